"""The unbounded sampler: rays through a foreground box and on to infinity, in contracted space.

For scenes that go on beyond their box (a capture with its room): world positions are
contracted into the cube [-2, 2]^3 (``rendering.contraction``), which the grid spans.
"""
from __future__ import annotations

import math

import numpy as np
import jittor as jt

from tensorf_jt.kernels.ray_marching import PackedSamples, march_unbounded
from tensorf_jt.rendering.contraction import SceneContraction, contraction_norm
from tensorf_jt.rendering.sampling import ray_box_intersection
from tensorf_jt.rendering.samplers.protocol import DenseSamples, flat_indices, masked, step_size


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
    built of density like the rest (``takes_background`` is False). (A last gap reaching to
    infinity, as some renderers give it, makes the last sample an opaque screen whose colour,
    looked up at a different place for every ray, learns each training image without any
    geometry.)
    """

    can_shrink = False  # a shrink could cut away the background shell for good
    takes_background = False
    caps_optical_depth = True
    filters_rays = True
    packs = True
    jitter_per_ray = True
    model_space_is_world = False  # contracted space

    def __init__(self, foreground_aabb, near_far, step_ratio: float) -> None:
        self.contraction = SceneContraction(foreground_aabb)
        self.near_far = (float(near_far[0]), float(near_far[1]))
        self.step_ratio = float(step_ratio)
        self._aabb = jt.array(self.contraction.foreground).stop_grad()
        self._center = jt.array(self.contraction.center).stop_grad()
        self.model_step = self.step = 0.0
        self.n_linear = self.n_background = 0

    def fit_grid(self, grid_box: np.ndarray, units: np.ndarray) -> None:
        self.model_step = step_size(units, self.step_ratio)
        box = self.contraction.foreground.astype(np.float64)
        self.step = float(np.float32(self.model_step) * np.float32(np.mean(self.contraction.half_size)))
        self.n_linear = int(math.ceil(np.linalg.norm(box[1] - box[0]) / self.step)) + 1
        self.n_background = int(1.0 / self.model_step) + 1
        # One more step than samples: the last sample stays finite however far its jitter takes it.
        self._inv_background = float(np.float32(1.0) / np.float32(self.n_background + 1))

    @property
    def n_samples(self) -> int:
        """Samples per ray at most: the linear run's and the background's."""
        return self.n_linear + self.n_background

    def samples_per_ray(self, reso: list[int], cap: int) -> int:
        """The sampler's own count: it covers the foreground and the shell whatever the cap."""
        return self.n_samples

    def draw_jitter(self, n_rays: int, n_samples: int) -> jt.Var:
        """One fraction of a step per ray, shared by its linear and background runs."""
        return jt.rand(n_rays)

    def _kernel_data(self) -> dict[str, float]:
        return {**self.contraction.kernel_data(), "near": self.near_far[0], "step": self.step,
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
        near = jt.full_like(t_enter, self.near_far[0])
        hits = t_exit > jt.maximum(t_enter, near)
        steps = jt.arange(self.n_linear).float32().unsqueeze(0)
        t_linear = jt.maximum(near, t_enter).unsqueeze(1) + (self.step * (steps + j).stop_fuse()).stop_fuse()
        linear_kept = hits.unsqueeze(1) & (t_linear <= t_exit.unsqueeze(1))
        s = jt.maximum(near, t_exit).unsqueeze(1)
        ticks = jt.arange(self.n_background + 1).float32().unsqueeze(0)
        # 1 - (k + j) / (n + 1) as ((n - k) + (1 - j)) / (n + 1): with k = n and j a few ulps
        # below 1, the first form rounds to 0 and the last gap to infinity (a NaN loss).
        left = ((float(self.n_background) - ticks).stop_fuse() + (1.0 - j).stop_fuse()).stop_fuse()
        # The quotient in float64, rounded once to float32: the correctly rounded float32 quotient
        # (53 >= 2 * 24 + 2 bits), which -Ofast's float32 division is not on every CPU (AVX2: up
        # to 2 ulps off), and which the fused kernel's div_rn computes.
        t_ticks = (s.float64() / (left * self._inv_background).stop_fuse().float64()).float32()
        t_background = t_ticks[:, :-1]

        next_linear = jt.concat([t_linear[:, 1:], t_linear[:, -1:]], dim=1)
        next_kept = jt.concat([linear_kept[:, 1:], jt.zeros((n_rays, 1), dtype="bool")], dim=1)
        dist_linear = jt.ternary(linear_kept, jt.ternary(next_kept, next_linear, t_background[:, :1]) - t_linear,
                                 jt.zeros_like(t_linear))
        dist_background = t_ticks[:, 1:] - t_background
        z = jt.concat([t_linear, t_background], dim=1)
        dist = jt.concat([dist_linear, dist_background], dim=1)
        kept = jt.concat([linear_kept, jt.ones((n_rays, self.n_background), dtype="bool")], dim=1)
        offsets = (rays_d.unsqueeze(1) * z.unsqueeze(2)).stop_fuse()
        world = (rays_o.unsqueeze(1) + offsets).stop_fuse().reshape(-1, 3)
        xyz = self.contraction(world)
        return DenseSamples(xyz, z, dist, masked(flat_indices(kept), xyz, alpha_mask, fused), rays_d)

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
        length = contraction_norm(xyz)
        stretch = 1.0 / jt.sqr((2.0 - length.clamp(min_v=1.0, max_v=2.0 - 1e-6)))
        return self.step * stretch

    def to_model(self, xyz: jt.Var) -> jt.Var:
        return self.contraction(xyz)

    def world_box(self) -> np.ndarray:
        return self.contraction.foreground

    def foreground(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The foreground box: model space [-1, 1]^3, where contraction is the identity up to
        the box's scale (the shell beyond holds the room, no object)."""
        box = np.array([[-1.0] * 3, [1.0] * 3], dtype=np.float32)
        return box, self.contraction.half_size, self.contraction.center

    def kwargs(self) -> dict:
        return {"near_far": list(self.near_far), "step_ratio": self.step_ratio, "scene_contraction": "inf",
                "foreground_aabb": jt.array(self.contraction.foreground)}
