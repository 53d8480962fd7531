"""Refusing cameras that cannot be right: non-finite numbers, poses that are not rigid transforms.

A NaN in one frame's matrix would otherwise turn that view's rays into NaN and train on
silently (every sample of those rays lands nowhere); a scaled or sheared rotation bends every
ray of the view. The loaders call these checks on what they read and raise ``DatasetError``
naming the file, the frame and what is wrong.
"""
from __future__ import annotations

import math

import numpy as np

from tensorf_jt.errors import DatasetError

# How far R^T R may be from the identity (and a 4x4 pose's last row from [0, 0, 0, 1]). Real
# camera poses are orthonormal to ~1e-6 (floats written as text); this refuses scaled,
# sheared or corrupted matrices, not rounding.
RIGID_TOLERANCE = 1e-3


def check_pose(matrix, where: str) -> np.ndarray:
    """``matrix`` as a float64 camera-to-world [3 or 4, 4], refused unless finite and rigid.

    ``where`` names the file and frame for the message (e.g. "frame 3 ('./train/r_3') of 'x.json'").
    """
    try:
        pose = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        raise DatasetError(f"The camera pose of {where} is not a matrix of numbers.") from None
    if pose.shape not in ((3, 4), (4, 4)):
        raise DatasetError(f"The camera pose of {where} has shape {list(pose.shape)}; expected 3x4 or 4x4.")
    if not np.all(np.isfinite(pose)):
        bad = [f"[{r}][{c}]" for r, c in zip(*np.nonzero(~np.isfinite(pose)))]
        raise DatasetError(f"The camera pose of {where} holds NaN or infinity (at {', '.join(bad[:4])}). "
                           "Fix or remove that frame.")
    if pose.shape == (4, 4) and np.abs(pose[3] - (0.0, 0.0, 0.0, 1.0)).max() > RIGID_TOLERANCE:
        raise DatasetError(f"The camera pose of {where} is not a rigid transform: its last row is "
                           f"{np.round(pose[3], 6).tolist()} instead of [0, 0, 0, 1].")
    rotation = pose[:3, :3]
    deviation = float(np.abs(rotation.T @ rotation - np.eye(3)).max())
    if deviation > RIGID_TOLERANCE:
        raise DatasetError(f"The camera pose of {where} is not a rigid transform: its rotation is not orthonormal "
                           f"(R^T R is off the identity by up to {deviation:.3g}; tolerance {RIGID_TOLERANCE:g}). "
                           "Scale or shear in a camera matrix bends every ray; fix the pose.")
    determinant = float(np.linalg.det(rotation))
    if determinant < 0:
        raise DatasetError(f"The camera pose of {where} is a reflection (determinant {determinant:.3f}), not a "
                           "rotation: an axis of the camera is flipped. Fix the pose's convention.")
    return pose


def _number(value, name: str, where: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise DatasetError(f"'{name}' of {where} is {value!r}, not a number.") from None


def check_positive(value, name: str, where: str) -> float:
    """A camera number (focal length, field of view, near or far bound) that must be finite and > 0."""
    number = _number(value, name, where)
    if not math.isfinite(number) or number <= 0:
        raise DatasetError(f"'{name}' of {where} is {number:g}; it must be a finite positive number.")
    return number


def check_field_of_view(angle, name: str, where: str) -> float:
    """A field of view in radians: finite and strictly between 0 and pi."""
    angle = check_positive(angle, name, where)
    if angle >= math.pi:
        raise DatasetError(f"'{name}' of {where} is {angle:g} radians; a pinhole camera's field of view is "
                           "below pi (180 degrees). Is it in degrees?")
    return angle


def check_finite(value, name: str, where: str) -> float:
    """A camera number that may be any finite value (a principal point, say)."""
    number = _number(value, name, where)
    if not math.isfinite(number):
        raise DatasetError(f"'{name}' of {where} is {number:g}; it must be a finite number.")
    return number
