"""Bounded or unbounded: whether a run models only its scene box or all of space around it.

A bounded scene (the reference's only kind) is all inside its box: rays are marched through the
box and whatever they do not hit there is a plain background colour. An unbounded scene -- a
capture walked around an object in a room, or outdoors -- goes on beyond it: the box becomes
the foreground, kept at full resolution, and the rest of space is contracted around it
(``rendering.contraction``). ``--unbounded`` decides, or with -1 the dataset does
(``ViewDataset.unbounded``: own_data's ``"unbounded"`` key, LLFF captures around an object).
"""
from __future__ import annotations

import numpy as np

from tensorf_jt.config import DataConfig
from tensorf_jt.errors import DatasetError

PIXEL_STRIDE = 8  # every how many pixels (each way) a view's rays are tried against the box


def scene_mode(data: DataConfig, dataset) -> tuple[bool, str]:
    """Whether the run's scene is unbounded, and what said so (for the scene summary)."""
    if data.unbounded == 1:
        return True, "--unbounded 1"
    if data.unbounded == 0 or data.ndc_ray:
        return False, "--unbounded 0" if data.unbounded == 0 else "ndc_ray"
    return bool(dataset.unbounded), dataset.unbounded_source


def adopt_foreground_box(dataset) -> None:
    """Make the dataset's foreground box, where it has one, its scene box: an unbounded run
    models that box finest and contracts everything else, its room included."""
    if dataset.foreground_bbox is None:
        return
    dataset.scene_bbox = np.asarray(dataset.foreground_bbox, dtype=np.float32)
    sources = getattr(dataset, "bounds_source", "").split(", ")  # the box's source comes first
    dataset.bounds_source = ", ".join([dataset.foreground_source] + sources[1:])


def mode_summary(unbounded: bool, source: str) -> str:
    """The scene summary's words on the mode."""
    if not unbounded:
        return "bounded: nothing beyond the box"
    return f"unbounded: the box is the foreground, space beyond it is contracted ({source})"


def check_box_in_view(dataset) -> None:
    """Refuse an unbounded run whose foreground box no training camera sees: its grid's
    full-resolution part would hold nothing of the scene."""
    box = np.asarray(dataset.scene_bbox, dtype=np.float64).reshape(2, 3)
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
