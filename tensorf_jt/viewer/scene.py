"""What the viewer shows of a scene besides the rendered frames, gathered from a dataset and a model."""
from __future__ import annotations

import numpy as np

from tensorf_jt.viewer.cameras import scene_cameras
from tensorf_jt.viewer.server import SceneView

THUMBNAIL_SIDE = 96  # pixels on the longer side of each training camera's thumbnail


def thumbnail(rgb: np.ndarray, width: int, height: int, side: int = THUMBNAIL_SIDE) -> np.ndarray:
    """A view's colours [H*W, 3] in [0, 1] as a uint8 image at most ``side`` pixels on its longer side
    (every k-th pixel: thumbnails need no filtering)."""
    step = max(1, int(np.ceil(max(width, height) / side)))
    image = np.asarray(rgb, dtype=np.float32).reshape(height, width, 3)[::step, ::step]
    return np.round(np.clip(image, 0.0, 1.0) * 255).astype(np.uint8)


def scene_view(dataset) -> SceneView:
    """The cameras, thumbnails and depth range of a loaded dataset (any split, stacked or not)."""
    width, height = dataset.img_wh
    thumbnails = [thumbnail(dataset.view_rgbs(view), width, height) for view in range(dataset.n_views)]
    return SceneView(cameras=scene_cameras(dataset), thumbnails=thumbnails,
                     near_far=tuple(float(v) for v in dataset.near_far))


def model_boxes(model) -> tuple[np.ndarray, np.ndarray | None]:
    """The model's scene box in the world and its alpha mask's box, [2, 3] each; the mask box is
    None before the first alpha-mask update, and for an unbounded model (whose mask spans all
    of contracted space: its box is no box in the world)."""
    mask = None if model.unbounded else model.alphaMask
    return np.asarray(model.world_box(), dtype=np.float64), None if mask is None else mask.aabb.numpy().astype(np.float64)
