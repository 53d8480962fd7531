"""Turning depth maps into pictures."""
from __future__ import annotations

import numpy as np


def jet(values: np.ndarray) -> np.ndarray:
    """The classic 'jet' colour map: values in [0, 1] -> RGB float in [0, 1] (blue, cyan, yellow, red)."""
    v = np.clip(values, 0.0, 1.0)[..., None]
    ramps = np.array([0.75, 0.5, 0.25])  # centres of the red, green and blue humps
    return np.clip(1.5 - np.abs(4.0 * v - 4.0 * ramps), 0.0, 1.0)


def depth_to_rgb(depth: np.ndarray, near_far) -> np.ndarray:
    """Depth [H, W] -> uint8 [H, W, 3]; near is blue, far is red, outside the range clips.

    Like the reference's ``visualize_depth_numpy`` with a fixed range, but clipped instead of
    wrapping around in uint8, and in RGB order (the reference writes OpenCV's BGR as RGB).
    """
    near, far = float(near_far[0]), float(near_far[1])
    normalised = (np.nan_to_num(depth) - near) / (far - near + 1e-8)
    return np.round(jet(normalised) * 255).astype(np.uint8)
