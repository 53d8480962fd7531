"""Training-state files: what ``--save_every`` writes and ``--resume`` reads back.

A state file ``basedir/expname/expname_state.th`` (``jt.save``, written atomically) holds a
dict with ``format`` = ``STATE_FORMAT`` and:

- ``iteration``: iterations completed (the next one to run);
- ``model``: the model checkpoint dict (``checkpoint.checkpoint_dict``, the ``expname.th`` layout);
- ``optimizer``: Adam's step count (``n_step``) and, per parameter group, its learning rate,
  both moment estimates (``m`` and Jittor's ``values``) as Vars in their parameters' saved
  layout (the reference's, as the model's tensors) and the per-parameter step counts
  (``steps``, int32 Var; a state without them still loads, see ``load_optimizer_state``);
- ``schedule``: grid size (``reso_cur``, ``reso_mask``), samples per ray, the loss weights
  that change as training goes (L1 after the first mask update, TV decaying every step), and
  the learning-rate scale left by the NaN guard;
- ``rays``: which of the dataset's training rays survived filtering, as packed bits;
- ``sampler``: the ray-batch stream's position (``RayBatchDataset.state``);
- ``log``: the training log's rows, elapsed training time, schedule events so far and the
  progress display's running values;
- ``train_args``: every flag of the run (``RunConfig.to_flags``).

Random numbers need no saved state: the trainer reseeds Jittor and numpy at every iteration
from (seed, iteration), and the ray sampler has its own generator, saved above.
"""
from __future__ import annotations

import glob
import os

import numpy as np
import jittor as jt

from tensorf_jt.errors import CheckpointError, ConfigError
from tensorf_jt.formats.checkpoint import checkpoint_dict, read_pickled
from tensorf_jt.config.limits import MAX_VOXELS
from tensorf_jt.formats.checkpoint_checks import excerpt, is_tensor
from tensorf_jt.models import TensoRFModel
from tensorf_jt.models.tensor_base import TensorBase
from tensorf_jt.training.optimizer import TorchAdam
from tensorf_jt.training.schedules import ScheduleState

STATE_FORMAT = "tensorf_jt-state/1"


def state_path(folder: str, expname: str) -> str:
    return os.path.join(folder, f"{expname}_state.th")


def find_latest_state(basedir: str, expname: str) -> str | None:
    """The newest state file of run ``expname`` under ``basedir`` (timestamped folders included)."""
    candidates = [state_path(os.path.join(basedir, expname), expname)]
    candidates += glob.glob(state_path(os.path.join(glob.escape(basedir), f"{glob.escape(expname)}-*"), expname))
    existing = [path for path in candidates if os.path.isfile(path)]
    return max(existing, key=os.path.getmtime) if existing else None


def snapshot(iteration: int, model: TensoRFModel, optimizer: TorchAdam, schedule: ScheduleState,
             ray_keep: np.ndarray | None, sampler: dict) -> dict:
    """Copies of everything the loop needs to continue from ``iteration``: model, Adam, schedule
    values, the training-ray mask and the batch stream's position (``RayBatchDataset.state``)."""
    taken = {"iteration": iteration, "model": checkpoint_dict(model), "optimizer": optimizer_state(optimizer, model.field),
             "schedule": schedule.to_dict(), "ray_keep": ray_keep, "sampler": sampler}
    jt.sync(list(taken["model"]["state_dict"].values())
            + [var for group in taken["optimizer"]["groups"] for key in ("m", "values") for var in group[key]])
    return taken


def state_contents(taken: dict, train_args: dict, n_rays: int, log: dict) -> dict:
    """A ``snapshot`` as a state file holds it, with what a new process needs besides: the run's
    flags, the ray mask packed in bits (of ``n_rays`` training rays) and the training log."""
    state = {key: value for key, value in taken.items() if key != "ray_keep"}
    state.update(format=STATE_FORMAT, train_args=dict(train_args), rays=pack_ray_mask(taken["ray_keep"], n_rays))
    state["log"] = log
    return state


def read_state(path: str) -> dict:
    """The state dict at ``path``, with a clear error for anything that is not one.

    Read through the same allow-list as checkpoints (``formats.safe_pickle``), then checked
    part by part (``check_state``); the model inside is checked when it is rebuilt.
    """
    if not os.path.isfile(path):
        raise CheckpointError(f"Training state '{path}' does not exist; pass the EXPNAME_state.th file next "
                              "to an earlier run's checkpoint, or --resume auto.")
    state = read_pickled(path, f"Training state '{path}'", damaged="is corrupted or incomplete; resume from an intact "
                         "copy, or start the run again")
    if isinstance(state, dict) and state.get("format") == STATE_FORMAT:
        check_state(state, f"Training state '{path}'")
        return state
    if isinstance(state, dict) and "kwargs" in state and "state_dict" in state:
        raise CheckpointError(f"'{path}' is a model checkpoint, not a training state: --resume needs the "
                              "*_state.th file written next to it. To start a new run from these weights, "
                              "use --ckpt instead.")
    raise CheckpointError(f"'{path}' is not a tensorf_jt training state.")


_NUMBER = (int, float, np.integer, np.floating)
# What each part of a state file holds: {part: {key: accepted types}} (the model part is a
# checkpoint, checked when it is rebuilt).
_STATE_LAYOUT = {
    "": {"iteration": (int, np.integer), "model": dict, "optimizer": dict, "schedule": dict, "rays": dict,
         "sampler": dict, "log": dict, "train_args": dict},
    "optimizer": {"n_step": (int, np.integer), "groups": list},
    "schedule": {"reso_cur": list, "reso_mask": list, "nSamples": (int, np.integer), "L1_reg_weight": _NUMBER,
                 "TV_weight_density": _NUMBER, "TV_weight_app": _NUMBER, "lr_scale": _NUMBER},
    "rays": {"n_rays": (int, np.integer), "kept": (type(None), np.ndarray)},
    "sampler": {"n_rays": (int, np.integer), "rays_per_batch": (int, np.integer), "epoch_rng_state": (type(None), dict),
                "position": (int, np.integer)},
    "log": {"rows": list, "elapsed_s": _NUMBER, "events": list, "logged_events": (int, np.integer),
            "recent_psnrs": list, "test_psnr": _NUMBER, "last_psnr": _NUMBER},
}
_GROUP_LAYOUT = {"lr": _NUMBER, "m": list, "values": list}


def _check_part(part: dict, layout: dict, where: str) -> None:
    for key, types in layout.items():
        if key not in part:
            raise CheckpointError(f"{where} lacks '{key}': the file is damaged or was not written by tensorf_jt.")
        if not isinstance(part[key], types) or isinstance(part[key], bool) and types is not bool:
            raise CheckpointError(f"{where}: '{key}' has the wrong type ({type(part[key]).__name__}); the file "
                                  "is damaged.")


def check_state(state: dict, source: str) -> None:
    """Refuse a state dict whose parts lack a key or hold the wrong type, naming it."""
    for part, layout in _STATE_LAYOUT.items():
        _check_part(state[part] if part else state, layout, f"{source}{f' ({part})' if part else ''}")
    for index, group in enumerate(state["optimizer"]["groups"]):
        if not isinstance(group, dict):
            raise CheckpointError(f"{source}: optimizer group {index} is not a dict; the file is damaged.")
        _check_part(group, _GROUP_LAYOUT, f"{source} (optimizer group {index})")
        if not all(is_tensor(value) for key in ("m", "values") for value in group[key]):
            raise CheckpointError(f"{source}: optimizer group {index} holds moments that are not tensors; the file "
                                  "is damaged.")
    kept, n_rays = state["rays"]["kept"], state["rays"]["n_rays"]
    if kept is not None and (kept.dtype != np.uint8 or kept.ndim != 1 or kept.size < (n_rays + 7) // 8):
        raise CheckpointError(f"{source}: the training-ray mask holds {kept.size} bytes of {kept.dtype} for "
                              f"{n_rays} rays; the file is damaged.")
    if state["iteration"] < 0:
        raise CheckpointError(f"{source}: iteration {state['iteration']} is negative; the file is damaged.")
    _check_schedule(state["schedule"], f"{source} (schedule)")
    _check_log(state["log"], f"{source} (log)")
    _check_optimizer(state["optimizer"], f"{source} (optimizer)")
    _check_sampler(state["sampler"], f"{source} (sampler)")


def _require(ok: bool, where: str, key: str, value, expected: str) -> None:
    if not ok:
        raise CheckpointError(f"{where}: '{key}' is {excerpt(value)}, where {expected} belongs; the file is damaged.")


def _at_least(value, low: float) -> bool:
    """A finite number (not a bool) of ``low`` or more."""
    return (isinstance(value, _NUMBER) and not isinstance(value, bool) and bool(np.isfinite(value))
            and value >= low)


def _check_optimizer(optimizer: dict, where: str) -> None:
    """Step counts not negative, learning rates finite and not negative, moments finite and the
    second moments not negative (Adam divides by their square root)."""
    _require(optimizer["n_step"] >= 0, where, "n_step", optimizer["n_step"], "a step count")
    for index, group in enumerate(optimizer["groups"]):
        at = f"{where[:-1]} group {index})"
        _require(_at_least(group["lr"], 0), at, "lr", group["lr"], "a finite learning rate of 0 or more")
        for key, low in (("m", -np.inf), ("values", 0.0)):
            for moment in group[key]:
                array = moment.numpy() if isinstance(moment, jt.Var) else np.asarray(moment)
                bad = ~np.isfinite(array) | (array < low)
                if bad.any():
                    raise CheckpointError(f"{at}: '{key}' holds {int(bad.sum()):,} values that are not finite"
                                          f"{'' if low == -np.inf else ' or are negative'}; the file is damaged.")
        if "steps" in group:
            steps = group["steps"]
            array = steps.numpy() if isinstance(steps, jt.Var) else np.asarray(steps)
            _require(is_tensor(steps) and array.dtype.kind in "iu" and bool((array >= 0).all()), at, "steps",
                     array, "whole step counts of 0 or more")


def _check_sampler(sampler: dict, where: str) -> None:
    """A batch size from 1 to the ray count, and a position within the epoch's batches."""
    n_rays, per_batch = sampler["n_rays"], sampler["rays_per_batch"]
    _require(n_rays >= 1, where, "n_rays", n_rays, "a ray count")
    _require(1 <= per_batch <= n_rays, where, "rays_per_batch", per_batch, f"a batch size from 1 to {n_rays:,}")
    batches = n_rays // per_batch
    _require(0 <= sampler["position"] <= batches, where, "position", sampler["position"],
             f"a batch number from 0 to {batches:,}")


def _whole(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_schedule(schedule: dict, where: str) -> None:
    """Grid resolutions of 3 whole numbers within the kernels' reach, and a positive sample count
    (the trainer compares it with the model's when it resumes)."""
    for key in ("reso_cur", "reso_mask"):
        reso = schedule[key]
        if (len(reso) != 3 or not all(_whole(n) and n >= 1 for n in reso)
                or int(np.prod([int(n) for n in reso], dtype=np.float64)) > MAX_VOXELS):
            raise CheckpointError(f"{where}: '{key}' should be 3 whole numbers from 1 up, at most {MAX_VOXELS:,} "
                                  f"voxels in all, found {excerpt(reso)}; the file is damaged.")
    if schedule["nSamples"] < 1:
        raise CheckpointError(f"{where}: 'nSamples' is {schedule['nSamples']}; the file is damaged.")
    for key in ("L1_reg_weight", "TV_weight_density", "TV_weight_app", "lr_scale"):
        _require(_at_least(schedule[key], 0), where, key, schedule[key], "a finite weight of 0 or more")


def _check_log(log: dict, where: str) -> None:
    """The log's rows as dicts of the training log's columns, events as (iteration, text) pairs and
    recent PSNRs as numbers."""
    if not all(isinstance(row, dict) and all(isinstance(key, str) for key in row) for row in log["rows"]):
        raise CheckpointError(f"{where}: 'rows' should be a list of dicts (one per logged iteration); the file "
                              "is damaged.")
    if not all(isinstance(event, (list, tuple)) and len(event) == 2 and _whole(event[0]) and isinstance(event[1], str)
               for event in log["events"]):
        raise CheckpointError(f"{where}: 'events' should be (iteration, text) pairs; the file is damaged.")
    if not all(isinstance(value, _NUMBER) and not isinstance(value, bool) for value in log["recent_psnrs"]):
        raise CheckpointError(f"{where}: 'recent_psnrs' should be numbers; the file is damaged.")
    _require(_at_least(log["elapsed_s"], 0), where, "elapsed_s", log["elapsed_s"], "a finite time of 0 or more")
    _require(0 <= log["logged_events"] <= len(log["events"]), where, "logged_events", log["logged_events"],
             f"a count from 0 to {len(log['events'])} (the events)")


def _moment_layouts(optimizer: TorchAdam, field: TensorBase | None) -> list[list[str | None]]:
    """Per group, each parameter's name in ``field`` (whose layout its moments share), or None."""
    names = field.parameter_names() if field is not None else {}
    return [[names.get(id(param)) for param in group["params"]] for group in optimizer.param_groups]


def optimizer_state(optimizer: TorchAdam, field: TensorBase | None = None) -> dict:
    """Adam's step counts, and per group its learning rate and moment estimates (cloned Vars,
    in the saved layout of ``field``'s parameters: ``TensorBase.to_reference``).

    ``steps`` are the per-parameter counts (``TorchAdam``); ``n_step`` is Jittor's count of
    optimizer steps, which a state written before per-parameter counts holds alone.
    """
    def saved(name: str | None, moment: jt.Var) -> jt.Var:
        return (moment if name is None else field.to_reference(name, moment)).clone()

    return {
        "n_step": int(optimizer.n_step),
        "groups": [{"lr": float(group["lr"]), "m": [saved(name, m) for name, m in zip(names, group["m"])],
                    "values": [saved(name, v) for name, v in zip(names, group["values"])],
                    "steps": group["steps"].clone()}
                   for group, names in zip(optimizer.param_groups, _moment_layouts(optimizer, field))],
    }


def load_optimizer_state(optimizer: TorchAdam, state: dict, field: TensorBase | None = None) -> None:
    """Put ``optimizer_state`` output back into a ``TorchAdam`` built over the same parameter groups
    (of ``field``, whose layouts the saved moments are converted back to).

    A state without per-parameter counts (written by Jittor's Adam, which counted only the
    optimizer's steps) gives each parameter ``n_step``, or 0 where both its moments are zero
    everywhere: such a parameter has never had a gradient, and torch's Adam would not have
    counted a step for it.
    """
    groups = optimizer.param_groups
    if len(groups) != len(state["groups"]):
        raise CheckpointError(f"The saved optimizer has {len(state['groups'])} parameter groups; "
                              f"this model has {len(groups)}.")
    layouts = _moment_layouts(optimizer, field)
    for index, (group, saved, names) in enumerate(zip(groups, state["groups"], layouts)):
        for key in ("m", "values"):
            if len(saved[key]) != len(group[key]):
                raise CheckpointError(f"Optimizer group {index} holds {len(group[key])} tensors; "
                                      f"the saved one {len(saved[key])}.")
            for target, value, name in zip(group[key], saved[key], names):
                value = value if isinstance(value, jt.Var) else jt.array(np.asarray(value))
                expected = tuple((target if name is None else field.to_reference(name, target)).shape)
                if tuple(value.shape) != expected:
                    raise CheckpointError(f"Optimizer group {index}: a saved moment has shape {tuple(value.shape)}, "
                                          f"the parameter {expected}.")
                value = value.float32()
                target.update(value if name is None else field.from_reference(name, value))
        if "steps" in saved:
            steps = np.asarray(saved["steps"].numpy() if isinstance(saved["steps"], jt.Var) else saved["steps"])
        else:
            steps = np.array([int(state["n_step"]) if _nonzero(m) or _nonzero(v) else 0
                              for m, v in zip(saved["m"], saved["values"])])
        if steps.shape != (len(group["params"]),):
            raise CheckpointError(f"Optimizer group {index}: {steps.size} saved step counts for "
                                  f"{len(group['params'])} parameters.")
        group["steps"].update(jt.array(steps.astype(np.int32)))
        group["lr"] = float(saved["lr"])
    optimizer.n_step = int(state["n_step"])


def _nonzero(value) -> bool:
    return bool(np.any((value.numpy() if isinstance(value, jt.Var) else np.asarray(value)) != 0))


def pack_ray_mask(keep: np.ndarray | None, n_rays: int) -> dict:
    """Which of ``n_rays`` training rays are kept, as packed bits (None: all of them)."""
    return {"n_rays": int(n_rays), "kept": None if keep is None else np.packbits(keep)}


def unpack_ray_mask(packed: dict, n_rays: int) -> np.ndarray | None:
    """Inverse of ``pack_ray_mask``; the dataset must have as many training rays as the saved one."""
    if packed["n_rays"] != n_rays:
        raise ConfigError(f"The saved run trained on {packed['n_rays']} rays; this dataset has {n_rays}. "
                          "Resume with the same datadir, dataset_name and downsample_train.")
    if packed["kept"] is None:
        return None
    return np.unpackbits(np.asarray(packed["kept"]), count=n_rays).astype(bool)
