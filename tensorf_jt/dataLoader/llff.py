"""Forward-facing LLFF scenes: ``poses_bounds.npy`` plus images, rendered with NDC rays.

Layout (as produced by LLFF's ``imgs2poses.py`` from a COLMAP reconstruction)::

    scene/poses_bounds.npy   [N, 17] float: per image a 3x5 matrix (3x4 camera-to-world in
                             LLFF's "down, right, back" axes, then the column (H, W, focal)
                             of the full-resolution images), then near and far depth bounds
    scene/images/            full-resolution images, sorted by name = the poses' order
    scene/images_4/, ...     the same images downsampled 4x (8x, ...)

Faithful to the reference loader: poses are turned into "right, up, back" (OpenGL), centred
on their average pose, scaled so the nearest bound sits at 1/0.75; every ``hold_every``-th
image (0, 8, 16, ...) is the test split (also for "val"); rays are OpenGL pinhole rays
through pixel centres, converted to NDC with near plane 1; the scene box is
[[-1.5, -1.67, -1], [1.5, 1.67, 1]] in NDC, near/far 0/1, black background; the render path
is the reference's 120-view spiral. Differences: the image folder follows ``downsample``
(``images_4`` for 4, ``images`` for 1, ``images_N`` for other integers, ``images`` resized for
fractional factors) where the reference always reads ``images_4``; files that are not
images are ignored.

A 360-degree capture in this format (cameras around their object, as in mip-NeRF 360's
scenes) is read with world-space rays instead (``unbounded``: 1, or -1 and the cameras orbit
a common focus: ``scene_fit.orbits_focus``): the scene box is then the cube around the focus that holds every camera
(what a bounded run, ``--unbounded 0``, models), the foreground box the cube around the focus
that the cameras frame (``scene_fit.foreground_box``), near is 0.9 x the nearest depth bound,
and the render path orbits the focus at the cameras' distance.
"""
from __future__ import annotations

import os

import numpy as np

from tensorf_jt.dataLoader.camera_checks import check_pose, check_positive
from tensorf_jt.dataLoader.views import ViewDataset, read_all_pixels, resize_pixels
from tensorf_jt.dataLoader.camera_paths import average_pose, orbit_path, spiral_path
from tensorf_jt.dataLoader.scene_fit import foreground_box, orbits_focus, surrounds_focus
from tensorf_jt.errors import DatasetError
from tensorf_jt.rendering.rays import BLENDER_TO_OPENCV, get_ray_directions_blender

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg")
NDC_NEAR = 1.0  # the near plane of the NDC projection, in units of the rescaled scene
BOUNDS_MARGIN = 0.75  # the nearest bound is scaled to 1 / 0.75
FOREGROUND_PADDING = 1.05  # a 360 capture's foreground cube: the cameras' reach from the focus, padded


def list_images(folder: str) -> list[str]:
    """Image files (png/jpg, any case) in ``folder``, sorted by name."""
    return sorted(os.path.join(folder, name) for name in os.listdir(folder)
                  if os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS)


def image_folder_name(downsample: float) -> str:
    """``images`` for factor 1 (and fractional factors, resized on load), ``images_N`` for integer N > 1."""
    if downsample != 1 and float(downsample).is_integer():
        return f"images_{int(downsample)}"
    return "images"


def read_poses_bounds(path: str) -> np.ndarray:
    """``poses_bounds.npy`` as float64 [N, 17], checked."""
    if not os.path.isfile(path):
        folder = os.path.dirname(path) or "."
        raise DatasetError(
            f"'{path}' not found. Point --datadir at an LLFF scene folder (poses_bounds.npy and "
            f"images*/ folders; COLMAP output can be converted with LLFF's imgs2poses.py); '{folder}' "
            f"{'exists but lacks it' if os.path.isdir(folder) else 'does not exist'}.")
    try:
        poses_bounds = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise DatasetError(f"Cannot read '{path}' as a numpy array: {err}") from None
    if poses_bounds.ndim != 2 or poses_bounds.shape[1] != 17 or len(poses_bounds) == 0:
        raise DatasetError(f"'{path}' has shape {poses_bounds.shape}; expected [N, 17] (a 3x5 pose and "
                           f"two depth bounds per image).")
    poses_bounds = poses_bounds.astype(np.float64)
    for index, row in enumerate(poses_bounds):
        where = f"image {index} (row {index}) of '{path}'"
        check_pose(row[:15].reshape(3, 5)[:, :4], where)
        for name, value in zip(("height", "width", "focal", "near", "far"), (*row[4:15:5], *row[15:])):
            check_positive(value, name, where)
    return poses_bounds


def center_poses(poses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Poses [N, 3, 4] expressed relative to their average pose: (centred [N, 4, 4], average [4, 4]).

    As the reference (whose ``blender2opencv`` is the identity for LLFF). See
    ``camera_paths.average_pose`` for the reflection this frame contains.
    """
    average = np.eye(4)
    average[:3] = average_pose(poses)
    homogeneous = np.tile(np.eye(4), (len(poses), 1, 1))
    homogeneous[:, :3] = poses[:, :3]
    return np.linalg.inv(average) @ homogeneous, average


class LLFFDataset(ViewDataset):
    """One split of a forward-facing LLFF scene, loaded into host memory.

    Attributes as the common interface (``tensorf_jt.dataLoader``); ``focal`` is [fx, fy] at
    the loaded size (the NDC projection uses fx, as the reference), ``poses`` are this split's
    centred OpenGL camera-to-world matrices [n, 4, 4] (``all_poses``: every image's, float64,
    ``image_ids``: this split's indices into them), ``near_fars`` the rescaled depth bounds of
    all images [N, 2], ``directions`` the OpenGL camera-frame pixel directions [H, W, 3].
    """

    scene_bbox = np.array([[-1.5, -1.67, -1.0], [1.5, 1.67, 1.0]], dtype=np.float32)
    near_far = [0.0, 1.0]
    white_bg = False
    composite_alpha = False  # RGB images: colours are the pixels' RGB
    poses_are_opengl = True
    all_depths = None

    def __init__(self, datadir: str, split: str = "train", downsample: float = 4.0, is_stack: bool = False,
                 hold_every: int = 8, unbounded: int = 0) -> None:
        if downsample <= 0:
            raise DatasetError(f"downsample must be positive, got {downsample}.")
        if int(hold_every) != hold_every or hold_every < 1:
            raise DatasetError(f"hold_every must be a positive integer, got {hold_every}.")
        self.root_dir, self.split, self.is_stack = datadir, split, is_stack
        self.downsample, self.hold_every = float(downsample), int(hold_every)

        poses_bounds = read_poses_bounds(os.path.join(datadir, "poses_bounds.npy"))
        all_paths = self._image_paths(len(poses_bounds))
        self._read_cameras(poses_bounds)
        if unbounded == 1 or (unbounded == -1 and orbits_focus(self.all_poses)):
            self._use_world_rays("--unbounded 1" if unbounded == 1 else "cameras around their focus")

        test_ids = np.arange(0, len(all_paths), self.hold_every)
        ids = test_ids if split != "train" else np.setdiff1d(np.arange(len(all_paths)), test_ids)
        if len(ids) == 0:
            raise DatasetError(f"The {split} split of '{datadir}' is empty: {len(all_paths)} images, every "
                               f"{self.hold_every}th held out for testing.")
        self.image_ids = ids
        self.image_paths = [all_paths[i] for i in ids]
        self._load_images()

    def _image_paths(self, n_poses: int) -> list[str]:
        folder = os.path.join(self.root_dir, image_folder_name(self.downsample))
        if not os.path.isdir(folder):
            present = sorted(name for name in os.listdir(self.root_dir)
                             if name.startswith("images") and os.path.isdir(os.path.join(self.root_dir, name)))
            raise DatasetError(
                f"Image folder '{folder}' for downsample {self.downsample:g} does not exist; "
                f"'{self.root_dir}' has {', '.join(present) if present else 'no images* folders'}. "
                f"Set downsample_train/downsample_test to match a folder (images: 1, images_N: N) or "
                f"create '{os.path.basename(folder)}' by resizing the full-size images.")
        paths = list_images(folder)
        if len(paths) != n_poses:
            raise DatasetError(
                f"'{folder}' holds {len(paths)} images but poses_bounds.npy has {n_poses} poses; they must "
                f"match one to one in sorted order (rerun COLMAP/imgs2poses on exactly these images).")
        return paths

    def _read_cameras(self, poses_bounds: np.ndarray) -> None:
        """Intrinsics at the loaded size, centred and rescaled poses, render path, pixel directions."""
        poses = poses_bounds[:, :15].reshape(-1, 3, 5)
        near_fars = poses_bounds[:, 15:].copy()
        full_h, full_w, focal = poses[0, :, 4]
        w, h = int(full_w / self.downsample), int(full_h / self.downsample)
        if w < 1 or h < 1:
            raise DatasetError(f"downsample {self.downsample:g} leaves no pixels of the "
                               f"{full_w:g}x{full_h:g} images.")
        self.img_wh = (w, h)
        self.focal = [focal * w / full_w, focal * h / full_h]
        self.intrinsics = np.array([[self.focal[0], 0.0, w / 2.0], [0.0, self.focal[1], h / 2.0], [0.0, 0.0, 1.0]])

        # LLFF stores the rotation as (down, right, back); make it (right, up, back).
        poses = np.concatenate([poses[..., 1:2], -poses[..., 0:1], poses[..., 2:4]], axis=-1)
        centred, self.pose_avg = center_poses(poses)
        scale = near_fars.min() * BOUNDS_MARGIN
        centred[:, :3, 3] /= scale
        self.near_fars = near_fars / scale
        self.all_poses = centred
        self.render_path = spiral_path(centred, self.near_fars, n_views=120).astype(np.float32)
        self.directions = get_ray_directions_blender(h, w, self.focal)

    def _use_world_rays(self, source: str) -> None:
        """Read the scene as an unbounded 360-degree capture (see the module's docstring)."""
        focus, _ = surrounds_focus(self.all_poses)
        reach = np.abs(self.all_poses[:, :3, 3] - focus).max() * FOREGROUND_PADDING
        self.scene_bbox = np.stack([focus - reach, focus + reach]).astype(np.float32)
        self.foreground_bbox = foreground_box(self.all_poses, tuple(self.focal), self.img_wh).astype(np.float32)
        self.foreground_source = "foreground box that the cameras frame"
        self.near_far = [float(0.9 * self.near_fars.min()), float(1.1 * self.near_fars.max())]
        self.bounds_source = "box around the cameras, near from the depth bounds"
        self.white_bg = False
        self.unbounded, self.unbounded_source = True, source
        opencv = orbit_path(self.all_poses @ BLENDER_TO_OPENCV, focus, n_views=120)
        self.render_path = (opencv @ BLENDER_TO_OPENCV).astype(np.float32)

    def _load_images(self) -> None:
        w, h = self.img_wh

        def fit(path: str, image: np.ndarray, scale: np.float32) -> tuple[np.ndarray, np.float32]:
            image[..., 3] = scale  # LLFF images are RGB; ignore any alpha (the reference converts to RGB)
            image_h, image_w = image.shape[:2]
            if abs(image_w / image_h - w / h) > 0.02 * w / h:
                raise DatasetError(
                    f"Image '{path}' is {image_w}x{image_h}, but poses_bounds.npy describes "
                    f"{w}x{h} at downsample {self.downsample:g} (another aspect ratio): wrong images folder?")
            if (image_w, image_h) != (w, h):
                return resize_pixels(image, scale, (w, h)), np.float32(255)
            return image, scale

        pixels, scales = zip(*read_all_pixels(self.image_paths, fit=fit))
        poses = self.all_poses[self.image_ids]
        self.poses = poses.astype(np.float32)
        self.store_views(pixels, scales, poses, self.directions,
                         ndc=None if self.unbounded else (self.focal[0], NDC_NEAR))
