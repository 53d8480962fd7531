"""Camera rays: pixel directions and their transformation to world space.

Camera math runs in float64 numpy (it happens once per image, at load time) and is cast to
float32 explicitly where rays are handed to Jittor. Directions are in the OpenCV camera frame
(x right, y down, z forward); Blender/OpenGL camera-to-world matrices (x right, y up, z back)
are converted with ``BLENDER_TO_OPENCV``. The LLFF loader is the exception: it keeps OpenGL
poses, with ``get_ray_directions_blender``, and maps its rays to NDC (``ndc_rays_blender``).
"""
from __future__ import annotations

import numpy as np

# Right-multiplying a Blender/OpenGL camera-to-world matrix by this flips the camera's y and z
# axes, giving the OpenCV convention the direction grid uses.
BLENDER_TO_OPENCV = np.diag([1.0, -1.0, -1.0, 1.0])


def focal_from_fov(width: int, camera_angle_x: float) -> float:
    """Focal length in pixels of a pinhole camera ``width`` pixels wide with horizontal FOV (radians)."""
    return 0.5 * width / np.tan(0.5 * camera_angle_x)


def get_ray_directions(height: int, width: int, focal, center=None) -> np.ndarray:
    """Camera-frame direction through each pixel centre, [H, W, 3] float64 (z component 1).

    focal: (fx, fy) in pixels; center: principal point (cx, cy), default the image centre.
    """
    fx, fy = focal
    cx, cy = center if center is not None else (width / 2.0, height / 2.0)
    i, j = np.meshgrid(np.arange(width, dtype=np.float64) + 0.5,
                       np.arange(height, dtype=np.float64) + 0.5, indexing="xy")
    return np.stack([(i - cx) / fx, (j - cy) / fy, np.ones_like(i)], axis=-1)


def rotate_directions(directions: np.ndarray, c2w: np.ndarray) -> np.ndarray:
    """Camera-frame directions [M, 3] rotated into the world by ``c2w`` ([3 or 4, 4], or one per
    direction [M, 3 or 4, 4]), float64.

    Written as three scaled columns summed left to right rather than a matrix product: the
    same numbers come out for one view's pixels at once, for a batch mixing many views, and for
    any subset, which a BLAS product (blocking, fused multiply-adds) does not promise.
    """
    rotation = np.asarray(c2w, dtype=np.float64)[..., :3, :3]
    d = np.asarray(directions, dtype=np.float64)
    return d[:, 0:1] * rotation[..., :, 0] + d[:, 1:2] * rotation[..., :, 1] + d[:, 2:3] * rotation[..., :, 2]


def get_rays(directions: np.ndarray, c2w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World-space rays for every pixel: origins and directions, each [H*W, 3] float64.

    directions: [H, W, 3] camera-frame directions; c2w: [3, 4] or [4, 4] OpenCV-convention
    camera-to-world matrix. Directions are rotated, not renormalised.
    """
    c2w = np.asarray(c2w, dtype=np.float64)
    rays_d = rotate_directions(directions.reshape(-1, 3), c2w)
    rays_o = np.broadcast_to(c2w[:3, 3], rays_d.shape).copy()
    return rays_o, rays_d


def blender_pose_to_opencv(transform_matrix) -> np.ndarray:
    """A NeRF-synthetic ``transform_matrix`` (Blender camera-to-world) in the OpenCV convention, [4, 4]."""
    return np.asarray(transform_matrix, dtype=np.float64) @ BLENDER_TO_OPENCV


def camera_rays(height: int, width: int, focal: float, c2w_opencv: np.ndarray) -> np.ndarray:
    """Rays [H*W, 6] float32 (origin, unit direction) of a pinhole camera (the blender loader's)."""
    directions = get_ray_directions(height, width, (focal, focal))
    directions = directions / np.linalg.norm(directions, axis=-1, keepdims=True)
    rays_o, rays_d = get_rays(directions, c2w_opencv)
    return np.concatenate([rays_o, rays_d], axis=1).astype(np.float32)


def get_ray_directions_blender(height: int, width: int, focal, center=None) -> np.ndarray:
    """Camera-frame direction through each pixel centre in the OpenGL frame, [H, W, 3] float64.

    x right, y up, z back: the camera looks along -z, so every direction has z = -1. Same
    pixel grid as ``get_ray_directions`` (centres at +0.5); used by the LLFF loader, whose
    poses keep the OpenGL convention.
    """
    directions = get_ray_directions(height, width, focal, center)
    directions[..., 1:] *= -1.0
    return directions


def ndc_rays_blender(height: int, width: int, focal: float, near: float, rays_o: np.ndarray,
                     rays_d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rays of an OpenGL camera (looking down -z) in normalised device coordinates, float64.

    The forward-facing parametrisation of NeRF (Mildenhall et al. 2020, appendix C), as the
    reference's ``ndc_rays_blender``: each origin is first moved along its ray onto the plane
    z = -near, then with ``a = 2 focal / W`` and ``b = 2 focal / H``

        o' = (-a ox/oz,  -b oy/oz,  1 + 2 near/oz)
        d' = (-a (dx/dz - ox/oz),  -b (dy/dz - oy/oz),  -2 near/oz)

    so o'_z = -1 and o' + t d' sweeps the whole frustum from the near plane (t = 0) to
    infinity (t = 1): sample with near/far = 0/1. ``d'`` is not unit length. rays_o, rays_d:
    [..., 3] in the camera's world frame (the frame the NDC projection is centred on).
    """
    rays_o = np.asarray(rays_o, dtype=np.float64)
    rays_d = np.asarray(rays_d, dtype=np.float64)
    t = -(near + rays_o[..., 2]) / rays_d[..., 2]
    rays_o = rays_o + t[..., None] * rays_d
    a, b = 2.0 * focal / width, 2.0 * focal / height
    ox_oz, oy_oz = rays_o[..., 0] / rays_o[..., 2], rays_o[..., 1] / rays_o[..., 2]
    ndc_o = np.stack([-a * ox_oz, -b * oy_oz, 1.0 + 2.0 * near / rays_o[..., 2]], axis=-1)
    ndc_d = np.stack([-a * (rays_d[..., 0] / rays_d[..., 2] - ox_oz),
                      -b * (rays_d[..., 1] / rays_d[..., 2] - oy_oz),
                      -2.0 * near / rays_o[..., 2]], axis=-1)
    return ndc_o, ndc_d
