"""Where along each ray the field is evaluated: the samplers, one per kind of scene.

A sampler turns rays [R, 6] (world origins, unit directions) into samples: their positions in
*model space* (where the grid lives), their distance ``z`` along the ray, the gap ``dist`` to
the ray's next sample, and which of them may hold density (inside the grid and, given an
alpha grid, where it is occupied). It gives them two ways: ``dense``, an [R, S] grid of every
sample with a mask (the reference path, plain Jittor, the specification), and ``packed``, only
the kept samples with per-ray offsets (the fused kernels). Both give the same samples.

- ``BoxSampler``: the reference TensoRF's sampling -- fixed steps from where the ray enters
  the scene box (model space is the world); NDC rays of forward-facing scenes in ``dense_ndc``.
- ``UnboundedSampler``: for scenes that go on beyond the box (``rendering.contraction``):
  fixed steps through the foreground box, then samples evenly spaced in disparity 1/t out to
  infinity; positions are contracted into the cube [-2, 2]^3.

The samplers also answer the alpha grid's and the ray filter's questions: how long a step is
at a model-space point (``segment_length``), and which rays can see anything (``rays_hit``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import jittor as jt

from tensorf_jt.kernels.ray_marching import PackedSamples, march_rays, march_unbounded, rays_hit_alpha
from tensorf_jt.rendering.contraction import MODEL_BOX, SceneContraction, contraction_norm
from tensorf_jt.rendering.sampling import (ray_box_intersection, sample_along_rays, sample_along_rays_ndc,
                                           sample_distances)


def flat_indices(mask: jt.Var) -> jt.Var:
    """Positions (int32) of the true entries of a boolean mask, flattened."""
    return jt.where(mask.reshape(-1))[0]


@dataclass
class DenseSamples:
    """Every sample of R rays, S each: xyz [R*S, 3] model-space positions, z and dist [R, S]
    (world units; ``dist`` not yet scaled by ``distance_scale``), kept [K] int32 (flat
    positions of the samples that may hold density), viewdirs [R, 3] (unit, for shading) and,
    for the distortion loss, ordinal [R, S] (each sample's place in its ray's sequence) or None."""

    xyz: jt.Var
    z: jt.Var
    dist: jt.Var
    kept: jt.Var
    viewdirs: jt.Var
    ordinal: jt.Var | None = None


class BoxSampler:
    """Fixed steps of ``step_size`` from each ray's entry into ``aabb`` [2, 3] (reference ``sample_ray``).

    The entry distance is clamped to ``near_far``; samples outside the box are not kept.
    """

    contraction = None
    can_shrink = True  # cropping the box to the occupied region loses nothing

    def __init__(self, aabb: jt.Var, near_far: tuple[float, float], step_size: float) -> None:
        self.aabb, self.near_far, self.step_size = aabb, tuple(near_far), float(step_size)

    def _starts(self, rays_o: jt.Var, rays_d: jt.Var) -> jt.Var:
        t_enter, _ = ray_box_intersection(rays_o, rays_d, self.aabb)
        return t_enter.clamp(min_v=self.near_far[0], max_v=self.near_far[1])

    def dense(self, rays_o: jt.Var, rays_d: jt.Var, n_samples: int, jitter: jt.Var | None,
              alpha_mask=None, fused: bool = False) -> DenseSamples:
        xyz, z_vals, inside = sample_along_rays(rays_o, rays_d, self.aabb, self.near_far, self.step_size, n_samples,
                                                jitter=jitter)
        xyz = xyz.reshape(-1, 3)
        return DenseSamples(xyz, z_vals, sample_distances(z_vals), _masked(flat_indices(inside), xyz, alpha_mask, fused),
                            rays_d)

    def dense_ndc(self, rays_o: jt.Var, rays_d: jt.Var, n_samples: int, jitter: bool, alpha_mask=None,
                  fused: bool = False) -> DenseSamples:
        """Forward-facing scenes: samples evenly spaced in NDC between near and far (reference
        ``sample_ray_ndc``). NDC directions are not unit length: gaps scale by their norm, and
        shading sees the normalised direction."""
        xyz, z_vals, inside = sample_along_rays_ndc(rays_o, rays_d, self.aabb, self.near_far, n_samples, jitter=jitter)
        ray_norm = jt.sqrt(jt.sqr(rays_d).sum(-1, keepdims=True))
        xyz = xyz.reshape(-1, 3)
        return DenseSamples(xyz, z_vals, sample_distances(z_vals) * ray_norm,
                            _masked(flat_indices(inside), xyz, alpha_mask, fused), rays_d / ray_norm)

    def packed(self, rays_o: jt.Var, rays_d: jt.Var, n_samples: int, jitter: jt.Var | None,
               alpha_mask=None) -> PackedSamples:
        jitter = jt.zeros(rays_o.shape[0], dtype="float32") if jitter is None else jitter
        return march_rays(rays_o, rays_d, self._starts(rays_o, rays_d), jitter, self.aabb, alpha_mask,
                          self.step_size, n_samples)

    def rays_hit(self, rays_o: jt.Var, rays_d: jt.Var, alpha_mask, n_samples: int, bbox_only: bool,
                 fused: bool) -> jt.Var:
        """bool [R]: the ray crosses the box (``bbox_only``, or no alpha grid yet); otherwise one of
        ``n_samples`` evenly spaced samples meets the alpha grid (the reference's ``filtering_rays``
        test, which looks past the box's far side too)."""
        if bbox_only or alpha_mask is None:
            t_enter, t_exit = ray_box_intersection(rays_o, rays_d, self.aabb)
            return t_exit > t_enter
        if fused:
            return rays_hit_alpha(rays_o, rays_d, self._starts(rays_o, rays_d), alpha_mask, self.step_size, n_samples)
        xyz, _, _ = sample_along_rays(rays_o, rays_d, self.aabb, self.near_far, self.step_size, n_samples, jitter=None)
        alpha = alpha_mask.sample_alpha(xyz.reshape(-1, 3), fused=False).reshape(xyz.shape[:2])
        return (alpha > 0).any(-1)

    def segment_length(self, xyz: jt.Var) -> float:
        """World length of one step at model-space points: the step itself (model space is the world)."""
        return self.step_size


def _masked(kept: jt.Var, xyz: jt.Var, alpha_mask, fused: bool) -> jt.Var:
    """Of the samples ``kept`` (flat positions into xyz [N, 3]), those the alpha grid keeps."""
    if alpha_mask is None or kept.shape[0] == 0:
        return kept
    return kept[flat_indices(alpha_mask.sample_alpha(xyz[kept], fused) > 0)]


class UnboundedSampler:
    """Samples of rays through a foreground box and on to infinity, in contracted model space.

    Each ray is sampled in two runs, in this order:

    - *linear*: fixed world steps ``step`` through the foreground box, from where the ray
      enters it (or the near plane) to where it leaves it, at most ``n_linear`` samples (a ray
      that misses the box has none); ``step`` is the grid's step in model space times the box's
      mean half-size, so the foreground is sampled as finely as the grid resolves it, as in
      the bounded mode;
    - *background*: ``n_background`` samples from where the linear run ends (the box's far
      side; for a ray that misses the box, its closest approach to the box's centre, or the
      near plane) out towards infinity, evenly spaced in disparity: t_k = s / (1 - (k + j) /
      (n_background + 1)) for ray start s and jitter j (the + 1 keeps the last sample finite;
      the denominator is taken as ((n_background - k) + (1 - j)) / (n_background + 1), which
      float32 never rounds to 0).
      Past the box, contraction maps equal disparity steps to equal steps through the shell,
      so ``n_background`` is about the number of grid steps across it.

    Nothing is sampled between a camera outside the box and the box, nor near a camera whose
    ray misses it: no camera sees that space from more than a few viewpoints, and samples
    there let the model paint each training image onto a haze in front of its camera
    (the floaters of unbounded NeRFs).

    Every sample's gap reaches to the next one of its ray, the last one's to where a next
    background sample would be. Light that passes all of them is black: the background must be
    built of density like the rest. (A last gap reaching to infinity, as some renderers give
    it, makes the last sample an opaque screen whose colour, looked up at a different place
    for every ray, learns each training image without any geometry.) Samples carry their
    place in the ray's sequence (``ordinal``), which the distortion loss measures distances in.
    """

    can_shrink = False  # a shrink could cut away the background shell for good

    def __init__(self, contraction: SceneContraction, near: float, model_step: float) -> None:
        self.contraction = contraction
        self.near = float(near)
        self.model_step = float(model_step)
        box = contraction.foreground.astype(np.float64)
        self.step = float(np.float32(model_step) * np.float32(np.mean(contraction.half_size)))
        self.n_linear = int(math.ceil(np.linalg.norm(box[1] - box[0]) / self.step)) + 1
        self.n_background = int(1.0 / self.model_step) + 1
        # One more step than samples: the last sample stays finite however far its jitter takes it.
        self._inv_background = float(np.float32(1.0) / np.float32(self.n_background + 1))
        self._aabb = jt.array(contraction.foreground).stop_grad()
        self._center = jt.array(contraction.center).stop_grad()

    @property
    def n_samples(self) -> int:
        """Samples per ray at most: the linear run's and the background's."""
        return self.n_linear + self.n_background

    def _kernel_data(self) -> dict[str, float]:
        return {**self.contraction.kernel_data(), "near": self.near, "step": self.step,
                "n_linear": float(self.n_linear), "n_background": float(self.n_background),
                "inv_background": self._inv_background}

    def _runs(self, rays_o: jt.Var, rays_d: jt.Var) -> tuple[jt.Var, jt.Var]:
        """Where each ray's linear run starts (+inf: it misses the box) and its background run."""
        t_enter, t_exit = ray_box_intersection(rays_o, rays_d, self._aabb)
        misses = t_exit <= t_enter
        closest = ((self._center - rays_o) * rays_d).sum(-1)
        return (jt.ternary(misses, jt.full_like(t_enter, float("inf")), t_enter),
                jt.ternary(misses, closest, t_exit))

    def dense(self, rays_o: jt.Var, rays_d: jt.Var, n_samples: int, jitter: jt.Var | None,
              alpha_mask=None, fused: bool = False) -> DenseSamples:
        n_rays = rays_o.shape[0]
        j = (jt.zeros(n_rays, dtype="float32") if jitter is None else jitter).unsqueeze(1)
        t_enter, t_exit = self._runs(rays_o, rays_d)
        near = jt.full_like(t_enter, self.near)
        hits = t_exit > jt.maximum(t_enter, near)
        steps = jt.arange(self.n_linear).float32().unsqueeze(0)
        t_linear = jt.maximum(near, t_enter).unsqueeze(1) + (self.step * (steps + j).stop_fuse()).stop_fuse()
        linear_kept = hits.unsqueeze(1) & (t_linear <= t_exit.unsqueeze(1))
        s = jt.maximum(near, t_exit).unsqueeze(1)
        ticks = jt.arange(self.n_background + 1).float32().unsqueeze(0)
        # 1 - (k + j) / (n + 1) as ((n - k) + (1 - j)) / (n + 1): with k = n and j a few ulps
        # below 1, the first form rounds to 0 and the last gap to infinity (a NaN loss).
        left = ((float(self.n_background) - ticks).stop_fuse() + (1.0 - j).stop_fuse()).stop_fuse()
        t_ticks = (s / (left * self._inv_background).stop_fuse()).stop_fuse()
        t_background, ticks = t_ticks[:, :-1], ticks[:, :-1]

        next_linear = jt.concat([t_linear[:, 1:], t_linear[:, -1:]], dim=1)
        next_kept = jt.concat([linear_kept[:, 1:], jt.zeros((n_rays, 1), dtype="bool")], dim=1)
        dist_linear = jt.ternary(linear_kept, jt.ternary(next_kept, next_linear, t_background[:, :1]) - t_linear,
                                 jt.zeros_like(t_linear))
        dist_background = t_ticks[:, 1:] - t_background
        z = jt.concat([t_linear, t_background], dim=1)
        dist = jt.concat([dist_linear, dist_background], dim=1)
        kept = jt.concat([linear_kept, jt.ones((n_rays, self.n_background), dtype="bool")], dim=1)
        n_kept_linear = linear_kept.int32().sum(1, keepdims=True)
        ordinal = jt.concat([steps.broadcast((n_rays, self.n_linear)), (ticks + n_kept_linear.float32())], dim=1)
        offsets = (rays_d.unsqueeze(1) * z.unsqueeze(2)).stop_fuse()
        world = (rays_o.unsqueeze(1) + offsets).stop_fuse().reshape(-1, 3)
        xyz = self.contraction(world)
        return DenseSamples(xyz, z, dist, _masked(flat_indices(kept), xyz, alpha_mask, fused), rays_d, ordinal)

    def packed(self, rays_o: jt.Var, rays_d: jt.Var, n_samples: int, jitter: jt.Var | None,
               alpha_mask=None) -> PackedSamples:
        jitter = jt.zeros(rays_o.shape[0], dtype="float32") if jitter is None else jitter
        t_enter, t_exit = self._runs(rays_o, rays_d)
        return march_unbounded(rays_o, rays_d, jitter, t_enter, t_exit, alpha_mask, self.n_linear, self.n_background,
                               self._kernel_data())

    def rays_hit(self, rays_o: jt.Var, rays_d: jt.Var, alpha_mask, n_samples: int, bbox_only: bool,
                 fused: bool) -> jt.Var:
        """bool [R]: every ray sees the background (``bbox_only``, or no alpha grid yet);
        otherwise one of its samples meets the alpha grid."""
        if bbox_only or alpha_mask is None:
            return jt.ones(rays_o.shape[0], dtype="bool")
        if fused:
            samples = self.packed(rays_o, rays_d, self.n_samples, None, alpha_mask)
            return (samples.ray_offsets[1:] - samples.ray_offsets[:-1]) > 0
        samples = self.dense(rays_o, rays_d, self.n_samples, None, alpha_mask, fused=False)
        hit = jt.zeros(rays_o.shape[0] * self.n_samples, dtype="bool")
        if samples.kept.shape[0] > 0:
            hit[samples.kept] = True
        return hit.reshape(rays_o.shape[0], self.n_samples).any(-1)

    def segment_length(self, xyz: jt.Var) -> jt.Var:
        """World length [N] of one grid step at model-space points: the foreground's step, times
        the factor by which contraction shrinks distances there (1 / (2 - |y|)^2 radially)."""
        length = contraction_norm(xyz, self.contraction.norm)
        stretch = 1.0 / jt.sqr((2.0 - length.clamp(min_v=1.0, max_v=2.0 - 1e-6)))
        return self.step * stretch


__all__ = ["BoxSampler", "DenseSamples", "MODEL_BOX", "UnboundedSampler", "flat_indices"]
