"""How the factorised grids are stored in memory, and how they are written to files.

The lookups (fused kernels and plain Jittor alike) read a plane as [H, W, C] and a line as
[L, C]: a texel's components next to each other. The parameters are stored that way, so a
training step copies neither them into that layout nor their gradients back. Files keep the
reference's layout -- planes [1, C, H, W], lines [1, C, L, 1] -- so checkpoints, training
states and PyTorch exports are what they were; these conversions run only when a file is
written or read, and around upsampling (bilinear resizing is defined on the reference layout).
"""
from __future__ import annotations

import jittor as jt


def plane_to_reference(plane: jt.Var) -> jt.Var:
    """[H, W, C] -> [1, C, H, W]."""
    return plane.permute(2, 0, 1).unsqueeze(0)


def plane_from_reference(plane: jt.Var) -> jt.Var:
    """[1, C, H, W] -> [H, W, C]."""
    return plane[0].permute(1, 2, 0)


def line_to_reference(line: jt.Var) -> jt.Var:
    """[L, C] -> [1, C, L, 1]."""
    return line.permute(1, 0).unsqueeze(0).unsqueeze(-1)


def line_from_reference(line: jt.Var) -> jt.Var:
    """[1, C, L, 1] -> [L, C]."""
    return line[0, :, :, 0].permute(1, 0)


PLANE = (plane_to_reference, plane_from_reference)
LINE = (line_to_reference, line_from_reference)
