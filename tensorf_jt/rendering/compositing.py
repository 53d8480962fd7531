"""The renderer: densities along a ray to per-sample weights, and weights to pixels.

The formulas are the reference's ``raw2alpha`` and the tail of ``TensorBase.forward``:
alpha_i = 1 - exp(-sigma_i * delta_i), T_i = prod_{j<i} (1 - alpha_j + 1e-10), w_i = alpha_i T_i.
Two forms: dense, on an [R, S] grid of samples (``raw2alpha``, ``accumulate``: the reference
path), and packed, on the kept samples of ``PackedSamples`` (``packed_weights``,
``packed_pixels``: the fused kernels).
"""
from __future__ import annotations

import jittor as jt

from tensorf_jt.kernels.packed_compositing import composite_weights, segment_sum
from tensorf_jt.kernels.ray_marching import PackedSamples


# The largest optical depth sigma * dist a sample may have in an unbounded scene (opacity
# 1 - exp(-15), 3e-7 short of 1). A sample of opacity exactly 1 -- the last background sample,
# whose gap reaches to infinity, or a wall far out in the background shell, with gaps of
# metres -- makes the transmittance factor 1 - alpha + 1e-10 exactly 0 in float32 (Jittor's
# -Ofast even drops the 1e-10), and its gradient divides by that.
MAX_OPTICAL_DEPTH = 15.0


def cap_optical_depth(sigma: jt.Var, dist: jt.Var) -> jt.Var:
    """``sigma`` lowered where sigma * dist would exceed ``MAX_OPTICAL_DEPTH`` (no gradient
    there: the sample is opaque either way); ``dist`` must not be negative."""
    return jt.minimum(sigma, MAX_OPTICAL_DEPTH / dist)


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
    weights: jt.Var, shares: jt.Var, z_vals: jt.Var, background_depth: jt.Var, white_background: bool
) -> tuple[jt.Var, jt.Var, jt.Var]:
    """Pixel colour, depth and opacity from per-sample weights.

    weights, z_vals: [R, S]; shares: [R, S, 3], each sample's w * rgb (0 where not shaded);
    background_depth: [R], the depth given to the transparent part of each pixel. Returns
    rgb_map [R, 3] (clamped to [0, 1]), depth_map [R] (no gradient, as in the reference) and
    acc_map [R].
    """
    with jt.no_grad():
        depth_sum = (weights * z_vals).sum(-1)
    return finish_pixels(shares.sum(-2), weights.sum(-1), depth_sum.stop_grad(), background_depth, white_background)


def finish_pixels(rgb_sum: jt.Var, acc_map: jt.Var, depth_sum: jt.Var, background_depth: jt.Var,
                  white_background: bool) -> tuple[jt.Var, jt.Var, jt.Var]:
    """Pixel values from per-ray sums of w * rgb [R, 3], w [R] and w * z [R] (no gradient):
    the background fills the transparent part, colours are clamped to [0, 1]."""
    rgb_map = rgb_sum + (1.0 - acc_map).unsqueeze(-1) if white_background else rgb_sum
    with jt.no_grad():
        depth_map = depth_sum + (1.0 - acc_map) * background_depth
    return rgb_map.clamp(min_v=0.0, max_v=1.0), depth_map.stop_grad(), acc_map


def packed_weights(sigma: jt.Var, dist: jt.Var, ray_offsets: jt.Var) -> jt.Var:
    """Compositing weights [N] of packed samples: sigma [N], dist [N] (scaled gaps), ray_offsets
    [R + 1] (``kernels.packed_compositing``: the same weights as ``raw2alpha``)."""
    return composite_weights(sigma, dist, ray_offsets)


def packed_pixels(weights: jt.Var, shares: jt.Var | None, shaded: jt.Var | None, samples: PackedSamples,
                  n_rays: int, background_depth: jt.Var, white_background: bool) -> tuple[jt.Var, jt.Var, jt.Var]:
    """``accumulate`` for packed samples: weights [N], shares [M, 3] (w * rgb) of the samples
    ``shaded`` [M] (None: none was shaded). Returns rgb_map [R, 3], depth_map [R] and acc_map [R]."""
    rgb_sum = jt.zeros((n_rays, 3), dtype="float32")
    if shares is not None:
        rgb_sum = segment_sum(shares, samples.ray_index[shaded], n_rays)
    with jt.no_grad():
        depth_sum = segment_sum(weights * samples.z, samples.ray_index, n_rays)
    acc = segment_sum(weights, samples.ray_index, n_rays)
    return finish_pixels(rgb_sum, acc, depth_sum.stop_grad(), background_depth, white_background)
