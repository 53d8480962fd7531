"""Pinhole cameras as the splat rasteriser takes them: OpenCV axes (x right, y down, z forward),
pixel (x, y) covering [x, x + 1) x [y, y + 1), the dataset's world.

The datasets keep camera-to-world poses in OpenCV axes, or in OpenGL axes (LLFF, whose world
is the loader's recentred one); both come out here in OpenCV axes, in the loader's world,
which is the world the splats are written in.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorf_jt.rendering.rays import BLENDER_TO_OPENCV


@dataclass(frozen=True)
class PinholeCamera:
    """``c2w`` [3, 4] camera-to-world (OpenCV axes, float64), focal lengths and principal point
    in pixels, image size."""

    c2w: np.ndarray
    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    @property
    def centre(self) -> np.ndarray:
        return self.c2w[:, 3]

    def world_to_camera(self) -> tuple[np.ndarray, np.ndarray]:
        """(R [3, 3], t [3]) with camera = R world + t."""
        rotation = self.c2w[:, :3].T
        return rotation, -rotation @ self.c2w[:, 3]

    def vector(self) -> np.ndarray:
        """[19] float32, the kernels' camera: R row by row, t, fx, fy, cx, cy, the centre."""
        rotation, translation = self.world_to_camera()
        return np.concatenate([rotation.reshape(-1), translation, [self.fx, self.fy, self.cx, self.cy],
                               self.centre]).astype(np.float32)

    def pixel_rays(self, stride: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """World rays through every ``stride``-th pixel's centre: origins [M, 3], unit directions
        [M, 3] (float64) and the pixels' (row, column) [M, 2]."""
        rows, cols = np.meshgrid(np.arange(0, self.height, stride), np.arange(0, self.width, stride), indexing="ij")
        local = np.stack([(cols + 0.5 - self.cx) / self.fx, (rows + 0.5 - self.cy) / self.fy,
                          np.ones(rows.shape)], axis=-1).reshape(-1, 3)
        directions = local @ self.c2w[:, :3].T
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        return (np.broadcast_to(self.centre, directions.shape).copy(), directions,
                np.stack([rows.reshape(-1), cols.reshape(-1)], axis=1))


def dataset_cameras(dataset) -> list[PinholeCamera]:
    """The cameras of a loaded split (``dataLoader.views.ViewDataset``) in OpenCV axes."""
    width, height = dataset.img_wh
    intrinsics = np.asarray(dataset.intrinsics, np.float64)
    poses = np.asarray(dataset.camera_poses, np.float64)
    cameras = []
    for pose in poses:
        c2w = np.concatenate([pose[:3, :4], [[0.0, 0.0, 0.0, 1.0]]])
        if dataset.poses_are_opengl:
            c2w = c2w @ BLENDER_TO_OPENCV
        cameras.append(PinholeCamera(c2w[:3, :4], float(intrinsics[0, 0]), float(intrinsics[1, 1]),
                                     float(intrinsics[0, 2]), float(intrinsics[1, 2]), int(width), int(height)))
    return cameras


def _matrix_quaternion(rotation: np.ndarray) -> np.ndarray:
    """(w, x, y, z) of a rotation matrix."""
    m = rotation
    w = np.sqrt(max(0.0, 1.0 + m[0, 0] + m[1, 1] + m[2, 2])) / 2.0
    x = np.copysign(np.sqrt(max(0.0, 1.0 + m[0, 0] - m[1, 1] - m[2, 2])) / 2.0, m[2, 1] - m[1, 2])
    y = np.copysign(np.sqrt(max(0.0, 1.0 - m[0, 0] + m[1, 1] - m[2, 2])) / 2.0, m[0, 2] - m[2, 0])
    z = np.copysign(np.sqrt(max(0.0, 1.0 - m[0, 0] - m[1, 1] + m[2, 2])) / 2.0, m[1, 0] - m[0, 1])
    q = np.array([w, x, y, z])
    return q / np.linalg.norm(q)


def _quaternion_matrix(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def between_cameras(cameras: list[PinholeCamera]) -> list[PinholeCamera]:
    """For each camera, one halfway to its nearest neighbour: centres averaged, orientations
    interpolated (the quaternions' normalised sum, their halfway rotation), the same lens."""
    centres = np.stack([camera.centre for camera in cameras])
    distances = np.linalg.norm(centres[:, None] - centres[None], axis=2)
    np.fill_diagonal(distances, np.inf)
    result = []
    for i, camera in enumerate(cameras):
        other = cameras[int(np.argmin(distances[i]))] if len(cameras) > 1 else camera
        q1, q2 = _matrix_quaternion(camera.c2w[:, :3]), _matrix_quaternion(other.c2w[:, :3])
        q = q1 + (q2 if np.dot(q1, q2) >= 0 else -q2)
        c2w = np.concatenate([_quaternion_matrix(q), 0.5 * (camera.centre + other.centre)[:, None]], axis=1)
        result.append(PinholeCamera(c2w, camera.fx, camera.fy, camera.cx, camera.cy, camera.width, camera.height))
    return result
