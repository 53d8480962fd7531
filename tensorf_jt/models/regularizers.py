"""Regularisers of the factorised grids (the reference's ``TVLoss`` and ``vectorDiffs``), shared by every model."""
from __future__ import annotations

import jittor as jt


def total_variation(grid: jt.Var) -> jt.Var:
    """Reference ``TVLoss``: 2 * (mean squared vertical + horizontal difference) / batch.

    grid: [B, C, H, W]. Means are over the differences that exist; a width-1 grid (a line)
    contributes no horizontal term.
    """
    batch, channels, height, width = grid.shape
    vertical = jt.sqr(grid[:, :, 1:, :] - grid[:, :, :-1, :]).sum()
    horizontal = jt.sqr(grid[:, :, :, 1:] - grid[:, :, :, :-1]).sum() if width > 1 else 0.0
    count_vertical = channels * (height - 1) * width
    count_horizontal = max(channels * height * (width - 1), 1)
    return 2.0 * (vertical / count_vertical + horizontal / count_horizontal) / batch


def line_orthogonality(lines: list[jt.Var]) -> jt.Var:
    """Reference ``vectorDiffs``: mean |off-diagonal| of each line set's Gram matrix, summed.

    lines: [1, C, L, 1] each (C components of length L); pushes components apart.
    """
    total = 0.0
    for line in lines:
        n_comp, n_size = line.shape[1], line.shape[2]
        vectors = line.reshape(n_comp, n_size)
        gram = jt.matmul(vectors, vectors.transpose(1, 0))
        off_diagonal = gram * (1.0 - jt.init.eye(n_comp, "float32"))
        total = total + off_diagonal.abs().sum() / (n_comp * (n_comp - 1))
    return total
