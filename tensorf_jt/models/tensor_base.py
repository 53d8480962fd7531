"""The radiance field around a tensor decomposition, and the model that renders it.

``TensorBase`` is the *field* of the reference's ``models/tensorBase.py``: the decomposed grids
(subclasses provide them through two narrow calls -- normalised points [N, 3] in, density
features [N] or appearance features [N, app_dim] out -- plus the grid operations and the
regularisers), the density activation, the shading head and the alpha grid. It renders by
composing three parts, each in its own module:

- a *sampler* (``rendering.samplers``): where along each ray the field is evaluated, and which
  samples may hold density -- ``BoxSampler`` for the reference's bounded scenes,
  ``UnboundedSampler`` for scenes beyond a foreground box (``scene_contraction``), whose
  positions are contracted into the grid's cube (``rendering.contraction``);
- the field, evaluated at those samples (model space: the world for a bounded scene):
  ``density`` and ``shade``, with the per-view corrections of ``models.view_corrections``;
- the *renderer* (``rendering.renderer``, with the formulas in ``rendering.compositing``):
  weights from densities, pixels from weights, dense for the reference path and packed for
  the fused kernels.
"""
from __future__ import annotations

import contextlib
import warnings

import numpy as np
import jittor as jt
from jittor import nn

from tensorf_jt.errors import ConfigError
from tensorf_jt.kernels import check_kernels
from tensorf_jt.models.shading import build_shader
from tensorf_jt.models.view_corrections import AppearanceCodes, PoseCorrections
from tensorf_jt.rendering import renderer
from tensorf_jt.rendering.alpha_grid import AlphaGridMask, binarize_alpha, occupied_bounds
from tensorf_jt.rendering.contraction import NORMS, SceneContraction
from tensorf_jt.rendering.samplers import BoxSampler, UnboundedSampler, flat_indices
from tensorf_jt.rendering.torch_numerics import linspace_f32
from tensorf_jt.runtime.profiling import stage

DENSITY_ACTIVATIONS = ("softplus", "relu")


def softplus(x: jt.Var, threshold: float = 20.0) -> jt.Var:
    """log(1 + e^x), accurate for very negative x as torch's is.

    Jittor's ``nn.softplus`` evaluates log(1 + e^x) directly, which in float32 is 0.04% off at
    x = -10 (where every density starts: features ~0 plus ``density_shift``) and 0 below -17.
    Below -5 the series e - e^2/2 + e^3/3 is exact to float32; above ``threshold`` it is x.
    """
    large = x > threshold
    e = jt.exp(jt.ternary(large, jt.zeros_like(x), x))  # no overflow in the branch not taken
    series = e * (1.0 - e * (0.5 - e / 3.0))
    smooth = jt.ternary(x < -5.0, series, jt.log(1.0 + e))
    return jt.ternary(large, x, smooth)


def as_trainable(var: jt.Var) -> jt.Var:
    """A fresh leaf that the optimizer will update.

    Vars made under ``jt.no_grad()`` (upsampling, shrinking) are stop-grad: Jittor still lists
    them as parameters, but Adam skips them silently. The copy is detached from the history
    that made it and explicitly re-enabled for gradients.
    """
    leaf = var.detach().clone()
    leaf.start_grad()
    return leaf


class TensorBase(nn.Module):
    """Radiance field over an axis-aligned grid, rendered by ray marching.

    Constructor arguments are the reference's ``get_kwargs`` keys, so a checkpoint's kwargs
    rebuild the model (``device`` is gone: Jittor places Vars by ``jt.flags.use_cuda``), plus,
    for an unbounded scene, ``scene_contraction`` ('inf' or 'l2', the contraction's norm) and
    ``foreground_aabb`` (the world box the contraction keeps as it is); ``aabb`` is then the
    grid's box in contracted space, ``rendering.contraction.MODEL_BOX``, and, if set,
    ``importance_samples`` (``rendering.resampling``). Bounded models' kwargs hold none of them,
    as the reference's. ``appearance_dim`` > 0 (a code of that size per training
    view) and ``refine_poses`` (a pose correction per training view) add the per-view
    corrections of ``models.view_corrections`` for ``n_views`` training views; only models that
    use them have these keys.
    """

    # Which grid axes each of the three planes spans and which axis its line runs along.
    matMode = ((0, 1), (0, 2), (1, 2))
    vecMode = (2, 1, 0)
    # Whether the decomposition's grids can be cropped (TensorVM's single cube cannot).
    crops_grid = True
    # Training jitters sample positions along each ray (``--perturb 1``); a training-time
    # setting, not part of the model's kwargs.
    jitter_samples = True
    # Unbounded training shades samples of weight below this at random (``--shading_roulette``,
    # ``rendering.shading_selection``; 0: off); a training-time setting too.
    shading_roulette = 0.0

    def __init__(
        self,
        aabb,
        gridSize,
        density_n_comp=8,
        appearance_n_comp=24,
        app_dim: int = 27,
        shadingMode: str = "MLP_PE",
        alphaMask: AlphaGridMask | None = None,
        near_far=(2.0, 6.0),
        density_shift: float = -10,
        alphaMask_thres: float = 0.001,
        distance_scale: float = 25,
        rayMarch_weight_thres: float = 0.0001,
        pos_pe: int = 6,
        view_pe: int = 6,
        fea_pe: int = 6,
        featureC: int = 128,
        step_ratio: float = 2.0,
        fea2denseAct: str = "softplus",
        scene_contraction: str | None = None,
        foreground_aabb=None,
        kernels: str = "fused",
        appearance_dim: int = 0,
        refine_poses: bool = False,
        n_views: int = 0,
        importance_samples: int = 0,
    ) -> None:
        super().__init__()
        if fea2denseAct not in DENSITY_ACTIVATIONS:
            raise ConfigError(
                f"fea2denseAct '{fea2denseAct}' is not supported; choose one of {', '.join(DENSITY_ACTIVATIONS)}."
            )
        if scene_contraction is not None and scene_contraction not in NORMS:
            raise ConfigError(f"scene_contraction '{scene_contraction}' is not supported; choose one of "
                              f"{', '.join(NORMS)}.")
        if (scene_contraction is None) != (foreground_aabb is None):
            raise ConfigError("An unbounded model needs both scene_contraction and foreground_aabb.")
        self.contraction = (None if scene_contraction is None
                            else SceneContraction(_numpy(foreground_aabb), scene_contraction))
        self.importance_samples = int(importance_samples)
        if self.importance_samples < 0 or (self.importance_samples and self.contraction is None):
            raise ConfigError(f"importance_samples must be 0 (off) or, for an unbounded scene, positive; got "
                              f"{self.importance_samples}{'' if self.contraction else ' for a bounded scene'}. "
                              "Set --importance_samples 0, or --unbounded 1.")
        self.density_n_comp = self._per_axis(density_n_comp, "n_lamb_sigma")
        self.app_n_comp = self._per_axis(appearance_n_comp, "n_lamb_sh")
        self.app_dim = int(app_dim)
        self.alphaMask = alphaMask
        self.density_shift = float(density_shift)
        self.alphaMask_thres = float(alphaMask_thres)
        self.distance_scale = float(distance_scale)
        self.rayMarch_weight_thres = float(rayMarch_weight_thres)
        self.fea2denseAct = fea2denseAct
        self.near_far = [float(near_far[0]), float(near_far[1])]
        self.step_ratio = float(step_ratio)
        self.set_aabb(aabb)
        self.update_stepSize(gridSize)

        self.init_svd_volume()

        self.shadingMode, self.pos_pe, self.view_pe, self.fea_pe, self.featureC = (
            shadingMode, int(pos_pe), int(view_pe), int(fea_pe), int(featureC))
        self.appearance_dim, self.refine_poses, self.n_views = int(appearance_dim), bool(refine_poses), int(n_views)
        if self.appearance_dim < 0:
            raise ConfigError(f"appearance_dim must be 0 (no appearance codes) or positive, got {self.appearance_dim}.")
        if (self.appearance_dim or self.refine_poses) and self.n_views <= 0:
            raise ConfigError("Per-view appearance codes and pose corrections need n_views, the number of training views.")
        self.appearance = AppearanceCodes(self.n_views, self.appearance_dim) if self.appearance_dim else None
        self.pose_corrections = PoseCorrections(self.n_views) if self.refine_poses else None
        self.renderModule = build_shader(shadingMode, self.app_dim, self.pos_pe, self.view_pe, self.fea_pe, self.featureC,
                                         self.appearance_dim)
        self.kernels = kernels

    @property
    def kernels(self) -> str:
        """The implementation this model renders with: 'fused' kernels or the 'reference' path
        (``tensorf_jt.kernels``); a setting of the model, saved in its checkpoint."""
        return self._kernels

    @kernels.setter
    def kernels(self, name: str) -> None:
        self._kernels = check_kernels(name)
        self._tracking_positions = False
        self.renderModule.fused = self.fused

    @property
    def fused(self) -> bool:
        return self._kernels == "fused"

    @property
    def fused_lookups(self) -> bool:
        """Whether grid lookups use the fused kernels: not while poses are refined, since those
        kernels give no gradients for sample positions (nor the shader's for view directions)."""
        return self.fused and not self._tracking_positions

    @contextlib.contextmanager
    def _positions_tracked(self, tracked: bool):
        """Look up the grids and encode the shader's input in Jittor while ``tracked``."""
        self._tracking_positions = tracked
        self.renderModule.fused = self.fused_lookups
        try:
            yield
        finally:
            self._tracking_positions = False
            self.renderModule.fused = self.fused

    @property
    def unbounded(self) -> bool:
        """Whether the grid covers all of space through the scene contraction."""
        return self.contraction is not None

    @property
    def can_shrink(self) -> bool:
        """Whether the first alpha-mask update may crop the grid to the occupied box: not for
        TensorVM, nor for an unbounded scene (a crop could cut away its background for good)."""
        return self.crops_grid and self.sampler.can_shrink

    def world_box(self) -> np.ndarray:
        """The box [2, 3] in world units that the grid spans (bounded) or keeps uncontracted
        (unbounded: the foreground), float32."""
        return self.aabb if self.contraction is None else self.contraction.foreground

    @staticmethod
    def _per_axis(n_comp, flag: str) -> list[int]:
        values = [int(n_comp)] * 3 if np.isscalar(n_comp) else [int(c) for c in n_comp]
        if len(values) == 1:
            values = values * 3
        if len(values) != 3 or min(values) <= 0:
            raise ConfigError(f"{flag} must give 1 or 3 positive component counts, got {list(values)}.")
        return values

    # ----------------------------------------------------------------- geometry
    def set_aabb(self, aabb) -> None:
        """Set the grid's box ([2, 3] in model space; numpy, list or Var). Kept as float32 numpy
        plus a Var copy."""
        self.aabb = _numpy(aabb).astype(np.float32).reshape(2, 3)
        self._aabb_var = jt.array(self.aabb).stop_grad()
        self.aabbSize = self.aabb[1] - self.aabb[0]
        self.invaabbSize = np.float32(2.0) / self.aabbSize
        self._inv_half_size_var = jt.array(self.invaabbSize).stop_grad()

    def update_stepSize(self, gridSize) -> None:
        """Grid resolution changed: recompute voxel size, marching step and samples per ray.

        Done in float32, as the reference does with torch tensors, so step counts agree exactly.
        """
        self.gridSize = [int(g) for g in gridSize]
        self.units = self.aabbSize / (np.asarray(self.gridSize, dtype=np.float32) - np.float32(1))
        self.stepSize = float(np.mean(self.units, dtype=np.float32) * np.float32(self.step_ratio))
        self.aabbDiag = float(np.sqrt(np.sum(np.square(self.aabbSize), dtype=np.float32)))
        if self.contraction is None:
            self.sampler = BoxSampler(self._aabb_var, self.near_far, self.stepSize)
            self.nSamples = int(np.float32(self.aabbDiag) / np.float32(self.stepSize)) + 1
        else:
            self.sampler = UnboundedSampler(self.contraction, self.near_far[0], self.stepSize)
            self.nSamples = self.sampler.n_samples

    def normalize_coord(self, xyz: jt.Var) -> jt.Var:
        """Model-space points [N, 3] -> grid coordinates in [-1, 1]."""
        return (xyz - self._aabb_var[0]) * self._inv_half_size_var - 1.0

    def model_points(self, xyz: jt.Var) -> jt.Var:
        """World points [N, 3] in model space (contracted for an unbounded scene)."""
        return xyz if self.contraction is None else self.contraction(xyz)

    # ---------------------------------------------------------- field interface
    def init_svd_volume(self) -> None:
        raise NotImplementedError

    def compute_densityfeature(self, xyz_normed: jt.Var) -> jt.Var:
        """Normalised points [N, 3] -> density features [N]."""
        raise NotImplementedError

    def compute_appfeature(self, xyz_normed: jt.Var) -> jt.Var:
        """Normalised points [N, 3] -> appearance features [N, app_dim]."""
        raise NotImplementedError

    def upsample_volume_grid(self, res_target) -> None:
        raise NotImplementedError

    def shrink(self, new_aabb: np.ndarray) -> None:
        raise NotImplementedError

    def shrink_bounds(self, new_aabb: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """Voxel index range [top_left, bottom_right) per axis covering ``new_aabb``, and
        whether an axis had to be widened.

        Snaps to whole voxels as the reference does. Deliberate guard the reference lacks:
        every axis keeps at least two voxels, since a one-voxel axis has no voxel size
        (``units`` divide by gridSize - 1).
        """
        new_aabb = np.asarray(new_aabb, dtype=np.float32)
        grid = np.asarray(self.gridSize, dtype=np.int64)
        top_left = np.round((new_aabb[0] - self.aabb[0]) / self.units).astype(np.int64)
        bottom_right = np.round((new_aabb[1] - self.aabb[0]) / self.units).astype(np.int64) + 1
        bottom_right = np.minimum(bottom_right, grid)
        too_thin = bottom_right - top_left < 2
        bottom_right = np.where(too_thin, np.minimum(top_left + 2, grid), bottom_right)
        top_left = np.where(too_thin, np.maximum(bottom_right - 2, 0), top_left)
        return top_left, bottom_right, bool(too_thin.any())

    def finish_shrink(self, new_aabb: np.ndarray, top_left: np.ndarray, bottom_right: np.ndarray,
                      widened: bool) -> None:
        """Adopt the cropped grid: new box and step size.

        When the alpha grid's resolution differs from the model's, or an axis was widened to
        two voxels, the box is corrected to the snapped voxel bounds (as the reference does).
        """
        new_aabb = np.asarray(new_aabb, dtype=np.float32)
        grid = np.asarray(self.gridSize, dtype=np.int64)
        mask_grid_differs = self.alphaMask is not None and list(self.alphaMask.grid_size) != list(self.gridSize)
        if mask_grid_differs or widened:
            low = top_left.astype(np.float32) / (grid - 1).astype(np.float32)
            high = (bottom_right - 1).astype(np.float32) / (grid - 1).astype(np.float32)
            new_aabb = np.stack([(1 - low) * self.aabb[0] + low * self.aabb[1],
                                 (1 - high) * self.aabb[0] + high * self.aabb[1]]).astype(np.float32)
        self.set_aabb(new_aabb)
        self.update_stepSize(bottom_right - top_left)

    def get_optparam_groups(self, lr_init_spatialxyz: float = 0.02, lr_init_network: float = 0.001) -> list[dict]:
        raise NotImplementedError

    def view_correction_groups(self, lr_init_network: float = 0.001) -> list[dict]:
        """Parameter groups of the per-view corrections, trained at the networks' rate (none
        without them); the optimizer puts them after the field's groups."""
        modules = [module for module in (self.appearance, self.pose_corrections) if module is not None]
        return [{"params": module.parameters(), "lr": lr_init_network} for module in modules]

    def feature2density(self, density_features: jt.Var) -> jt.Var:
        if self.fea2denseAct == "softplus":
            return softplus(density_features + self.density_shift)
        return nn.relu(density_features)

    # -------------------------------------------------------------- persistence
    def get_kwargs(self) -> dict:
        """Everything the constructor needs to rebuild this model (reference ``get_kwargs``; an
        unbounded model's adds its contraction)."""
        kwargs = {
            "aabb": jt.array(self.aabb),
            "gridSize": list(self.gridSize),
            "density_n_comp": list(self.density_n_comp),
            "appearance_n_comp": list(self.app_n_comp),
            "app_dim": self.app_dim,
            "density_shift": self.density_shift,
            "alphaMask_thres": self.alphaMask_thres,
            "distance_scale": self.distance_scale,
            "rayMarch_weight_thres": self.rayMarch_weight_thres,
            "fea2denseAct": self.fea2denseAct,
            "near_far": list(self.near_far),
            "step_ratio": self.step_ratio,
            "shadingMode": self.shadingMode,
            "pos_pe": self.pos_pe,
            "view_pe": self.view_pe,
            "fea_pe": self.fea_pe,
            "featureC": self.featureC,
        }
        if self.contraction is not None:
            kwargs["scene_contraction"] = self.contraction.norm
            kwargs["foreground_aabb"] = jt.array(self.contraction.foreground)
        if self.importance_samples:
            kwargs["importance_samples"] = self.importance_samples
        if self.appearance_dim or self.refine_poses:
            kwargs.update(appearance_dim=self.appearance_dim, refine_poses=self.refine_poses, n_views=self.n_views)
        return kwargs

    # ------------------------------------------------------------- alpha grid
    def compute_alpha(self, xyz: jt.Var, length: float | jt.Var = 1.0) -> jt.Var:
        """Opacity of a segment of ``length`` (world units; a number or [N]) at model-space points
        [N, 3] -> [N]; zero outside the mask."""
        if self.alphaMask is not None:
            index = flat_indices(self.alphaMask.sample_alpha(xyz, self.fused) > 0)
        else:
            index = jt.arange(xyz.shape[0]).int32()
        sigma = jt.zeros(xyz.shape[0], dtype="float32")
        if index.shape[0] > 0:
            features = self.compute_densityfeature(self.normalize_coord(xyz[index]))
            sigma[index] = self.feature2density(features)
        return 1.0 - jt.exp(-sigma * length)

    def getDenseAlpha(self, gridSize=None, chunk: int = 1 << 18, box: np.ndarray | None = None) -> tuple[jt.Var, jt.Var]:
        """Opacity on a regular grid spanning ``box`` (model space; default the grid's box), of
        one sampling step at each point; returns alpha [X, Y, Z] and points [X, Y, Z, 3]."""
        gridSize = self.gridSize if gridSize is None else [int(g) for g in gridSize]
        corners = self._aabb_var if box is None else jt.array(np.asarray(box, dtype=np.float32))
        with jt.no_grad():
            axes = [jt.array(linspace_f32(0.0, 1.0, int(n))) for n in gridSize]
            samples = jt.stack(jt.meshgrid(*axes), dim=-1)
            # Each product rounded on its own (no fused multiply-add), as in torch: the box the
            # first mask update shrinks to is built from these coordinates.
            dense_xyz = ((corners[0] * (1.0 - samples)).stop_fuse()
                         + (corners[1] * samples).stop_fuse())
            flat = dense_xyz.reshape(-1, 3)
            parts = []
            for start in range(0, flat.shape[0], chunk):
                points = flat[start:start + chunk]
                parts.append(self.compute_alpha(points, self.sampler.segment_length(points)))
            alpha = jt.concat(parts, dim=0).reshape(gridSize)
            alpha.sync()
        return alpha.stop_grad(), dense_xyz.stop_grad()

    def updateAlphaMask(self, gridSize=(200, 200, 200)) -> np.ndarray | None:
        """Rebuild the alpha grid from the current field; return the tight box around occupied space.

        When nothing is occupied the previous mask is kept and None is returned, with a warning,
        rather than masking out every sample (which would stop training for good).
        """
        with jt.no_grad():
            alpha, dense_xyz = self.getDenseAlpha(gridSize)
            occupancy = binarize_alpha(alpha, self.alphaMask_thres)
            bounds = occupied_bounds(occupancy, dense_xyz)
            if bounds is None:
                warnings.warn(
                    f"The alpha mask is empty: no voxel of the {list(gridSize)} grid reaches opacity "
                    f"{self.alphaMask_thres}. Keeping the previous mask and box; if this persists, lower "
                    "alpha_mask_thre or train longer before the first update_AlphaMask_list entry."
                )
                return None
            self.alphaMask = AlphaGridMask(self._aabb_var.clone(), occupancy)
            return bounds.numpy().astype(np.float32)

    def rays_hit(self, rays: np.ndarray, N_samples: int = 256, bbox_only: bool = False) -> np.ndarray:
        """Which of rays [M, 6] (numpy) can see anything: bool [M] (``sampler.rays_hit``)."""
        with jt.no_grad():
            rays = jt.array(rays)
            return self.sampler.rays_hit(rays[:, :3], rays[:, 3:6], self.alphaMask, N_samples, bbox_only,
                                         self.fused).numpy()

    # ------------------------------------------------------------------ forward
    def execute(
        self, rays_chunk: jt.Var, white_bg: bool = True, is_train: bool = False, ndc_ray: bool = False,
        N_samples: int = -1, jitter: jt.Var | None = None, with_opacity: bool = False,
        with_distortion: bool = False, view_ids: jt.Var | None = None,
    ) -> tuple[jt.Var, ...]:
        """Render rays [R, 6] (origin, direction) -> rgb_map [R, 3], depth_map [R], then with
        ``with_opacity`` the accumulated opacity acc_map [R] (the viewer shows it), and with
        ``with_distortion`` the mean distortion loss of the rays (``rendering.distortion``;
        unbounded scenes only, 0 otherwise).

        Follows the reference's ``TensorBase.forward``: sample (the sampler drops samples
        outside the grid or the alpha grid), evaluate density where samples remain, composite,
        and shade only samples whose weight exceeds ``rayMarch_weight_thres`` (training an
        unbounded scene with ``shading_roulette``: and a random share of fainter ones). The fused kernels
        do this on packed samples, the reference path on the dense [R, S] sample grid. An
        unbounded model with ``importance_samples`` K evaluates density alone there and renders
        each ray from K samples placed where that pass found its weight
        (``rendering.resampling``; training draws their stratification). ``ndc_ray``
        rays (forward-facing scenes) are sampled in NDC space on the dense grid by both paths;
        the fused field kernels still evaluate them. In training, each ray's samples shift by a
        random fraction of a step, drawn here unless ``jitter`` [R] gives them (the
        data-parallel trainer passes each rank its share of one draw per batch). A bounded
        scene's transparent part is white (``white_bg``, and at random half the training
        batches, as the reference does) or black; an unbounded scene's is black, always: its
        background is the scene's own, built of density in the contracted shell. ``view_ids`` [R]
        (int32) name the training view of each ray, for the per-view corrections; without them
        rays keep their poses and shade with the mean appearance code.
        """
        n_samples = N_samples if N_samples > 0 else self.nSamples
        corrected = self.pose_corrections is not None and view_ids is not None
        if corrected:
            rays_chunk = self.pose_corrections(rays_chunk, view_ids)
        codes = None if self.appearance is None else self.appearance(view_ids, rays_chunk.shape[0])
        white = not self.unbounded and (white_bg or (is_train and float(np.random.rand()) < 0.5))
        if is_train and self.jitter_samples and not ndc_ray:
            jitter = jt.rand(rays_chunk.shape[0]) if jitter is None else jitter
        else:
            jitter = None
        roulette = is_train and self.unbounded and self.shading_roulette > 0
        ray_draws = jt.rand((rays_chunk.shape[0], 2)) if roulette else None
        with self._positions_tracked(corrected):
            if self.importance_samples and not ndc_ray:
                bin_jitter = jt.rand(rays_chunk.shape[0]) if is_train and self.jitter_samples else None
                maps = renderer.render_resampled(self, rays_chunk, n_samples, jitter, bin_jitter, codes, ray_draws)
            elif self.fused and not ndc_ray:
                maps = renderer.render_packed(self, rays_chunk, white, n_samples, jitter, with_distortion, codes,
                                              corrected, ray_draws)
            else:
                maps = renderer.render_dense(self, rays_chunk, white, is_train, n_samples, ndc_ray, jitter,
                                             with_distortion, codes, corrected, ray_draws)
        rgb_map, depth_map, acc_map, distortion = maps
        return (rgb_map, depth_map) + ((acc_map,) if with_opacity else ()) + ((distortion,) if with_distortion else ())

    def shade(self, points: jt.Var, viewdirs: jt.Var, codes: jt.Var | None = None) -> jt.Var:
        """Colour [M, 3] of normalised points [M, 3] seen along viewdirs [M, 3], with appearance
        codes [M, appearance_dim] when the model has them (default: the mean code)."""
        if self.appearance is not None and codes is None:
            codes = self.appearance(None, points.shape[0])
        with stage("field"):
            features = self.compute_appfeature(points)
        with stage("shading"):
            if codes is None:
                return self.renderModule(points, viewdirs, features)
            return self.renderModule(points, viewdirs, features, codes)

    def density(self, xyz: jt.Var) -> jt.Var:
        """Density [N] at model-space points [N, 3]."""
        with stage("field"):
            return self.feature2density(self.compute_densityfeature(self.normalize_coord(xyz)))


def _numpy(box) -> np.ndarray:
    """A box given as numpy, a list or a ``jt.Var``, as a numpy array."""
    return box.numpy() if isinstance(box, jt.Var) else np.asarray(box)
