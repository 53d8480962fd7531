"""Regularisers of the factorised grids (the reference's ``TVLoss`` and ``vectorDiffs``), shared
by every model, on grids stored channel-last (``models.grid_layout``)."""
from __future__ import annotations

import jittor as jt


def total_variation(grid: jt.Var) -> jt.Var:
    """Reference ``TVLoss`` of one plane or line: 2 * (mean squared difference along H + along W).

    grid: a plane [H, W, C] (the reference's [1, C, H, W]) or a line [L, C] (its [1, C, L, 1],
    whose width of 1 gives no horizontal term). Means are over the differences that exist.
    """
    if grid.ndim == 2:
        grid = grid.unsqueeze(1)
    height, width, channels = grid.shape
    vertical = jt.sqr(grid[1:] - grid[:-1]).sum()
    horizontal = jt.sqr(grid[:, 1:] - grid[:, :-1]).sum() if width > 1 else 0.0
    count_vertical = channels * (height - 1) * width
    count_horizontal = max(channels * height * (width - 1), 1)
    return 2.0 * (vertical / count_vertical + horizontal / count_horizontal)


def line_orthogonality(lines: list[jt.Var]) -> jt.Var:
    """Reference ``vectorDiffs``: mean |off-diagonal| of each line set's Gram matrix, summed.

    lines: [L, C] each (C components of length L); pushes components apart. The Gram matrix is
    a broadcast product summed over L, so the line is read as stored, without a transpose.
    """
    total = 0.0
    for line in lines:
        n_comp = line.shape[1]
        gram = (line.unsqueeze(2) * line.unsqueeze(1)).sum(0)
        off_diagonal = gram * (1.0 - jt.init.eye(n_comp, "float32"))
        total = total + off_diagonal.abs().sum() / (n_comp * (n_comp - 1))
    return total
