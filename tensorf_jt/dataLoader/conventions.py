"""Camera conventions: reading poses given in any of four forms, and telling from the geometry
when a file's poses are in another form than it claims.

A transforms file holds camera-to-world matrices in OpenGL axes (x right, y up, z back).
Tools write others: OpenCV axes (z forward), or world-to-camera matrices. Any of these loads
without complaint, and trains to a blur, because every ray then leaves its camera in a wrong
direction. The mistake shows in the geometry: a capture's cameras look at the scene, so the
scene box's centre lies near the optical axis (within ``VIEW_CONE_DEG``) of (nearly) every
camera outside the box. When it does not for most of them, the other forms are tried, and the
error names the one under which the cameras do look at the scene, and the flag that reads the
file that way (``--pose_format``). "Near the axis" rather than merely "in front": a
world-to-camera matrix read as an OpenCV camera-to-world one puts every camera above the box
in front of it, but not on its axis. Cameras inside the box (a capture looking outward from
within the scene) are not judged.
Only numpy is imported here.
"""
from __future__ import annotations

import numpy as np

from tensorf_jt.errors import DatasetError

POSE_FORMATS = ("c2w_opengl", "c2w_opencv", "w2c_opengl", "w2c_opencv")
DEFAULT_POSE_FORMAT = "c2w_opengl"
_FLIP_YZ = np.diag([1.0, -1.0, -1.0, 1.0])
VIEW_CONE_DEG = 60.0  # the box centre must lie within this angle of a camera's optical axis
FACING_OK = 0.8  # share of outside cameras that must face the box centre
FACING_CLEAR = 0.95  # share another form must reach to be named as the cause
SPREAD_MIN = 0.05  # another form whose camera positions spread less (relative to their distance) is not named


def to_c2w_opengl(matrices: np.ndarray, pose_format: str) -> np.ndarray:
    """Matrices [N, 4, 4] in ``pose_format`` as camera-to-world in OpenGL axes."""
    if pose_format not in POSE_FORMATS:
        raise DatasetError(f"pose_format '{pose_format}' is not one of {', '.join(POSE_FORMATS)}.")
    matrices = np.asarray(matrices, dtype=np.float64)
    if pose_format.startswith("w2c"):
        matrices = np.linalg.inv(matrices)
    return matrices @ _FLIP_YZ if pose_format.endswith("opencv") else matrices


def facing_share(c2w_opengl: np.ndarray, box: np.ndarray) -> float | None:
    """Share of the cameras outside ``box``'s bounding sphere that have its centre within
    ``VIEW_CONE_DEG`` of their optical axis; None when fewer than half of them (and fewer
    than 3) are outside."""
    centre = np.asarray(box, dtype=np.float64).mean(0)
    radius = 0.5 * float(np.linalg.norm(np.asarray(box[1]) - np.asarray(box[0])))
    positions = c2w_opengl[:, :3, 3]
    outside = np.linalg.norm(positions - centre, axis=-1) > radius
    if outside.sum() < max(3, 0.5 * len(c2w_opengl)):
        return None
    forward = -c2w_opengl[outside, :3, 2]
    forward = forward / np.linalg.norm(forward, axis=-1, keepdims=True)
    towards = centre - positions[outside]
    towards = towards / np.linalg.norm(towards, axis=-1, keepdims=True)
    return float((np.einsum("ni,ni->n", towards, forward) > np.cos(np.radians(VIEW_CONE_DEG))).mean())


def spread_out(c2w_opengl: np.ndarray, box: np.ndarray) -> bool:
    """Whether the camera positions spread by at least ``SPREAD_MIN`` of their distance to the
    box centre. A world-to-camera matrix of a camera aimed at a point holds that point's
    position in the camera frame, the same for every such camera: read the other way, every
    camera sits at one spot, a reading that can face anything and names nothing."""
    positions = c2w_opengl[:, :3, 3]
    spread = float(np.sqrt(((positions - positions.mean(0)) ** 2).sum(-1).mean()))
    distance = float(np.median(np.linalg.norm(positions - np.asarray(box, dtype=np.float64).mean(0), axis=-1)))
    return spread >= SPREAD_MIN * max(distance, 1e-12)


def check_pose_format(matrices: np.ndarray, pose_format: str, box: np.ndarray, where: str) -> None:
    """Refuse poses (as read with ``pose_format``) whose cameras do not look at ``box`` [2, 3].

    ``where`` names the file for the message. The error names the form under which the most
    cameras look at the box (when it is clear), or says that the box is not where the
    cameras look.
    """
    share = facing_share(to_c2w_opengl(matrices, pose_format), box)
    if share is None or share >= FACING_OK:
        return
    box_text = np.round(np.asarray(box, dtype=np.float64), 3).tolist()
    others = {}
    for other in POSE_FORMATS:
        poses = to_c2w_opengl(matrices, other)
        if other != pose_format and spread_out(poses, box):
            others[other] = facing_share(poses, box)
    best = max(others, key=lambda other: others[other] or 0.0, default=None)
    if best is not None and (others[best] or 0.0) >= FACING_CLEAR:
        raise _wrong_format(where, pose_format, best, share, others[best])
    if share < 0.5:
        raise DatasetError(
            f"The cameras of {where} do not look at the scene box {box_text}: only {share:.0%} of the cameras "
            f"outside it have its centre within {VIEW_CONE_DEG:g} degrees of their optical axis, whichever way the "
            "poses are read. The scene is elsewhere: convert COLMAP models with tools/colmap_to_transforms.py (it "
            "fits the box and writes it as 'aabb'), or give the box with --scene_bbox.")


def _wrong_format(where: str, given: str, likely: str, share: float, likely_share: float) -> DatasetError:
    kind = "world-to-camera" if likely.startswith("w2c") else "camera-to-world"
    inverse = " (the inverse of what is expected)" if given[:3] != likely[:3] else ""
    axes = ""
    if given[4:] != likely[4:]:
        axes = (" in OpenCV axes (x right, y down, z forward), so read as OpenGL their optical axes point away "
                "from the scene" if likely.endswith("opencv") else " in OpenGL axes (x right, y up, z back)")
    return DatasetError(
        f"The poses of {where} look like {kind} matrices{inverse}{axes}: read as {given}, {share:.0%} of the "
        f"cameras look at the scene box; read as {likely}, {likely_share:.0%} do. Pass --pose_format {likely}, or "
        "rewrite the file's transform_matrix as camera-to-world in OpenGL axes.")
