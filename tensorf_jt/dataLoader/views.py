"""What every dataset format shares: reading, checking and resizing images, compositing, and
keeping the per-view rays and colours flat (training) or stacked per view (evaluation)."""
from __future__ import annotations

import imageio.v3 as iio
import numpy as np
from PIL import Image

from tensorf_jt.errors import DatasetError


def read_rgba(path: str) -> np.ndarray:
    """An image as float32 [H, W, 4] in [0, 1]; images without alpha get an opaque one."""
    try:
        image = iio.imread(path)
    except FileNotFoundError:
        raise DatasetError(f"Image '{path}' listed in the transforms file does not exist.") from None
    except Exception as err:
        raise DatasetError(f"Cannot read image '{path}': {err}") from None
    scale = np.float32(np.iinfo(image.dtype).max) if np.issubdtype(image.dtype, np.integer) else np.float32(1)
    image = image.astype(np.float32) / scale
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=-1)
    if image.shape[-1] == 3:
        image = np.concatenate([image, np.ones_like(image[..., :1])], axis=-1)
    return image[..., :4]


def resize_rgba(image: np.ndarray, size_wh: tuple[int, int]) -> np.ndarray:
    """Resize an RGBA float image with Lanczos filtering (the reference's choice)."""
    as_uint8 = Image.fromarray(np.round(image * 255).astype(np.uint8), mode="RGBA")
    return np.asarray(as_uint8.resize(size_wh, Image.LANCZOS), dtype=np.float32) / np.float32(255)


def composite_on_white(rgba: np.ndarray) -> np.ndarray:
    """Straight-alpha RGBA [..., 4] onto a white background -> RGB [..., 3]."""
    return rgba[..., :3] * rgba[..., 3:] + (1.0 - rgba[..., 3:])


def fit_image(rgba: np.ndarray, path: str, expected_wh: tuple[int, int], expected_from: str,
              target_wh: tuple[int, int]) -> np.ndarray:
    """Check an image's size against what the scene says, then resize it to ``target_wh``.

    ``expected_from`` names where ``expected_wh`` comes from (another image, a transforms file).
    """
    size = (rgba.shape[1], rgba.shape[0])
    if size != tuple(expected_wh):
        raise DatasetError(f"Image '{path}' is {size[0]}x{size[1]} but {expected_from} "
                           f"{expected_wh[0]}x{expected_wh[1]}; all images of a scene must have the same size.")
    return rgba if tuple(target_wh) == size else resize_rgba(rgba, tuple(target_wh))


class ViewDataset:
    """Base of the loaders: ``all_rays`` / ``all_rgbs`` from per-view arrays, and ``len``."""

    img_wh: tuple[int, int]
    is_stack: bool

    def store_views(self, rays: list[np.ndarray], rgbs: list[np.ndarray]) -> None:
        """Per-view rays [H*W, 6] and colours [H*W, 3] -> flat [N*H*W, ...] or stacked per view."""
        w, h = self.img_wh
        if self.is_stack:
            self.all_rays = np.stack(rays)
            self.all_rgbs = np.stack(rgbs).reshape(-1, h, w, 3)
        else:
            self.all_rays = np.concatenate(rays)
            self.all_rgbs = np.concatenate(rgbs)

    def __len__(self) -> int:
        return len(self.all_rgbs)
