"""Where a capture's scene is: a box and near/far fitted to the cameras and sparse points, the
similarity that puts the scene into a box of TensoRF's usual size, and a one-line summary.

TensoRF spreads its voxels over the scene box and marches rays only inside it, so a box much
larger than the object wastes resolution, and one that cuts the object loses it. The
reference's own_data loader uses a fixed [-1.5, 1.5]^3 and leaves fitting it to the user;
here it is fitted once, at conversion (``tools/colmap_to_transforms.py``):

- from the sparse points seen by at least ``MIN_TRACK`` images (shorter tracks are mostly
  mismatches); for a capture that surrounds its object, points farther from the cameras'
  common focus than the cameras themselves are background and are dropped. A core box spans
  the ``CORE_PERCENTILES`` of the rest; points within ``OUTLIER_REACH`` of the core's size
  around it extend it (thin parts of the object), points beyond are outliers; the result is
  padded by ``PADDING`` of its size on each side;
- without points, from where the cameras' view frusta overlap: the grid points around the
  focus that at least ``FRUSTA_SHARE`` of the cameras see.

near/far bound the ray distances the scene can have: ``NEAR_MARGIN`` times the closest and
``FAR_MARGIN`` times the farthest camera-to-point distance over all views (without points,
the distances to the box). Rays are sampled only between near and far *and* inside the box,
so near/far trim the box where no camera saw anything in front (floaters near the cameras).

A capture around its object that sees beyond its box (``sees_beyond_box``: many sparse
points outside it, or cameras standing in it) holds a room or landscape too: the converter
marks it unbounded (``models.factory.scene_space``) and writes a foreground box for the unbounded
mode (``foreground_box``): the object the cameras orbit, not the room the fitted box also holds.
Only numpy is imported here.
"""
from __future__ import annotations

import numpy as np

from tensorf_jt.errors import DatasetError

MIN_TRACK = 3
CORE_PERCENTILES = (2.0, 98.0)
OUTLIER_REACH = 0.25
PADDING = 0.05
FRUSTA_SHARE = 0.9
NEAR_MARGIN, FAR_MARGIN = 0.8, 1.25
BACKGROUND_SHARE = 0.2  # of the sparse points outside the box: the capture is unbounded
CAMERA_REACH = 1.25  # cameras within this many box half-sizes of its centre look out of it
ORBIT_MIN_DEGREES = 60.0  # of azimuth around the focus that a 360-degree capture's cameras span at least
FOREGROUND_FRAMING = 0.8  # of the median camera's narrower field of view that the foreground cube fills
BOX_SIDE = 3.0  # the largest side of the normalised box: own_data's default [-1.5, 1.5]^3


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


def camera_focus(c2w_opengl: np.ndarray) -> tuple[np.ndarray, bool]:
    """The point nearest (least squares) to all optical axes, and whether it is well defined
    (False when the axes are nearly parallel, as in a forward-facing capture; then the mean
    camera position is returned)."""
    origins, directions = c2w_opengl[:, :3, 3], -c2w_opengl[:, :3, 2]
    directions = directions / np.linalg.norm(directions, axis=-1, keepdims=True)
    projectors = np.eye(3)[None] - directions[:, :, None] * directions[:, None, :]
    lhs, rhs = projectors.sum(0), np.einsum("nij,nj->i", projectors, origins)
    eigenvalues = np.linalg.eigvalsh(lhs)
    if eigenvalues[0] < 1e-2 * eigenvalues[-1]:
        return origins.mean(0), False
    return np.linalg.solve(lhs, rhs), True


def surrounds_focus(c2w_opengl: np.ndarray) -> tuple[np.ndarray, bool]:
    """The cameras' focus, and whether the capture is object-centred: the focus well defined
    and in front of at least 90 % of the cameras."""
    focus, ok = camera_focus(c2w_opengl)
    if not ok:
        return focus, False
    in_front = np.einsum("ni,ni->n", focus - c2w_opengl[:, :3, 3], -c2w_opengl[:, :3, 2]) > 0
    return focus, bool(in_front.mean() >= 0.9)


def orbits_focus(c2w_opengl: np.ndarray) -> bool:
    """Whether the cameras orbit their focus (a 360-degree capture, or an arc of one) rather than
    all face one way as a forward-facing capture's do, whose axes may converge too: object-centred
    (``surrounds_focus``) and spread around the focus over ``ORBIT_MIN_DEGREES`` of azimuth about
    the up axis."""
    focus, surrounded = surrounds_focus(c2w_opengl)
    if not surrounded:
        return False
    up = up_vector(c2w_opengl)
    across = np.cross(up, np.eye(3)[np.argmin(np.abs(up))])
    across /= np.linalg.norm(across)
    offsets = c2w_opengl[:, :3, 3] - focus
    azimuth = np.sort(np.degrees(np.arctan2(offsets @ np.cross(up, across), offsets @ across)))
    gaps = np.diff(np.concatenate([azimuth, azimuth[:1] + 360.0]))
    return bool(360.0 - gaps.max() >= ORBIT_MIN_DEGREES)


def up_vector(c2w_opengl: np.ndarray) -> np.ndarray:
    """The cameras' mean up direction (OpenGL +y), unit length; +z if they cancel out."""
    up = c2w_opengl[:, :3, 1].mean(0)
    norm = np.linalg.norm(up)
    return up / norm if norm > 1e-9 else np.array([0.0, 0.0, 1.0])


def scene_points(xyz: np.ndarray, track_lengths: np.ndarray, c2w_opengl: np.ndarray,
                 min_track: int = MIN_TRACK) -> np.ndarray:
    """Mask [n] of the sparse points that belong to the scene (see the module's docstring)."""
    keep = np.asarray(track_lengths) >= min_track
    focus, surrounded = surrounds_focus(c2w_opengl)
    if surrounded:
        reach = np.median(np.linalg.norm(c2w_opengl[:, :3, 3] - focus, axis=-1))
        keep &= np.linalg.norm(xyz - focus, axis=-1) < reach
    return keep


def sees_beyond_box(xyz: np.ndarray, track_lengths: np.ndarray, c2w_opengl: np.ndarray, box: np.ndarray,
                    min_track: int = MIN_TRACK) -> str | None:
    """Why a capture around its object (``orbits_focus``) also sees the space beyond ``box`` (a room, a
    landscape) -- ``BACKGROUND_SHARE`` of its well-tracked sparse points lie outside the box, or
    half its cameras stand within ``CAMERA_REACH`` times the box (each of those looks out of
    the box over much of its view) -- or None when it does not, or is no such capture."""
    if not orbits_focus(c2w_opengl):
        return None
    tracked = np.asarray(xyz)[np.asarray(track_lengths) >= min_track]
    outside = float(np.any((tracked < box[0]) | (tracked > box[1]), axis=1).mean()) if len(tracked) else 0.0
    if outside >= BACKGROUND_SHARE:
        return f"{100 * outside:.0f}% of the sparse points lie beyond the box"
    centre, half = box.mean(0), (box[1] - box[0]) / 2
    within = float((np.abs(c2w_opengl[:, :3, 3] - centre) <= CAMERA_REACH * half).all(1).mean())
    if within >= 0.5:
        return f"{100 * within:.0f}% of the cameras stand within the box or close to it"
    return None


def foreground_box(c2w_opengl: np.ndarray, focal: tuple[float, float], size_wh: tuple[int, int]) -> np.ndarray:
    """Cube [2, 3] around the cameras' focus that fills ``FOREGROUND_FRAMING`` of the narrower
    field of view of a camera at the median distance: the object a capture walks around, which
    its photos frame. The unbounded mode spends the grid's finest part on it and contracts
    the rest; a foreground that also held the room would spread that resolution over air
    (measured on ``../shared/data/cup``, docs/UNBOUNDED.md)."""
    focus, _ = camera_focus(c2w_opengl)
    distance = float(np.median(np.linalg.norm(c2w_opengl[:, :3, 3] - focus, axis=-1)))
    half_view = min(size_wh[0] / (2.0 * focal[0]), size_wh[1] / (2.0 * focal[1]))
    half = FOREGROUND_FRAMING * distance * half_view
    return np.stack([focus - half, focus + half])


def fit_box_to_points(xyz: np.ndarray) -> np.ndarray:
    """Box [2, 3] around points [n, 3] (already filtered by ``scene_points``), robust to outliers."""
    if len(xyz) < 10:
        raise DatasetError(f"Only {len(xyz)} sparse points are left to fit the scene box to (at least 10 "
                           "are needed): give the box with --scene_bbox.")
    core = np.percentile(xyz, CORE_PERCENTILES, axis=0)
    reach = OUTLIER_REACH * (core[1] - core[0]).max()
    near_core = np.all((xyz >= core[0] - reach) & (xyz <= core[1] + reach), axis=1)
    box = np.stack([xyz[near_core].min(0), xyz[near_core].max(0)])
    return _padded(box)


def _padded(box: np.ndarray) -> np.ndarray:
    size = box[1] - box[0]
    pad = PADDING * np.maximum(size, 1e-3 * size.max())
    return np.stack([box[0] - pad, box[1] + pad])


def fit_box_to_frusta(c2w_opengl: np.ndarray, focal: tuple[float, float], center: tuple[float, float],
                      size_wh: tuple[int, int], resolution: int = 48) -> np.ndarray:
    """Box [2, 3] around what ``FRUSTA_SHARE`` of the pinhole cameras all see, for a capture
    without sparse points; the cameras must surround their focus."""
    focus, surrounded = surrounds_focus(c2w_opengl)
    if not surrounded:
        raise DatasetError("There are no sparse points to fit the scene box to, and the cameras do not look at "
                           "a common point (a forward-facing capture?), so their view frusta say nothing about "
                           "where the scene is. Give the box with --scene_bbox, or use the llff format.")
    half = np.median(np.linalg.norm(c2w_opengl[:, :3, 3] - focus, axis=-1))
    ticks = np.linspace(-half, half, resolution)
    grid = focus + np.stack(np.meshgrid(ticks, ticks, ticks, indexing="ij"), axis=-1).reshape(-1, 3)
    seen = np.zeros(len(grid), dtype=np.int64)
    (fx, fy), (cx, cy), (w, h) = focal, center, size_wh
    for c2w in c2w_opengl:
        local = (grid - c2w[:3, 3]) @ c2w[:3, :3]  # OpenGL camera frame: in front means z < 0
        depth = -local[:, 2]
        safe = np.maximum(depth, 1e-9)
        u, v = cx + fx * local[:, 0] / safe, cy - fy * local[:, 1] / safe
        seen += (depth > 0) & (u >= 0) & (u <= w) & (v >= 0) & (v <= h)
    inside = grid[seen >= FRUSTA_SHARE * len(c2w_opengl)]
    if len(inside) == 0:
        raise DatasetError("The cameras' view frusta have no common region, and there are no sparse points: "
                           "give the scene box with --scene_bbox.")
    step = ticks[1] - ticks[0]
    return _padded(np.stack([inside.min(0) - step, inside.max(0) + step]))


def fit_near_far(camera_centres: np.ndarray, view_points: list[np.ndarray]) -> tuple[float, float]:
    """(near, far) from the points each view sees: [n_i, 3] per camera centre [N, 3]."""
    distances = [np.linalg.norm(points - centre, axis=-1) for centre, points in zip(camera_centres, view_points)
                 if len(points)]
    if not distances:
        raise DatasetError("No view sees any of the scene's sparse points; near/far cannot be fitted.")
    return (NEAR_MARGIN * float(min(d.min() for d in distances)),
            FAR_MARGIN * float(max(d.max() for d in distances)))


def near_far_from_box(camera_centres: np.ndarray, box: np.ndarray) -> tuple[float, float]:
    """(near, far) that bracket every point of ``box`` [2, 3] from every camera centre [N, 3]."""
    nearest = np.clip(camera_centres, box[0], box[1])
    closest = float(np.linalg.norm(camera_centres - nearest, axis=-1).min())
    corners = np.stack(np.meshgrid(*box.T, indexing="ij"), axis=-1).reshape(-1, 3)
    farthest = float(np.linalg.norm(camera_centres[:, None] - corners[None], axis=-1).max())
    floor = 1e-2 * float(np.linalg.norm(box[1] - box[0]))  # a camera inside the box
    return max(NEAR_MARGIN * closest, floor), FAR_MARGIN * farthest


def normalizing_similarity(box: np.ndarray) -> np.ndarray:
    """[4, 4] scale-and-translate taking ``box`` to one centred at the origin whose largest side is ``BOX_SIDE``."""
    scale = BOX_SIDE / float((box[1] - box[0]).max())
    similarity = np.eye(4) * scale
    similarity[3, 3] = 1.0
    similarity[:3, 3] = -scale * box.mean(0)
    return similarity


def transform_poses(similarity: np.ndarray, c2w: np.ndarray) -> np.ndarray:
    """Camera-to-world matrices [N, 4, 4] after the similarity ``x -> s R x + t`` ([4, 4]): rotated
    and moved, their rotation part kept orthonormal."""
    scale = np.cbrt(np.linalg.det(similarity[:3, :3]))
    out = similarity[None] @ c2w
    out[:, :3, :3] /= scale
    return out


def transform_points(similarity: np.ndarray, xyz: np.ndarray) -> np.ndarray:
    """Points [n, 3] mapped by the [4, 4] affine ``similarity``."""
    return xyz @ similarity[:3, :3].T + similarity[:3, 3]


def scene_summary(dataset) -> str:
    """One line on a loaded split, printed when training starts: number of cameras, image size,
    box size and centre, near/far, and where box and near/far come from (``bounds_source``,
    which own_data and the ``--scene_bbox``/``--near_far`` overrides set)."""
    w, h = dataset.img_wh
    box = np.asarray(dataset.scene_bbox, dtype=np.float64).reshape(2, 3)
    size = " x ".join(f"{v:.3g}" for v in box[1] - box[0])
    centre = ", ".join(f"{v:.3g}" for v in box.mean(0))
    near, far = dataset.near_far
    source = getattr(dataset, "bounds_source", None)
    line = (f"scene: {dataset.n_views} cameras, {w}x{h} pixels, box {size} around ({centre}), "
            f"near/far {near:.3g} / {far:.3g}")
    return line + (f" ({source})" if source else "")
