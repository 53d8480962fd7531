"""Volume compositing: densities along a ray to per-sample weights, and weights to pixels.

The formulas are the reference's ``raw2alpha`` and the tail of ``TensorBase.forward``:
alpha_i = 1 - exp(-sigma_i * delta_i), T_i = prod_{j<i} (1 - alpha_j + 1e-10), w_i = alpha_i T_i.
"""
from __future__ import annotations

import jittor as jt


def raw2alpha(sigma: jt.Var, dist: jt.Var) -> tuple[jt.Var, jt.Var, jt.Var]:
    """Opacity, compositing weights and leftover transmittance of each ray.

    sigma, dist: [R, S] (dist already scaled by ``distance_scale``). Returns alpha [R, S],
    weights [R, S] and the transmittance past the last sample [R, 1].
    """
    alpha = 1.0 - jt.exp(-sigma * dist)
    ones = jt.ones((alpha.shape[0], 1), dtype=alpha.dtype)
    transmittance = jt.cumprod(jt.concat([ones, 1.0 - alpha + 1e-10], dim=1), dim=1)
    weights = alpha * transmittance[:, :-1]
    return alpha, weights, transmittance[:, -1:]


def accumulate(
    weights: jt.Var, rgb: jt.Var, z_vals: jt.Var, background_depth: jt.Var, white_background: bool
) -> tuple[jt.Var, jt.Var, jt.Var]:
    """Pixel colour, depth and opacity from per-sample weights.

    weights, z_vals: [R, S]; rgb: [R, S, 3]; background_depth: [R], the depth given to the
    transparent part of each pixel. Returns rgb_map [R, 3] (clamped to [0, 1]), depth_map [R]
    (no gradient, as in the reference) and acc_map [R].
    """
    with jt.no_grad():
        depth_sum = (weights * z_vals).sum(-1)
    return finish_pixels((weights.unsqueeze(-1) * rgb).sum(-2), weights.sum(-1), depth_sum.stop_grad(),
                         background_depth, white_background)


def finish_pixels(rgb_sum: jt.Var, acc_map: jt.Var, depth_sum: jt.Var, background_depth: jt.Var,
                  white_background: bool) -> tuple[jt.Var, jt.Var, jt.Var]:
    """Pixel values from per-ray sums of w * rgb [R, 3], w [R] and w * z [R] (no gradient):
    the background fills the transparent part, colours are clamped to [0, 1]."""
    rgb_map = rgb_sum + (1.0 - acc_map).unsqueeze(-1) if white_background else rgb_sum
    with jt.no_grad():
        depth_map = depth_sum + (1.0 - acc_map) * background_depth
    return rgb_map.clamp(min_v=0.0, max_v=1.0), depth_map.stop_grad(), acc_map
