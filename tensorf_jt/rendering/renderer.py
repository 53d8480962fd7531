"""The compositing routes: rays to pixels through a field and a sampler.

Each route follows the reference's ``TensorBase.forward``: the sampler places samples and
drops those outside the grid or the alpha grid, the field gives density where samples remain,
compositing turns densities into weights, and only samples whose weight exceeds
``Compositing.weight_threshold`` (the reference's ``rayMarch_weight_thres``) are shaded.

- ``DenseRoute``: the [R, S] grid of every sample in plain Jittor (the reference path, and
  every sampler without a packed form);
- ``PackedRoute``: the kept samples only, with the fused kernels;
- ``ResampledRoute``: each ray rendered from a few samples placed by a density-only first pass
  over the sampler's (``rendering.resampling``; ``--importance_samples``).

``choose_route`` picks one. A route knows nothing of the field's grids or of the sampler's
space: it calls the ``Field`` and ``Sampler`` protocols.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import jittor as jt

from tensorf_jt.rendering import compositing
from tensorf_jt.rendering.resampling import bins, importance_edges, packed_edges
from tensorf_jt.rendering.samplers import DenseSamples, Sampler, flat_indices
from tensorf_jt.runtime.profiling import stage


class Field(Protocol):
    """What a route asks of a field (``models.TensorBase`` is one)."""

    alphaMask: object
    fused: bool

    def density(self, xyz: jt.Var) -> jt.Var:
        """Density [N] at model-space points [N, 3]."""

    def shade(self, points: jt.Var, viewdirs: jt.Var) -> jt.Var:
        """Colour [M, 3] at normalised points [M, 3] seen along viewdirs [M, 3]."""

    def normalize_coord(self, xyz: jt.Var) -> jt.Var:
        """Model-space points [N, 3] in grid coordinates [-1, 1]."""


class Route(Protocol):
    """A way to render rays [R, 6] through a field and its sampler (the classes below)."""

    settings: "Compositing"

    def __call__(self, field: Field, sampler: Sampler, rays: jt.Var, white: bool, n_samples: int,
                 jitter: jt.Var | None, perturb: bool) -> "RenderOutput":
        """Pixels of the rays: ``white`` composites the transparent part on white, ``n_samples``
        bounds the samples a ray, ``jitter`` shifts them (training), ``perturb`` asks for the
        route's own training draws."""


@dataclass(frozen=True)
class Compositing:
    """How densities become pixels: ``distance_scale`` multiplies the samples' gaps (the
    reference's setting of that name), and samples of weight at most ``weight_threshold``
    (``rayMarch_weight_thres``) are not shaded."""

    distance_scale: float
    weight_threshold: float


@dataclass
class RenderOutput:
    """rgb [R, 3] in [0, 1], depth [R] (no gradient) and opacity [R] of rays."""

    rgb: jt.Var
    depth: jt.Var
    opacity: jt.Var


class DenseRoute:
    """Every sample on the dense [R, S] grid, in plain Jittor (the reference path)."""

    def __init__(self, settings: Compositing) -> None:
        self.settings = settings

    def __call__(self, field: Field, sampler: Sampler, rays: jt.Var, white: bool, n_samples: int,
                 jitter: jt.Var | None, perturb: bool) -> RenderOutput:
        n_rays = rays.shape[0]
        samples, weights = dense_weights(field, sampler, self.settings, rays, n_samples, jitter, field.fused)
        n_samples = samples.z.shape[1]
        with stage("compositing"):
            flat_weights = weights.reshape(-1)
            shaded = flat_indices(flat_weights > self.settings.weight_threshold)
        shares = _shade(field, shaded, flat_weights, samples.xyz, shaded // n_samples, samples.viewdirs)
        dense_shares = jt.zeros((n_rays * n_samples, 3), dtype="float32")
        if shares is not None:
            dense_shares[shaded] = shares
        with stage("compositing"):
            rgb, depth, opacity = compositing.accumulate(weights, dense_shares.reshape(n_rays, n_samples, 3), samples.z,
                                                         rays[:, -1], white)
        return RenderOutput(rgb, depth, opacity)


class PackedRoute:
    """The kept samples only, with the fused kernels."""

    def __init__(self, settings: Compositing) -> None:
        self.settings = settings

    def __call__(self, field: Field, sampler: Sampler, rays: jt.Var, white: bool, n_samples: int,
                 jitter: jt.Var | None, perturb: bool) -> RenderOutput:
        n_rays = rays.shape[0]
        viewdirs = rays[:, 3:6]
        with stage("sampling"):
            samples = sampler.packed(rays[:, :3], viewdirs, n_samples, jitter, field.alphaMask)
        if samples.count == 0:
            zeros = jt.zeros(n_rays, dtype="float32")
            rgb, depth, opacity = compositing.finish_pixels(jt.zeros((n_rays, 3), dtype="float32"), zeros, zeros,
                                                            rays[:, -1], white)
            return RenderOutput(rgb, depth, opacity)
        sigma = field.density(samples.xyz)
        with stage("compositing"):
            dist = samples.dist * self.settings.distance_scale
            if sampler.caps_optical_depth:
                sigma = compositing.cap_optical_depth(sigma, dist)
            weights = compositing.packed_weights(sigma, dist, samples.ray_offsets)
            shaded = flat_indices(weights > self.settings.weight_threshold)
        shares = _shade(field, shaded, weights, samples.xyz, samples.ray_index[shaded], viewdirs)
        with stage("compositing"):
            rgb, depth, opacity = compositing.packed_pixels(weights, shares, shaded, samples, n_rays, rays[:, -1],
                                                            white)
        return RenderOutput(rgb, depth, opacity)


class ResampledRoute:
    """Each ray rendered from ``n_bins`` samples, placed by a first, density-only pass over the
    sampler's samples (``rendering.resampling``; packed with the fused kernels, dense
    otherwise). In training (``perturb``) a per-ray jitter stratifies the bins; otherwise each
    bin's level sits in the middle of its share."""

    def __init__(self, settings: Compositing, n_bins: int) -> None:
        self.settings = settings
        self.n_bins = int(n_bins)

    def __call__(self, field: Field, sampler: Sampler, rays: jt.Var, white: bool, n_samples: int,
                 jitter: jt.Var | None, perturb: bool) -> RenderOutput:
        n_rays, n_bins = rays.shape[0], self.n_bins
        rays_o, rays_d = rays[:, :3], rays[:, 3:6]
        bin_jitter = jt.rand(n_rays) if perturb else None
        with stage("sampling"), jt.no_grad():
            z, gaps = bins(self._first_pass_edges(field, sampler, rays_o, rays_d, n_samples, jitter, bin_jitter))
        xyz = sampler.to_model((rays_o.unsqueeze(1) + rays_d.unsqueeze(1) * z.unsqueeze(2)).reshape(-1, 3))
        sigma = field.density(xyz).reshape(n_rays, n_bins)
        with stage("compositing"):
            dist = gaps * self.settings.distance_scale
            if sampler.caps_optical_depth:
                sigma = compositing.cap_optical_depth(sigma, dist)
            _, weights, _ = compositing.raw2alpha(sigma, dist)
            flat_weights = weights.reshape(-1)
            shaded = flat_indices(flat_weights > self.settings.weight_threshold)
        shares = _shade(field, shaded, flat_weights, xyz, shaded // n_bins, rays_d)
        dense_shares = jt.zeros((n_rays * n_bins, 3), dtype="float32")
        if shares is not None:
            dense_shares[shaded] = shares
        with stage("compositing"):
            rgb, depth, opacity = compositing.accumulate(weights, dense_shares.reshape(n_rays, n_bins, 3), z,
                                                         rays[:, -1], white)
        return RenderOutput(rgb, depth, opacity)

    def _first_pass_edges(self, field: Field, sampler: Sampler, rays_o: jt.Var, rays_d: jt.Var, n_samples: int,
                          jitter: jt.Var | None, bin_jitter: jt.Var | None) -> jt.Var:
        """Bin edges [R, n_bins + 1] from the compositing weights of the sampler's samples."""
        n_rays, n_bins = rays_o.shape[0], self.n_bins
        scale = self.settings.distance_scale
        if field.fused and sampler.packs:
            samples = sampler.packed(rays_o, rays_d, n_samples, jitter, field.alphaMask)
            if samples.count == 0:
                return jt.zeros((n_rays, n_bins + 1), dtype="float32")
            dist = samples.dist * scale
            sigma = field.density(samples.xyz)
            if sampler.caps_optical_depth:
                sigma = compositing.cap_optical_depth(sigma, dist)
            return packed_edges(samples, compositing.packed_weights(sigma, dist, samples.ray_offsets), n_bins,
                                bin_jitter)
        samples = sampler.dense(rays_o, rays_d, n_samples, jitter, field.alphaMask, False)
        dist = samples.dist * scale
        sigma = _dense_density(field, samples)
        if sampler.caps_optical_depth:
            sigma = compositing.cap_optical_depth(sigma, dist)
        _, weights, _ = compositing.raw2alpha(sigma, dist)
        kept = jt.zeros(samples.z.numel(), dtype="bool")
        if samples.kept.shape[0] > 0:
            kept[samples.kept] = True
        end = jt.ternary(kept.reshape(samples.z.shape), samples.z + samples.dist, samples.z)
        return importance_edges(samples.z, end, weights, n_bins, bin_jitter)


def choose_route(fused: bool, sampler: Sampler, settings: Compositing, importance_samples: int = 0) -> Route:
    """The route a model renders with: resampling when it has ``importance_samples``, else the
    packed samples where the kernels are fused and the sampler packs, else the dense grid."""
    if importance_samples:
        return ResampledRoute(settings, importance_samples)
    if fused and sampler.packs:
        return PackedRoute(settings)
    return DenseRoute(settings)


def dense_weights(field: Field, sampler: Sampler, settings: Compositing, rays: jt.Var, n_samples: int,
                  jitter: jt.Var | None, fused: bool = False) -> tuple[DenseSamples, jt.Var]:
    """The sampler's dense samples of rays [R, 6] and their compositing weights [R, S], with
    gradients to the field's density (what a loss on where rays end needs); ``fused`` lets the
    sampler march with its kernel."""
    rays_o, rays_d = rays[:, :3], rays[:, 3:6]
    with stage("sampling"):
        samples = sampler.dense(rays_o, rays_d, n_samples, jitter, field.alphaMask, fused)
    sigma = _dense_density(field, samples)
    with stage("compositing"):
        dist = samples.dist * settings.distance_scale
        if sampler.caps_optical_depth:
            sigma = compositing.cap_optical_depth(sigma, dist)
        _, weights, _ = compositing.raw2alpha(sigma, dist)
    return samples, weights


def _dense_density(field: Field, samples: DenseSamples) -> jt.Var:
    """Density [R, S] of dense samples: the field's at the kept ones, 0 elsewhere."""
    sigma = jt.zeros(samples.z.numel(), dtype="float32")
    if samples.kept.shape[0] > 0:
        sigma[samples.kept] = field.density(samples.xyz[samples.kept])
    return sigma.reshape(samples.z.shape)


def _shade(field: Field, shaded: jt.Var, weights: jt.Var, xyz: jt.Var, rays_of_shaded: jt.Var,
           viewdirs: jt.Var) -> jt.Var | None:
    """Each shaded sample's share of its pixel, w * colour [M, 3], for the samples at flat
    positions ``shaded`` [M] of rays ``rays_of_shaded`` [M]; None when there are none."""
    if shaded.shape[0] == 0:
        return None
    colours = field.shade(field.normalize_coord(xyz[shaded]), viewdirs[rays_of_shaded])
    return weights[shaded].unsqueeze(1) * colours
