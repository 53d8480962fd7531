"""NSVF-layout scenes (Synthetic-NSVF, BlendedMVS, ...): ``bbox.txt``, ``intrinsics.txt``, ``pose/``, ``rgb/``.

Layout, as the NSVF release ships it::

    scene/bbox.txt         x_min y_min z_min x_max y_max z_max [initial voxel size]
    scene/intrinsics.txt   a 3x3 or 4x4 matrix (or its 16 numbers on one line), or the
                           DeepVoxels style whose first line is "f cx cy 0"
    scene/rgb/0_*.png      training images (1_*: validation, 2_*: test), RGB or RGBA
    scene/pose/0_*.txt     one 4x4 camera-to-world matrix per image (OpenCV axes: x right,
                           y down, z forward), paired with the images in sorted order
    scene/test_traj.txt    optional: camera path, 4N x 4 (or N lines of 16 numbers)

Faithful to the reference loader: box from ``bbox.txt``, near/far 0.5..6, RGBA composited on
white, poses used as they are with unit-length ray directions through pixel centres, test
split ``2_*`` (``1_*`` when there is no ``2_*``). Differences: the image size is read from
the images (the reference assumes 800x800 and a principal point at its centre; we take cx,
cy from ``intrinsics.txt``) and ``downsample`` resizes them; ``is_stack`` is honoured for
every split (the reference always stacks val/test); the render path is ``test_traj.txt`` when
present, else a circle around the box centre at the training cameras' mean distance and
elevation (the reference's fixed Blender-convention circle looks away from the scene when
used with these OpenCV poses).
"""
from __future__ import annotations

import os

import numpy as np

from tensorf_jt.dataLoader.views import (ViewDataset, fit_pixels, read_all_pixels, read_pixels,
                                        warn_if_already_downsampled)
from tensorf_jt.dataLoader.camera_checks import check_finite, check_pose, check_positive
from tensorf_jt.dataLoader.camera_paths import orbit_path
from tensorf_jt.dataLoader.llff import IMAGE_EXTENSIONS
from tensorf_jt.errors import DatasetError
from tensorf_jt.rendering.rays import get_ray_directions

SPLIT_PREFIXES = {"train": ("0_",), "val": ("1_",), "test": ("2_", "1_")}


def read_numbers(path: str, what: str) -> list[list[float]]:
    """Rows of numbers in a text file (blank lines skipped); DatasetError if missing or not numeric."""
    if not os.path.isfile(path):
        raise DatasetError(f"{what} '{path}' not found.")
    rows = []
    with open(path, "r", encoding="utf-8", errors="replace") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rows.append([float(token) for token in line.split()])
            except ValueError:
                raise DatasetError(f"{what} '{path}', line {line_no}: '{line.strip()}' is not a row of "
                                   f"numbers.") from None
    if not rows:
        raise DatasetError(f"{what} '{path}' is empty.")
    return rows


def read_bbox(path: str) -> np.ndarray:
    """The scene box [2, 3] float32 from the first six numbers of ``bbox.txt``."""
    values = [v for row in read_numbers(path, "Bounding-box file") for v in row]
    if len(values) < 6:
        raise DatasetError(f"Bounding-box file '{path}' has {len(values)} numbers; expected "
                           f"'x_min y_min z_min x_max y_max z_max [voxel_size]'.")
    bbox = np.array(values[:6], dtype=np.float64).reshape(2, 3)
    if not np.all(np.isfinite(bbox)):
        raise DatasetError(f"Bounding-box file '{path}' holds NaN or infinity: {bbox.tolist()}.")
    if np.any(bbox[1] <= bbox[0]):
        raise DatasetError(f"Bounding-box file '{path}': the maxima {bbox[1].tolist()} must exceed the "
                           f"minima {bbox[0].tolist()}.")
    return bbox.astype(np.float32)


def read_intrinsics(path: str) -> tuple[float, float, float, float]:
    """(fx, fy, cx, cy) in pixels of the full-size images, from either ``intrinsics.txt`` style."""
    rows = read_numbers(path, "Intrinsics file")
    rows = [row for row in rows if len(row) != 2]  # NSVF writes "H W"-style size lines; not needed
    widths = {len(row) for row in rows}
    if len(widths) == 1 and (len(rows), len(rows[0])) in ((3, 3), (4, 4), (1, 16)):
        k = np.array(rows, dtype=np.float64).reshape(len(rows), -1)
        k = k.reshape(4, 4) if k.size == 16 else k
        fx, fy, cx, cy = k[0, 0], k[1, 1], k[0, 2], k[1, 2]
    elif rows and len(rows[0]) >= 3:
        fx, cx, cy = rows[0][:3]
        fy = fx
    else:
        raise DatasetError(f"Intrinsics file '{path}' is neither a 3x3/4x4 matrix nor starts with "
                           f"'focal cx cy'.")
    if fx <= 0 or fy <= 0:
        raise DatasetError(f"Intrinsics file '{path}' gives a non-positive focal length ({fx}, {fy}).")
    where = f"intrinsics file '{path}'"
    return (check_positive(fx, "fx", where), check_positive(fy, "fy", where), check_finite(cx, "cx", where),
            check_finite(cy, "cy", where))


def read_pose(path: str) -> np.ndarray:
    """A camera-to-world matrix [4, 4] float64 from a text file holding a 4x4 or 3x4 matrix."""
    rows = read_numbers(path, "Pose file")
    try:
        matrix = np.array(rows, dtype=np.float64)
    except ValueError:
        matrix = np.zeros(0)
    if matrix.size in (12, 16):
        matrix = matrix.reshape(-1, 4)
    if matrix.shape not in ((3, 4), (4, 4)):
        raise DatasetError(f"Pose file '{path}' does not hold a 4x4 (or 3x4) camera-to-world matrix.")
    pose = np.eye(4)
    pose[:3] = check_pose(matrix, f"pose file '{path}'")[:3]
    return pose


def read_trajectory(path: str) -> np.ndarray:
    """Camera path [K, 4, 4] float64 from NSVF's ``test_traj.txt`` (4K x 4, or K x 16 / K x 17 rows)."""
    rows = [row for row in read_numbers(path, "Camera path") if len(row) != 2]
    widths = {len(row) for row in rows}
    if widths == {17}:
        rows = [row[:16] for row in rows]  # a trailing frame id
        widths = {16}
    if widths not in ({16}, {4}) or (widths == {4} and len(rows) % 4):
        raise DatasetError(f"Camera path '{path}' must hold 4x4 matrices: 4N rows of 4 numbers or N rows of 16.")
    return np.array(rows, dtype=np.float64).reshape(-1, 4, 4)


def _split_files(folder: str, prefix: str, extensions: tuple[str, ...]) -> list[str]:
    return sorted(name for name in os.listdir(folder)
                  if name.startswith(prefix) and os.path.splitext(name)[1].lower() in extensions)


class NSVFDataset(ViewDataset):
    """One split of an NSVF-layout scene, loaded into host memory.

    Attributes as the common interface (``tensorf_jt.dataLoader``); ``focal`` is [fx, fy] at
    the loaded size, ``intrinsics`` the 3x3 matrix at the loaded size, ``poses`` the split's
    OpenCV camera-to-world matrices [n, 4, 4].
    """

    near_far = [0.5, 6.0]
    white_bg = True
    all_depths = None
    bbox_scale = 1.0
    layout = "NSVF"
    original_size = (800, 800)  # the image size the original's loader assumes

    def __init__(self, datadir: str, split: str = "train", downsample: float = 1.0, is_stack: bool = False) -> None:
        if downsample <= 0:
            raise DatasetError(f"downsample must be positive, got {downsample}.")
        if split not in SPLIT_PREFIXES:
            raise DatasetError(f"Unknown split '{split}' for the {self.layout} layout; use train, val or test.")
        if not os.path.isdir(datadir):
            raise DatasetError(f"Dataset folder '{datadir}' does not exist. Point --datadir at a scene in the "
                               f"{self.layout} layout (bbox.txt, intrinsics.txt, rgb/, pose/).")
        self.root_dir, self.split, self.is_stack = datadir, split, is_stack
        self.downsample = float(downsample)
        self.scene_bbox = read_bbox(os.path.join(datadir, "bbox.txt")) * np.float32(self.bbox_scale)
        self._intrinsics_full = read_intrinsics(os.path.join(datadir, "intrinsics.txt"))
        self.image_paths, pose_paths = self._files(split)
        self._load(pose_paths)
        self.render_path = self._render_path().astype(np.float32)

    def _folder(self, name: str) -> str:
        folder = os.path.join(self.root_dir, name)
        if not os.path.isdir(folder):
            raise DatasetError(f"'{folder}' not found: a scene in the {self.layout} layout keeps its images in "
                               f"rgb/ and one camera-to-world matrix per image in pose/.")
        return folder

    def _files(self, split: str) -> tuple[list[str], list[str]]:
        """Image and pose paths of ``split``, paired in sorted order."""
        rgb_dir, pose_dir = self._folder("rgb"), self._folder("pose")
        prefixes = SPLIT_PREFIXES[split]
        for prefix in prefixes:
            images = _split_files(rgb_dir, prefix, IMAGE_EXTENSIONS)
            poses = _split_files(pose_dir, prefix, (".txt",))
            if images or poses:
                break
        if not images:
            raise DatasetError(f"No images for the {split} split in '{rgb_dir}' (expected files named "
                               f"{' or '.join(p + '*.png' for p in prefixes)}).")
        if len(images) != len(poses):
            raise DatasetError(f"The {split} split has {len(images)} images '{prefix}*' in '{rgb_dir}' but "
                               f"{len(poses)} pose files '{prefix}*.txt' in '{pose_dir}'; every image needs "
                               f"exactly one pose (paired in sorted order).")
        return ([os.path.join(rgb_dir, name) for name in images],
                [os.path.join(pose_dir, name) for name in poses])

    def _load(self, pose_paths: list[str]) -> None:
        full_h, full_w = read_pixels(self.image_paths[0])[0].shape[:2]
        warn_if_already_downsampled((full_w, full_h), self.downsample, self.original_size)
        w, h = int(full_w / self.downsample), int(full_h / self.downsample)
        if w < 1 or h < 1:
            raise DatasetError(f"downsample {self.downsample:g} leaves no pixels of the {full_w}x{full_h} images.")
        self.img_wh = (w, h)
        fx, fy, cx, cy = self._intrinsics_full
        sx, sy = w / full_w, h / full_h
        self.focal = [fx * sx, fy * sy]
        self.intrinsics = np.array([[fx * sx, 0.0, cx * sx], [0.0, fy * sy, cy * sy], [0.0, 0.0, 1.0]])
        directions = get_ray_directions(h, w, self.focal, center=(cx * sx, cy * sy))
        self.directions = directions / np.linalg.norm(directions, axis=-1, keepdims=True)

        pixels, scales = zip(*read_all_pixels(self.image_paths, fit=lambda path, image, scale: fit_pixels(
            image, scale, path, (full_w, full_h), f"'{self.image_paths[0]}' is", (w, h))))
        poses = np.stack([read_pose(path) for path in pose_paths])
        self.poses = poses.astype(np.float32)
        self.store_views(pixels, scales, poses, self.directions)

    def training_poses(self) -> np.ndarray:
        """The training cameras' OpenCV camera-to-world matrices [N, 4, 4] float64."""
        if self.split == "train":
            return self.poses.astype(np.float64)
        return np.stack([read_pose(path) for path in self._files("train")[1]])

    def _render_path(self) -> np.ndarray:
        trajectory = os.path.join(self.root_dir, "test_traj.txt")
        if os.path.isfile(trajectory):
            return read_trajectory(trajectory)
        return orbit_path(self.training_poses(), self.scene_bbox.astype(np.float64).mean(0), n_views=120)
