"""A COLMAP capture of the demo scene with known truth, for the converter's tests.

``make_capture`` ray-casts the demo scene (``tensorf_jt.dataLoader.demo_scene``) through
cameras with radial lens distortion, samples 3-D points on the surfaces the cameras see,
moves everything by a random similarity, perturbs the poses a little, and writes the result
the way ``colmap mapper`` leaves it: ``images/`` and ``sparse/0/`` (binary or text model).
``Capture`` keeps the truth: the similarity, the noise-free poses, the object's extent and
the true depth range. ``render_pinhole`` renders the scene through any pinhole camera, the
reference the undistorted images are compared with. ``make_blender_scene`` writes the same
views, undistorted and with exact poses, in the blender layout.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import imageio.v3 as iio
import numpy as np

from tensorf_jt.dataLoader import demo_scene
from tensorf_jt.formats.colmap import (Camera, Image, Model, Points3D, quaternion_to_rotation, rotation_to_quaternion,
                                      write_model)
from tensorf_jt.rendering.rays import BLENDER_TO_OPENCV

TEST_POSITIONS = (0, 8, 16)  # own_data's hold-out positions (every 8th sorted name) = the blender test split
RADIUS = 4.0
# The object: the platform (a disc of radius 1.25, z -0.8..-0.7) bounds x and y, the small
# sphere's top (0.42 + 0.2) bounds z from above.
OBJECT_RIMS = ((1.25, -0.8), (1.25, -0.7))
OBJECT_TOP = 0.62


@dataclass(frozen=True)
class Capture:
    """A written capture and its truth. ``similarity``: [4, 4], x_colmap = similarity @ x_demo.
    ``c2w_true``: noise-free OpenCV camera-to-world [N, 4, 4] in the demo world, in file order.
    ``names``: image names in that order. ``depth_range``: (min, max) ray distance of the
    surfaces any view sees (demo world units). ``camera``: the distorted COLMAP camera."""

    root: str
    names: list[str]
    c2w_true: np.ndarray
    similarity: np.ndarray
    camera: Camera
    depth_range: tuple[float, float]
    supersampling: int


def random_similarity(rng: np.random.Generator) -> np.ndarray:
    """x -> s R x + t with a uniformly random rotation, s in [0.3, 3], t of a few units."""
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    similarity = np.eye(4)
    similarity[:3, :3] = np.exp(rng.uniform(np.log(0.3), np.log(3.0))) * quaternion_to_rotation(q)
    similarity[:3, 3] = rng.normal(scale=3.0, size=3)
    return similarity


def camera_centres(n_views: int) -> np.ndarray:
    """Positions on the upper hemisphere (radius 4, elevation 10-75 degrees), a Fibonacci spiral."""
    k = np.arange(n_views) + 0.5
    sin_elevation = np.sin(np.deg2rad(10)) + (np.sin(np.deg2rad(75)) - np.sin(np.deg2rad(10))) * k / n_views
    azimuth = np.pi * (3 - np.sqrt(5)) * k
    elevation = np.arcsin(sin_elevation)
    return RADIUS * np.stack([np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth),
                              np.sin(elevation)], axis=1)


def undistort_normalized(camera: Camera, xd: np.ndarray, yd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Invert ``camera.distort`` by fixed-point iteration (mild distortion converges fast)."""
    x, y = xd.copy(), yd.copy()
    for _ in range(50):
        dx, dy = camera.distort(x, y)
        x, y = x - (dx - xd), y - (dy - yd)
    return x, y


def _cast(c2w_opencv: np.ndarray, directions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Colour, coverage and hit distance of camera-frame directions [M, 3] (any length)."""
    d = directions / np.linalg.norm(directions, axis=-1, keepdims=True)
    d = d @ c2w_opencv[:3, :3].T
    o = np.broadcast_to(c2w_opencv[:3, 3], d.shape)
    return demo_scene._shade(np.ascontiguousarray(o), np.ascontiguousarray(d))


def _render(c2w_opencv: np.ndarray, width: int, height: int, supersampling: int, to_direction) -> np.ndarray:
    """RGBA uint8 [H, W, 4]: the mean of supersampling^2 rays per pixel; ``to_direction(u, v)``
    maps pixel coordinates (top-left pixel centre at 0.5) to camera-frame directions."""
    s = supersampling
    u, v = np.meshgrid((np.arange(width * s) + 0.5) / s, (np.arange(height * s) + 0.5) / s, indexing="xy")
    colour, coverage, _ = _cast(c2w_opencv, to_direction(u.ravel(), v.ravel()))
    colour = colour.reshape(height, s, width, s, 3).sum((1, 3))
    coverage = coverage.reshape(height, s, width, s).sum((1, 3))
    rgb = np.where(coverage[..., None] > 0, colour / np.maximum(coverage, 1)[..., None], 0.0)
    rgba = np.concatenate([rgb, (coverage / (s * s))[..., None]], axis=-1)
    return np.round(rgba * 255).astype(np.uint8)


def render_pinhole(c2w_opencv: np.ndarray, width: int, height: int, fx: float, fy: float, cx: float, cy: float,
                   supersampling: int = 3) -> np.ndarray:
    """The demo scene through a pinhole camera (pixels), RGBA uint8."""
    return _render(c2w_opencv, width, height, supersampling,
                   lambda u, v: np.stack([(u - cx) / fx, (v - cy) / fy, np.ones_like(u)], axis=-1))


def render_distorted(c2w_opencv: np.ndarray, camera: Camera, supersampling: int = 3) -> np.ndarray:
    """The demo scene through ``camera`` (with its lens distortion), RGBA uint8."""
    (fx, fy), (cx, cy) = camera.focal, camera.principal_point

    def direction(u, v):
        x, y = undistort_normalized(camera, (u - cx) / fx, (v - cy) / fy)
        return np.stack([x, y, np.ones_like(x)], axis=-1)

    return _render(c2w_opencv, camera.width, camera.height, supersampling, direction)


def _pixel_depths(c2w_opencv: np.ndarray, camera: Camera) -> np.ndarray:
    """Ray distances of the surfaces seen through the pixel centres (misses left out)."""
    (fx, fy), (cx, cy) = camera.focal, camera.principal_point
    u, v = np.meshgrid(np.arange(camera.width) + 0.5, np.arange(camera.height) + 0.5, indexing="xy")
    x, y = undistort_normalized(camera, (u.ravel() - cx) / fx, (v.ravel() - cy) / fy)
    _, covered, t = _cast(c2w_opencv, np.stack([x, y, np.ones_like(x)], axis=-1))
    return t[covered > 0]


def _visible(c2w: np.ndarray, camera: Camera, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which ``points`` [n, 3] (demo world) the camera sees unoccluded inside its image, and their pixels."""
    local = (points - c2w[:3, 3]) @ c2w[:3, :3]
    in_front = local[:, 2] > 1e-6
    pixels = np.full((len(points), 2), -1.0)
    pixels[in_front] = camera.project(local[in_front])
    inside = in_front & np.all((pixels >= 0) & (pixels <= [camera.width, camera.height]), axis=1)
    distance = np.linalg.norm(points - c2w[:3, 3], axis=-1)
    _, _, t = _cast(c2w, local / np.maximum(local[:, 2:3], 1e-6))
    unoccluded = np.abs(t - distance) < 1e-4 * np.maximum(distance, 1.0)
    return inside & unoccluded, pixels


def make_capture(root: str, image_size: int = 32, n_views: int = 24, binary: bool = True, seed: int = 0,
                 k1: float = -0.12, rotation_noise_deg: float = 0.03, position_noise: float = 0.003,
                 points_per_view: int = 40, supersampling: int = 3) -> Capture:
    """Write ``root/images/*.png`` and ``root/sparse/0/`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    spec = demo_scene.DemoSceneSpec(image_size=image_size)
    focal = 0.5 * image_size / np.tan(0.5 * spec.camera_angle_x)
    camera = Camera(1, "SIMPLE_RADIAL", image_size, image_size, (focal, image_size / 2.0, image_size / 2.0, k1))
    c2w_true = np.stack([demo_scene.look_at_origin(p) @ BLENDER_TO_OPENCV for p in camera_centres(n_views)])
    names = [f"view_{i:03d}.png" for i in range(n_views)]
    os.makedirs(os.path.join(root, "images"), exist_ok=True)
    for name, c2w in zip(names, c2w_true):
        iio.imwrite(os.path.join(root, "images", name), render_distorted(c2w, camera, supersampling))

    # sparse points: surface points hit through random pixels, observed wherever visible
    hits = []
    for c2w in c2w_true:
        u, v = rng.uniform(0, image_size, size=(2, 4 * points_per_view))
        directions = np.stack([(u - camera.width / 2) / focal, (v - camera.height / 2) / focal, np.ones_like(u)], -1)
        _, covered, t = _cast(c2w, directions)
        unit = directions / np.linalg.norm(directions, axis=-1, keepdims=True)
        world = c2w[:3, 3] + t[:, None] * (unit @ c2w[:3, :3].T)
        hits.append(world[covered > 0][:points_per_view])
    xyz = np.concatenate(hits)
    observations = [_visible(c2w, camera, xyz) for c2w in c2w_true]
    depths = np.concatenate([_pixel_depths(c2w, camera) for c2w in c2w_true])
    depth_range = (float(depths.min()), float(depths.max()))

    # outliers: far-away points seen by two images (mismatches)
    n_outliers = max(3, len(xyz) // 25)
    outliers = rng.normal(scale=8.0, size=(n_outliers, 3))
    similarity = random_similarity(rng)
    scale = np.cbrt(np.linalg.det(similarity[:3, :3]))
    xyz_colmap = np.concatenate([xyz, outliers]) @ similarity[:3, :3].T + similarity[:3, 3]

    xys = [[] for _ in names]
    point_ids = [[] for _ in names]
    tracks = []
    for index in range(len(xyz)):
        track = []
        for view, (seen, pixels) in enumerate(observations):
            if seen[index]:
                track.append((view + 1, len(xys[view])))
                xys[view].append(pixels[index])
                point_ids[view].append(index + 1)
        tracks.append(np.array(track, dtype=np.int64).reshape(-1, 2))
    for index in range(n_outliers):
        views = rng.choice(len(names), size=2, replace=False)
        tracks.append(np.array([(view + 1, len(xys[view])) for view in views], dtype=np.int64))
        for view in views:
            xys[view].append(rng.uniform(0, image_size, size=2))
            point_ids[view].append(len(xyz) + index + 1)

    images = {}
    for view, (name, c2w) in enumerate(zip(names, c2w_true)):
        noise = np.eye(4)
        axis = rng.normal(size=3)
        angle = np.deg2rad(rotation_noise_deg) * rng.normal()
        k = np.cross(np.eye(3), axis / np.linalg.norm(axis))
        noise[:3, :3] = np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * (k @ k)
        noisy = c2w @ noise
        noisy[:3, 3] += position_noise * rng.normal(size=3)
        colmap_c2w = similarity @ noisy
        colmap_c2w[:3, :3] /= scale
        rotation = colmap_c2w[:3, :3].T
        images[view + 1] = Image(view + 1, rotation_to_quaternion(rotation), -rotation @ colmap_c2w[:3, 3], 1, name,
                                 np.array(xys[view], dtype=np.float64).reshape(-1, 2),
                                 np.array(point_ids[view], dtype=np.int64))
    colours = rng.integers(0, 256, size=(len(xyz_colmap), 3)).astype(np.uint8)
    points = Points3D(np.arange(1, len(xyz_colmap) + 1), xyz_colmap, colours, rng.uniform(0.1, 1.0, len(xyz_colmap)),
                      tracks)
    write_model(Model({1: camera}, images, points), os.path.join(root, "sparse", "0"), binary=binary)
    return Capture(root, names, c2w_true, similarity, camera, depth_range, supersampling)


def object_points(n: int = 720) -> np.ndarray:
    """Points [m, 3] on the object's extreme features (platform rims, small sphere top), demo world."""
    angle = np.linspace(0, 2 * np.pi, n, endpoint=False)
    rims = [np.stack([r * np.cos(angle), r * np.sin(angle), np.full(n, z)], -1) for r, z in OBJECT_RIMS]
    centre, radius = demo_scene._SMALL_SPHERE
    polar = np.linspace(0, 0.5 * np.pi, 30)
    cap = centre + radius * np.stack([np.outer(np.sin(polar), np.cos(angle[::24])).ravel(),
                                      np.outer(np.sin(polar), np.sin(angle[::24])).ravel(),
                                      np.outer(np.cos(polar), np.ones(len(angle[::24]))).ravel()], -1)
    return np.concatenate(rims + [cap])


def make_blender_scene(root: str, capture: Capture) -> str:
    """The capture's views, pinhole at the capture's focal length with exact poses, in the
    blender layout: ``TEST_POSITIONS`` as the test split, the others as train."""
    camera = capture.camera
    focal = camera.focal[0]
    splits = {"train": [], "test": []}
    for index, (name, c2w) in enumerate(zip(capture.names, capture.c2w_true)):
        split = "test" if index in TEST_POSITIONS else "train"
        os.makedirs(os.path.join(root, split), exist_ok=True)
        image = render_pinhole(c2w, camera.width, camera.height, focal, focal, camera.width / 2, camera.height / 2,
                               capture.supersampling)
        iio.imwrite(os.path.join(root, split, name), image)
        splits[split].append({"file_path": f"./{split}/{os.path.splitext(name)[0]}",
                              "transform_matrix": (c2w @ BLENDER_TO_OPENCV).tolist()})
    for split, frames in splits.items():
        with open(os.path.join(root, f"transforms_{split}.json"), "w", encoding="utf-8") as handle:
            json.dump({"camera_angle_x": 2 * float(np.arctan(0.5 * camera.width / focal)), "frames": frames}, handle)
    return root
