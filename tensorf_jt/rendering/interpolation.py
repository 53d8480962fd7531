"""Grid lookups with ``align_corners=True`` and zero padding, as ``F.grid_sample`` does them.

The reference samples its planes, lines and alpha volume with ``F.grid_sample``. Jittor's
``nn.grid_sample`` matches it numerically but is assembled from generic reindex ops and is
several times slower than a lookup written as weighted row gathers, so this module writes
the interpolation out: a normalised coordinate c in [-1, 1] lands on pixel (c + 1) / 2 * (size - 1);
corners outside the grid contribute zero.

Grids are passed channel-last (rows of the flattened grid hold all channels of one texel), so
each corner lookup gathers contiguous memory.
"""
from __future__ import annotations

import jittor as jt


def _to_pixel(coord: jt.Var, size: int) -> tuple[jt.Var, jt.Var]:
    """Split a normalised coordinate into its lower texel index (int32) and the fraction above it."""
    pixel = (coord + 1.0) * (0.5 * (size - 1))
    lower = jt.floor(pixel)
    return lower.int32(), pixel - lower


def _corner(index: jt.Var, offset: int, size: int) -> tuple[jt.Var, jt.Var]:
    """Index of a corner clamped into the grid, and a float32 flag for whether it was inside."""
    shifted = index + offset
    inside = ((shifted >= 0) & (shifted < size)).float32()
    return shifted.clamp(min_v=0, max_v=size - 1), inside


def linear_sample(line: jt.Var, t: jt.Var) -> jt.Var:
    """Sample a 1-D grid at normalised positions.

    line: [L, C] channel-last values; t: [N] in [-1, 1]. Returns [N, C].
    """
    length = line.shape[0]
    lower, frac = _to_pixel(t, length)
    result = None
    for offset, weight in ((0, 1.0 - frac), (1, frac)):
        index, inside = _corner(lower, offset, length)
        term = line[index] * (weight * inside).unsqueeze(1)
        result = term if result is None else result + term
    return result


def bilinear_sample(plane: jt.Var, u: jt.Var, v: jt.Var) -> jt.Var:
    """Sample a 2-D grid at normalised positions.

    plane: [H, W, C] channel-last values; u indexes W (grid_sample's x), v indexes H (its y),
    both [N] in [-1, 1]. Returns [N, C].
    """
    height, width, channels = plane.shape
    rows = plane.reshape(height * width, channels)
    x0, fx = _to_pixel(u, width)
    y0, fy = _to_pixel(v, height)
    result = None
    for dy, wy in ((0, 1.0 - fy), (1, fy)):
        y, inside_y = _corner(y0, dy, height)
        for dx, wx in ((0, 1.0 - fx), (1, fx)):
            x, inside_x = _corner(x0, dx, width)
            weight = wx * wy * inside_x * inside_y
            term = rows[y * width + x] * weight.unsqueeze(1)
            result = term if result is None else result + term
    return result


def trilinear_sample(volume: jt.Var, coords: jt.Var) -> jt.Var:
    """Sample a single-channel 3-D grid at normalised positions.

    volume: [D, H, W]; coords: [N, 3] as (x, y, z) with x indexing W, y indexing H and z
    indexing D -- grid_sample's convention, which is why callers store volumes z-first.
    Returns [N].
    """
    depth, height, width = volume.shape
    flat = volume.reshape(-1)
    x0, fx = _to_pixel(coords[:, 0], width)
    y0, fy = _to_pixel(coords[:, 1], height)
    z0, fz = _to_pixel(coords[:, 2], depth)
    result = None
    for dz, wz in ((0, 1.0 - fz), (1, fz)):
        z, inside_z = _corner(z0, dz, depth)
        for dy, wy in ((0, 1.0 - fy), (1, fy)):
            y, inside_y = _corner(y0, dy, height)
            for dx, wx in ((0, 1.0 - fx), (1, fx)):
                x, inside_x = _corner(x0, dx, width)
                weight = wx * wy * wz * inside_x * inside_y * inside_z
                term = flat[(z * height + y) * width + x] * weight
                result = term if result is None else result + term
    return result
