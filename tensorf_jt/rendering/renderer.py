"""The renderer: rays to pixels through a field and its sampler, on dense or packed samples.

Both follow the reference's ``TensorBase.forward``: the field's sampler places samples and
drops those outside the grid or the alpha grid, the field gives density where samples remain,
compositing turns densities into weights, and only samples whose weight exceeds the field's
``rayMarch_weight_thres`` are shaded. ``render_dense`` works on the [R, S] grid of every
sample in plain Jittor (the reference path, also every NDC scene's); ``render_packed`` on the
kept samples only, with the fused kernels. Each returns rgb [R, 3], depth [R], opacity [R] and
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
from tensorf_jt.rendering.samplers import flat_indices
from tensorf_jt.runtime.profiling import stage

Maps = tuple[jt.Var, jt.Var, jt.Var, jt.Var]


class Field(Protocol):
    """What the renderer asks of a field (``models.TensorBase`` is one)."""

    sampler: object
    alphaMask: object
    nSamples: int
    distance_scale: float
    rayMarch_weight_thres: float
    unbounded: bool
    fused: bool
    jitter_samples: bool

    def density(self, xyz: jt.Var) -> jt.Var: ...

    def shade(self, points: jt.Var, viewdirs: jt.Var, codes: jt.Var | None = None) -> jt.Var: ...

    def normalize_coord(self, xyz: jt.Var) -> jt.Var: ...

    def model_points(self, xyz: jt.Var) -> jt.Var: ...


def render_dense(field: Field, rays_chunk: jt.Var, white: bool, is_train: bool, n_samples: int, ndc_ray: bool,
                 jitter: jt.Var | None, with_distortion: bool, codes: jt.Var | None, corrected: bool) -> Maps:
    """Rays [R, 6] rendered on the dense sample grid; ``codes`` [R, appearance_dim] or None."""
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
    sigma = jt.zeros(n_rays * n_samples, dtype="float32")
    if samples.kept.shape[0] > 0:
        sigma[samples.kept] = field.density(samples.xyz[samples.kept])
    sigma = sigma.reshape(n_rays, n_samples)

    with stage("compositing"):
        dist = samples.dist * field.distance_scale
        if field.unbounded:
            sigma = compositing.cap_optical_depth(sigma, dist)
        _, weights, _ = compositing.raw2alpha(sigma, dist)
        shaded = flat_indices(weights > field.rayMarch_weight_thres)
    rgb = jt.zeros((n_rays * n_samples, 3), dtype="float32")
    if shaded.shape[0] > 0:
        rays = shaded // n_samples
        rgb[shaded] = field.shade(field.normalize_coord(samples.xyz[shaded]), samples.viewdirs[rays],
                                 None if codes is None else codes[rays])
    rgb = rgb.reshape(n_rays, n_samples, 3)

    with stage("compositing"):
        maps = compositing.accumulate(weights, rgb, samples.z, rays_chunk[:, -1], white)
        distortion = (distortion_loss.dense_distortion(weights, samples.ordinal, field.nSamples)
                      if with_distortion and samples.ordinal is not None else jt.zeros(1))
    return maps + (distortion,)

def render_packed(field: Field, rays_chunk: jt.Var, white: bool, n_samples: int, jitter: jt.Var | None,
                  with_distortion: bool, codes: jt.Var | None, corrected: bool) -> Maps:
    """Rays [R, 6] rendered on their kept samples with the fused kernels (the marching kernels
    give positions without gradients: corrected rays' positions are recomputed)."""
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
        shaded = flat_indices(weights > field.rayMarch_weight_thres)
    rgb = None
    if shaded.shape[0] > 0:
        rays = samples.ray_index[shaded]
        rgb = field.shade(field.normalize_coord(samples.xyz[shaded]), viewdirs[rays],
                         None if codes is None else codes[rays])
    with stage("compositing"):
        maps = compositing.packed_pixels(weights, rgb, shaded, samples, n_rays, rays_chunk[:, -1], white)
        distortion = (distortion_loss.packed_distortion(weights, samples, field.nSamples)
                      if with_distortion and samples.ordinal is not None else jt.zeros(1))
    return maps + (distortion,)
