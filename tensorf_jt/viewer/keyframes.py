"""Camera-path files: keyframes chosen in the viewer, the smooth path through them, and the
file ``render.py --camera_path FILE`` renders (numpy, no Jittor).

The file is JSON::

    {"format": "tensorf_jt-camera-path", "version": 1,
     "render_width": 800, "render_height": 800, "fps": 30, "seconds": 4.0,
     "keyframes": [{"camera_to_world": [[...4], [...4], [...4], [0, 0, 0, 1]], "fov_y_degrees": 40.0}, ...],
     "frames":    [{"camera_to_world": ..., "fov_y_degrees": ...}, ...]}

``camera_to_world`` is a 4x4 OpenCV camera-to-world matrix (x right, y down, z forward) in the
model's world, the frame the checkpoint's scene box lives in; ``frames`` is what gets
rendered, ``keyframes`` what the viewer reloads. Positions follow a Catmull-Rom spline through
the keyframes, orientations a spherical interpolation between neighbours, the field of view a
linear one; frames are spaced evenly in time.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from tensorf_jt.errors import ConfigError
from tensorf_jt.viewer.cameras import matrix_from_quaternion, quaternion_from_matrix

FORMAT_NAME = "tensorf_jt-camera-path"


@dataclass(frozen=True)
class PathCamera:
    """One camera of a path: OpenCV camera-to-world [3, 4] in the model's world, vertical FOV (radians)."""

    c2w: np.ndarray
    fov_y: float


def slerp(q0: np.ndarray, q1: np.ndarray, t: float) -> np.ndarray:
    """Spherical interpolation between unit quaternions (shorter arc)."""
    q0, q1 = np.asarray(q0, dtype=np.float64), np.asarray(q1, dtype=np.float64)
    dot = float(np.dot(q0, q1))
    if dot < 0.0:
        q1, dot = -q1, -dot
    if dot > 0.9995:
        q = q0 + t * (q1 - q0)
        return q / np.linalg.norm(q)
    angle = math.acos(min(dot, 1.0))
    return (math.sin((1 - t) * angle) * q0 + math.sin(t * angle) * q1) / math.sin(angle)


def catmull_rom(p0: np.ndarray, p1: np.ndarray, p2: np.ndarray, p3: np.ndarray, t: float) -> np.ndarray:
    """The uniform Catmull-Rom spline segment from p1 (t = 0) to p2 (t = 1)."""
    t2, t3 = t * t, t * t * t
    return 0.5 * ((2 * p1) + (-p0 + p2) * t + (2 * p0 - 5 * p1 + 4 * p2 - p3) * t2 + (-p0 + 3 * p1 - 3 * p2 + p3) * t3)


def interpolate(keyframes: list[PathCamera], n_frames: int) -> list[PathCamera]:
    """``n_frames`` cameras evenly spaced in time along the path through ``keyframes``
    (first and last frames are the first and last keyframes)."""
    if not keyframes:
        raise ConfigError("A camera path needs at least one keyframe.")
    if n_frames < 1:
        raise ConfigError(f"A camera path needs at least one frame, got {n_frames}.")
    if len(keyframes) == 1 or n_frames == 1:
        return [keyframes[0]] * n_frames
    positions = [k.c2w[:, 3] for k in keyframes]
    padded = [2 * positions[0] - positions[1], *positions, 2 * positions[-1] - positions[-2]]
    quaternions = [quaternion_from_matrix(k.c2w[:, :3]) for k in keyframes]
    frames = []
    segments = len(keyframes) - 1
    for u in np.linspace(0.0, segments, n_frames):
        index = min(int(u), segments - 1)
        t = float(u - index)
        position = catmull_rom(padded[index], padded[index + 1], padded[index + 2], padded[index + 3], t)
        rotation = matrix_from_quaternion(slerp(quaternions[index], quaternions[index + 1], t))
        fov = (1 - t) * keyframes[index].fov_y + t * keyframes[index + 1].fov_y
        frames.append(PathCamera(np.concatenate([rotation, position[:, None]], axis=1), float(fov)))
    return frames


def _camera_record(camera: PathCamera) -> dict:
    matrix = np.eye(4)
    matrix[:3] = camera.c2w
    return {"camera_to_world": matrix.round(9).tolist(), "fov_y_degrees": round(math.degrees(camera.fov_y), 9)}


def write_camera_path(path: str, keyframes: list[PathCamera], width: int, height: int, fps: float,
                      seconds: float) -> dict:
    """Write the camera-path file for ``keyframes``; returns what was written."""
    if width < 1 or height < 1:
        raise ConfigError(f"A camera path needs a positive image size, got {width}x{height}.")
    if fps <= 0 or seconds <= 0:
        raise ConfigError(f"A camera path needs positive fps and seconds, got {fps} and {seconds}.")
    n_frames = max(1, int(round(fps * seconds)))
    content = {"format": FORMAT_NAME, "version": 1, "render_width": int(width), "render_height": int(height),
               "fps": float(fps), "seconds": float(seconds),
               "keyframes": [_camera_record(k) for k in keyframes],
               "frames": [_camera_record(f) for f in interpolate(keyframes, n_frames)]}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(content, handle, indent=1)
    return content


def _read_camera(record: object, where: str) -> PathCamera:
    if not isinstance(record, dict) or "camera_to_world" not in record or "fov_y_degrees" not in record:
        raise ConfigError(f"{where} needs 'camera_to_world' (4x4) and 'fov_y_degrees'.")
    try:
        matrix = np.asarray(record["camera_to_world"], dtype=np.float64)
        fov = float(record["fov_y_degrees"])
    except (TypeError, ValueError):
        matrix, fov = None, float("nan")
    if matrix is None or matrix.shape != (4, 4) or not np.all(np.isfinite(matrix)):
        raise ConfigError(f"{where}: 'camera_to_world' must be a 4x4 matrix of finite numbers.")
    if not 0.0 < fov < 180.0:
        raise ConfigError(f"{where}: 'fov_y_degrees' must be between 0 and 180, got {record['fov_y_degrees']!r}.")
    rotation = matrix[:3, :3]
    if not np.allclose(rotation @ rotation.T, np.eye(3), atol=1e-4) or np.linalg.det(rotation) < 0:
        raise ConfigError(f"{where}: the rotation part of 'camera_to_world' is not a rotation.")
    return PathCamera(matrix[:3], math.radians(fov))


@dataclass(frozen=True)
class CameraPath:
    """A camera-path file as read: frames to render, keyframes, image size and frame rate."""

    frames: list[PathCamera]
    keyframes: list[PathCamera]
    width: int
    height: int
    fps: float


def read_camera_path(path: str) -> CameraPath:
    """Read and check a camera-path file; errors name the file and what is wrong."""
    try:
        with open(path, "r", encoding="utf-8") as handle:
            content = json.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"Camera path file '{path}' does not exist; save one from the viewer "
                          "(python view.py --ckpt ..., 'Camera path' panel).") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"Camera path file '{path}' is not valid JSON: {err}.") from None
    if not isinstance(content, dict) or content.get("format") != FORMAT_NAME:
        raise ConfigError(f"'{path}' is not a camera path file (its 'format' must be '{FORMAT_NAME}').")
    try:
        width, height = int(content["render_width"]), int(content["render_height"])
        fps = float(content.get("fps", 30.0))
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"'{path}' needs integer 'render_width' and 'render_height'.") from None
    if width < 1 or height < 1 or fps <= 0:
        raise ConfigError(f"'{path}': render_width, render_height and fps must be positive.")
    records = content.get("frames")
    if not isinstance(records, list) or not records:
        raise ConfigError(f"'{path}' lists no 'frames'.")
    frames = [_read_camera(r, f"Frame {i} of '{path}'") for i, r in enumerate(records)]
    keyframes = [_read_camera(r, f"Keyframe {i} of '{path}'") for i, r in enumerate(content.get("keyframes") or [])]
    return CameraPath(frames, keyframes, width, height, fps)
