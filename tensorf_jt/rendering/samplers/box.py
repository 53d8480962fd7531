"""The reference TensoRF's samplers: a bounded scene, model space is the world.

- ``BoxSampler``: fixed steps from where each ray enters the scene box (reference
  ``sample_ray``); the box is the grid's, so it shrinks with it.
- ``NDCSampler``: forward-facing scenes, whose rays come in normalised device coordinates:
  samples evenly spaced between near and far (reference ``sample_ray_ndc``). The reference
  filters no NDC rays; this sampler has no packed form, so both kernel paths render it dense
  (the fused field kernels still evaluate the samples).
"""
from __future__ import annotations

import numpy as np
import jittor as jt

from tensorf_jt.kernels.ray_marching import PackedSamples, march_rays, rays_hit_alpha
from tensorf_jt.rendering.sampling import (ray_box_intersection, sample_along_rays, sample_along_rays_ndc,
                                           sample_distances)
from tensorf_jt.rendering.samplers.protocol import DenseSamples, flat_indices, masked, step_size


class BoxSampler:
    """Fixed steps of ``step_size`` from each ray's entry into the grid's box; the entry
    distance is clamped to ``near_far``, samples outside the box are not kept."""

    can_shrink = True  # cropping the box to the occupied region loses nothing
    takes_background = True
    caps_optical_depth = False
    filters_rays = True
    packs = True
    jitter_per_ray = True
    model_space_is_world = True

    def __init__(self, near_far, step_ratio: float) -> None:
        self.near_far = (float(near_far[0]), float(near_far[1]))
        self.step_ratio = float(step_ratio)
        self.aabb: jt.Var | None = None
        self.step_size = 0.0
        self.n_samples = 0

    def fit_grid(self, grid_box: np.ndarray, units: np.ndarray) -> None:
        box = np.asarray(grid_box, dtype=np.float32).reshape(2, 3)
        self._box = box
        self.aabb = jt.array(box).stop_grad()
        self.step_size = step_size(units, self.step_ratio)
        diagonal = np.sqrt(np.sum(np.square(box[1] - box[0]), dtype=np.float32))
        self.n_samples = int(np.float32(diagonal) / np.float32(self.step_size)) + 1

    def samples_per_ray(self, reso: list[int], cap: int) -> int:
        """The reference's ``min(nSamples, cal_n_samples(reso, step_ratio))``: the grid's
        diagonal in steps of ``step_ratio`` voxels."""
        return min(int(cap), int(np.linalg.norm(reso) / self.step_ratio))

    def draw_jitter(self, n_rays: int, n_samples: int) -> jt.Var:
        """One fraction of a step per ray: its samples shift together."""
        return jt.rand(n_rays)

    def _starts(self, rays_o: jt.Var, rays_d: jt.Var) -> jt.Var:
        t_enter, _ = ray_box_intersection(rays_o, rays_d, self.aabb)
        return t_enter.clamp(min_v=self.near_far[0], max_v=self.near_far[1])

    def dense(self, rays_o: jt.Var, rays_d: jt.Var, n_samples: int, jitter: jt.Var | None,
              alpha_mask=None, fused: bool = False) -> DenseSamples:
        xyz, z_vals, inside = sample_along_rays(rays_o, rays_d, self.aabb, self.near_far, self.step_size, n_samples,
                                                jitter=jitter)
        xyz = xyz.reshape(-1, 3)
        return DenseSamples(xyz, z_vals, sample_distances(z_vals), masked(flat_indices(inside), xyz, alpha_mask, fused),
                            rays_d)

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
        """World length of one step: the step itself (model space is the world)."""
        return self.step_size

    def to_model(self, xyz: jt.Var) -> jt.Var:
        return xyz

    def world_box(self) -> np.ndarray:
        return self._box

    def foreground(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The grid's box; model space is the world."""
        return self._box, np.ones(3, np.float32), np.zeros(3, np.float32)

    def kwargs(self) -> dict:
        return {"near_far": list(self.near_far), "step_ratio": self.step_ratio}


class NDCSampler(BoxSampler):
    """Samples evenly spaced in NDC between near and far (reference ``sample_ray_ndc``). NDC
    directions are not unit length: gaps scale by their norm, and shading sees the normalised
    direction."""

    filters_rays = False  # NDC rays all cross the NDC box; the reference filters none
    packs = False
    jitter_per_ray = False
    model_space_is_world = False  # NDC space

    def world_box(self) -> None:
        """None: the grid's box lies in NDC space, not in the cameras' world."""
        return None

    def draw_jitter(self, n_rays: int, n_samples: int) -> jt.Var:
        """One fraction of the spacing per sample, shared by the batch's rays, as the reference."""
        return jt.rand(1, n_samples)

    def dense(self, rays_o: jt.Var, rays_d: jt.Var, n_samples: int, jitter: jt.Var | None,
              alpha_mask=None, fused: bool = False) -> DenseSamples:
        xyz, z_vals, inside = sample_along_rays_ndc(rays_o, rays_d, self.aabb, self.near_far, n_samples, jitter=jitter)
        ray_norm = jt.sqrt(jt.sqr(rays_d).sum(-1, keepdims=True))
        xyz = xyz.reshape(-1, 3)
        return DenseSamples(xyz, z_vals, sample_distances(z_vals) * ray_norm,
                            masked(flat_indices(inside), xyz, alpha_mask, fused), rays_d / ray_norm)

    def packed(self, rays_o, rays_d, n_samples, jitter, alpha_mask=None) -> PackedSamples:
        raise NotImplementedError("NDC samples are rendered dense (NDCSampler.packs is False)")
