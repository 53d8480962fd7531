"""Browser cameras to model rays, and training cameras to browser poses (numpy, no Jittor).

viser reports each browser's camera OpenCV-style: ``wxyz`` is the rotation of the camera
frame (x right, y down, z forward) into the viewer's world, ``position`` its centre, ``fov``
the vertical field of view in radians. The model's rays follow each loader's convention:
OpenCV poses with unit directions (blender, own_data, NSVF, Tanks&Temples), or LLFF's
OpenGL poses with directions of z length 1, mapped to NDC. ``SceneCameras`` holds what the
mapping needs for one scene.

LLFF's centred world is a mirror image of the capture (its average pose is a reflection,
kept from the reference, see ``camera_paths.average_pose``), so its camera rotations have
determinant -1 and no browser camera can take them. The viewer's world is therefore the
model's world times ``world_to_viewer``, a diagonal matrix of +-1 that undoes the mirror:
a browser camera at a training camera's displayed pose makes exactly that camera's rays.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorf_jt.rendering.rays import BLENDER_TO_OPENCV, get_ray_directions, get_rays, ndc_rays_blender


@dataclass(frozen=True)
class ViewerCamera:
    """A pinhole camera in the viewer's world: OpenCV camera-to-world [3, 4], vertical FOV
    (radians), and the image size it renders."""

    c2w: np.ndarray
    fov_y: float
    width: int
    height: int

    @property
    def focal(self) -> float:
        """Focal length in pixels (square pixels, principal point at the image centre)."""
        return 0.5 * self.height / np.tan(0.5 * self.fov_y)

    def resized(self, width: int, height: int) -> "ViewerCamera":
        """The same camera rendering ``width`` x ``height`` pixels."""
        return ViewerCamera(self.c2w, self.fov_y, int(width), int(height))


@dataclass(frozen=True)
class SceneCameras:
    """One scene's camera conventions and its training cameras.

    poses: training camera-to-world [N, 3, 4] float64, OpenCV axes, model world.
    world_to_viewer: diagonal [3, 3] of +-1 (identity unless the model's world is mirrored).
    unit_directions: whether the loader normalises ray directions.
    ndc: (focal, near, width, height) of the loader's NDC mapping, or None.
    image_size: training (width, height); focal_y: training vertical focal length (pixels).
    """

    poses: np.ndarray
    world_to_viewer: np.ndarray
    unit_directions: bool
    ndc: tuple[float, float, int, int] | None
    image_size: tuple[int, int]
    focal_y: float

    @property
    def fov_y(self) -> float:
        """The training cameras' vertical field of view (radians)."""
        return float(2.0 * np.arctan(0.5 * self.image_size[1] / self.focal_y))

    def viewer_pose(self, c2w_model: np.ndarray) -> np.ndarray:
        """A model-world OpenCV camera-to-world [3, 4] in the viewer's world."""
        c2w_model = np.asarray(c2w_model, dtype=np.float64)[:3, :4]
        return self.world_to_viewer @ c2w_model

    def model_pose(self, c2w_viewer: np.ndarray) -> np.ndarray:
        """A viewer-world OpenCV camera-to-world [3, 4] in the model's world."""
        return self.world_to_viewer.T @ np.asarray(c2w_viewer, dtype=np.float64)[:3, :4]

    def rays(self, camera: ViewerCamera) -> np.ndarray:
        """The model's rays [H*W, 6] float32 for a viewer-world ``camera``."""
        return self.rays_for_model_pose(self.model_pose(camera.c2w), camera.fov_y, camera.width, camera.height)

    def rays_for_model_pose(self, c2w_model: np.ndarray, fov_y: float, width: int, height: int) -> np.ndarray:
        """Rays [H*W, 6] float32 of an OpenCV camera-to-world [3, 4] in the model's world."""
        focal = 0.5 * height / np.tan(0.5 * fov_y)
        directions = get_ray_directions(height, width, (focal, focal)).reshape(-1, 3)
        if self.unit_directions:
            directions = directions / np.linalg.norm(directions, axis=-1, keepdims=True)
        rays_o, rays_d = get_rays(directions, np.asarray(c2w_model, dtype=np.float64)[:3, :4])
        if self.ndc is not None:
            ndc_focal, near, ndc_width, ndc_height = self.ndc
            rays_o, rays_d = ndc_rays_blender(ndc_height, ndc_width, ndc_focal, near, rays_o, rays_d)
        return np.concatenate([rays_o, rays_d], axis=1).astype(np.float32)

    def up_direction(self) -> np.ndarray:
        """The training cameras' mean up vector (-y of OpenCV), unit length, viewer world."""
        up = -(self.world_to_viewer @ self.poses[:, :, 1].T).T.mean(0)
        return up / max(np.linalg.norm(up), 1e-12)

    def start_view(self, scene_center: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(position, look_at) of a first view in the viewer's world: the training camera
        closest to the cameras' mean centre, looking at ``scene_center`` (viewer world), or
        straight ahead at the mean camera distance for forward-facing (NDC) scenes."""
        centres = (self.world_to_viewer @ self.poses[:, :, 3].T).T
        nearest = int(np.argmin(np.linalg.norm(centres - centres.mean(0), axis=1)))
        position = centres[nearest]
        if scene_center is not None and self.ndc is None:
            return position, np.asarray(scene_center, dtype=np.float64)
        forward = (self.world_to_viewer @ self.poses[nearest, :, 2])
        reach = float(np.linalg.norm(centres - position, axis=1).max()) or 1.0
        return position, position + forward * max(reach, 1.0)


def scene_cameras(dataset) -> SceneCameras:
    """``SceneCameras`` of a loaded dataset (any of ``tensorf_jt.dataLoader``'s loaders)."""
    poses = np.array(dataset.camera_poses, dtype=np.float64)
    if dataset.poses_are_opengl:
        poses[:, :, :3] = poses[:, :, :3] @ BLENDER_TO_OPENCV[:3, :3]
    handedness = np.sign(np.linalg.det(poses[:, :, :3]).mean())
    world_to_viewer = np.diag([handedness, 1.0, 1.0])
    width, height = dataset.img_wh
    directions = dataset.pixel_directions
    unit = bool(np.allclose(np.linalg.norm(directions[:1], axis=-1), 1.0))
    ndc = None
    if dataset.ndc_parameters is not None:
        focal, near = dataset.ndc_parameters
        ndc = (float(focal), float(near), int(width), int(height))
    return SceneCameras(poses=poses, world_to_viewer=world_to_viewer, unit_directions=unit, ndc=ndc,
                        image_size=(int(width), int(height)), focal_y=float(dataset.intrinsics[1, 1]))


def quaternion_from_matrix(rotation: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z), w >= 0, of a rotation matrix [3, 3]."""
    m = np.asarray(rotation, dtype=np.float64)
    trace = np.trace(m)
    candidates = np.array([trace, m[0, 0], m[1, 1], m[2, 2]])
    largest = int(np.argmax(candidates))
    if largest == 0:
        s = 2.0 * np.sqrt(max(1.0 + trace, 1e-12))
        q = np.array([0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s])
    else:
        i = largest - 1
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(max(1.0 + m[i, i] - m[j, j] - m[k, k], 1e-12))
        q = np.empty(4)
        q[0] = (m[k, j] - m[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (m[j, i] + m[i, j]) / s
        q[1 + k] = (m[k, i] + m[i, k]) / s
    q /= np.linalg.norm(q)
    return -q if q[0] < 0 else q


def matrix_from_quaternion(wxyz: np.ndarray) -> np.ndarray:
    """Rotation matrix [3, 3] of a quaternion (w, x, y, z) (normalised first)."""
    w, x, y, z = np.asarray(wxyz, dtype=np.float64) / np.linalg.norm(wxyz)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def camera_from_viser(wxyz: np.ndarray, position: np.ndarray, fov_y: float, aspect: float,
                      max_side: int) -> ViewerCamera:
    """The camera a browser reports, rendering at most ``max_side`` pixels on its longer side."""
    c2w = np.concatenate([matrix_from_quaternion(wxyz), np.asarray(position, dtype=np.float64)[:, None]], axis=1)
    aspect = float(aspect) if np.isfinite(aspect) and aspect > 0 else 1.0
    if aspect >= 1.0:
        width, height = max_side, max(1, round(max_side / aspect))
    else:
        width, height = max(1, round(max_side * aspect)), max_side
    return ViewerCamera(c2w, float(fov_y), int(width), int(height))
