"""float32 arithmetic that reproduces what the reference's torch code computes, bit for bit.

Where the reference derives discrete quantities (grid sizes, voxel counts, grid coordinates)
from float32 tensors, a last-bit difference can change the result; these helpers follow
torch's evaluation order so they do not.
"""
from __future__ import annotations

import numpy as np


def linspace_f32(start: float, end: float, steps: int) -> np.ndarray:
    """``torch.linspace`` in float32: the first half counts up from ``start``, the second half
    counts down from ``end``, so both end points are exact."""
    start32, end32 = np.float32(start), np.float32(end)
    if steps == 1:
        return np.array([start32], dtype=np.float32)
    step = (end32 - start32) / np.float32(steps - 1)
    index = np.arange(steps)
    forward = start32 + index.astype(np.float32) * step
    backward = end32 - (steps - 1 - index).astype(np.float32) * step
    return np.where(index < steps // 2, forward, backward).astype(np.float32)
