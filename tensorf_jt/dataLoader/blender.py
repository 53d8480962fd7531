"""NeRF-synthetic ("blender") scenes: ``transforms_{split}.json`` plus RGBA PNGs.

Faithful to the reference loader (box [-1.5, 1.5]^3, near/far 2..6, RGBA composited onto
white, unit-length ray directions), with two deliberate differences: the image size is read
from the files instead of assuming 800x800, and ``downsample`` divides that size and really
resizes the images (the reference divides 800 and never resizes, so its users keep
pre-shrunk copies; those get a warning naming the setting that matches the reference,
``views.warn_if_already_downsampled``). Optional per-frame ``depth_path`` entries (our demo
scene writes them) load ground-truth depth.
"""
from __future__ import annotations

import json
import os

import numpy as np

from tensorf_jt.dataLoader.camera_checks import check_field_of_view, check_pose
from tensorf_jt.dataLoader.camera_paths import orbit_path
from tensorf_jt.dataLoader.views import (ViewDataset, fit_pixels, read_all_pixels, read_pixels,
                                        warn_if_already_downsampled)
from tensorf_jt.errors import DatasetError
from tensorf_jt.rendering.rays import blender_pose_to_opencv, focal_from_fov, get_ray_directions


class BlenderDataset(ViewDataset):
    """One split of a blender-layout scene, loaded into host memory (``ViewDataset``).

    Attributes follow the reference: ``all_rays`` ([N*H*W, 6] or stacked [N, H*W, 6]),
    ``all_rgbs`` ([N*H*W, 3] or [N, H, W, 3]), ``img_wh``, ``focal``, ``poses`` (OpenCV
    camera-to-world, [N, 4, 4]), ``scene_bbox``, ``near_far``, ``white_bg``; plus
    ``all_depths`` ([N, H, W], 0 where nothing is hit) when the scene provides depth, and
    ``render_path`` / ``rays_for_pose`` (the common interface of ``tensorf_jt.dataLoader``).
    """

    scene_bbox = np.array([[-1.5, -1.5, -1.5], [1.5, 1.5, 1.5]], dtype=np.float32)
    near_far = [2.0, 6.0]
    white_bg = True

    def __init__(self, datadir: str, split: str = "train", downsample: float = 1.0,
                 is_stack: bool = False) -> None:
        if downsample <= 0:
            raise DatasetError(f"downsample must be positive, got {downsample}.")
        self.root_dir, self.split, self.is_stack = datadir, split, is_stack
        self.downsample = float(downsample)
        meta = self._read_meta(os.path.join(datadir, f"transforms_{split}.json"))
        self._load_frames(meta["camera_angle_x"], meta["frames"])
        self.render_path = self._render_path()

    @staticmethod
    def _read_meta(path: str) -> dict:
        if not os.path.isfile(path):
            folder = os.path.dirname(path) or "."
            raise DatasetError(
                f"'{path}' not found. Point --datadir at a blender-layout scene folder (with "
                f"transforms_train.json, transforms_test.json and the images); '{folder}' "
                f"{'exists but lacks it' if os.path.isdir(folder) else 'does not exist'}.")
        try:
            with open(path, "r", encoding="utf-8") as handle:
                meta = json.load(handle)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise DatasetError(f"'{path}' is not valid JSON: {err}.") from None
        for key in ("camera_angle_x", "frames"):
            if key not in meta:
                raise DatasetError(f"'{path}' lacks the key '{key}'.")
        if not meta["frames"]:
            raise DatasetError(f"'{path}' lists no frames.")
        for index, frame in enumerate(meta["frames"]):
            for key in ("file_path", "transform_matrix"):
                if key not in frame:
                    raise DatasetError(f"Frame {index} of '{path}' lacks the key '{key}'.")
            check_pose(frame["transform_matrix"], f"frame {index} ('{frame['file_path']}') of '{path}'")
        check_field_of_view(meta["camera_angle_x"], "camera_angle_x", f"'{path}'")
        return meta

    def _image_path(self, file_path: str) -> str:
        path = os.path.join(self.root_dir, file_path)
        return path if os.path.splitext(path)[1].lower() in (".png", ".jpg", ".jpeg") else path + ".png"

    def _load_frames(self, camera_angle_x: float, frames: list[dict]) -> None:
        self.image_paths = [self._image_path(frame["file_path"]) for frame in frames]
        full_h, full_w = read_pixels(self.image_paths[0])[0].shape[:2]
        warn_if_already_downsampled((full_w, full_h), self.downsample, (800, 800))
        w, h = int(full_w / self.downsample), int(full_h / self.downsample)
        self.img_wh = (w, h)
        self.focal = focal_from_fov(full_w, camera_angle_x) * w / full_w
        self.intrinsics = np.array([[self.focal, 0.0, w / 2.0], [0.0, self.focal, h / 2.0], [0.0, 0.0, 1.0]])

        pixels, scales = zip(*read_all_pixels(self.image_paths, fit=lambda path, image, scale: fit_pixels(
            image, scale, path, (full_w, full_h), f"'{self.image_paths[0]}' is", (w, h))))
        poses, depths = [], []
        for frame in frames:
            poses.append(blender_pose_to_opencv(frame["transform_matrix"]))
            if "depth_path" in frame:
                depths.append(self._load_depth(frame["depth_path"], (w, h)))
        self.poses = np.stack(poses).astype(np.float32)
        self.all_depths = np.stack(depths) if len(depths) == len(frames) else None
        directions = get_ray_directions(h, w, (self.focal, self.focal))
        self.store_views(pixels, scales, np.stack(poses),
                         directions / np.linalg.norm(directions, axis=-1, keepdims=True))

    def _render_path(self) -> np.ndarray:
        """120 OpenCV poses circling the origin (z up) at the training cameras' mean distance and elevation.

        Ours: the reference has no render path for this format. The training cameras come from
        ``transforms_train.json`` whatever the split (this split's cameras if that file is missing).
        """
        poses = self.poses.astype(np.float64)
        train_file = os.path.join(self.root_dir, "transforms_train.json")
        if self.split != "train" and os.path.isfile(train_file):
            frames = self._read_meta(train_file)["frames"]
            poses = np.stack([blender_pose_to_opencv(frame["transform_matrix"]) for frame in frames])
        return orbit_path(poses, np.zeros(3), n_views=120, up=(0.0, 0.0, 1.0)).astype(np.float32)

    def _load_depth(self, depth_path: str, size_wh: tuple[int, int]) -> np.ndarray:
        """Ground-truth ray distance [H, W] (0 = background), nearest-resampled to ``size_wh``."""
        path = os.path.join(self.root_dir, depth_path)
        try:
            depth = np.load(path).astype(np.float32)
        except (OSError, ValueError) as err:
            raise DatasetError(f"Cannot read depth map '{path}': {err}") from None
        full_h, full_w = depth.shape
        w, h = size_wh
        rows = ((np.arange(h) + 0.5) * full_h / h).astype(np.int64)[:, None]
        cols = ((np.arange(w) + 0.5) * full_w / w).astype(np.int64)[None, :]
        return depth[rows, cols]
