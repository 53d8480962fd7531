"""Camera paths for ``--render_path`` videos, and the average-pose math LLFF centring shares.

All functions take and return float64 numpy camera-to-world matrices; loaders cast their
``render_path`` to float32. Each path is in the convention its loader's rays use:

- ``spiral_path``: LLFF's forward-facing spiral (OpenGL, as the reference's ``get_spiral``).
- ``tankstemple_circle_path``: the reference's Tanks&Temples circle (OpenCV).
- ``orbit_path``: ours, for scenes the reference gives no usable path (blender, own_data,
  NSVF without ``test_traj.txt``): a circle at the training cameras' mean distance and
  elevation around the scene centre (OpenCV).
"""
from __future__ import annotations

import numpy as np


def normalize(v: np.ndarray) -> np.ndarray:
    """``v`` divided by its Euclidean norm (last axis)."""
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def average_pose(poses: np.ndarray) -> np.ndarray:
    """The reference's average camera [3, 4] of poses [N, 3 or 4, 4]: mean centre, mean axes.

    z is the normalised mean z axis and x = normalize(z x mean_y), y = x x z. Note the order
    of that cross product: for right-handed input poses x is *minus* their mean x axis, so
    the result is a reflection (determinant -1). Kept as in the reference: LLFF centring
    multiplies by its inverse, which defines the (x-mirrored) world the reference's NDC rays,
    scene box and checkpoints live in; its spiral path (``view_matrix``) mirrors x back, so
    rendered videos are consistent with the training views.
    """
    poses = np.asarray(poses, dtype=np.float64)
    center = poses[:, :3, 3].mean(0)
    z = normalize(poses[:, :3, 2].mean(0))
    mean_y = poses[:, :3, 1].mean(0)
    x = normalize(np.cross(z, mean_y))
    y = np.cross(x, z)
    return np.stack([x, y, z, center], axis=1)


def view_matrix(z: np.ndarray, up: np.ndarray, position: np.ndarray) -> np.ndarray:
    """[4, 4] OpenGL-style pose with back axis ``z`` at ``position``, as the reference's spiral builds it.

    Its x column is -normalize(up x z), i.e. the same handedness as ``average_pose``'s frame
    and as LLFF's centred training poses.
    """
    back = normalize(np.asarray(z, dtype=np.float64))
    side = normalize(np.cross(up, back))
    true_up = normalize(np.cross(back, side))
    pose = np.eye(4)
    pose[:3] = np.stack([-side, true_up, back, position], axis=1)
    return pose


def spiral_path(poses: np.ndarray, near_fars: np.ndarray, n_views: int = 120, n_rots: int = 2,
                zrate: float = 0.5, rads_scale: float = 1.0) -> np.ndarray:
    """LLFF's forward-facing spiral [n_views, 4, 4] (the reference's ``get_spiral``).

    The cameras circle ``n_rots`` times around the average pose, with radii the 90th
    percentile of |camera position| per axis (so this assumes centred poses), bobbing along z
    at ``zrate`` times the angular rate, all looking at a focus point on the average pose's
    viewing axis at depth 1 / (0.25 / (0.9 near_min) + 0.75 / (5 far_max)).
    """
    poses = np.asarray(poses, dtype=np.float64)
    near_fars = np.asarray(near_fars, dtype=np.float64)
    center = average_pose(poses)
    up = normalize(poses[:, :3, 1].sum(0))
    focus = focus_depth(near_fars)
    rads = np.append(np.percentile(np.abs(poses[:, :3, 3]), 90, axis=0) * rads_scale, 1.0)
    look_at = center @ np.array([0.0, 0.0, -focus, 1.0])
    path = []
    for theta in np.linspace(0.0, 2.0 * np.pi * n_rots, n_views + 1)[:-1]:
        position = center @ (np.array([np.cos(theta), -np.sin(theta), -np.sin(theta * zrate), 1.0]) * rads)
        path.append(view_matrix(position - look_at, up, position))
    return np.stack(path)


def focus_depth(near_fars: np.ndarray) -> float:
    """The spiral's focus distance: a disparity blend of 0.9 x nearest and 5 x farthest depth (weights 0.25/0.75)."""
    close_depth, inf_depth = near_fars.min() * 0.9, near_fars.max() * 5.0
    return 1.0 / (0.25 / close_depth + 0.75 / inf_depth)


def look_at_opencv(positions: np.ndarray, target, up) -> np.ndarray:
    """OpenCV camera-to-world poses [K, 4, 4] at ``positions`` [K, 3] looking at ``target``.

    The camera's z axis points at the target, its x axis is normalize(z x up) (image right),
    its y axis z x x (image down, so the world ``up`` appears up in the image).
    """
    positions = np.atleast_2d(np.asarray(positions, dtype=np.float64))
    forward = normalize(np.asarray(target, dtype=np.float64) - positions)
    right = normalize(np.cross(forward, np.asarray(up, dtype=np.float64)))
    down = np.cross(forward, right)
    poses = np.tile(np.eye(4), (len(positions), 1, 1))
    poses[:, :3, :3] = np.stack([right, down, forward], axis=-1)
    poses[:, :3, 3] = positions
    return poses


def orbit_path(poses_opencv: np.ndarray, center, n_views: int = 120, up=None,
               max_elevation_deg: float = 80.0) -> np.ndarray:
    """A circle of ``n_views`` OpenCV cameras [n_views, 4, 4] around ``center``, looking at it.

    Radius and elevation are the means over ``poses_opencv`` (the training cameras) of their
    distance from ``center`` and of their angle above the plane normal to ``up``; ``up``
    defaults to minus the cameras' mean y axis (OpenCV's y points down in the image). The
    elevation is clamped to +-``max_elevation_deg`` so that the view direction never
    coincides with ``up``. The circle starts at the first camera's azimuth.
    """
    poses_opencv = np.asarray(poses_opencv, dtype=np.float64)
    center = np.asarray(center, dtype=np.float64)
    if up is None:
        up = -poses_opencv[:, :3, 1].mean(0)
        if np.linalg.norm(up) < 1e-6:
            up = np.array([0.0, 0.0, 1.0])
    up = normalize(np.asarray(up, dtype=np.float64))
    offsets = poses_opencv[:, :3, 3] - center
    distances = np.linalg.norm(offsets, axis=-1)
    radius = float(distances.mean())
    heights = offsets @ up
    elevation = np.arcsin(np.clip(heights / np.maximum(distances, 1e-12), -1.0, 1.0)).mean()
    limit = np.radians(max_elevation_deg)
    elevation = float(np.clip(elevation, -limit, limit))

    start = offsets[0] - heights[0] * up
    if np.linalg.norm(start) < 1e-9 * max(radius, 1.0):
        helper = np.eye(3)[np.argmin(np.abs(up))]
        start = helper - (helper @ up) * up
    e1 = normalize(start)
    e2 = np.cross(up, e1)
    azimuth = np.linspace(0.0, 2.0 * np.pi, n_views, endpoint=False)[:, None]
    directions = np.cos(elevation) * (np.cos(azimuth) * e1 + np.sin(azimuth) * e2) + np.sin(elevation) * up
    return look_at_opencv(center + radius * directions, center, up)


def tankstemple_circle_path(poses_opencv: np.ndarray, scene_bbox: np.ndarray, n_views: int = 200) -> np.ndarray:
    """The reference's Tanks&Temples path [n_views, 4, 4] (OpenCV): a circle in the world x-z plane.

    Centre: the box centre; radius: 1.2 x the half-diagonal of ``scene_bbox``; height above
    the centre -0.2 x (the y component of the cameras' mean y axis); the cameras look at the
    centre with the cameras' mean y axis as their "down" direction. This assumes the scene's
    vertical is the world y axis, as in the NSVF release of Tanks&Temples.
    """
    scene_bbox = np.asarray(scene_bbox, dtype=np.float64)
    center = scene_bbox.mean(0)
    radius = np.linalg.norm(scene_bbox[1] - center) * 1.2
    mean_down = np.asarray(poses_opencv, dtype=np.float64)[:, :3, 1].mean(0)
    angles = np.arange(n_views) * (2.0 * np.pi / n_views)
    offsets = np.stack([radius * np.cos(angles), np.full(n_views, -0.2 * mean_down[1]),
                        radius * np.sin(angles)], axis=-1)
    return look_at_opencv(offsets + center, center, -mean_down)


__all__ = ["average_pose", "focus_depth", "look_at_opencv", "normalize", "orbit_path", "spiral_path",
           "tankstemple_circle_path", "view_matrix"]
