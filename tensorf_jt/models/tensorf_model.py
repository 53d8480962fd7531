"""A TensoRF model: a field, the sampler of its scene, and the route that composites them.

``TensoRFModel`` renders rays the way the reference's ``TensorBase.forward`` does, with each
part in its own place: the *field* (``models.TensorBase``: grids, density, shading, alpha
grid) in model space, the *sampler* (``rendering.samplers``: scene space, near/far, step,
background) and the *route* (``rendering.renderer``: dense, packed or resampled compositing).
It is put together from outside by ``models.factory``, from a run's configuration or from a
checkpoint's ``kwargs``; the grid events that change the grid (upsampling, shrinking) go
through it, so the sampler follows the grid. Training-time policy (sample jitter, the
background colour of a batch) comes in as arguments of each call.
"""
from __future__ import annotations

import numpy as np
import jittor as jt
from jittor import nn

from tensorf_jt.kernels import check_kernels
from tensorf_jt.models.tensor_base import TensorBase
from tensorf_jt.rendering.alpha_grid import AlphaGridMask
from tensorf_jt.rendering.renderer import Compositing, RenderOutput, choose_route
from tensorf_jt.rendering.samplers import Sampler

# The reference's ``get_kwargs`` keys in its order; a model's further keys follow them.
REFERENCE_KWARGS = ("aabb", "gridSize", "density_n_comp", "appearance_n_comp", "app_dim", "density_shift",
                    "alphaMask_thres", "distance_scale", "rayMarch_weight_thres", "fea2denseAct", "near_far",
                    "step_ratio", "shadingMode", "pos_pe", "view_pe", "fea_pe", "featureC")


class TensoRFModel(nn.Module):
    """A field rendered through a sampler and a compositing route.

    ``importance_samples`` > 0 renders each ray from that many samples placed by a first,
    density-only pass (``rendering.resampling``); ``kernels`` names the implementation
    ('fused' or 'reference', ``tensorf_jt.kernels``), a setting kept in checkpoints.
    """

    def __init__(self, field: TensorBase, sampler: Sampler, compositing: Compositing, importance_samples: int = 0,
                 kernels: str = "fused") -> None:
        super().__init__()
        self.field = field
        self.sampler = sampler
        self.compositing = compositing
        self.importance_samples = int(importance_samples)
        self._fit_sampler()
        self.kernels = kernels

    @property
    def kernels(self) -> str:
        return self._kernels

    @kernels.setter
    def kernels(self, name: str) -> None:
        self._kernels = check_kernels(name)
        self.field.fused = name == "fused"
        self.route = choose_route(self.field.fused, self.sampler, self.compositing, self.importance_samples)

    @property
    def model_name(self) -> str:
        """The field's class name, the reference's ``model_name``."""
        return type(self.field).__name__

    @property
    def alphaMask(self) -> AlphaGridMask | None:
        return self.field.alphaMask

    @property
    def gridSize(self) -> list[int]:
        return self.field.gridSize

    @property
    def can_shrink(self) -> bool:
        """Whether the first alpha-mask update may crop the grid to the occupied box: not for
        TensorVM's single cube, nor where the sampler says no (an unbounded scene's shell)."""
        return self.field.crops_grid and self.sampler.can_shrink

    # ------------------------------------------------------------------ rendering
    def execute(self, rays: jt.Var, white_bg: bool = False, n_samples: int = -1, perturb: bool = False,
                jitter: jt.Var | None = None) -> RenderOutput:
        """Render rays [R, 6] (origin, direction).

        ``white_bg``: the transparent part of each pixel is white (where the sampler takes a
        background colour; black otherwise). ``n_samples`` bounds the samples a ray (-1: the
        sampler's count for the grid). ``perturb`` (training) shifts the samples along each ray
        by random draws (``Sampler.draw_jitter``) unless ``jitter`` gives them (the
        data-parallel trainer passes each rank its share of one draw per batch), and lets the
        route draw its own (resampling's stratification).
        """
        n_samples = n_samples if n_samples > 0 else self.sampler.n_samples
        if perturb and jitter is None:
            jitter = self.sampler.draw_jitter(rays.shape[0], n_samples)
        white = white_bg and self.sampler.takes_background
        return self.route(self.field, self.sampler, rays, white, n_samples, jitter, perturb)

    def rays_hit(self, rays: np.ndarray, n_samples: int = 256, bbox_only: bool = False) -> np.ndarray:
        """Which of rays [M, 6] (numpy) can see anything: bool [M] (``Sampler.rays_hit``)."""
        with jt.no_grad():
            rays = jt.array(rays)
            return self.sampler.rays_hit(rays[:, :3], rays[:, 3:6], self.field.alphaMask, n_samples, bbox_only,
                                         self.field.fused).numpy()

    def world_box(self) -> np.ndarray:
        """The box [2, 3] in world units the grid spans (bounded) or keeps uncontracted (unbounded)."""
        return self.sampler.world_box()

    # ---------------------------------------------------------------- grid events
    def update_alpha_mask(self, grid_size) -> np.ndarray | None:
        """Rebuild the alpha grid at ``grid_size`` (``TensorBase.updateAlphaMask``); returns the
        box around occupied space, or None when nothing is occupied."""
        return self.field.updateAlphaMask(self.sampler.segment_length, grid_size)

    def dense_alpha(self, box: np.ndarray | None = None) -> jt.Var:
        """Opacity of one step on the grid's resolution over ``box`` (model space; default the
        grid's box): [X, Y, Z]."""
        alpha, _ = self.field.getDenseAlpha(self.sampler.segment_length, box=box)
        return alpha

    def shrink(self, new_aabb: np.ndarray) -> None:
        """Crop the grid to ``new_aabb`` (model space); the sampler follows."""
        self.field.shrink(new_aabb)
        self._fit_sampler()

    def upsample(self, res_target) -> None:
        """Resample the grid to ``res_target`` (x, y, z); the sampler follows."""
        self.field.upsample_volume_grid(res_target)
        self._fit_sampler()

    def _fit_sampler(self) -> None:
        self.sampler.fit_grid(self.field.aabb, self.field.units)

    # ---------------------------------------------------------------- persistence
    def get_kwargs(self) -> dict:
        """Everything ``models.factory.compose`` needs to rebuild this model: the reference's
        ``get_kwargs`` keys in its order, then the sampler's and the route's own."""
        merged = {**self.field.get_kwargs(), **self.sampler.kwargs(),
                  "distance_scale": self.compositing.distance_scale,
                  "rayMarch_weight_thres": self.compositing.weight_threshold}
        if self.importance_samples:
            merged["importance_samples"] = self.importance_samples
        ordered = {key: merged.pop(key) for key in REFERENCE_KWARGS}
        return {**ordered, **merged}
