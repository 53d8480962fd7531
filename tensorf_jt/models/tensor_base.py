"""The radiance-field model around a tensor decomposition: sampling, masking, shading, compositing.

``TensorBase`` owns everything that is not the decomposition itself (reference
``models/tensorBase.py``): the scene box and its sampling step, the alpha grid, the shading
head, and the forward pass that ties them together. Subclasses provide the field through two
narrow calls -- normalised points [N, 3] in, density features [N] or appearance features
[N, app_dim] out -- plus the grid operations (upsample, shrink) and the regularisers.
"""
from __future__ import annotations

import warnings

import numpy as np
import jittor as jt
from jittor import nn

from tensorf_jt.kernels import check_kernels
from tensorf_jt.rendering import compositing
from tensorf_jt.rendering.alpha_grid import AlphaGridMask, binarize_alpha, occupied_bounds
from tensorf_jt.errors import ConfigError
from tensorf_jt.kernels.packed_compositing import composite_weights, segment_sum
from tensorf_jt.kernels.ray_marching import march_rays, rays_hit_alpha
from tensorf_jt.models.shading import build_shader
from tensorf_jt.runtime.profiling import stage
from tensorf_jt.rendering.sampling import ray_box_intersection, sample_along_rays, sample_along_rays_ndc, sample_distances
from tensorf_jt.rendering.torch_numerics import linspace_f32

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


def _flat_indices(mask: jt.Var) -> jt.Var:
    """Positions (int32) of the true entries of a boolean mask, flattened."""
    return jt.where(mask.reshape(-1))[0]


def kept_ray_ids(hit: np.ndarray, ray_ids: np.ndarray | None = None) -> np.ndarray:
    """The numbers of the rays ``hit`` marks (``ray_ids[i]`` for mark i; i itself for None).
    If none is marked, all are kept and a warning says so, as the reference's filter does
    not leave a scene without training rays."""
    if not hit.any():
        warnings.warn("Ray filtering would remove every training ray; keeping them all. "
                      "Check the dataset's scene box and camera poses.")
        return np.arange(len(hit)) if ray_ids is None else np.asarray(ray_ids)
    kept = np.flatnonzero(hit)
    return kept if ray_ids is None else np.asarray(ray_ids)[kept]


class TensorBase(nn.Module):
    """Radiance field over an axis-aligned box, rendered by ray marching.

    Constructor arguments are the reference's ``get_kwargs`` keys, so a checkpoint's kwargs
    rebuild the model (``device`` is gone: Jittor places Vars by ``jt.flags.use_cuda``).
    """

    # Which grid axes each of the three planes spans and which axis its line runs along.
    matMode = ((0, 1), (0, 2), (1, 2))
    vecMode = (2, 1, 0)
    # Whether the first alpha-mask update may crop the grid to the occupied box.
    can_shrink = True
    # Training jitters sample positions along each ray (``--perturb 1``); a training-time
    # setting, not part of the model's kwargs.
    jitter_samples = True

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
        kernels: str = "fused",
    ) -> None:
        super().__init__()
        if fea2denseAct not in DENSITY_ACTIVATIONS:
            raise ConfigError(
                f"fea2denseAct '{fea2denseAct}' is not supported; choose one of {', '.join(DENSITY_ACTIVATIONS)}."
            )
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
        self.renderModule = build_shader(shadingMode, self.app_dim, self.pos_pe, self.view_pe, self.fea_pe, self.featureC)
        self.kernels = kernels

    @property
    def kernels(self) -> str:
        """The implementation this model renders with: 'fused' kernels or the 'reference' path
        (``tensorf_jt.kernels``); a setting of the model, saved in its checkpoint."""
        return self._kernels

    @kernels.setter
    def kernels(self, name: str) -> None:
        self._kernels = check_kernels(name)
        self.renderModule.fused = self.fused

    @property
    def fused(self) -> bool:
        return self._kernels == "fused"

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
        """Set the scene box ([2, 3]; numpy, list or Var). Kept as float32 numpy plus a Var copy."""
        aabb = aabb.numpy() if isinstance(aabb, jt.Var) else np.asarray(aabb)
        self.aabb = aabb.astype(np.float32).reshape(2, 3)
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
        self.nSamples = int(np.float32(self.aabbDiag) / np.float32(self.stepSize)) + 1

    def normalize_coord(self, xyz: jt.Var) -> jt.Var:
        """World points [N, 3] -> box coordinates in [-1, 1]."""
        return (xyz - self._aabb_var[0]) * self._inv_half_size_var - 1.0

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

    def feature2density(self, density_features: jt.Var) -> jt.Var:
        if self.fea2denseAct == "softplus":
            return softplus(density_features + self.density_shift)
        return nn.relu(density_features)

    # -------------------------------------------------------------- persistence
    def get_kwargs(self) -> dict:
        """Everything the constructor needs to rebuild this model (reference ``get_kwargs``)."""
        return {
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

    # ------------------------------------------------------------- alpha grid
    def compute_alpha(self, xyz: jt.Var, length: float = 1.0) -> jt.Var:
        """Opacity of a segment of ``length`` at world points [N, 3] -> [N]; zero outside the mask."""
        if self.alphaMask is not None:
            index = _flat_indices(self.alphaMask.sample_alpha(xyz, self.fused) > 0)
        else:
            index = jt.arange(xyz.shape[0]).int32()
        sigma = jt.zeros(xyz.shape[0], dtype="float32")
        if index.shape[0] > 0:
            features = self.compute_densityfeature(self.normalize_coord(xyz[index]))
            sigma[index] = self.feature2density(features)
        return 1.0 - jt.exp(-sigma * length)

    def getDenseAlpha(self, gridSize=None, chunk: int = 1 << 18) -> tuple[jt.Var, jt.Var]:
        """Opacity on a regular grid spanning the box; returns alpha [X, Y, Z] and points [X, Y, Z, 3]."""
        gridSize = self.gridSize if gridSize is None else [int(g) for g in gridSize]
        with jt.no_grad():
            axes = [jt.array(linspace_f32(0.0, 1.0, int(n))) for n in gridSize]
            samples = jt.stack(jt.meshgrid(*axes), dim=-1)
            # Each product rounded on its own (no fused multiply-add), as in torch: the box the
            # first mask update shrinks to is built from these coordinates.
            dense_xyz = ((self._aabb_var[0] * (1.0 - samples)).stop_fuse()
                         + (self._aabb_var[1] * samples).stop_fuse())
            flat = dense_xyz.reshape(-1, 3)
            parts = [
                self.compute_alpha(flat[start:start + chunk], self.stepSize)
                for start in range(0, flat.shape[0], chunk)
            ]
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

    # ----------------------------------------------------------- ray filtering
    def rays_hit(self, rays: np.ndarray, N_samples: int = 256, bbox_only: bool = False) -> np.ndarray:
        """Which of rays [M, 6] (numpy) can see anything: bool [M].

        ``bbox_only``: the ray crosses the box; otherwise one of ``N_samples`` evenly spaced
        samples meets the alpha grid (the reference's ``filtering_rays`` test).
        """
        with jt.no_grad():
            rays = jt.array(rays)
            rays_o, rays_d = rays[:, :3], rays[:, 3:6]
            if bbox_only or self.alphaMask is None:
                t_enter, t_exit = ray_box_intersection(rays_o, rays_d, self._aabb_var)
                hit = t_exit > t_enter
            elif self.fused:
                t_enter, _ = ray_box_intersection(rays_o, rays_d, self._aabb_var)
                t_start = t_enter.clamp(min_v=self.near_far[0], max_v=self.near_far[1])
                hit = rays_hit_alpha(rays_o, rays_d, t_start, self.alphaMask, self.stepSize, N_samples)
            else:
                xyz, _, _ = sample_along_rays(rays_o, rays_d, self._aabb_var, self.near_far,
                                              self.stepSize, N_samples, jitter=None)
                alpha = self.alphaMask.sample_alpha(xyz.reshape(-1, 3), self.fused).reshape(xyz.shape[:2])
                hit = (alpha > 0).any(-1)
            return hit.numpy()

    def ray_hit_mask(self, source, ray_ids: np.ndarray | slice, N_samples: int = 256, chunk: int = 10240 * 5,
                     bbox_only: bool = False) -> np.ndarray:
        """For each of the ``source``'s rays numbered ``ray_ids`` (an array, or a slice of all its
        ray numbers), whether it can see anything (``rays_hit``). ``source`` makes rays by number
        (``ViewDataset.rays_at``), a chunk at a time, so no array of every ray is built."""
        if isinstance(ray_ids, slice):
            first, stop, _ = ray_ids.indices(source.n_rays)
            total = max(stop - first, 0)
        else:
            first, total = 0, len(ray_ids)
        hit = np.zeros(total, dtype=bool)
        for start in range(0, total, chunk):
            ids = (np.arange(first + start, first + min(start + chunk, total)) if isinstance(ray_ids, slice)
                   else ray_ids[start:start + chunk])
            hit[start:start + len(ids)] = self.rays_hit(source.rays_at(ids), N_samples, bbox_only)
        return hit

    def filtering_ray_ids(self, source, ray_ids: np.ndarray | None = None, N_samples: int = 256,
                          chunk: int = 10240 * 5, bbox_only: bool = False) -> np.ndarray:
        """The reference's ``filtering_rays`` over rays made on demand: of the ``source``'s rays
        numbered ``ray_ids`` (None: all ``source.n_rays``), the numbers of those that can see
        anything, in order (``ray_hit_mask``, then ``kept_ray_ids``)."""
        hit = self.ray_hit_mask(source, slice(None) if ray_ids is None else ray_ids, N_samples, chunk, bbox_only)
        return kept_ray_ids(hit, ray_ids)

    # ------------------------------------------------------------------ forward
    def execute(
        self, rays_chunk: jt.Var, white_bg: bool = True, is_train: bool = False, ndc_ray: bool = False,
        N_samples: int = -1, jitter: jt.Var | None = None, with_opacity: bool = False,
    ) -> tuple[jt.Var, ...]:
        """Render rays [R, 6] (origin, direction) -> rgb_map [R, 3], depth_map [R], and with
        ``with_opacity`` the accumulated opacity acc_map [R] (the viewer shows it).

        Follows the reference's ``TensorBase.forward``: march the box, drop samples outside
        it or outside the alpha grid, evaluate density where samples remain, composite, and
        shade only samples whose weight exceeds ``rayMarch_weight_thres``. The fused kernels
        do this on packed samples, the reference path on the dense [R, S] sample grid.
        ``ndc_ray`` rays (forward-facing scenes) are sampled in NDC space on the dense grid by
        both paths; the fused field kernels still evaluate them. In training, each ray's
        samples shift by a random fraction of a step, drawn here unless ``jitter`` [R] gives
        them (the data-parallel trainer passes each rank its share of one draw per batch).
        """
        n_samples = N_samples if N_samples > 0 else self.nSamples
        white = white_bg or (is_train and float(np.random.rand()) < 0.5)
        if is_train and self.jitter_samples and not ndc_ray:
            jitter = jt.rand(rays_chunk.shape[0]) if jitter is None else jitter
        else:
            jitter = None
        if self.fused and not ndc_ray:
            maps = self._render_packed(rays_chunk, white, n_samples, jitter)
        else:
            maps = self._render_dense(rays_chunk, white, is_train, n_samples, ndc_ray, jitter)
        return maps if with_opacity else maps[:2]

    def _shade(self, points: jt.Var, viewdirs: jt.Var) -> jt.Var:
        """Colour [M, 3] of normalised points [M, 3] seen along viewdirs [M, 3]."""
        with stage("field"):
            features = self.compute_appfeature(points)
        with stage("shading"):
            return self.renderModule(points, viewdirs, features)

    def _render_dense(self, rays_chunk: jt.Var, white: bool, is_train: bool, n_samples: int, ndc_ray: bool = False,
                      jitter: jt.Var | None = None):
        rays_o, viewdirs = rays_chunk[:, :3], rays_chunk[:, 3:6]
        n_rays = rays_chunk.shape[0]
        with stage("sampling"):
            if ndc_ray:
                xyz, z_vals, inside = sample_along_rays_ndc(
                    rays_o, viewdirs, self._aabb_var, self.near_far, n_samples, jitter=is_train and self.jitter_samples)
                # NDC directions are not unit length: distances scale by their norm, and the
                # shading sees the normalised direction.
                ray_norm = jt.sqrt(jt.sqr(viewdirs).sum(-1, keepdims=True))
                dists = sample_distances(z_vals) * ray_norm
                viewdirs = viewdirs / ray_norm
            else:
                xyz, z_vals, inside = sample_along_rays(rays_o, viewdirs, self._aabb_var, self.near_far,
                                                        self.stepSize, n_samples, jitter=jitter)
                dists = sample_distances(z_vals)
            xyz = xyz.reshape(-1, 3)
            valid = _flat_indices(inside)
            if self.alphaMask is not None and valid.shape[0] > 0:
                valid = valid[_flat_indices(self.alphaMask.sample_alpha(xyz[valid], self.fused) > 0)]

        sigma = jt.zeros(n_rays * n_samples, dtype="float32")
        if valid.shape[0] > 0:
            with stage("field"):
                sigma[valid] = self.feature2density(self.compute_densityfeature(self.normalize_coord(xyz[valid])))
        sigma = sigma.reshape(n_rays, n_samples)

        with stage("compositing"):
            _, weights, _ = compositing.raw2alpha(sigma, dists * self.distance_scale)
            shaded = _flat_indices(weights > self.rayMarch_weight_thres)
        rgb = jt.zeros((n_rays * n_samples, 3), dtype="float32")
        if shaded.shape[0] > 0:
            rgb[shaded] = self._shade(self.normalize_coord(xyz[shaded]), viewdirs[shaded // n_samples])
        rgb = rgb.reshape(n_rays, n_samples, 3)

        with stage("compositing"):
            return compositing.accumulate(weights, rgb, z_vals, rays_chunk[:, -1], white)

    def _render_packed(self, rays_chunk: jt.Var, white: bool, n_samples: int, jitter: jt.Var | None):
        n_rays = rays_chunk.shape[0]
        rays_o, viewdirs = rays_chunk[:, :3], rays_chunk[:, 3:6]
        with stage("sampling"):
            t_enter, _ = ray_box_intersection(rays_o, viewdirs, self._aabb_var)
            t_start = t_enter.clamp(min_v=self.near_far[0], max_v=self.near_far[1])
            jitter = jt.zeros(n_rays, dtype="float32") if jitter is None else jitter
            samples = march_rays(rays_o, viewdirs, t_start, jitter, self._aabb_var, self.alphaMask,
                                 self.stepSize, n_samples)
        rgb_sum = jt.zeros((n_rays, 3), dtype="float32")
        if samples.count == 0:
            zeros = jt.zeros(n_rays, dtype="float32")
            return compositing.finish_pixels(rgb_sum, zeros, zeros, rays_chunk[:, -1], white)

        with stage("field"):
            sigma = self.feature2density(self.compute_densityfeature(self.normalize_coord(samples.xyz)))
        with stage("compositing"):
            weights = composite_weights(sigma, samples.dist * self.distance_scale, samples.ray_offsets)
            shaded = _flat_indices(weights > self.rayMarch_weight_thres)
        if shaded.shape[0] > 0:
            ray_of_sample = samples.ray_index[shaded]
            rgb = self._shade(self.normalize_coord(samples.xyz[shaded]), viewdirs[ray_of_sample])
            with stage("compositing"):
                rgb_sum = segment_sum(weights[shaded].unsqueeze(1) * rgb, ray_of_sample, n_rays)
        with stage("compositing"):
            with jt.no_grad():
                depth_sum = segment_sum(weights * samples.z, samples.ray_index, n_rays)
            acc = segment_sum(weights, samples.ray_index, n_rays)
            return compositing.finish_pixels(rgb_sum, acc, depth_sum.stop_grad(), rays_chunk[:, -1], white)
