"""The renderer: rays to pixels through a field and its sampler, on dense or packed samples.

Both follow the reference's ``TensorBase.forward``: the field's sampler places samples and
drops those outside the grid or the alpha grid, the field gives density where samples remain,
compositing turns densities into weights, and only samples whose weight exceeds the field's
``rayMarch_weight_thres`` are shaded (in unbounded training, given per-ray draws, a random
share of the faint ones: ``shading_selection``). ``render_dense`` works on the [R, S] grid of every
sample in plain Jittor (the reference path, also every NDC scene's); ``render_packed`` on the
kept samples only, with the fused kernels. ``render_resampled`` (unbounded scenes with
``importance_samples``) renders each ray from a few samples placed by a density-only first
pass over the sampler's (``rendering.resampling``). Each returns rgb [R, 3], depth [R], opacity [R] and
the rays' mean distortion loss (0 unless the sampler numbers its samples: unbounded scenes).

The field (a ``Field``, such as ``models.TensorBase``) provides ``sampler``, ``alphaMask``,
``density`` and ``shade`` at model-space points, ``normalize_coord``, ``model_points`` and
its settings. Rays that carry trainable pose corrections (``corrected``) keep the sampler's
distances along them as constants and take their sample positions from the corrected rays,
so that the corrections receive gradients on both paths.
"""
from __future__ import annotations

from typing import Protocol

import jittor as jt

from tensorf_jt.rendering import compositing, distortion as distortion_loss
from tensorf_jt.rendering.resampling import bins, importance_edges, packed_edges
from tensorf_jt.rendering.samplers import DenseSamples
from tensorf_jt.rendering.shading_selection import ShadingPlan, plan_shading, roulette_draws, weighted_colours
from tensorf_jt.runtime.profiling import stage

Maps = tuple[jt.Var, jt.Var, jt.Var, jt.Var]


class Field(Protocol):
    """What the renderer asks of a field (``models.TensorBase`` is one)."""

    sampler: object
    alphaMask: object
    nSamples: int
    distance_scale: float
    rayMarch_weight_thres: float
    shading_roulette: float
    importance_samples: int
    unbounded: bool
    fused: bool
    jitter_samples: bool

    def density(self, xyz: jt.Var) -> jt.Var: ...

    def shade(self, points: jt.Var, viewdirs: jt.Var, codes: jt.Var | None = None) -> jt.Var: ...

    def normalize_coord(self, xyz: jt.Var) -> jt.Var: ...

    def model_points(self, xyz: jt.Var) -> jt.Var: ...


def render_dense(field: Field, rays_chunk: jt.Var, white: bool, is_train: bool, n_samples: int, ndc_ray: bool,
                 jitter: jt.Var | None, with_distortion: bool, codes: jt.Var | None, corrected: bool,
                 ray_draws: jt.Var | None = None) -> Maps:
    """Rays [R, 6] rendered on the dense sample grid; ``codes`` [R, appearance_dim] or None;
    ``ray_draws`` [R, 2]: two uniform numbers per ray for the shading roulette (None: none)."""
    rays_o, rays_d = rays_chunk[:, :3], rays_chunk[:, 3:6]
    n_rays = rays_chunk.shape[0]
    with stage("sampling"):
        if ndc_ray:
            samples = field.sampler.dense_ndc(rays_o, rays_d, n_samples, is_train and field.jitter_samples,
                                             field.alphaMask, field.fused)
        else:
            samples = field.sampler.dense(rays_o.detach(), rays_d.detach(), n_samples, jitter, field.alphaMask,
                                         field.fused)
            if corrected:
                along = samples.z.unsqueeze(2) * rays_d.unsqueeze(1)
                samples.xyz = field.model_points((rays_o.unsqueeze(1) + along).reshape(-1, 3))
                samples.viewdirs = rays_d
    n_samples = samples.z.shape[1]
    sigma = _dense_density(field, samples)

    with stage("compositing"):
        dist = samples.dist * field.distance_scale
        if field.unbounded:
            sigma = compositing.cap_optical_depth(sigma, dist)
        _, weights, _ = compositing.raw2alpha(sigma, dist)
        flat_weights = weights.reshape(-1)
        plan = _plan(field, flat_weights, ray_draws, lambda draws: draws.unsqueeze(1).broadcast(
            (n_rays, n_samples)).reshape(-1), None if samples.ordinal is None else samples.ordinal.reshape(-1))
    shaded, shares = _shade(field, plan, flat_weights, samples.xyz, lambda index: index // n_samples,
                            samples.viewdirs, codes)
    dense_shares = jt.zeros((n_rays * n_samples, 3), dtype="float32")
    if shaded is not None:
        dense_shares[shaded] = shares

    with stage("compositing"):
        maps = compositing.accumulate(weights, dense_shares.reshape(n_rays, n_samples, 3), samples.z,
                                      rays_chunk[:, -1], white)
        distortion = (distortion_loss.dense_distortion(weights, samples.ordinal, field.nSamples)
                      if with_distortion and samples.ordinal is not None else jt.zeros(1))
    return maps + (distortion,)


def render_packed(field: Field, rays_chunk: jt.Var, white: bool, n_samples: int, jitter: jt.Var | None,
                  with_distortion: bool, codes: jt.Var | None, corrected: bool,
                  ray_draws: jt.Var | None = None) -> Maps:
    """Rays [R, 6] rendered on their kept samples with the fused kernels (the marching kernels
    give positions without gradients: corrected rays' positions are recomputed); ``ray_draws``
    as for ``render_dense``."""
    n_rays = rays_chunk.shape[0]
    rays_o, viewdirs = rays_chunk[:, :3], rays_chunk[:, 3:6]
    with stage("sampling"):
        samples = field.sampler.packed(rays_o.detach(), viewdirs.detach(), n_samples, jitter, field.alphaMask)
        if corrected and samples.count > 0:
            along = samples.z.unsqueeze(1) * viewdirs[samples.ray_index]
            samples.xyz = field.model_points(rays_o[samples.ray_index] + along)
    if samples.count == 0:
        zeros = jt.zeros(n_rays, dtype="float32")
        maps = compositing.finish_pixels(jt.zeros((n_rays, 3), dtype="float32"), zeros, zeros,
                                         rays_chunk[:, -1], white)
        return maps + (jt.zeros(1),)
    sigma = field.density(samples.xyz)
    with stage("compositing"):
        dist = samples.dist * field.distance_scale
        if field.unbounded:
            sigma = compositing.cap_optical_depth(sigma, dist)
        weights = compositing.packed_weights(sigma, dist, samples.ray_offsets)
        plan = _plan(field, weights, ray_draws, lambda draws: draws[samples.ray_index], samples.ordinal)
    shaded, shares = _shade(field, plan, weights, samples.xyz, lambda index: samples.ray_index[index], viewdirs,
                            codes)
    with stage("compositing"):
        maps = compositing.packed_pixels(weights, shares, shaded, samples, n_rays, rays_chunk[:, -1], white)
        distortion = (distortion_loss.packed_distortion(weights, samples, field.nSamples)
                      if with_distortion and samples.ordinal is not None else jt.zeros(1))
    return maps + (distortion,)


def render_resampled(field: Field, rays_chunk: jt.Var, n_samples: int, jitter: jt.Var | None,
                     bin_jitter: jt.Var | None, codes: jt.Var | None, ray_draws: jt.Var | None = None) -> Maps:
    """Rays [R, 6] of an unbounded scene rendered from ``field.importance_samples`` samples each,
    placed by a first, density-only pass over the sampler's samples (``rendering.resampling``;
    packed with the fused kernels, dense otherwise); ``bin_jitter`` [R] stratifies the bins
    (None: the middle of each share). Rays that carry pose corrections take the positions of
    the samples from the corrected rays, as in ``render_dense``. The distortion loss is 0: the
    bins are not evenly spaced."""
    n_rays, n_bins = rays_chunk.shape[0], field.importance_samples
    rays_o, rays_d = rays_chunk[:, :3], rays_chunk[:, 3:6]
    with stage("sampling"), jt.no_grad():
        z, gaps = bins(_first_pass_edges(field, rays_o.detach(), rays_d.detach(), n_samples, jitter, bin_jitter,
                                         n_bins))
    xyz = field.model_points((rays_o.unsqueeze(1) + rays_d.unsqueeze(1) * z.unsqueeze(2)).reshape(-1, 3))
    sigma = field.density(xyz).reshape(n_rays, n_bins)
    with stage("compositing"):
        dist = gaps * field.distance_scale
        _, weights, _ = compositing.raw2alpha(compositing.cap_optical_depth(sigma, dist), dist)
        flat_weights = weights.reshape(-1)
        ordinal = jt.arange(n_bins).int32().unsqueeze(0).broadcast((n_rays, n_bins)).reshape(-1)
        plan = _plan(field, flat_weights, ray_draws, lambda draws: draws.unsqueeze(1).broadcast(
            (n_rays, n_bins)).reshape(-1), ordinal)
    shaded, shares = _shade(field, plan, flat_weights, xyz, lambda index: index // n_bins, rays_d, codes)
    dense_shares = jt.zeros((n_rays * n_bins, 3), dtype="float32")
    if shaded is not None:
        dense_shares[shaded] = shares
    with stage("compositing"):
        maps = compositing.accumulate(weights, dense_shares.reshape(n_rays, n_bins, 3), z, rays_chunk[:, -1], False)
    return maps + (jt.zeros(1),)


def _first_pass_edges(field: Field, rays_o: jt.Var, rays_d: jt.Var, n_samples: int, jitter: jt.Var | None,
                      bin_jitter: jt.Var | None, n_bins: int) -> jt.Var:
    """The first pass of ``render_resampled``: bin edges [R, n_bins + 1] from the compositing
    weights of the sampler's samples."""
    n_rays = rays_o.shape[0]
    if field.fused:
        samples = field.sampler.packed(rays_o, rays_d, n_samples, jitter, field.alphaMask)
        if samples.count == 0:
            return jt.zeros((n_rays, n_bins + 1), dtype="float32")
        dist = samples.dist * field.distance_scale
        weights = compositing.packed_weights(compositing.cap_optical_depth(field.density(samples.xyz), dist), dist,
                                             samples.ray_offsets)
        return packed_edges(samples, weights, n_bins, bin_jitter)
    samples = field.sampler.dense(rays_o, rays_d, n_samples, jitter, field.alphaMask, False)
    dist = samples.dist * field.distance_scale
    _, weights, _ = compositing.raw2alpha(compositing.cap_optical_depth(_dense_density(field, samples), dist), dist)
    kept = jt.zeros(samples.z.numel(), dtype="bool")
    if samples.kept.shape[0] > 0:
        kept[samples.kept] = True
    end = jt.ternary(kept.reshape(samples.z.shape), samples.z + samples.dist, samples.z)
    return importance_edges(samples.z, end, weights, n_bins, bin_jitter)


def _dense_density(field: Field, samples: DenseSamples) -> jt.Var:
    """Density [R, S] of dense samples: the field's at the kept ones, 0 elsewhere."""
    sigma = jt.zeros(samples.z.numel(), dtype="float32")
    if samples.kept.shape[0] > 0:
        sigma[samples.kept] = field.density(samples.xyz[samples.kept])
    return sigma.reshape(samples.z.shape)


def _plan(field: Field, weights: jt.Var, ray_draws: jt.Var | None, per_sample, ordinal: jt.Var | None) -> ShadingPlan:
    """The shading plan of samples of weights [N]: the roulette's when there are draws [R, 2]
    and the samples are numbered (``ordinal`` [N]); ``per_sample`` spreads a per-ray [R] Var to them."""
    if ray_draws is None or ordinal is None:
        return plan_shading(weights, field.rayMarch_weight_thres)
    value_draws = roulette_draws(per_sample(ray_draws[:, 0]), ordinal)
    grad_draws = roulette_draws(per_sample(ray_draws[:, 1]), ordinal)
    return plan_shading(weights, field.rayMarch_weight_thres, field.shading_roulette, value_draws, grad_draws)


def _shade(field: Field, plan: ShadingPlan, weights: jt.Var, xyz: jt.Var, ray_of, viewdirs: jt.Var,
           codes: jt.Var | None) -> tuple[jt.Var | None, jt.Var | None]:
    """Shade what ``plan`` says: flat positions [M] of the shaded samples and their shares of
    their pixels, w * colour [M, 3] (None, None: none). ``ray_of`` maps positions to rays."""
    def colours(index: jt.Var) -> jt.Var:
        rays = ray_of(index)
        return field.shade(field.normalize_coord(xyz[index]), viewdirs[rays], None if codes is None else codes[rays])

    positions, shares = [], []
    if plan.graded.shape[0] > 0:
        positions.append(plan.graded)
        shares.append(weighted_colours(weights[plan.graded], colours(plan.graded), plan.value_scale,
                                       plan.grad_scale))
    if plan.has_value_only:
        with jt.no_grad():
            unscaled = weighted_colours(weights[plan.value_only], colours(plan.value_only), None, None)
        positions.append(plan.value_only)
        shares.append((unscaled * plan.value_only_scale.unsqueeze(1)).stop_grad())
    if not positions:
        return None, None
    if len(positions) == 1:
        return positions[0], shares[0]
    return jt.concat(positions), jt.concat(shares)
