"""Where training rays end: rays from the training cameras to the COLMAP points their photos observe.

A sparse point that an image observes lies on a surface seen from that camera: the segment from
the camera to the point is empty and the ray ends there. ``training.sparse_depth`` turns these
rays into a loss (DS-NeRF's depth supervision), which fixes the geometry that photometric error
alone leaves free between the photos. Only numpy is imported here.

A transforms file written by ``tools/colmap_to_transforms.py`` carries what is needed: the
model's folder (``colmap_model``, relative to the file), the similarity from COLMAP's world to
the scene's (``colmap_to_world``) and each frame's ``colmap_image_id``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from tensorf_jt.errors import DatasetError
from tensorf_jt.formats.colmap import Model, find_model, read_model, view_points

# A point must be seen by this many training photos: triangulated from them, not from the
# held-out views alone.
MIN_VIEWS = 2
# Points whose mean reprojection error exceeds this (pixels of the photos COLMAP matched) are
# left out: mismatches.
MAX_ERROR = 2.0


@dataclass(frozen=True)
class KeypointRays:
    """Rays [N, 6] (camera centre, unit direction; float32) to ``n_points`` sparse points, and
    each point's distance along its ray ``depths`` [N]."""

    rays: np.ndarray
    depths: np.ndarray
    n_points: int

    def summary(self) -> str:
        return f"{len(self.depths):,} rays to {self.n_points:,} sparse points"


def keypoint_rays(model: Model, colmap_to_scene: np.ndarray, image_ids: list[int], c2w_opencv: np.ndarray,
                  min_views: int = MIN_VIEWS, max_error: float = MAX_ERROR) -> KeypointRays:
    """One ray from each camera (``c2w_opencv`` [V, 4, 4] in the scene's frame, the images
    ``image_ids`` of ``model``) to each sparse point it observes in front of it, for the points
    that at least ``min_views`` of these images observe with an error of at most ``max_error``."""
    points = model.points
    xyz = points.xyz @ colmap_to_scene[:3, :3].T + colmap_to_scene[:3, 3]
    views = view_points([model.images[image_id] for image_id in image_ids], points.ids)
    seen_by = np.zeros(len(points.ids), dtype=np.int64)
    for rows in views:
        seen_by[rows] += 1
    good = (seen_by >= min_views) & (points.error <= max_error)
    origins, directions, depths = [], [], []
    for c2w, rows in zip(c2w_opencv, views):
        offset = xyz[rows[good[rows]]] - c2w[:3, 3]
        offset = offset[offset @ c2w[:3, 2] > 0]
        distance = np.linalg.norm(offset, axis=-1)
        origins.append(np.broadcast_to(c2w[:3, 3], offset.shape))
        directions.append(offset / distance[:, None])
        depths.append(distance)
    rays = np.concatenate([np.concatenate(origins), np.concatenate(directions)], axis=1) if origins else \
        np.zeros((0, 6))
    depths = np.concatenate(depths) if depths else np.zeros(0)
    return KeypointRays(rays.astype(np.float32), depths.astype(np.float32), int(good.sum()))


def transforms_keypoints(transforms_path: str, meta: dict, frames: list[dict],
                         c2w_opencv: np.ndarray) -> tuple[KeypointRays | None, str]:
    """The keypoint rays of ``frames`` (poses ``c2w_opencv``) of a transforms file, or None and
    why not (the file does not come from a COLMAP model, or the model is gone)."""
    if "colmap_to_world" not in meta or any("colmap_image_id" not in frame for frame in frames):
        return None, (f"'{transforms_path}' names no COLMAP model (tools/colmap_to_transforms.py writes "
                      "'colmap_to_world' and each frame's 'colmap_image_id')")
    folder = os.path.dirname(os.path.abspath(transforms_path))
    try:
        model_dir = (os.path.join(folder, str(meta["colmap_model"])) if "colmap_model" in meta
                     else find_model(folder))
        model = read_model(model_dir)
        to_scene = np.asarray(meta["colmap_to_world"], dtype=np.float64)
        if to_scene.shape != (4, 4) or not np.isfinite(to_scene).all():
            return None, f"'colmap_to_world' of '{transforms_path}' is not a finite 4x4 matrix"
        image_ids = [int(frame["colmap_image_id"]) for frame in frames]
        missing = [image_id for image_id in image_ids if image_id not in model.images]
        if missing:
            return None, f"the COLMAP model in '{model_dir}' has no image {missing[0]} (colmap_image_id)"
    except DatasetError as err:
        return None, str(err)
    except (TypeError, ValueError) as err:
        return None, f"'{transforms_path}': {err}"
    return keypoint_rays(model, to_scene, image_ids, c2w_opencv), f"from '{model_dir}'"
