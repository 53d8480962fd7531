"""Resampling a capture's images into one shared pinhole camera, once, with OpenCV.

The loaders trace rays through a pinhole camera shared by all views; COLMAP calibrates lens
distortion (SIMPLE_RADIAL, RADIAL, OPENCV, FULL_OPENCV, OPENCV_FISHEYE) and may give each
image its own camera. Each image is remapped (``cv2.remap``, Lanczos) into the shared pinhole
camera ``shared_pinhole`` picks: the size, aspect and principal point of the camera most
images use, with the focal length scaled so that every pixel of every image sees inside its
source image (no blank borders, like ``colmap image_undistorter``'s default). Where every
image already uses one undistorted camera, nothing is resampled.

The maps are built here, from ``Camera.project`` (COLMAP's models), and only the resampling is
OpenCV's: COLMAP puts the centre of the top-left pixel at (0.5, 0.5), ``cv2.remap`` at (0, 0),
hence the half-pixel shift. The results are PNG files (lossless) in a cache folder with a
stamp of the cameras they were made for; a later run redoes only what changed.
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import numpy as np

from tensorf_jt.errors import DatasetError
from tensorf_jt.formats.colmap import Camera
from tensorf_jt.formats.ownership import read_json_object

STAMP_FILE = "undistort.json"


@dataclass(frozen=True)
class Pinhole:
    """An undistorted camera, in pixels (centre of the top-left pixel at (0.5, 0.5))."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    def directions(self) -> np.ndarray:
        """Camera-frame directions [H, W, 3] (OpenCV axes, z = 1) through the pixel centres."""
        u, v = np.meshgrid(np.arange(self.width) + 0.5, np.arange(self.height) + 0.5, indexing="xy")
        return np.stack([(u - self.cx) / self.fx, (v - self.cy) / self.fy, np.ones_like(u)], axis=-1)


def _import_cv2():
    try:
        import cv2
    except ImportError:
        raise DatasetError("Undistorting images needs OpenCV: pip install opencv-python-headless") from None
    return cv2


def _border(camera: Pinhole, samples: int = 64) -> np.ndarray:
    """Directions [samples * 4, 32, 3]: rays from the principal point out to the image's border pixels."""
    t = np.linspace(0.0, 1.0, samples)
    w, h = camera.width, camera.height
    edges = np.concatenate([np.stack([0.5 + t * (w - 1), np.full_like(t, 0.5)], -1),
                            np.stack([0.5 + t * (w - 1), np.full_like(t, h - 0.5)], -1),
                            np.stack([np.full_like(t, 0.5), 0.5 + t * (h - 1)], -1),
                            np.stack([np.full_like(t, w - 0.5), 0.5 + t * (h - 1)], -1)])
    fractions = np.linspace(0.0, 1.0, 32)[None, :, None]
    pixels = np.array([camera.cx, camera.cy]) + fractions * (edges[:, None, :] - np.array([camera.cx, camera.cy]))
    return np.concatenate([(pixels[..., :1] - camera.cx) / camera.fx, (pixels[..., 1:] - camera.cy) / camera.fy,
                           np.ones(pixels.shape[:-1] + (1,))], axis=-1)


def _covers(target: Pinhole, source: Camera) -> bool:
    """Whether every pixel of ``target`` maps inside ``source``'s image, through a lens that
    keeps radial order (a strong barrel term folds back beyond some radius; that is refused)."""
    rays = _border(target)
    pixels = source.project(rays)
    if not np.all(np.isfinite(pixels)):
        return False
    inside = np.all((pixels >= 0.5) & (pixels <= np.array([source.width, source.height]) - 0.5))
    cx, cy = source.principal_point
    radius = np.hypot(pixels[..., 0] - cx, pixels[..., 1] - cy)
    return bool(inside and np.all(np.diff(radius, axis=1) >= -1e-9))


def shared_pinhole(cameras: list[Camera]) -> Pinhole | None:
    """The one pinhole camera all images are resampled into; None when they already share one
    undistorted camera. ``cameras``: each image's camera (repeats count as use)."""
    ids = [camera.camera_id for camera in cameras]
    main = cameras[max(range(len(ids)), key=lambda index: ids.count(ids[index]))]
    distinct = {camera.camera_id: camera for camera in cameras}.values()
    if len({(c.model, c.width, c.height, c.params) for c in distinct}) == 1 and main.is_pinhole:
        return None
    (fx, fy), (cx, cy) = main.focal, main.principal_point

    def candidate(scale: float) -> Pinhole:
        return Pinhole(main.width, main.height, fx * scale, fy * scale, cx, cy)

    def valid(scale: float) -> bool:
        return all(_covers(candidate(scale), camera) for camera in distinct)

    low, high = 0.25, 4.0
    if not valid(high):
        raise DatasetError(f"The lens distortion of the cameras ({', '.join(sorted({c.model for c in distinct}))}) "
                           "is too strong to resample into one pinhole camera without blank borders; undistort "
                           "with 'colmap image_undistorter' and convert its PINHOLE model instead.")
    if valid(low):
        return candidate(low)
    for _ in range(40):  # the smallest focal length (widest view) that still covers every image
        middle = 0.5 * (low + high)
        low, high = (low, middle) if valid(middle) else (middle, high)
    return candidate(high)


def remap_table(target: Pinhole, source: Camera) -> tuple[np.ndarray, np.ndarray]:
    """``cv2.remap`` maps (x, y), float32 [H, W] each: where each target pixel centre lies in ``source``."""
    pixels = source.project(target.directions()) - 0.5  # OpenCV puts pixel centres at integers
    return pixels[..., 0].astype(np.float32), pixels[..., 1].astype(np.float32)


def read_image(path: str) -> np.ndarray:
    """An image as OpenCV reads it (channel order kept as stored, 8 or 16 bits, alpha kept)."""
    cv2 = _import_cv2()
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as err:
        raise DatasetError(f"Cannot read image '{path}': {err}") from None
    image = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
    if image is None:
        raise DatasetError(f"Cannot decode image '{path}'.")
    return image


def resample(image: np.ndarray, maps: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """``image`` resampled through ``remap_table``'s maps (Lanczos; borders repeat the edge pixels)."""
    cv2 = _import_cv2()
    return cv2.remap(image, maps[0], maps[1], interpolation=cv2.INTER_LANCZOS4, borderMode=cv2.BORDER_REPLICATE)


def is_cache(folder: str) -> bool:
    """Whether ``folder`` is a cache ``undistort_images`` wrote: it holds the stamp file."""
    stamp = read_json_object(os.path.join(folder, STAMP_FILE))
    return stamp is not None and "target" in stamp and "cameras" in stamp


def undistort_images(jobs: list[tuple[str, str, Camera]], target: Pinhole, cache_dir: str) -> list[str]:
    """Resample ``(image path, name, its camera)`` into ``cache_dir``/name (as .png); returns the new paths.

    ``name`` is the image's name in the COLMAP model (it may hold sub-folders). An image whose
    cached PNG is newer than it and was made for the same cameras (the stamp file) is not
    redone. The stamp is written first, marked incomplete (it marks the folder as this cache,
    ``is_cache``), and again once every image is done. Images are processed in threads
    (OpenCV releases the GIL); each camera's maps are built once.
    """
    cv2 = _import_cv2()
    os.makedirs(cache_dir, exist_ok=True)
    stamp_path = os.path.join(cache_dir, STAMP_FILE)
    stamp = {"target": asdict(target),
             "cameras": {str(c.camera_id): [c.model, c.width, c.height, list(c.params)] for _, _, c in jobs}}
    previous = read_json_object(stamp_path)
    fresh = previous is not None and previous.pop("complete", True) is True and previous == stamp
    outputs = [os.path.join(cache_dir, os.path.splitext(name)[0] + ".png") for _, name, _ in jobs]
    if len(set(outputs)) != len(outputs):
        raise DatasetError("Two images differ only in their extension (e.g. a.jpg and a.png); rename one, as their "
                           f"undistorted copies in '{cache_dir}' would overwrite each other.")
    _write_stamp(stamp_path, {**stamp, "complete": False})
    maps = {camera.camera_id: remap_table(target, camera) for _, _, camera in jobs}

    def work(job: tuple[tuple[str, str, Camera], str]) -> None:
        (path, _, camera), out = job
        if fresh and os.path.isfile(out) and os.path.getmtime(out) >= os.path.getmtime(path):
            return
        os.makedirs(os.path.dirname(out), exist_ok=True)
        if not cv2.imwrite(out, resample(read_image(path), maps[camera.camera_id])):
            raise DatasetError(f"Cannot write '{out}'; check that the folder is writable and the disk not full.")

    with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1))) as pool:
        list(pool.map(work, zip(jobs, outputs)))
    _write_stamp(stamp_path, stamp)
    return outputs


def _write_stamp(path: str, stamp: dict) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(stamp, handle, indent=1)
