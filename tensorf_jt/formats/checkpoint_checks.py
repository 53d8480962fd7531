"""What a checkpoint must hold before a model is built from it: keys, types and plausible sizes.

A checkpoint is rebuilt by calling the model's constructor with its ``kwargs`` and copying its
``state_dict`` in. Files are shared between people like datasets, so every value is checked
first and anything that does not fit is refused with a ``CheckpointError`` naming the key:
a wrong type would otherwise end in a traceback deep inside the model, and a grid size
nobody trains (100000^3 voxels) in an allocation that takes the machine down.

The size limits are the configuration's (``config.limits``). Every kwarg is one the models
take (``KNOWN_KWARGS``; the reference loader's ``device`` is dropped with a warning) and every
top-level entry has its type, so a damaged or hand-edited file is one line naming its key.
"""
from __future__ import annotations

import math
import reprlib
import warnings

import numpy as np

from tensorf_jt.config.limits import (MAX_COMPONENTS, MAX_ENCODING_FREQUENCIES, MAX_IMPORTANCE_SAMPLES, MAX_VOXELS,
                                      MAX_WIDTH)
from tensorf_jt.errors import CheckpointError
from tensorf_jt.kernels import KERNELS

_TOP_LEVEL_TEXT = ("format", "model_name", "kernels")
_TOP_LEVEL = ("kwargs", "state_dict", "train_args", *_TOP_LEVEL_TEXT)
_FLOAT_KWARGS = ("density_shift", "alphaMask_thres", "distance_scale", "rayMarch_weight_thres", "step_ratio")
_POSITIVE_FLOAT_KWARGS = ("distance_scale", "step_ratio")
_TEXT_KWARGS = ("shadingMode", "fea2denseAct")
_ALPHA_MASK_KEYS = ("alphaMask.shape", "alphaMask.mask", "alphaMask.aabb")


def _values(value) -> np.ndarray | None:
    """A number, list, numpy array or ``jt.Var`` as a numpy array; None for anything else."""
    if hasattr(value, "numpy") and hasattr(value, "shape") and not isinstance(value, np.ndarray):
        value = value.numpy()  # a jt.Var
    if isinstance(value, (bool, str, bytes, dict)) or value is None:
        return None
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        return None
    return array if array.dtype.kind in "iuf" else None


def _integers(value, count: int | None, what: str, low: int, high: int) -> list[int]:
    """``count`` whole numbers (any count for None) in [low, high], as Python ints."""
    array = _values(value)
    if array is not None and array.ndim == 0:
        array = array.reshape(1)
    if (array is None or array.ndim != 1 or (count is not None and array.size != count) or array.size == 0
            or not np.all(np.isfinite(array)) or not np.all(array == np.round(array))
            or array.min() < low or array.max() > high):
        amount = {None: "whole numbers", 1: "a whole number"}.get(count, f"{count} whole numbers")
        raise CheckpointError(f"{what} should be {amount} from {low} to {high}, found {excerpt(value)}.")
    return [int(v) for v in array]


def _number(value, what: str) -> float:
    array = _values(value)
    if array is None or array.size != 1 or not np.isfinite(array).all():
        raise CheckpointError(f"{what} should be a finite number, found {excerpt(value)}.")
    return float(array.reshape(-1)[0])


def _box(value, what: str) -> np.ndarray:
    array = _values(value)
    if array is None or array.shape != (2, 3) or not np.all(np.isfinite(array)) or np.any(array[1] <= array[0]):
        raise CheckpointError(f"{what} should be a box [[xmin, ymin, zmin], [xmax, ymax, zmax]] of finite numbers "
                              f"with each minimum below its maximum, found {excerpt(value)}.")
    return array


def is_tensor(value) -> bool:
    """A numeric numpy array or ``jt.Var`` with at least one axis (a Var is not fetched to check it)."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biuf" and value.ndim > 0
    dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
    return hasattr(value, "numpy") and shape is not None and len(shape) > 0 and np.dtype(str(dtype)).kind in "biuf"


_EXCERPT = reprlib.Repr()
_EXCERPT.maxlevel, _EXCERPT.maxlist, _EXCERPT.maxtuple, _EXCERPT.maxdict = 3, 6, 6, 4
_EXCERPT.maxstring, _EXCERPT.maxother = 40, 60


def excerpt(value) -> str:
    """A bad value as an excerpt of at most 80 characters, whatever its size or depth."""
    if isinstance(value, np.ndarray) or (hasattr(value, "numpy") and hasattr(value, "shape")):
        if math.prod(value.shape) > 12:
            return f"an array of shape {tuple(value.shape)} and dtype {value.dtype}"
        value = np.asarray(value.numpy() if hasattr(value, "numpy") else value).tolist()
    text = _EXCERPT.repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def known_kwargs() -> frozenset[str]:
    """The kwargs a model is rebuilt from: the reference's ``get_kwargs`` keys and our samplers' and
    compositing route's (``models.factory``)."""
    from tensorf_jt.models.factory import COMPOSITING_KEYS, ROUTE_KEYS, SAMPLER_KEYS
    from tensorf_jt.models.tensorf_model import REFERENCE_KWARGS

    return frozenset((*REFERENCE_KWARGS, *SAMPLER_KEYS, *COMPOSITING_KEYS, *ROUTE_KEYS))


def check_model_kwargs(kwargs, source: str) -> None:
    """The constructor arguments ``kwargs``: each known key of the right type and a plausible size."""
    from tensorf_jt.models.shading import SHADING_MODES

    if not isinstance(kwargs, dict):
        raise CheckpointError(f"{source}: 'kwargs' should be a dict of the model's settings, found "
                              f"{type(kwargs).__name__}.")
    missing = [key for key in ("aabb", "gridSize") if key not in kwargs]
    if missing:
        raise CheckpointError(f"{source}: 'kwargs' lacks {', '.join(missing)}.")
    unknown = [key for key in kwargs if key not in known_kwargs()]
    if unknown:
        raise CheckpointError(f"{source}: kwargs has {', '.join(excerpt(key) for key in unknown[:5])}, which no "
                              "TensoRF model takes: the file was changed by hand or written by another program. "
                              "Use an intact copy, or remove the key.")
    where = f"{source}: kwargs"
    _box(kwargs["aabb"], f"{where}.aabb")
    grid = _integers(kwargs["gridSize"], 3, f"{where}.gridSize", 2, MAX_VOXELS)
    if math.prod(grid) > MAX_VOXELS:
        raise CheckpointError(f"{where}.gridSize {grid} has {math.prod(grid):,} voxels; no TensoRF grid has more "
                              f"than {MAX_VOXELS:,}. The file is damaged or was not written by a TensoRF.")
    for key in ("density_n_comp", "appearance_n_comp"):
        if key in kwargs:
            values = _integers(kwargs[key], None, f"{where}.{key}", 1, MAX_COMPONENTS)
            if len(values) not in (1, 3):
                raise CheckpointError(f"{where}.{key} should give 1 or 3 component counts, found {values}.")
    for key, low, high in (("app_dim", 1, MAX_WIDTH), ("featureC", 1, MAX_WIDTH),
                           ("pos_pe", 0, MAX_ENCODING_FREQUENCIES), ("view_pe", 0, MAX_ENCODING_FREQUENCIES),
                           ("fea_pe", 0, MAX_ENCODING_FREQUENCIES)):
        if key in kwargs:
            _integers(kwargs[key], 1, f"{where}.{key}", low, high)
    for key in _FLOAT_KWARGS:
        if key in kwargs:
            value = _number(kwargs[key], f"{where}.{key}")
            if key in _POSITIVE_FLOAT_KWARGS and value <= 0:
                raise CheckpointError(f"{where}.{key} should be positive, found {value:g}.")
    if "near_far" in kwargs:
        near_far = _values(kwargs["near_far"])
        if near_far is None or near_far.shape != (2,) or not np.all(np.isfinite(near_far)) or near_far[0] >= near_far[1]:
            raise CheckpointError(f"{where}.near_far should be two finite numbers [near, far] with near < far, "
                                  f"found {excerpt(kwargs['near_far'])}.")
    for key in _TEXT_KWARGS:
        if key in kwargs and not isinstance(kwargs[key], str):
            raise CheckpointError(f"{where}.{key} should be text, found {excerpt(kwargs[key])}.")
    if kwargs.get("shadingMode", SHADING_MODES[0]) not in SHADING_MODES:
        raise CheckpointError(f"{where}.shadingMode '{kwargs['shadingMode']}' is not one of {', '.join(SHADING_MODES)}.")
    _check_contraction(kwargs, where)


def _check_contraction(kwargs: dict, where: str) -> None:
    """An unbounded model's ``scene_contraction`` ('inf', the norm) and ``foreground_aabb`` (a box), both
    or neither, and its ``importance_samples`` (a count, unbounded models only)."""
    present = [key for key in ("scene_contraction", "foreground_aabb") if key in kwargs]
    if "importance_samples" in kwargs:
        _integers(kwargs["importance_samples"], 1, f"{where}.importance_samples", 1, MAX_IMPORTANCE_SAMPLES)
        if not present:
            raise CheckpointError(f"{where} has importance_samples but no scene_contraction: only unbounded "
                                  "models resample their rays.")
    if len(present) == 1:
        raise CheckpointError(f"{where} has {present[0]} without "
                              f"{'foreground_aabb' if present[0] == 'scene_contraction' else 'scene_contraction'}: "
                              "an unbounded model needs both.")
    if not present:
        return
    if not isinstance(kwargs["scene_contraction"], str) or kwargs["scene_contraction"] != "inf":
        raise CheckpointError(f"{where}.scene_contraction should be 'inf', "
                              f"found {excerpt(kwargs['scene_contraction'])}.")
    _box(kwargs["foreground_aabb"], f"{where}.foreground_aabb")


def without_retired_options(ckpt: dict, source: str) -> dict:
    """``ckpt`` as this version reads it, when it was written with an option that is gone.

    A model trained with ``--refine_poses 1`` renders test views at their given poses, so it
    loads without its pose corrections; one with appearance codes (``--appearance_dim``) or
    the L2 contraction renders differently without them and is refused.
    """
    kwargs = ckpt.get("kwargs")
    if not isinstance(kwargs, dict):
        return ckpt
    if isinstance(kwargs.get("scene_contraction"), str) and kwargs["scene_contraction"] == "l2":
        raise CheckpointError(f"{source} was trained with --contraction l2, which is no longer an option (it "
                              "lost 3.7 dB to the cube); retrain it without.")
    codes = _values(kwargs.get("appearance_dim", 0))
    if codes is None or codes.size != 1 or codes.reshape(-1)[0] != 0:
        raise CheckpointError(f"{source} was trained with --appearance_dim {excerpt(kwargs['appearance_dim'])}, "
                              "which is no longer an option (it lost 0.2 dB on held-out views); retrain it without.")
    retired = ("appearance_dim", "refine_poses", "n_views")
    if not any(key in kwargs for key in retired):
        return ckpt
    state_dict = ckpt.get("state_dict")
    if isinstance(state_dict, dict):
        state_dict = {name: value for name, value in state_dict.items()
                      if not (isinstance(name, str) and name.startswith("pose_corrections."))}
    return {**ckpt, "kwargs": {key: value for key, value in kwargs.items() if key not in retired},
            "state_dict": state_dict}


def check_state_dict(state_dict, source: str) -> None:
    """``state_dict``: names to numeric tensors (their shapes are checked against the model later)."""
    if not isinstance(state_dict, dict):
        raise CheckpointError(f"{source}: 'state_dict' should be a dict of tensors, found {type(state_dict).__name__}.")
    for name, value in state_dict.items():
        if not isinstance(name, str) or not is_tensor(value):
            raise CheckpointError(f"{source}: state_dict entry {name!r} should be a tensor, found {excerpt(value)}.")


def check_alpha_mask(ckpt: dict, source: str) -> tuple[tuple[int, int, int], np.ndarray, np.ndarray] | None:
    """The alpha mask's grid (Z, Y, X), packed bits (uint8) and box, or None when it has none.

    The reference writes the shape as (1, 1, Z, Y, X), bits with numpy's ``packbits``.
    """
    present = [key for key in _ALPHA_MASK_KEYS if key in ckpt]
    if not present:
        return None
    if len(present) != len(_ALPHA_MASK_KEYS):
        absent = sorted(set(_ALPHA_MASK_KEYS) - set(present))
        raise CheckpointError(f"{source} has an incomplete alpha mask: {', '.join(absent)} missing.")
    shape = _values(ckpt["alphaMask.shape"])
    if (shape is None or shape.ndim != 1 or shape.size != 5 or not np.all(np.isfinite(shape))
            or not np.all(shape == np.round(shape)) or shape.min() < 1 or shape[0] != 1 or shape[1] != 1):
        raise CheckpointError(f"{source}: alphaMask.shape should be (1, 1, Z, Y, X), found "
                              f"{excerpt(ckpt['alphaMask.shape'])}.")
    shape = [int(n) for n in shape]
    grid = tuple(shape[-3:])
    voxels = math.prod(grid)
    if voxels > MAX_VOXELS:
        raise CheckpointError(f"{source}: alphaMask.shape {grid} has {voxels:,} voxels, more than any alpha mask "
                              f"({MAX_VOXELS:,}). The file is damaged.")
    bits = _values(ckpt["alphaMask.mask"])
    needed = (voxels + 7) // 8
    if bits is None or bits.dtype != np.uint8 or bits.ndim != 1 or bits.size < needed:
        found = "no array" if bits is None else f"{bits.size} of {bits.dtype}"
        raise CheckpointError(f"{source}: alphaMask.mask should hold {needed} packed bytes (uint8) for a {grid} grid, "
                              f"found {found}.")
    return grid, bits, _box(ckpt["alphaMask.aabb"], f"{source}: alphaMask.aabb").astype(np.float32)


def check_checkpoint(ckpt, source: str) -> None:
    """Refuse a checkpoint dict whose model cannot be rebuilt: see the module's docstring."""
    if not isinstance(ckpt, dict) or "kwargs" not in ckpt or "state_dict" not in ckpt:
        raise CheckpointError(f"{source} is not a TensoRF checkpoint: it lacks 'kwargs' and 'state_dict'.")
    for key in _TOP_LEVEL_TEXT:
        if key in ckpt and not isinstance(ckpt[key], str):
            raise CheckpointError(f"{source}: '{key}' should be text, found {excerpt(ckpt[key])}.")
    if "train_args" in ckpt and not isinstance(ckpt["train_args"], dict):
        raise CheckpointError(f"{source}: 'train_args' should be a dict of the run's flags, found "
                              f"{excerpt(ckpt['train_args'])}.")
    check_model_kwargs(ckpt["kwargs"], source)
    if ckpt.get("kernels", KERNELS[0]) not in KERNELS:
        raise CheckpointError(f"{source}: 'kernels' is {excerpt(ckpt['kernels'])}, not one of {', '.join(KERNELS)}.")
    check_state_dict(ckpt["state_dict"], source)
    check_alpha_mask(ckpt, source)
    ignored = [key for key in ckpt if key not in _TOP_LEVEL and key not in _ALPHA_MASK_KEYS]
    if ignored:
        warnings.warn(f"{source} holds {', '.join(excerpt(key) for key in ignored[:5])}, which tensorf_jt does not "
                      "read; it is ignored.", stacklevel=2)
