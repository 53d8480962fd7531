"""The PyTorch TensoRF's checkpoint contents, converted to ours and back.

The reference's ``TensorBase.save`` writes ``torch.save`` of a dict with ``kwargs`` (its
``get_kwargs``), ``state_dict`` and, once an alpha mask exists, ``alphaMask.shape``,
``alphaMask.mask`` (a numpy ``packbits`` array) and ``alphaMask.aabb``: our checkpoint minus
``model_name``, ``format`` and ``train_args``. Its ``train.py`` takes the class from
``--model_name`` and adds ``device`` to the kwargs before calling the constructor; the file
names no class, so here it is read off the state_dict's keys. Parameter names are the same
on both sides, so state dicts map key for key.
"""
from __future__ import annotations

import collections

import numpy as np

from tensorf_jt.errors import CheckpointError
from tensorf_jt.models import TensoRFModel, TensorVM
from tensorf_jt.models.tensorf_model import REFERENCE_KWARGS
from tensorf_jt.formats.checkpoint_checks import check_alpha_mask, check_model_kwargs
_MLP_PE_DEFECT = (
    "the reference's MLPRender_PE sizes its first layer for 3 raw position values that its forward pass "
    "never passes in, so every reference MLP_PE model crashes at its first batch")


def infer_model_name(state_dict: dict, source: str) -> str:
    """The reference class whose parameters ``state_dict`` holds, from its key names."""
    roots = {key.split(".")[0] for key in state_dict}
    candidates = []
    if "density_plane" in roots:
        candidates.append("TensorVMSplit")
    if "plane_coef" in roots:
        candidates.append("TensorVM")
    if "density_line" in roots and "density_plane" not in roots:
        candidates.append("TensorCP")
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise CheckpointError(
            f"{source} is not a TensoRF model this build knows: its state_dict has none of 'density_plane.*' "
            f"(TensorVMSplit), 'plane_coef' (TensorVM) or 'density_line.*' (TensorCP); it has {sorted(roots)}.")
    raise CheckpointError(f"{source} mixes the parameters of {' and '.join(candidates)} ({sorted(roots)}); "
                          "it is not a checkpoint of one model.")


def _array(value, name: str, source: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise CheckpointError(f"{source}: '{name}' should be a tensor, found {type(value).__name__}.")
    if shape is not None and value.shape != shape:
        raise CheckpointError(f"{source}: '{name}' has shape {value.shape}, expected {shape}.")
    return value


def _reference_kwargs(kwargs, source: str) -> dict:
    """The reference's constructor arguments as ours: ``device`` dropped, values checked."""
    if not isinstance(kwargs, dict):
        raise CheckpointError(f"{source}: 'kwargs' should be a dict, found {type(kwargs).__name__}.")
    kwargs = {key: value for key, value in kwargs.items() if key != "device"}
    unknown = sorted(set(kwargs) - set(REFERENCE_KWARGS))
    missing = [key for key in ("aabb", "gridSize") if key not in kwargs]
    if unknown or missing:
        raise CheckpointError(f"{source}: kwargs do not match the reference TensorBase's: unknown {unknown or 'none'}, "
                              f"missing {missing or 'none'}. Was it written by another program?")
    kwargs["aabb"] = _array(kwargs["aabb"], "kwargs.aabb", source, (2, 3)).astype(np.float32)
    check_model_kwargs(kwargs, source)
    return kwargs


def _refuse_reference_mlp_pe(kwargs: dict, state_dict: dict, source: str) -> None:
    """A reference MLP_PE first layer is 3 inputs wider than ours (see ``MLPRender_PE``): say why it cannot load."""
    if kwargs.get("shadingMode", "MLP_PE") != "MLP_PE" or "renderModule.mlp.0.weight" not in state_dict:
        return
    view_pe, pos_pe = int(kwargs.get("view_pe", 6)), int(kwargs.get("pos_pe", 6))
    ours = (3 + 2 * view_pe * 3) + 2 * pos_pe * 3 + int(kwargs.get("app_dim", 27))
    found = state_dict["renderModule.mlp.0.weight"].shape[-1]
    if found == ours + 3:
        raise CheckpointError(
            f"{source} is a reference MLP_PE model whose first layer takes {found} inputs: {_MLP_PE_DEFECT}, so "
            f"these weights were never trained and there is nothing to render. Retrain with shadingMode MLP_Fea "
            f"(the reference configs' choice), or with tensorf_jt, whose MLP_PE takes {ours} inputs.")


def from_reference(raw, source: str) -> dict:
    """Our checkpoint dict (``model_name``, ``kwargs``, ``state_dict``, ``alphaMask.*``; tensors as
    numpy arrays) from the object the reference's ``torch.save`` wrote."""
    if not isinstance(raw, dict) or "kwargs" not in raw or "state_dict" not in raw:
        found = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise CheckpointError(f"{source} is a PyTorch file but not a TensoRF checkpoint: it lacks 'kwargs' and "
                              f"'state_dict' (found {found}).")
    kwargs = _reference_kwargs(raw["kwargs"], source)
    state_dict = raw["state_dict"]
    if not isinstance(state_dict, dict):
        raise CheckpointError(f"{source}: 'state_dict' should be a dict, found {type(state_dict).__name__}.")
    for name, value in state_dict.items():
        _array(value, f"state_dict.{name}", source)
    ckpt = {"model_name": infer_model_name(state_dict, source), "kwargs": kwargs, "state_dict": dict(state_dict)}
    _refuse_reference_mlp_pe(kwargs, state_dict, source)
    if any(key.startswith("alphaMask.") for key in raw):
        ckpt.update(_alpha_mask_entries(raw, source))
    return ckpt


def _alpha_mask_entries(raw: dict, source: str) -> dict:
    _, bits, aabb = check_alpha_mask(raw, source)
    return {"alphaMask.shape": tuple(int(n) for n in np.asarray(raw["alphaMask.shape"]).reshape(-1)),
            "alphaMask.mask": bits, "alphaMask.aabb": aabb}


def to_reference(model: TensoRFModel) -> dict:
    """What the reference's ``TensorBase.save`` would write for ``model``; tensors as ``jt.Var``,
    the packed alpha mask as a numpy array (the reference unpacks it with numpy)."""
    kwargs = model.get_kwargs()
    if "scene_contraction" in kwargs:
        raise CheckpointError("An unbounded model cannot be exported: the reference has no scene contraction, so it "
                              "would render the contracted grid as if it were the world. Render it here with "
                              "render.py, or train with --unbounded 0 for a checkpoint the reference can use.")
    field = model.field
    if field.shadingMode == "MLP_PE":
        raise CheckpointError(f"An MLP_PE model cannot be exported: {_MLP_PE_DEFECT}, so no reference code can "
                              "render it.")
    if isinstance(field, TensorVM):
        # The reference's TensorVM adds the two counts as numbers (per-axis lists would be concatenated).
        kwargs["density_n_comp"], kwargs["appearance_n_comp"] = field.density_n_comp[0], field.app_n_comp[0]
    ckpt = {"kwargs": kwargs, "state_dict": collections.OrderedDict(field.reference_state_dict().items())}
    if model.alphaMask is not None:
        packed = model.alphaMask.packed()
        ckpt.update({
            "alphaMask.shape": packed["alphaMask.shape"],
            "alphaMask.mask": packed["alphaMask.mask"].numpy(),
            "alphaMask.aabb": packed["alphaMask.aabb"],
        })
    return ckpt
