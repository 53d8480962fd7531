#!/usr/bin/env python3
"""Convert a COLMAP text model (cameras.txt, images.txt) into an instant-ngp ``transforms.json``.

The output is what the ``own_data`` loader reads (docs/DATASETS.md describes the format)::

    colmap image_undistorter --image_path photos --input_path sparse/0 --output_path undistorted
    colmap model_converter --input_path undistorted/sparse --output_path undistorted/text --output_type TXT
    python tools/colmap_to_transforms.py --text undistorted/text --images undistorted/images \\
        --out undistorted/transforms.json
    python train.py --config configs/your_own_data.txt --datadir undistorted

COLMAP stores world-to-camera rotations (as quaternions qw qx qy qz) and translations in
OpenCV axes (x right, y down, z forward); ``transform_matrix`` is the inverse, camera-to-world,
in OpenGL/Blender axes (x right, y up, z back). Unless ``--no_normalize`` is given, the scene is
then re-oriented and re-scaled so that it fits own_data's fixed box [-1.5, 1.5]^3: the
cameras' mean up vector becomes +z, the point closest (least squares) to all optical axes
becomes the origin, and the mean camera distance from it becomes ``--radius`` (4 by default).
All cameras must share one intrinsic calibration (``--ImageReader.single_camera 1``);
lens distortion is written out but the loader ignores it, so undistort first.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass

import numpy as np

# COLMAP camera model -> names of its parameters, in file order.
CAMERA_PARAMS = {
    "SIMPLE_PINHOLE": ("f", "cx", "cy"),
    "PINHOLE": ("fx", "fy", "cx", "cy"),
    "SIMPLE_RADIAL": ("f", "cx", "cy", "k1"),
    "RADIAL": ("f", "cx", "cy", "k1", "k2"),
    "OPENCV": ("fx", "fy", "cx", "cy", "k1", "k2", "p1", "p2"),
}


class ConversionError(Exception):
    """The COLMAP model cannot be converted; the message says why and what to do."""


@dataclass(frozen=True)
class Camera:
    """A pinhole camera with optional radial/tangential distortion, in pixels."""

    model: str
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    k1: float = 0.0
    k2: float = 0.0
    p1: float = 0.0
    p2: float = 0.0

    def values(self) -> np.ndarray:
        return np.array([self.width, self.height, self.fx, self.fy, self.cx, self.cy, self.k1, self.k2, self.p1, self.p2])

    def same_calibration(self, other: "Camera") -> bool:
        return bool(np.allclose(self.values(), other.values(), rtol=1e-6, atol=1e-9))


@dataclass(frozen=True)
class Image:
    """One registered image: its file name, camera id and world-to-camera pose (quaternion, translation)."""

    name: str
    camera_id: int
    qvec: np.ndarray  # qw, qx, qy, qz
    tvec: np.ndarray


def _data_lines(path: str) -> list[tuple[int, str]]:
    """(line number, text) of every line that is not a comment, blank lines included."""
    if not os.path.isfile(path):
        raise ConversionError(f"'{path}' not found. Export the model as text first: colmap model_converter "
                              f"--input_path sparse/0 --output_path <text folder> --output_type TXT")
    with open(path, "r", encoding="utf-8") as handle:
        return [(no, line.rstrip("\n")) for no, line in enumerate(handle, 1) if not line.startswith("#")]


def read_cameras(path: str) -> dict[int, Camera]:
    """cameras.txt: ``CAMERA_ID MODEL WIDTH HEIGHT PARAMS...`` per line."""
    cameras = {}
    for no, line in _data_lines(path):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) < 4:
            raise ConversionError(f"{path}:{no}: expected 'CAMERA_ID MODEL WIDTH HEIGHT PARAMS...'.")
        model = tokens[1]
        if model not in CAMERA_PARAMS:
            raise ConversionError(
                f"{path}:{no}: camera model {model} is not supported (supported: {', '.join(CAMERA_PARAMS)}). "
                f"Run 'colmap image_undistorter' and convert its PINHOLE model instead.")
        names = CAMERA_PARAMS[model]
        try:
            camera_id, width, height = int(tokens[0]), int(tokens[2]), int(tokens[3])
            values = dict(zip(names, (float(t) for t in tokens[4:4 + len(names)])))
        except ValueError:
            raise ConversionError(f"{path}:{no}: '{line}' is not a valid camera line.") from None
        if len(values) != len(names):
            raise ConversionError(f"{path}:{no}: model {model} needs {len(names)} parameters ({' '.join(names)}).")
        fx = values.get("fx", values.get("f"))
        fy = values.get("fy", values.get("f"))
        cameras[camera_id] = Camera(model, width, height, fx, fy, values["cx"], values["cy"],
                                    values.get("k1", 0.0), values.get("k2", 0.0), values.get("p1", 0.0),
                                    values.get("p2", 0.0))
    if not cameras:
        raise ConversionError(f"'{path}' lists no cameras.")
    return cameras


def read_images(path: str) -> list[Image]:
    """images.txt: per image a line ``IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME`` and a line of 2-D points.

    The points line may be empty, so lines are taken in pairs; blank lines where a header is
    expected (a trailing newline) are skipped.
    """
    lines = _data_lines(path)
    images, index = [], 0
    while index < len(lines):
        no, line = lines[index]
        tokens = line.split()
        if not tokens:
            index += 1
            continue
        if len(tokens) < 10:
            raise ConversionError(f"{path}:{no}: expected 'IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME'.")
        try:
            numbers = [float(t) for t in tokens[1:8]]
            camera_id = int(tokens[8])
        except ValueError:
            raise ConversionError(f"{path}:{no}: '{line}' is not a valid image line.") from None
        name = line.split(None, 9)[9]  # names may contain spaces
        images.append(Image(name, camera_id, np.array(numbers[:4]), np.array(numbers[4:])))
        index += 2  # skip this image's 2-D points line
    if not images:
        raise ConversionError(f"'{path}' lists no registered images.")
    return images


def quaternion_to_rotation(qvec: np.ndarray) -> np.ndarray:
    """Rotation matrix [3, 3] of a (w, x, y, z) quaternion; normalised first."""
    w, x, y, z = np.asarray(qvec, dtype=np.float64) / np.linalg.norm(qvec)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def opengl_camera_to_world(qvec: np.ndarray, tvec: np.ndarray) -> np.ndarray:
    """COLMAP's world-to-camera (OpenCV axes) -> camera-to-world [4, 4] in OpenGL axes."""
    rotation = quaternion_to_rotation(qvec)
    c2w = np.eye(4)
    c2w[:3, :3] = rotation.T
    c2w[:3, 3] = -rotation.T @ np.asarray(tvec, dtype=np.float64)
    c2w[:3, 1:3] *= -1.0  # y down -> up, z forward -> back
    return c2w


def rotation_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest rotation [3, 3] taking direction ``a`` to direction ``b``."""
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    axis = np.cross(a, b)
    sin, cos = np.linalg.norm(axis), float(a @ b)
    if sin < 1e-12:
        if cos > 0:
            return np.eye(3)
        helper = np.eye(3)[np.argmin(np.abs(a))]  # 180 degrees about any axis normal to a
        axis = np.cross(a, helper)
        axis /= np.linalg.norm(axis)
        return 2.0 * np.outer(axis, axis) - np.eye(3)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]]) / sin
    return np.eye(3) + sin * k + (1 - cos) * (k @ k)


def closest_point_to_axes(origins: np.ndarray, directions: np.ndarray) -> tuple[np.ndarray, bool]:
    """Least-squares point nearest to all lines ``origin + t direction``; False if ill-conditioned."""
    directions = directions / np.linalg.norm(directions, axis=-1, keepdims=True)
    projectors = np.eye(3)[None] - directions[:, :, None] * directions[:, None, :]
    lhs, rhs = projectors.sum(0), np.einsum("nij,nj->i", projectors, origins)
    eigenvalues = np.linalg.eigvalsh(lhs)
    if eigenvalues[0] < 1e-6 * eigenvalues[-1]:
        return origins.mean(0), False
    return np.linalg.solve(lhs, rhs), True


def normalize_scene(c2ws: np.ndarray, radius: float) -> np.ndarray:
    """Mean up vector -> +z, the cameras' common focus -> origin, mean camera distance -> ``radius``."""
    c2ws = c2ws.copy()
    up = c2ws[:, :3, 1].mean(0)
    if np.linalg.norm(up) > 1e-9:
        rotation = np.eye(4)
        rotation[:3, :3] = rotation_between(up, np.array([0.0, 0.0, 1.0]))
        c2ws = rotation[None] @ c2ws
    focus, ok = closest_point_to_axes(c2ws[:, :3, 3], -c2ws[:, :3, 2])
    if not ok:
        print("warning: the cameras' optical axes are nearly parallel (a forward-facing capture?); centring on "
              "the mean camera position instead. Forward-facing scenes suit the llff format better.",
              file=sys.stderr)
    c2ws[:, :3, 3] -= focus
    mean_distance = np.linalg.norm(c2ws[:, :3, 3], axis=-1).mean()
    if mean_distance > 1e-12:
        c2ws[:, :3, 3] *= radius / mean_distance
    return c2ws


def shared_camera(cameras: dict[int, Camera], images: list[Image], path: str) -> Camera:
    """The one calibration every image uses; ConversionError if they differ."""
    used = {image.camera_id for image in images}
    missing = used - set(cameras)
    if missing:
        raise ConversionError(f"images.txt refers to camera id(s) {sorted(missing)} that '{path}' does not list.")
    first = cameras[min(used)]
    for camera_id in used:
        if not cameras[camera_id].same_calibration(first):
            raise ConversionError(
                f"The images use {len(used)} different calibrations; own_data needs one shared camera. "
                f"Rerun COLMAP with --ImageReader.single_camera 1 (or undistort to a common PINHOLE camera).")
    return first


def build_transforms(text_dir: str, images_dir: str, out_path: str, normalize: bool = True,
                     radius: float = 4.0) -> dict:
    """The transforms.json content for a COLMAP text model; image paths relative to ``out_path``'s folder."""
    cameras_path = os.path.join(text_dir, "cameras.txt")
    cameras = read_cameras(cameras_path)
    images = sorted(read_images(os.path.join(text_dir, "images.txt")), key=lambda image: image.name)
    camera = shared_camera(cameras, images, cameras_path)
    if any(abs(v) > 0 for v in (camera.k1, camera.k2, camera.p1, camera.p2)):
        print(f"warning: the {camera.model} camera has lens distortion, which own_data ignores; "
              f"undistort the images first (colmap image_undistorter) for sharp results.", file=sys.stderr)
    c2ws = np.stack([opengl_camera_to_world(image.qvec, image.tvec) for image in images])
    if normalize:
        c2ws = normalize_scene(c2ws, radius)
    out_dir = os.path.dirname(os.path.abspath(out_path))
    frames = []
    for image, c2w in zip(images, c2ws):
        relative = os.path.relpath(os.path.join(os.path.abspath(images_dir), image.name), out_dir)
        frames.append({"file_path": "./" + relative.replace(os.sep, "/"), "transform_matrix": c2w.tolist()})
    return {
        "camera_angle_x": 2.0 * float(np.arctan(camera.width / (2.0 * camera.fx))),
        "camera_angle_y": 2.0 * float(np.arctan(camera.height / (2.0 * camera.fy))),
        "fl_x": camera.fx, "fl_y": camera.fy, "cx": camera.cx, "cy": camera.cy,
        "w": camera.width, "h": camera.height,
        "k1": camera.k1, "k2": camera.k2, "p1": camera.p1, "p2": camera.p2,
        "frames": frames,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text", required=True, help="folder with COLMAP's cameras.txt and images.txt")
    parser.add_argument("--images", required=True, help="folder holding the images named in images.txt")
    parser.add_argument("--out", default="transforms.json", help="output file (default: transforms.json)")
    parser.add_argument("--no_normalize", action="store_true",
                        help="keep COLMAP's world frame (only convert the camera axes)")
    parser.add_argument("--radius", type=float, default=4.0,
                        help="mean camera distance from the scene centre after normalising (default 4)")
    args = parser.parse_args(argv)
    try:
        if args.radius <= 0:
            raise ConversionError(f"--radius must be positive, got {args.radius}.")
        content = build_transforms(args.text, args.images, args.out, normalize=not args.no_normalize,
                                   radius=args.radius)
    except ConversionError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(content, handle, indent=2)
    print(f"wrote {args.out}: {len(content['frames'])} frames, {content['w']}x{content['h']} pixels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
