"""Importance resampling: a ray's few final samples, placed where a first pass found its weight.

An unbounded model spreads part of each ray's weight thinly over the box and the shell, and
shading every sample above the weight threshold (appearance features, the MLP and their
backward pass) makes its steps several times a bounded model's (docs/UNBOUNDED.md). With
``--importance_samples K`` the renderer makes two passes over each ray instead:

- The first evaluates density only, without gradients, at the sampler's samples (kept by the
  alpha grid as usual) and composites it into weights w_i over the intervals [z_i, z_i +
  dist_i]. Those weights, padded by an even share of ``UNIFORM_PADDING`` times their sum (so
  that no kept interval is ruled out for good), define a piecewise-constant distribution along
  the ray. Its inverse CDF at the K + 1 stratified levels u_k = (k + j - 1/2) / K (clamped to
  [0, 1); j one uniform jitter per ray in training, 1/2 otherwise) gives the edges of K bins,
  each holding about 1/K of the ray's weight.
- The second evaluates the field, with gradients, at each bin's middle with the bin's width as
  its gap, and renders the pixel from those K samples alone, as mip-NeRF 360 and nerfacto
  render from their final samples (here proposed by the model's own density instead of a
  separate proposal network). A bin that spans empty space between two surfaces has its
  middle in that empty space, so it adds no opacity.
"""
from __future__ import annotations

import jittor as jt

from tensorf_jt.kernels.resampling import packed_importance_edges
from tensorf_jt.kernels.ray_marching import PackedSamples

# The share of a ray's distribution, relative to its weights' sum, spread evenly over its kept
# intervals: bins enough away from the weight to find what the first pass missed. On the
# built-in room (docs/UNBOUNDED.md) 0.01 lost 1 dB to rendering every sample; 0.1 to 0.25 lost
# nothing; 0.5 lost 0.2 dB.
UNIFORM_PADDING = 0.25


def importance_edges(start: jt.Var, end: jt.Var, weights: jt.Var, n_bins: int, jitter: jt.Var | None) -> jt.Var:
    """Edges [R, n_bins + 1] (ascending distances along each ray) of ``n_bins`` bins that split
    the padded distribution of weights [R, S] over intervals [start, end] [R, S] (in order
    along the ray; empty intervals hold no weight) into about equal shares; ``jitter`` [R] in
    [0, 1) shifts the levels (None: by half a share). Levels past the distribution's end (float
    rounding) take the end of the ray's last interval; a ray without intervals gets edges at 0.
    The plain-Jittor specification of the fused ``packed_edges``."""
    valid = end > start
    valid_f = valid.float32()
    n_valid = valid_f.sum(1, keepdims=True)
    padded = weights.detach().clamp(min_v=0.0) * valid_f
    total = padded.sum(1, keepdims=True)
    padded = padded + valid_f * ((UNIFORM_PADDING * total + 1e-12) / n_valid.clamp(min_v=1.0))
    share = padded / jt.maximum(padded.sum(1, keepdims=True), jt.full_like(total, 1e-30))
    cdf_end = jt.cumsum(share, dim=1)
    cdf_start = cdf_end - share
    n_rays, width = share.shape
    j = jt.full((n_rays, 1), 0.5, dtype="float32") if jitter is None else jitter.float32().reshape(n_rays, 1)
    levels = ((jt.arange(n_bins + 1).float32().unsqueeze(0) + j - 0.5) / float(n_bins)).clamp(
        min_v=0.0, max_v=1.0 - 1e-5)
    # The first interval whose cumulative share exceeds each level (a searchsorted, which the
    # Jittor notes keep off hot graphs on CUDA), no later than the ray's last interval.
    below = (cdf_end.unsqueeze(1) <= levels.unsqueeze(2)).int32().sum(2)
    last = (valid.int32() * jt.arange(width).int32().unsqueeze(0)).max(1, keepdims=True)
    flat = (jt.arange(n_rays).int32().unsqueeze(1) * width + jt.minimum(below, last)).reshape(-1)

    def at(values: jt.Var) -> jt.Var:
        return values.reshape(-1)[flat].reshape(n_rays, n_bins + 1)

    fraction = ((levels - at(cdf_start)) / jt.maximum(at(share), jt.full_like(levels, 1e-12))).clamp(
        min_v=0.0, max_v=1.0)
    left = at(start)
    edges = jt.ternary(n_valid > 0, left + (at(end) - left) * fraction, jt.zeros_like(levels))
    return edges.stop_grad()


def packed_edges(samples: PackedSamples, weights: jt.Var, n_bins: int, jitter: jt.Var | None) -> jt.Var:
    """``importance_edges`` of packed samples with weights [N], by the fused kernel."""
    n_rays = samples.ray_offsets.shape[0] - 1
    j = jt.full((n_rays,), 0.5, dtype="float32") if jitter is None else jitter
    return packed_importance_edges(samples.z, samples.dist, weights.detach(), samples.ray_offsets, j, n_bins,
                                   UNIFORM_PADDING)


def bins(edges: jt.Var) -> tuple[jt.Var, jt.Var]:
    """The resampled samples of bins with ``edges`` [R, K + 1]: their distances along the ray
    (the bins' middles) and their gaps (the bins' widths), each [R, K]."""
    middles = (0.5 * (edges[:, :-1] + edges[:, 1:])).stop_grad()
    return middles, (edges[:, 1:] - edges[:, :-1]).clamp(min_v=0.0).stop_grad()


__all__ = ["UNIFORM_PADDING", "bins", "importance_edges", "packed_edges"]
