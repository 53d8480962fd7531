"""What every sampler gives the renderer, and the samples it gives them in.

A sampler owns the scene's space: where its rays are sampled (a box, NDC, or all of space
contracted around a foreground box), its near/far, its step size (``step_ratio`` times the
grid's mean voxel size, refreshed by ``fit_grid`` whenever the grid changes size), whether the
transparent part of a pixel shows the dataset's background colour, whether the grid may be
cropped to its occupied part, and its own settings in a checkpoint's ``kwargs``. It turns rays
[R, 6] (world origins, directions) into samples in *model space* (where the grid lives), two
ways: ``dense``, an [R, S] grid of every sample with the kept ones listed (the reference path,
plain Jittor, the specification), and ``packed``, only the kept samples with per-ray offsets
(the fused kernels). Both give the same samples. Adding a sampler means writing a class that
meets ``Sampler``; no model file changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import jittor as jt

from tensorf_jt.kernels.ray_marching import PackedSamples


def flat_indices(mask: jt.Var) -> jt.Var:
    """Positions (int32) of the true entries of a boolean mask, flattened."""
    return jt.where(mask.reshape(-1))[0]


@dataclass
class DenseSamples:
    """Every sample of R rays, S each: xyz [R*S, 3] model-space positions, z and dist [R, S]
    (world units; ``dist`` not yet scaled by ``distance_scale``), kept [K] int32 (flat
    positions of the samples that may hold density) and viewdirs [R, 3] (unit, for shading)."""

    xyz: jt.Var
    z: jt.Var
    dist: jt.Var
    kept: jt.Var
    viewdirs: jt.Var


class Sampler(Protocol):
    """The renderer's view of a sampler (``BoxSampler``, ``NDCSampler``, ``UnboundedSampler``)."""

    can_shrink: bool  # the first alpha-mask update may crop the grid to the occupied box
    takes_background: bool  # a pixel's transparent part shows the background colour (else black)
    caps_optical_depth: bool  # samples' optical depth is capped (gaps that reach far out)
    filters_rays: bool  # training rays that see nothing may be dropped (the reference filters)
    packs: bool  # ``packed`` exists (the fused path); otherwise every path renders ``dense``
    jitter_per_ray: bool  # ``draw_jitter`` gives one number per ray (else one per sample, shared)
    model_space_is_world: bool  # model-space boxes (the alpha grid's) are world boxes
    n_samples: int  # samples per ray at most, for the current grid

    def fit_grid(self, grid_box: np.ndarray, units: np.ndarray) -> None:
        """The grid now spans ``grid_box`` [2, 3] (model space) with voxels of ``units`` [3]."""

    def samples_per_ray(self, reso: list[int], cap: int) -> int:
        """Samples per training ray the schedule uses for a grid of resolution ``reso``."""

    def draw_jitter(self, n_rays: int, n_samples: int) -> jt.Var:
        """Uniform numbers that shift a training batch's samples along their rays."""

    def dense(self, rays_o: jt.Var, rays_d: jt.Var, n_samples: int, jitter: jt.Var | None, alpha_mask,
              fused: bool) -> DenseSamples: ...

    def packed(self, rays_o: jt.Var, rays_d: jt.Var, n_samples: int, jitter: jt.Var | None,
               alpha_mask) -> PackedSamples: ...

    def rays_hit(self, rays_o: jt.Var, rays_d: jt.Var, alpha_mask, n_samples: int, bbox_only: bool,
                 fused: bool) -> jt.Var:
        """bool [R]: which rays can see anything (the reference's ``filtering_rays`` test)."""

    def segment_length(self, xyz: jt.Var) -> float | jt.Var:
        """World length of one step at model-space points [N, 3] (the alpha grid's opacity)."""

    def to_model(self, xyz: jt.Var) -> jt.Var:
        """World points [N, 3] in model space."""

    def world_box(self) -> np.ndarray | None:
        """The box [2, 3] in world units the grid spans (or keeps uncontracted); None where the
        scene is sampled in another space (NDC)."""

    def foreground(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The scene's object part: its box [2, 3] in model space, and the per-axis scale and
        offset [3] that take model space to the world there (world = model * scale + offset)."""

    def kwargs(self) -> dict:
        """This sampler's settings as checkpoint ``kwargs`` entries."""


def masked(kept: jt.Var, xyz: jt.Var, alpha_mask, fused: bool) -> jt.Var:
    """Of the samples ``kept`` (flat positions into xyz [N, 3]), those the alpha grid keeps."""
    if alpha_mask is None or kept.shape[0] == 0:
        return kept
    return kept[flat_indices(alpha_mask.sample_alpha(xyz[kept], fused) > 0)]


def step_size(units: np.ndarray, step_ratio: float) -> float:
    """The marching step: ``step_ratio`` times the mean voxel size, in float32 as the reference."""
    return float(np.mean(np.asarray(units, dtype=np.float32), dtype=np.float32) * np.float32(step_ratio))
