"""mip-NeRF 360's distortion loss, in its O(N) form: weights along each ray drawn together.

For a ray whose samples i have weights w_i at positions s_i (intervals of length d), the loss
is (Barron et al. 2022, eq. 15)

    L = sum_{i,j} w_i w_j |s_i - s_j|  +  1/3 sum_i w_i^2 d

It is small when a ray's weight sits in one short stretch and large when it is spread out:
it removes floaters and background fog. With the samples in order, the double sum is
2 sum_i w_i (s_i W_<i - (ws)_<i), prefix sums W_<i = sum_{j<i} w_j and (ws)_<i = sum_{j<i} w_j
s_j, so it costs O(N) (as DVGO v2 and localrf compute it). Positions are measured in samples:
s_i = (ordinal_i + 1/2) / S and d = 1 / S for a ray of S samples at most, which the unbounded
sampler spaces evenly in contracted space. The loss of a batch is the mean over its rays.
"""
from __future__ import annotations

import jittor as jt

from tensorf_jt.kernels.distortion import packed_distortion_per_ray
from tensorf_jt.kernels.ray_marching import PackedSamples


def dense_distortion(weights: jt.Var, ordinal: jt.Var, n_samples: int) -> jt.Var:
    """Mean distortion loss [1] of rays with weights [R, S] at sample ordinals [R, S] (in order
    along each ray wherever the weight is not zero), of at most ``n_samples`` samples a ray."""
    s = (ordinal.float32() + 0.5) / float(n_samples)
    ws = weights * s
    before = jt.cumsum(weights, dim=1) - weights
    ws_before = jt.cumsum(ws, dim=1) - ws
    pairs = 2.0 * (weights * (s * before - ws_before)).sum(1)
    own = jt.sqr(weights).sum(1) / (3.0 * n_samples)
    return (pairs + own).mean()


def packed_distortion(weights: jt.Var, samples: PackedSamples, n_samples: int) -> jt.Var:
    """``dense_distortion`` of packed samples: weights [N] of ``samples`` (with their ordinals)."""
    n_rays = samples.ray_offsets.shape[0] - 1
    return packed_distortion_per_ray(weights, samples.ordinal, samples.ray_offsets, n_samples).sum() / n_rays
