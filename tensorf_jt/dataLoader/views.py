"""What every dataset format shares: reading, checking and resizing images, and keeping the
views lean: pixels as read (8- or 16-bit integers) and one pose per view, with rays and colours
made when they are asked for, for one view or for any set of rays.

A NeRF-synthetic scene of 100 views at 800x800 holds 64 M training rays: 2.3 GB as float32
rays and colours, 256 MB as 8-bit RGBA pixels. A training batch needs a few thousand rays,
which cost nothing to make on the fly; evaluation needs one view at a time. Rays are made
with the same float64 arithmetic whichever set is asked for (one view, a batch drawn from
many, or ``rays_for_pose``), so they are the same numbers bit for bit, and colours are the
same float32 arithmetic on the same integers the eager loaders used.
"""
from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import imageio.v3 as iio
import numpy as np
import jittor as jt
from PIL import Image

from tensorf_jt.errors import DatasetError
from tensorf_jt.rendering.rays import BLENDER_TO_OPENCV, ndc_rays_blender, rotate_directions


def read_pixels(path: str) -> tuple[np.ndarray, np.float32]:
    """An image as RGBA pixels [H, W, 4] in its own integer type, and the value that means 1.0.

    Grey and RGB images get an opaque alpha channel; floating-point images are kept as they
    are (1.0 means 1.0).
    """
    try:
        image = iio.imread(path)
    except FileNotFoundError:
        raise DatasetError(f"Image '{path}' listed in the transforms file does not exist.") from None
    except Exception as err:
        raise DatasetError(f"Cannot read image '{path}': {err}") from None
    integer = np.issubdtype(image.dtype, np.integer)
    scale = np.float32(np.iinfo(image.dtype).max) if integer else np.float32(1)
    if not integer:
        image = image.astype(np.float32)
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=-1)
    if image.shape[-1] == 3:
        opaque = np.full(image.shape[:2] + (1,), np.iinfo(image.dtype).max if integer else 1, image.dtype)
        image = np.concatenate([image, opaque], axis=-1)
    return np.ascontiguousarray(image[..., :4]), scale


Fit = Callable[[str, np.ndarray, np.float32], tuple[np.ndarray, np.float32]]


def read_all_pixels(paths: list[str], fit: Fit | None = None) -> list[tuple[np.ndarray, np.float32]]:
    """``read_pixels`` of every path, decoded in parallel threads (PNG and JPEG decoding runs
    outside the GIL); errors are raised for the first failing path in order. ``fit(path,
    pixels, scale)`` checks and resizes each image as soon as it is decoded, so that only the
    fitted images are held at once, not every full-size one."""
    def read(path: str) -> tuple[np.ndarray, np.float32]:
        pixels, scale = read_pixels(path)
        return (pixels, scale) if fit is None else fit(path, pixels, scale)

    workers = min(len(paths), os.cpu_count() or 1)
    if workers <= 1:
        return [read(path) for path in paths]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(read, paths))


def resize_pixels(pixels: np.ndarray, scale: np.float32, size_wh: tuple[int, int]) -> np.ndarray:
    """Resize RGBA pixels with Lanczos filtering (the reference's choice) to 8-bit [h, w, 4].

    Resampling works on 8 bits, as the reference's PIL images do: 16-bit and float images are
    quantised first.
    """
    as_uint8 = np.round((pixels.astype(np.float32) / scale) * 255).astype(np.uint8)
    return np.asarray(Image.fromarray(as_uint8, mode="RGBA").resize(size_wh, Image.LANCZOS))


def composite_on_white(rgba: np.ndarray) -> np.ndarray:
    """Straight-alpha RGBA [..., 4] onto a white background -> RGB [..., 3]."""
    return rgba[..., :3] * rgba[..., 3:] + (1.0 - rgba[..., 3:])


def fit_pixels(pixels: np.ndarray, scale: np.float32, path: str, expected_wh: tuple[int, int],
               expected_from: str, target_wh: tuple[int, int]) -> tuple[np.ndarray, np.float32]:
    """Check an image's size against what the scene says, then resize it to ``target_wh``.

    ``expected_from`` names where ``expected_wh`` comes from (another image, a transforms file).
    """
    size = (pixels.shape[1], pixels.shape[0])
    if size != tuple(expected_wh):
        raise DatasetError(f"Image '{path}' is {size[0]}x{size[1]} but {expected_from} "
                           f"{expected_wh[0]}x{expected_wh[1]}; all images of a scene must have the same size.")
    if tuple(target_wh) == size:
        return pixels, scale
    return resize_pixels(pixels, scale, tuple(target_wh)), np.float32(255)


def warn_if_already_downsampled(image_wh: tuple[int, int], downsample: float, reference_wh: tuple[int, int]) -> None:
    """Say so when images are already the size the original TensoRF would train on.

    The original reads ``downsample`` relative to a fixed size (800x800 for blender and NSVF,
    1920x1080 for Tanks&Temples), so its users keep pre-shrunk copies: 400x400 images with
    ``downsample_train = 2`` train at 400x400 there. Here ``downsample`` divides the images'
    own size (200x200 for those), which works for any scene; the warning names the flag that
    gives the original's result.
    """
    if downsample == 1.0:
        return
    original_wh = (int(reference_wh[0] / downsample), int(reference_wh[1] / downsample))
    if tuple(image_wh) != original_wh:
        return
    ours = (int(image_wh[0] / downsample), int(image_wh[1] / downsample))
    warnings.warn(
        f"These images are {image_wh[0]}x{image_wh[1]}: the original TensoRF reads downsample {downsample:g} as "
        f"{reference_wh[0]}x{reference_wh[1]} / {downsample:g}, which these images already are, and trains on them "
        f"as they are; here downsample divides the images' own size, giving {ours[0]}x{ours[1]}. For the "
        "original's result set downsample_train = 1 and downsample_test = 1 (docs/DATASETS.md, 'downsample').")


class ViewDataset:
    """Base of the loaders: views stored lean (``store_views``), rays and colours on demand.

    ``rays_at`` / ``rgbs_at`` take global ray numbers (view * H*W + row * W + column), the
    order of the flat ``all_rays``; ``view_rays`` / ``view_rgbs`` one view's. ``all_rays`` and
    ``all_rgbs`` (the reference's attributes: flat [N*H*W, ...], or stacked per view when
    ``is_stack``) are made on each access: fine for small scenes and scripts, gigabytes for a
    real one.
    """

    img_wh: tuple[int, int]
    is_stack: bool
    # Loaders that composite RGBA onto white (every format but LLFF, whose images are RGB).
    composite_alpha = True
    # Whether ``poses`` follow OpenGL (LLFF) rather than OpenCV axes.
    poses_are_opengl = False
    # Whether the scene goes on beyond ``scene_bbox`` (a capture with its room or sky), and why
    # the loader says so ('' when it does not).
    unbounded = False
    unbounded_source = ""
    # The box an unbounded run models finest, where the loader knows one apart from ``scene_bbox``
    # (the object a 360-degree capture orbits, inside a box that holds its room); None: ``scene_bbox``.
    foreground_bbox: np.ndarray | None = None
    foreground_source = ""
    # The pinhole camera at the loaded size: [[fx, 0, cx], [0, fy, cy], [0, 0, 1]].
    intrinsics: np.ndarray

    def sparse_points(self) -> tuple[object | None, str]:
        """Rays to the sparse points the training photos observe (``dataLoader.sparse_points``);
        a loader that reads none says so."""
        return None, f"the {type(self).__name__} loader reads no sparse points"

    def store_views(self, pixels: list[np.ndarray], scales: list[np.float32], poses: np.ndarray,
                    directions: np.ndarray, ndc: tuple[float, float] | None = None) -> None:
        """Keep the views: RGBA ``pixels`` [H, W, 4] at the loaded size with their ``scales``
        (the value meaning 1.0), camera-to-world ``poses`` [N, 3 or 4, 4] (float64, in the
        convention ``directions`` are in), camera-frame pixel ``directions`` [H, W, 3] (float64,
        normalised where the format's rays are), and for NDC rays ``ndc`` = (focal, near)."""
        w, h = self.img_wh
        dtypes = {p.dtype for p in pixels}
        if len(dtypes) > 1 or len(set(float(s) for s in scales)) > 1:
            # Mixed bit depths: bring every image to float32 so one scale serves all.
            pixels = [p.astype(np.float32) / s for p, s in zip(pixels, scales)]
            scales = [np.float32(1)] * len(pixels)
        self._pixels = np.stack(pixels).reshape(len(pixels), h * w, 4)
        self._scale = np.float32(scales[0])
        self._poses = np.ascontiguousarray(np.asarray(poses, dtype=np.float64)[:, :3, :4])
        self._directions = np.ascontiguousarray(np.asarray(directions, dtype=np.float64).reshape(h * w, 3))
        self._ndc = ndc

    # ------------------------------------------------------------- sizes
    @property
    def n_views(self) -> int:
        return self._pixels.shape[0]

    @property
    def n_rays(self) -> int:
        """Rays of all views: N * H * W."""
        return self._pixels.shape[0] * self._pixels.shape[1]

    def __len__(self) -> int:
        return self.n_views if self.is_stack else self.n_rays

    # ------------------------------------------------ cameras (float64, exact)
    @property
    def camera_poses(self) -> np.ndarray:
        """Camera-to-world [N, 3, 4] float64 the rays are made from (axes: ``poses_are_opengl``)."""
        return self._poses

    @property
    def pixel_directions(self) -> np.ndarray:
        """Camera-frame direction of each pixel [H*W, 3] float64, as the rays use them."""
        return self._directions

    @property
    def ndc_parameters(self) -> tuple[float, float] | None:
        """(focal, near) of the NDC mapping the rays go through, or None for world-space rays."""
        return self._ndc

    # ------------------------------------------------------ rays and colours
    def _rays(self, c2w: np.ndarray, directions: np.ndarray) -> np.ndarray:
        """Rays [M, 6] float32 for camera-frame ``directions`` [M, 3] and ``c2w`` ([3, 4] or [M, 3, 4])."""
        rays_d = rotate_directions(directions, c2w)
        rays_o = np.broadcast_to(c2w[..., :3, 3], rays_d.shape)
        if self._ndc is not None:
            w, h = self.img_wh
            rays_o, rays_d = ndc_rays_blender(h, w, self._ndc[0], self._ndc[1], rays_o, rays_d)
        return np.concatenate([rays_o, rays_d], axis=1).astype(np.float32)

    def _colours(self, pixels: np.ndarray) -> np.ndarray:
        rgba = pixels.astype(np.float32) / self._scale
        return composite_on_white(rgba) if self.composite_alpha else rgba[..., :3]

    def rays_at(self, ray_ids: np.ndarray) -> np.ndarray:
        """Rays [M, 6] float32 (origin, direction) of global ray numbers ``ray_ids`` [M]."""
        views, pixels = np.divmod(np.asarray(ray_ids, dtype=np.int64), self._pixels.shape[1])
        return self._rays(self._poses[views], self._directions[pixels])

    def rgbs_at(self, ray_ids: np.ndarray) -> np.ndarray:
        """Colours [M, 3] float32 of global ray numbers ``ray_ids`` [M]."""
        views, pixels = np.divmod(np.asarray(ray_ids, dtype=np.int64), self._pixels.shape[1])
        return self._colours(self._pixels[views, pixels])

    def view_rays(self, view: int) -> np.ndarray:
        """Rays [H*W, 6] float32 of view ``view``."""
        return self._rays(self._poses[view], self._directions)

    def view_rgbs(self, view: int) -> np.ndarray:
        """Colours [H*W, 3] float32 of view ``view``."""
        return self._colours(self._pixels[view])

    def rays_for_pose(self, c2w: np.ndarray) -> np.ndarray:
        """Rays [H*W, 6] float32 of a camera at ``c2w`` ([3 or 4, 4], the loader's convention),
        made exactly as the loader makes its own (a ``render_path`` entry, say)."""
        return self._rays(np.asarray(c2w, dtype=np.float64)[:3, :4], self._directions)

    # --------------------------------------------- the reference's attributes
    @property
    def proj_mat(self) -> np.ndarray:
        """[N, 3, 4] float32: ``intrinsics @ inverse(pose)[:3]`` per view, the reference's
        projection of homogeneous world points to homogeneous pixels (OpenCV pinhole model;
        LLFF's OpenGL poses are converted first). Inverted with ``jt.linalg.inv``, in float32
        as the reference's ``torch.inverse``."""
        poses = self.poses.astype(np.float64)
        if self.poses_are_opengl:
            poses = poses @ BLENDER_TO_OPENCV
        world_to_camera = jt.linalg.inv(jt.array(poses.astype(np.float32))).numpy()
        return (self.intrinsics.astype(np.float32)[None] @ world_to_camera[:, :3]).astype(np.float32)


    @property
    def all_rays(self) -> np.ndarray:
        """Every ray: [N*H*W, 6], or [N, H*W, 6] when ``is_stack``. Made on each access."""
        rays = np.stack([self.view_rays(view) for view in range(self.n_views)])
        return rays if self.is_stack else rays.reshape(-1, 6)

    @property
    def all_rgbs(self) -> np.ndarray:
        """Every colour: [N*H*W, 3], or [N, H, W, 3] when ``is_stack``. Made on each access."""
        w, h = self.img_wh
        rgbs = self._colours(self._pixels)
        return rgbs.reshape(-1, h, w, 3) if self.is_stack else rgbs.reshape(-1, 3)
