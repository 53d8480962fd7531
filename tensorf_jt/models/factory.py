"""Putting a model together: field, sampler and compositing route, from a run or a checkpoint.

Two doors, one assembly:

- ``scene_space`` decides, once per run, what space the scene's model lives in -- bounded (the
  reference's box), forward-facing NDC, or unbounded (a foreground box with all of space
  contracted around it) -- from the dataset and the flags; ``new_model`` builds a model for it.
- ``compose`` builds the model a flat ``kwargs`` dict describes (a checkpoint's, with the
  reference's keys, or ``new_model``'s): the field's keys go to the field class ``model_name``
  names, ``near_far``/``step_ratio`` and an unbounded model's ``scene_contraction`` /
  ``foreground_aabb`` choose and set the sampler (``choose_sampler``), ``distance_scale`` and
  ``rayMarch_weight_thres`` the compositing, ``importance_samples`` the route.

Only here is a sampler chosen; everything downstream asks the sampler what it does.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorf_jt.config import DataConfig, ModelConfig
from tensorf_jt.errors import ConfigError, DatasetError
from tensorf_jt.models.tensor_base import TensorBase
from tensorf_jt.models.tensor_cp import TensorCP
from tensorf_jt.models.tensor_vm import TensorVMSplit
from tensorf_jt.models.tensor_vm_stacked import TensorVM
from tensorf_jt.models.tensorf_model import TensoRFModel
from tensorf_jt.rendering.contraction import MODEL_BOX
from tensorf_jt.rendering.renderer import Compositing
from tensorf_jt.rendering.samplers import BoxSampler, NDCSampler, Sampler, UnboundedSampler

MODELS: dict[str, type[TensorBase]] = {"TensorVMSplit": TensorVMSplit, "TensorVM": TensorVM, "TensorCP": TensorCP}
# kwargs keys that are not the field's: the sampler's, the compositing's and the route's.
SAMPLER_KEYS = ("near_far", "step_ratio", "scene_contraction", "foreground_aabb")
COMPOSITING_KEYS = ("distance_scale", "rayMarch_weight_thres")
ROUTE_KEYS = ("importance_samples",)
PIXEL_STRIDE = 8  # every how many pixels (each way) a view's rays are tried against the box


def choose_sampler(kwargs: dict, ndc_ray: bool = False) -> Sampler:
    """The sampler of a model with these ``kwargs``: unbounded where they hold a contraction,
    NDC for forward-facing rays (``ndc_ray``), the reference's box sampler otherwise."""
    near_far, step_ratio = kwargs.get("near_far", (2.0, 6.0)), kwargs.get("step_ratio", 2.0)
    contraction = kwargs.get("scene_contraction")
    if (contraction is None) != (kwargs.get("foreground_aabb") is None):
        raise ConfigError("An unbounded model needs both scene_contraction and foreground_aabb.")
    if contraction is not None:
        if contraction != "inf":
            raise ConfigError(f"scene_contraction '{contraction}' is not supported; the contraction's norm is 'inf'.")
        if ndc_ray:
            raise ConfigError("An unbounded model cannot render NDC rays: use ndc_ray = 0.")
        return UnboundedSampler(_numpy(kwargs["foreground_aabb"]), near_far, step_ratio)
    return NDCSampler(near_far, step_ratio) if ndc_ray else BoxSampler(near_far, step_ratio)


def compose(model_name: str, kwargs: dict, kernels: str = "fused", ndc_ray: bool = False) -> TensoRFModel:
    """The model ``kwargs`` describe, its field a ``model_name`` (a key of ``MODELS``)."""
    if model_name not in MODELS:
        raise ConfigError(f"model_name '{model_name}' is not supported; choose one of {', '.join(MODELS)}.")
    sampler = choose_sampler(kwargs, ndc_ray)
    compositing = Compositing(float(kwargs.get("distance_scale", 25)), float(kwargs.get("rayMarch_weight_thres", 1e-4)))
    importance_samples = int(kwargs.get("importance_samples", 0))
    unbounded = isinstance(sampler, UnboundedSampler)
    if importance_samples < 0 or (importance_samples and not unbounded):
        raise ConfigError(f"importance_samples must be 0 (off) or, for an unbounded scene, positive; got "
                          f"{importance_samples}{'' if unbounded else ' for a bounded scene'}. Set "
                          "--importance_samples 0, or --unbounded 1.")
    others = set(SAMPLER_KEYS + COMPOSITING_KEYS + ROUTE_KEYS)
    field = MODELS[model_name](**{key: value for key, value in kwargs.items() if key not in others})
    return TensoRFModel(field, sampler, compositing, importance_samples, kernels)


@dataclass(frozen=True)
class SceneSpace:
    """Where a run's model lives: ``unbounded`` (and what said so, ``source``), ``ndc_ray``, the
    grid's box in model space (``grid_box``) and, for an unbounded scene, the world box it
    keeps uncontracted (``foreground``, with ``foreground_source``)."""

    unbounded: bool
    source: str
    ndc_ray: bool
    grid_box: np.ndarray
    foreground: np.ndarray | None = None
    foreground_source: str = ""

    def summary(self) -> str:
        """The training's first line's words on the mode."""
        if not self.unbounded:
            return "bounded: nothing beyond the box"
        lo, hi = self.foreground
        size = " x ".join(f"{v:.3g}" for v in hi - lo)
        centre = ", ".join(f"{v:.3g}" for v in (lo + hi) / 2)
        origin = f" ({self.foreground_source})" if self.foreground_source else ""
        return (f"unbounded: the foreground box {size} around ({centre}){origin} is modelled finest, space "
                f"beyond it is contracted ({self.source})")

    def kwargs(self) -> dict:
        """The sampler's kwargs entries that carry the mode."""
        if not self.unbounded:
            return {}
        return {"scene_contraction": "inf", "foreground_aabb": self.foreground.astype(np.float32)}


def scene_space(data: DataConfig, dataset) -> SceneSpace:
    """The run's scene space, from ``--unbounded`` and, at -1, the dataset (``ViewDataset.unbounded``:
    own_data's ``"unbounded"`` key, LLFF captures around an object). An unbounded scene's
    foreground is the dataset's ``foreground_bbox`` where it has one, else its scene box."""
    if data.unbounded == 1:
        unbounded, source = True, "--unbounded 1"
    elif data.unbounded == 0 or data.ndc_ray:
        unbounded, source = False, "--unbounded 0" if data.unbounded == 0 else "ndc_ray"
    else:
        unbounded, source = bool(dataset.unbounded), dataset.unbounded_source
    box = np.asarray(dataset.scene_bbox, dtype=np.float32).reshape(2, 3)
    if not unbounded:
        return SceneSpace(False, source, bool(data.ndc_ray), box)
    if dataset.foreground_bbox is not None:
        foreground, origin = np.asarray(dataset.foreground_bbox, dtype=np.float32).reshape(2, 3), dataset.foreground_source
    else:
        foreground, origin = box, ""
    return SceneSpace(True, source, False, MODEL_BOX.copy(), foreground, origin)


def new_model(settings: ModelConfig, space: SceneSpace, grid_size: list[int], dataset, kernels: str) -> TensoRFModel:
    """A fresh model of ``settings`` over ``space`` at ``grid_size``, for ``dataset`` (its
    near/far; an unbounded run's foreground must be in some training camera's view)."""
    if space.unbounded:
        check_box_in_view(dataset, space.foreground)
    kwargs = {"aabb": space.grid_box, "gridSize": list(grid_size), "density_n_comp": list(settings.n_lamb_sigma),
              "appearance_n_comp": list(settings.n_lamb_sh), "app_dim": settings.data_dim_color,
              "density_shift": settings.density_shift, "alphaMask_thres": settings.alpha_mask_thre,
              "distance_scale": settings.distance_scale, "rayMarch_weight_thres": settings.rm_weight_mask_thre,
              "fea2denseAct": settings.fea2denseAct, "near_far": list(dataset.near_far),
              "step_ratio": settings.step_ratio, "shadingMode": settings.shadingMode, "pos_pe": settings.pos_pe,
              "view_pe": settings.view_pe, "fea_pe": settings.fea_pe, "featureC": settings.featureC,
              **space.kwargs()}
    if settings.importance_samples:
        kwargs["importance_samples"] = settings.importance_samples
    return compose(settings.model_name, kwargs, kernels, space.ndc_ray)


def check_fits_space(model: TensoRFModel, space: SceneSpace, path: str) -> None:
    """Refuse to go on training a checkpoint's model in a scene space other than its own."""
    unbounded = isinstance(model.sampler, UnboundedSampler)
    if unbounded != space.unbounded:
        raise ConfigError(f"--ckpt '{path}' holds {'an unbounded' if unbounded else 'a bounded'} model, but this "
                          f"run's scene is {'unbounded' if space.unbounded else 'bounded'}: set --unbounded "
                          f"{int(unbounded)} to go on training it.")


def check_box_in_view(dataset, box: np.ndarray) -> None:
    """Refuse an unbounded run whose foreground ``box`` [2, 3] no training camera sees: its
    grid's full-resolution part would hold nothing of the scene."""
    box = np.asarray(box, dtype=np.float64).reshape(2, 3)
    width, height = dataset.img_wh
    rows, cols = np.meshgrid(np.arange(0, height, PIXEL_STRIDE), np.arange(0, width, PIXEL_STRIDE), indexing="ij")
    pixels = (rows * width + cols).reshape(-1)
    for view in range(dataset.n_views):
        rays = np.asarray(dataset.view_rays(view), dtype=np.float64)[pixels]
        if _any_ray_hits(rays[:, :3], rays[:, 3:6], box, float(dataset.near_far[0])):
            return
    lo, hi = (", ".join(f"{v:.3g}" for v in corner) for corner in box)
    raise DatasetError(
        f"The scene box [{lo}] - [{hi}] is in no training camera's view, so an unbounded run has no "
        "foreground to model. Give the object's box with --scene_bbox (own_data: 'aabb' in "
        "transforms.json), or train with --unbounded 0.")


def _any_ray_hits(origins: np.ndarray, directions: np.ndarray, box: np.ndarray, near: float) -> bool:
    with np.errstate(divide="ignore", invalid="ignore"):
        inverse = 1.0 / np.where(directions == 0, 1e-12, directions)
        low, high = (box[0] - origins) * inverse, (box[1] - origins) * inverse
    enter = np.minimum(low, high).max(-1)
    leave = np.maximum(low, high).min(-1)
    return bool(np.any(leave > np.maximum(enter, near)))


def _numpy(box) -> np.ndarray:
    """A box given as numpy, a list or a ``jt.Var``, as a numpy array."""
    return box.numpy() if hasattr(box, "numpy") else np.asarray(box)
