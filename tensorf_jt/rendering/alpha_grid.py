"""The alpha grid: a coarse binary occupancy volume that lets ray marching skip empty space.

Built from the field's dense opacity (reference ``updateAlphaMask``): opacity on a regular grid,
dilated by a 3x3x3 max-pool, thresholded at ``alphaMask_thres``. Lookups are trilinear, so a
sample counts as occupied when any of its eight neighbouring voxels is.

The volume is stored z-first ([Z, Y, X]) because grid lookups take (x, y, z) coordinates with
x along the last axis (``F.grid_sample``'s convention, kept so checkpoints match the reference).
"""
from __future__ import annotations

import numpy as np
import jittor as jt

from tensorf_jt.rendering.interpolation import trilinear_sample
from tensorf_jt.kernels.layout import permute
from tensorf_jt.kernels.ray_marching import alpha_lookup


class AlphaGridMask:
    """Binary occupancy volume over ``aabb``; ``sample_alpha`` says whether points may hold density."""

    def __init__(self, aabb: jt.Var, alpha_volume: jt.Var) -> None:
        """aabb: [2, 3] float32; alpha_volume: [Z, Y, X] float32 of 0s and 1s."""
        self.aabb = aabb.float32().stop_grad()
        # Read once here: ray marching passes the box to its kernels as numbers at every step.
        self.box: np.ndarray = self.aabb.numpy()
        self.alpha_volume = alpha_volume.float32().stop_grad()
        self.inv_half_size = 2.0 / (self.aabb[1] - self.aabb[0])

    @property
    def grid_size(self) -> list[int]:
        """Voxel counts in (x, y, z) order, like the model's ``gridSize``."""
        depth, height, width = self.alpha_volume.shape
        return [width, height, depth]

    def sample_alpha(self, xyz: jt.Var, fused: bool = True) -> jt.Var:
        """Interpolated occupancy at world points xyz [N, 3] -> [N]; > 0 means keep the sample.
        ``fused``: through the fused kernel, else the reference path's trilinear lookup."""
        if fused:
            return alpha_lookup(self, xyz)
        normalised = (xyz - self.aabb[0]) * self.inv_half_size - 1.0
        return trilinear_sample(self.alpha_volume, normalised)

    def occupied_fraction(self) -> float:
        return float(self.alpha_volume.mean().item())

    def packed(self) -> dict[str, object]:
        """Checkpoint entries in the reference's layout: shape (1, 1, Z, Y, X), bit-packed mask, aabb.

        The bits are packed with numpy (as the reference does) and stored back as a uint8 Var so
        a loaded checkpoint holds Vars only.
        """
        volume = self.alpha_volume.numpy() > 0.5
        return {
            "alphaMask.shape": (1, 1) + tuple(int(s) for s in volume.shape),
            "alphaMask.mask": jt.array(np.packbits(volume.reshape(-1))),
            "alphaMask.aabb": self.aabb.clone(),
        }

    @classmethod
    def unpacked(cls, shape: tuple[int, ...], bits: jt.Var | np.ndarray, aabb: jt.Var) -> "AlphaGridMask":
        """Inverse of ``packed``; ``shape`` may also be a bare (Z, Y, X)."""
        bits = bits.numpy() if isinstance(bits, jt.Var) else np.asarray(bits)
        count = int(np.prod(shape))
        volume = np.unpackbits(bits.astype(np.uint8))[:count].reshape(tuple(shape)[-3:]).astype(np.float32)
        aabb = aabb if isinstance(aabb, jt.Var) else jt.array(np.asarray(aabb, dtype=np.float32))
        return cls(aabb, jt.array(volume))


def binarize_alpha(dense_alpha: jt.Var, threshold: float) -> jt.Var:
    """Dense opacity [X, Y, Z] -> binary occupancy [Z, Y, X]: clamp, 3x3x3 max-pool, threshold."""
    alpha = permute(dense_alpha.clamp(min_v=0.0, max_v=1.0), (2, 1, 0))
    for axis in range(3):
        alpha = _max_of_neighbours(alpha, axis)
    return (alpha >= threshold).float32()


def _max_of_neighbours(volume: jt.Var, axis: int) -> jt.Var:
    """Each voxel's maximum with its two neighbours along ``axis``, zero beyond the edges.

    Three of these make the reference's 3x3x3 max-pool with padding 1 (opacities are not negative,
    so zero padding is the pool's own). Jittor's max_pool3d refuses any side of 3 voxels or fewer,
    which the smallest grids a user may ask for have.
    """
    length = volume.shape[axis]
    if length == 1:
        return volume
    shape = list(volume.shape)
    shape[axis] = 1
    edge = jt.zeros(shape, dtype=volume.dtype)
    lead = (slice(None),) * axis
    before = jt.concat([edge, volume[lead + (slice(0, length - 1),)]], dim=axis)
    after = jt.concat([volume[lead + (slice(1, length),)], edge], dim=axis)
    return jt.maximum(volume, jt.maximum(before, after))


def occupied_bounds(occupancy: jt.Var, dense_xyz: jt.Var) -> jt.Var | None:
    """Tight box [2, 3] around occupied voxels; occupancy [Z, Y, X], dense_xyz [X, Y, Z, 3].

    Returns None when no voxel is occupied, so callers can keep their current box instead of
    crashing as the reference does (its issues #4 and #60).
    """
    points = dense_xyz.permute(2, 1, 0, 3).reshape(-1, 3)
    index = jt.nonzero(occupancy.reshape(-1) > 0.5).reshape(-1)
    if index.shape[0] == 0:
        return None
    occupied = points[index]
    return jt.stack([occupied.min(0), occupied.max(0)], dim=0)
