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


def model_boxes(model) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The model's scene box in the world and its alpha mask's box, [2, 3] each, where they are
    world boxes: the scene box is None for NDC scenes, the mask box before the first alpha-mask
    update and wherever the grid's space is not the world (NDC, an unbounded scene's contraction)."""
    box = model.world_box()
    mask = model.alphaMask if model.sampler.model_space_is_world else None
    return (None if box is None else np.asarray(box, dtype=np.float64),
            None if mask is None else mask.aabb.numpy().astype(np.float64))
