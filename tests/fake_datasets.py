"""Tiny fake scenes in every dataset layout the loaders read, for tests.

Each ``make_*`` writes a scene into ``root`` and returns its folder. Images are a few pixels
wide with known colours: red = horizontal position u, green = vertical position v (both
(pixel + 0.5) / size), blue = the image's index / (number of images - 1), so a test can tell
which image landed in which split and that resizing kept the picture. Cameras sit around the
origin (or, for LLFF, in front of the scene) and look at the scene centre. The camera
conventions are the formats' own, written out here independently of the loaders.
"""
from __future__ import annotations

import json
import os

import imageio.v3 as iio
import numpy as np

LLFF_FULL_WH = (64, 48)
LLFF_FOCAL = 60.0
LLFF_N_IMAGES = 10
LLFF_FOLDERS = {"images": 1, "images_4": 4, "images_8": 8}

NSVF_WH = (16, 12)
NSVF_INTRINSICS = (20.0, 8.5, 6.0)  # focal, cx, cy (pixels; DeepVoxels style: one focal length)
NSVF_BBOX = ((-1.0, -0.8, -0.6), (1.0, 1.2, 1.4))
NSVF_SPLITS = {"0_": 4, "1_": 1, "2_": 2}

TANKS_WH = (16, 9)
TANKS_BBOX = ((-1.0, -0.5, -1.0), (1.0, 1.5, 1.0))
TANKS_SPLITS = {"0_": 4, "1_": 2}

OWN_WH = (16, 12)
OWN_CAMERA = {"fl_x": 18.0, "fl_y": 19.0, "cx": 7.5, "cy": 6.5}
OWN_N_FRAMES = 10


def pattern_image(w: int, h: int, index: int, count: int, alpha: np.ndarray | None = None) -> np.ndarray:
    """uint8 [h, w, 3 or 4]: red = u, green = v, blue = index / (count - 1)."""
    u = (np.arange(w) + 0.5) / w
    v = (np.arange(h) + 0.5) / h
    rgb = np.empty((h, w, 3))
    rgb[..., 0] = u[None, :]
    rgb[..., 1] = v[:, None]
    rgb[..., 2] = index / max(count - 1, 1)
    if alpha is not None:
        rgb = np.concatenate([rgb, alpha[..., None]], axis=-1)
    return np.round(rgb * 255).astype(np.uint8)


def look_at_opencv(position, target, up) -> np.ndarray:
    """Camera-to-world [4, 4], OpenCV axes (x right, y down, z towards the target)."""
    position, target, up = (np.asarray(a, dtype=np.float64) for a in (position, target, up))
    forward = (target - position) / np.linalg.norm(target - position)
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    pose = np.eye(4)
    pose[:3, :3] = np.stack([right, down, forward], axis=1)
    pose[:3, 3] = position
    return pose


def look_at_opengl(position, target, up) -> np.ndarray:
    """Camera-to-world [4, 4], OpenGL/Blender axes (x right, y up, z away from the target)."""
    return look_at_opencv(position, target, up) @ np.diag([1.0, -1.0, -1.0, 1.0])


def sphere_positions(n: int, radius: float, center=(0.0, 0.0, 0.0), up_axis: int = 2, seed: int = 0) -> np.ndarray:
    """``n`` points at ``radius`` around ``center``, spread in azimuth, 15..60 degrees above the horizon."""
    rng = np.random.default_rng(seed)
    azimuth = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False) + rng.uniform(0, 0.3, n)
    elevation = np.radians(rng.uniform(15.0, 60.0, n))
    local = np.stack([np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth),
                      np.sin(elevation)], axis=-1)
    if up_axis == 1:  # y up: (x, y, z) = (a, up, b)
        local = local[:, [0, 2, 1]] * np.array([1.0, 1.0, -1.0])
    return np.asarray(center) + radius * local


# ------------------------------------------------------------------ LLFF
def llff_poses_opengl(n: int = LLFF_N_IMAGES) -> np.ndarray:
    """Forward-facing OpenGL camera-to-world [n, 4, 4]: a 5x2 grid near the origin looking at (0, 0, -6)."""
    poses = []
    for i in range(n):
        position = np.array([-0.5 + 0.25 * (i % 5), 0.15 * (i // 5) - 0.1, 0.05 * np.sin(i)])
        poses.append(look_at_opengl(position, (0.1, -0.05, -6.0), (0.05, 1.0, 0.0)))
    return np.stack(poses)


def make_llff(root: str, n_images: int = LLFF_N_IMAGES, poses_opengl: np.ndarray | None = None) -> str:
    """An LLFF scene: ``poses_bounds.npy`` and ``images``/``images_4``/``images_8`` (64x48 at full size),
    forward-facing unless ``poses_opengl`` [n, 4, 4] (camera-to-world, OpenGL axes) say otherwise."""
    folder = os.path.join(str(root), "llff_scene")
    full_w, full_h = LLFF_FULL_WH
    gl = llff_poses_opengl(n_images) if poses_opengl is None else np.asarray(poses_opengl, dtype=np.float64)
    n_images = len(gl)
    # LLFF's 3x5 rows: rotation columns (down, right, back) = (-up, right, back), position, (H, W, focal).
    llff = np.concatenate([-gl[:, :3, 1:2], gl[:, :3, 0:1], gl[:, :3, 2:4],
                           np.tile(np.array([[full_h], [full_w], [LLFF_FOCAL]]), (n_images, 1, 1))], axis=-1)
    bounds = np.stack([4.0 + 0.1 * np.arange(n_images), np.full(n_images, 12.0)], axis=-1)
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, "poses_bounds.npy"), np.concatenate([llff.reshape(n_images, 15), bounds], axis=1))
    for name, factor in LLFF_FOLDERS.items():
        os.makedirs(os.path.join(folder, name), exist_ok=True)
        for i in range(n_images):
            image = pattern_image(full_w // factor, full_h // factor, i, n_images)
            iio.imwrite(os.path.join(folder, name, f"IMG_{i:04d}.png"), image)
    return folder


# ------------------------------------------------------------------ NSVF and Tanks&Temples
def _write_matrix(path: str, matrix: np.ndarray) -> None:
    np.savetxt(path, matrix, fmt="%.10f")


def _nsvf_like(folder: str, splits: dict[str, int], wh: tuple[int, int], bbox, intrinsics_text: str,
               up_axis: int, alpha: bool) -> list[np.ndarray]:
    os.makedirs(os.path.join(folder, "rgb"), exist_ok=True)
    os.makedirs(os.path.join(folder, "pose"), exist_ok=True)
    with open(os.path.join(folder, "bbox.txt"), "w") as handle:
        handle.write(" ".join(f"{v:g}" for v in np.ravel(bbox)) + " 0.1\n")
    with open(os.path.join(folder, "intrinsics.txt"), "w") as handle:
        handle.write(intrinsics_text)
    center = np.mean(np.asarray(bbox, dtype=np.float64), axis=0)
    up = np.eye(3)[up_axis]
    total = sum(splits.values())
    positions = sphere_positions(total, 3.0, center, up_axis=up_axis)
    poses, index = [], 0
    w, h = wh
    for prefix, count in splits.items():
        for k in range(count):
            pose = look_at_opencv(positions[index], center, up)
            poses.append(pose)
            mask = None
            if alpha:
                mask = np.ones((h, w))
                mask[0, :] = 0.0  # a transparent top row, composited onto white by the loader
            iio.imwrite(os.path.join(folder, "rgb", f"{prefix}{k:04d}.png"), pattern_image(w, h, index, total, mask))
            _write_matrix(os.path.join(folder, "pose", f"{prefix}{k:04d}.txt"), pose)
            index += 1
    return poses


def make_nsvf(root: str, with_traj: bool = False) -> str:
    """A Synthetic-NSVF scene: 4 train (0_), 1 val (1_), 2 test (2_) RGBA 16x12 views, DeepVoxels-style intrinsics."""
    folder = os.path.join(str(root), "nsvf_scene")
    focal, cx, cy = NSVF_INTRINSICS
    intrinsics = f"{focal} {cx} {cy} 0.\n0. 0. 0.\n0.\n1.\n{NSVF_WH[1]} {NSVF_WH[0]}\n"
    _nsvf_like(folder, NSVF_SPLITS, NSVF_WH, NSVF_BBOX, intrinsics, up_axis=2, alpha=True)
    if with_traj:
        center = np.mean(np.asarray(NSVF_BBOX), axis=0)
        path = [look_at_opencv(p, center, (0, 0, 1)) for p in sphere_positions(5, 2.5, center, seed=3)]
        _write_matrix(os.path.join(folder, "test_traj.txt"), np.concatenate(path))
    return folder


def make_tankstemple(root: str) -> str:
    """A Tanks&Temples scene (NSVF layout): 4 train (0_), 2 test (1_) RGB 16x9 views, 4x4 intrinsics, y up."""
    folder = os.path.join(str(root), "tanks_scene")
    fx, fy, cx, cy = 15.0, 15.0, 8.0, 4.5
    intrinsics = f"{fx} 0 {cx} 0\n0 {fy} {cy} 0\n0 0 1 0\n0 0 0 1\n"
    _nsvf_like(folder, TANKS_SPLITS, TANKS_WH, TANKS_BBOX, intrinsics, up_axis=1, alpha=False)
    return folder


# ------------------------------------------------------------------ own data (instant-ngp)
def own_data_poses_opengl(n: int = OWN_N_FRAMES) -> np.ndarray:
    """OpenGL camera-to-world [n, 4, 4] at radius 3 around the origin, z up, looking at it."""
    return np.stack([look_at_opengl(p, (0, 0, 0), (0, 0, 1)) for p in sphere_positions(n, 3.0, seed=1)])


def make_own_data(root: str, single_file: bool = False) -> str:
    """An instant-ngp style scene, 10 RGB 16x12 frames with fl_x/fl_y/cx/cy/w/h.

    ``single_file=False``: ``transforms_train.json`` (frames 1-7 and 9) and
    ``transforms_test.json`` (frames 0 and 8). ``single_file=True``: one ``transforms.json``
    listing all ten frames in a shuffled order (the loader sorts them by file name).
    """
    folder = os.path.join(str(root), "own_scene_single" if single_file else "own_scene")
    os.makedirs(os.path.join(folder, "images"), exist_ok=True)
    w, h = OWN_WH
    poses = own_data_poses_opengl()
    frames = []
    for i in range(OWN_N_FRAMES):
        iio.imwrite(os.path.join(folder, "images", f"{i:04d}.png"), pattern_image(w, h, i, OWN_N_FRAMES))
        frames.append({"file_path": f"./images/{i:04d}.png", "transform_matrix": poses[i].tolist()})
    camera = {"w": w, "h": h, **OWN_CAMERA, "k1": 0.0, "k2": 0.0, "p1": 0.0, "p2": 0.0, "aabb_scale": 4}
    if single_file:
        order = np.random.default_rng(2).permutation(OWN_N_FRAMES)
        _write_json(os.path.join(folder, "transforms.json"), {**camera, "frames": [frames[i] for i in order]})
    else:
        test_ids = [0, 8]
        train = [f for i, f in enumerate(frames) if i not in test_ids]
        _write_json(os.path.join(folder, "transforms_train.json"), {**camera, "frames": train})
        _write_json(os.path.join(folder, "transforms_test.json"), {**camera, "frames": [frames[i] for i in test_ids]})
    return folder


def _write_json(path: str, content: dict) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(content, handle, indent=2)
