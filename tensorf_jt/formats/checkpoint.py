"""Checkpoints: the reference's ``.th`` contents, written with ``jt.save``, read back as Vars.

A checkpoint is a dict with the reference's keys -- ``kwargs`` (what ``models.factory.compose``
needs: the reference's constructor arguments, plus an unbounded model's contraction),
``state_dict`` (the field's tensors), and for a trained alpha grid ``alphaMask.shape`` /
``alphaMask.mask`` (bits packed with numpy) / ``alphaMask.aabb`` -- plus ``model_name``,
``format``, ``kernels`` (the model's implementation, ``TensoRFModel.kernels``) and
``train_args`` (the flags of the run, so ``render.py`` needs nothing but the file). Reading goes through an allow-list unpickler
(``safe_pickle``) and every value is checked (``checkpoint_checks``) before the model is built.

Loading rebuilds the model from ``kwargs`` first, so every tensor already has its final shape,
then copies each entry in after checking its name, shape and values (NaN or infinity
anywhere refuses the file: it would render garbage): Jittor's own ``load_state_dict``
skips ``ParameterList`` entries and keeps the old tensor on a shape mismatch, with only a log
line to say so.
"""
from __future__ import annotations

import os
import pickle
import tempfile

import numpy as np
import jittor as jt

from tensorf_jt.rendering.alpha_grid import AlphaGridMask
from tensorf_jt.errors import CheckpointError, ConfigError
from tensorf_jt.formats.checkpoint_checks import check_alpha_mask, check_checkpoint, excerpt, without_retired_options
from tensorf_jt.formats.file_modes import share_like_open
from tensorf_jt.formats.safe_pickle import RefusedGlobal, read_jittor_pickle
from tensorf_jt.models import MODELS, TensoRFModel, compose
from tensorf_jt.formats.reference_checkpoint import from_reference
from tensorf_jt.formats.torch_format import is_torch_checkpoint, load_torch_checkpoint

FORMAT = "tensorf_jt/1"


def checkpoint_dict(model: TensoRFModel, train_args: dict | None = None) -> dict:
    """The checkpoint contents of ``model``; every tensor in it is a ``jt.Var``."""
    ckpt = {
        "format": FORMAT,
        "model_name": model.model_name,
        "kernels": model.kernels,
        "kwargs": model.get_kwargs(),
        "state_dict": {name: var.clone() for name, var in model.field.reference_state_dict().items()},
    }
    if model.alphaMask is not None:
        ckpt.update(model.alphaMask.packed())
    if train_args is not None:
        ckpt["train_args"] = dict(train_args)
    return ckpt


def save_atomically(obj: object, path: str) -> str:
    """Write ``obj`` with ``jt.save`` to ``path`` atomically: a temporary file in the same folder,
    fsync, rename.

    A file already at ``path`` stays intact until the new one is complete, so an interrupted
    write (a crash, a full disk) never leaves a truncated checkpoint behind. The file gets the
    permissions a plain ``open`` would give it (``file_modes.replacement_mode``), not
    ``mkstemp``'s private 0600.
    """
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".th", dir=folder)
    except OSError as err:
        raise CheckpointError(f"Cannot write '{path}' ({err.strerror}); choose a writable --basedir.") from None
    os.close(handle)
    try:
        share_like_open(temporary, path)
        jt.save(obj, temporary)
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.replace(temporary, path)
    except OSError as err:
        raise CheckpointError(f"Cannot write '{path}' ({err.strerror}); the previous file, if any, is "
                              "unchanged. Free disk space or choose another --basedir.") from None
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return path


def save_checkpoint(model: TensoRFModel, path: str, train_args: dict | None = None) -> str:
    """Write ``model``'s checkpoint to ``path`` atomically (see ``save_atomically``)."""
    return save_atomically(checkpoint_dict(model, train_args), path)


def read_checkpoint(path: str) -> dict:
    """The raw checkpoint dict at ``path``, with a clear error for anything unreadable.

    The format is told by content, not by suffix: a file that starts like a torch checkpoint
    is the PyTorch TensoRF's (converted to our layout, tensors as numpy arrays), anything
    else ours. Both are unpickled through an allow-list (``safe_pickle``): a file that asks
    for anything but numbers, text, containers and arrays is refused before it can run code.
    """
    if not os.path.isfile(path):
        raise CheckpointError(f"Checkpoint '{path}' does not exist; pass the path of a .th file written by train.py.")
    if is_torch_checkpoint(path):
        return from_reference(load_torch_checkpoint(path), f"PyTorch checkpoint '{path}'")
    ckpt = read_pickled(path, f"Checkpoint '{path}'")
    if not isinstance(ckpt, dict) or "kwargs" not in ckpt or "state_dict" not in ckpt:
        raise CheckpointError(f"'{path}' is not a TensoRF checkpoint: it lacks 'kwargs' and 'state_dict'.")
    return ckpt


def read_pickled(path: str, what: str, damaged: str = "is corrupted or not a Jittor checkpoint"):
    """The object ``jt.save`` wrote to ``path`` (``what`` names the file in errors, ``damaged``
    says what an unreadable one is), read safely."""
    try:
        return read_jittor_pickle(path)
    except RefusedGlobal as err:
        raise CheckpointError(f"{what} asks to load '{err.qualified}', which tensorf_jt never saves: refusing to "
                              "open it, since it could run code. Only open files from sources you trust.") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
            OSError, MemoryError, RecursionError) as err:
        raise CheckpointError(f"{what} {damaged} ({err}).") from None


def model_from_checkpoint(ckpt: dict, model_name: str | None = None, source: str = "checkpoint",
                          ndc_ray: bool | None = None) -> TensoRFModel:
    """Rebuild the model a checkpoint dict describes and load its tensors, strictly.

    Every value is checked first (``checkpoint_checks``), so a damaged or foreign file gets a
    message naming its key; the tensors are built at their final shapes only after that.
    ``ndc_ray`` says whether the model renders NDC rays (forward-facing scenes); None: as the
    run that wrote the checkpoint was trained (its ``train_args``; no NDC without them).
    """
    ckpt = without_retired_options(ckpt, source)
    check_checkpoint(ckpt, source)
    name = ckpt.get("model_name", model_name)
    if not isinstance(name, str) or name not in MODELS:
        raise CheckpointError(f"{source} holds a {excerpt(name)} model; this build supports {', '.join(MODELS)}.")
    if ndc_ray is None:
        train_args = ckpt.get("train_args")
        ndc_ray = bool(train_args.get("ndc_ray", 0)) if isinstance(train_args, dict) else False
    try:
        model = compose(name, ckpt["kwargs"], ckpt.get("kernels", "fused"), ndc_ray)
    except ConfigError as err:
        raise CheckpointError(f"{source}: {err}") from None
    except TypeError as err:  # a kwargs key the constructor does not take
        raise CheckpointError(f"{source}: its kwargs do not fit a {name} ({err}).") from None
    load_state(model, ckpt["state_dict"], source)
    alpha_mask = check_alpha_mask(ckpt, source)
    if alpha_mask is not None:
        grid, bits, aabb = alpha_mask
        model.field.alphaMask = AlphaGridMask.unpacked(grid, bits, jt.array(aabb))
    return model


def load_state(model: TensoRFModel, state_dict: dict, source: str = "checkpoint") -> None:
    """Copy every tensor of ``state_dict`` (the reference's layout, as files hold it) into
    ``model``'s field; refuse missing, extra or mis-shaped entries."""
    field = model.field
    own = field.state_dict()
    missing = sorted(set(own) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(own))
    if missing or unexpected:
        raise CheckpointError(
            f"{source} does not match a {model.model_name} with these settings: "
            f"missing {missing or 'nothing'}, unexpected {unexpected or 'nothing'}.")
    for name, target in own.items():
        value = state_dict[name]
        value = value if isinstance(value, jt.Var) else jt.array(np.asarray(value))
        expected = tuple(field.to_reference(name, target).shape)
        if tuple(value.shape) != expected:
            raise CheckpointError(f"{source}: '{name}' has shape {tuple(value.shape)}, the model expects {expected}.")
        value = value.float32()
        bad = int(np.count_nonzero(~np.isfinite(value.numpy())))
        if bad:
            raise CheckpointError(f"{source}: '{name}' holds {bad:,} NaN or infinite values of {value.numel():,}; "
                                  "its renders would be garbage. The run that wrote it diverged or the file is "
                                  "damaged: use an earlier checkpoint or train again.")
        target.update(field.from_reference(name, value))


def load_checkpoint(path: str, model_name: str | None = None, ndc_ray: bool | None = None) -> tuple[TensoRFModel, dict]:
    """Model and raw dict of the checkpoint at ``path`` (``ndc_ray``: as ``model_from_checkpoint``)."""
    ckpt = read_checkpoint(path)
    return model_from_checkpoint(ckpt, model_name, source=f"Checkpoint '{path}'", ndc_ray=ndc_ray), ckpt
