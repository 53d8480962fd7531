"""The radiance field: a tensor decomposition of density and appearance, and its alpha grid.

``TensorBase`` is the *field* of the reference's ``models/tensorBase.py``: the decomposed grids
(subclasses provide them through two narrow calls -- normalised points [N, 3] in, density
features [N] or appearance features [N, app_dim] out -- plus the grid operations and the
regularisers), the density activation, the shading head and the alpha grid. It lives in
*model space* and knows nothing of rays: a sampler (``rendering.samplers``) places the samples
and maps the world into model space, a route (``rendering.renderer``) composites them, and
``models.tensorf_model.TensoRFModel`` puts the three together.
"""
from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
import jittor as jt
from jittor import nn

from tensorf_jt.errors import ConfigError
from tensorf_jt.models.shading import build_shader
from tensorf_jt.rendering.alpha_grid import AlphaGridMask, binarize_alpha, occupied_bounds
from tensorf_jt.rendering.samplers import flat_indices
from tensorf_jt.rendering.torch_numerics import linspace_f32
from tensorf_jt.runtime.profiling import stage

DENSITY_ACTIVATIONS = ("softplus", "relu")
# A step's world length at model-space points [N, 3] (``Sampler.segment_length``).
StepLength = Callable[[jt.Var], "float | jt.Var"]


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
    """Radiance field over an axis-aligned grid in model space.

    Constructor arguments are the field's part of the reference's ``get_kwargs`` keys
    (``device`` is gone: Jittor places Vars by ``jt.flags.use_cuda``); the sampler's and the
    compositing's keys (``near_far``, ``step_ratio``, ``distance_scale``,
    ``rayMarch_weight_thres``, ...) are ``models.factory``'s to split off.
    """

    # Which grid axes each of the three planes spans and which axis its line runs along.
    matMode = ((0, 1), (0, 2), (1, 2))
    vecMode = (2, 1, 0)
    # Whether the decomposition's grids can be cropped (TensorVM's single cube cannot).
    crops_grid = True
    # Parameters stored in another layout than the reference's, by name before the first '.':
    # (to the reference's layout, back) (``models.grid_layout``). Others are stored as saved.
    stored_layouts: dict[str, tuple[Callable[[jt.Var], jt.Var], Callable[[jt.Var], jt.Var]]] = {}

    def __init__(
        self,
        aabb,
        gridSize,
        density_n_comp=8,
        appearance_n_comp=24,
        app_dim: int = 27,
        shadingMode: str = "MLP_PE",
        alphaMask: AlphaGridMask | None = None,
        density_shift: float = -10,
        alphaMask_thres: float = 0.001,
        pos_pe: int = 6,
        view_pe: int = 6,
        fea_pe: int = 6,
        featureC: int = 128,
        fea2denseAct: str = "softplus",
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
        self.fea2denseAct = fea2denseAct
        self.set_aabb(aabb)
        self.set_grid_size(gridSize)

        self.init_svd_volume()

        self.shadingMode, self.pos_pe, self.view_pe, self.fea_pe, self.featureC = (
            shadingMode, int(pos_pe), int(view_pe), int(fea_pe), int(featureC))
        self.renderModule = build_shader(shadingMode, self.app_dim, self.pos_pe, self.view_pe, self.fea_pe, self.featureC)
        self.fused = True

    @property
    def fused(self) -> bool:
        """Whether grid lookups and the shader's input encoding run in the fused kernels
        (``tensorf_jt.kernels``); the model's ``kernels`` setting sets it."""
        return self._fused

    @fused.setter
    def fused(self, value: bool) -> None:
        self._fused = bool(value)
        self.renderModule.fused = self._fused

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

    def set_grid_size(self, gridSize) -> None:
        """The grid's resolution (x, y, z) and voxel size ``units``, in float32 as the reference
        computes them (its ``update_stepSize``; the step itself is the sampler's)."""
        self.gridSize = [int(g) for g in gridSize]
        self.units = self.aabbSize / (np.asarray(self.gridSize, dtype=np.float32) - np.float32(1))

    def normalize_coord(self, xyz: jt.Var) -> jt.Var:
        """Model-space points [N, 3] -> grid coordinates in [-1, 1]."""
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
        """Adopt the cropped grid: its new box and resolution.

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
        self.set_grid_size(bottom_right - top_left)

    def get_optparam_groups(self, lr_init_spatialxyz: float = 0.02, lr_init_network: float = 0.001) -> list[dict]:
        raise NotImplementedError

    def feature2density(self, density_features: jt.Var) -> jt.Var:
        if self.fea2denseAct == "softplus":
            return softplus(density_features + self.density_shift)
        return nn.relu(density_features)

    # -------------------------------------------------------------- persistence
    def to_reference(self, name: str, value: jt.Var) -> jt.Var:
        """Parameter ``name``'s ``value`` (or its gradient or Adam moment) in the reference's layout."""
        layout = self.stored_layouts.get(name.split(".")[0])
        return value if layout is None else layout[0](value)

    def from_reference(self, name: str, value: jt.Var) -> jt.Var:
        """``to_reference`` undone: a saved tensor in the layout parameter ``name`` is stored in."""
        layout = self.stored_layouts.get(name.split(".")[0])
        return value if layout is None else layout[1](value)

    def reference_state_dict(self) -> dict[str, jt.Var]:
        """The parameters by name, in the reference's layout (what files hold)."""
        return {name: self.to_reference(name, var) for name, var in self.state_dict().items()}

    def parameter_names(self) -> dict[int, str]:
        """Each parameter's name, by the ``id`` of its Var (an optimizer lists the Vars alone)."""
        return {id(var): name for name, var in self.state_dict().items()}

    def get_kwargs(self) -> dict:
        """The field's constructor arguments (its part of the reference's ``get_kwargs``)."""
        return {
            "aabb": jt.array(self.aabb),
            "gridSize": list(self.gridSize),
            "density_n_comp": list(self.density_n_comp),
            "appearance_n_comp": list(self.app_n_comp),
            "app_dim": self.app_dim,
            "density_shift": self.density_shift,
            "alphaMask_thres": self.alphaMask_thres,
            "fea2denseAct": self.fea2denseAct,
            "shadingMode": self.shadingMode,
            "pos_pe": self.pos_pe,
            "view_pe": self.view_pe,
            "fea_pe": self.fea_pe,
            "featureC": self.featureC,
        }

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

    def getDenseAlpha(self, step_length: StepLength, gridSize=None, chunk: int = 1 << 18,
                      box: np.ndarray | None = None) -> tuple[jt.Var, jt.Var]:
        """Opacity on a regular grid spanning ``box`` (model space; default the grid's box), of
        one sampling step at each point (``step_length``, the sampler's); returns alpha
        [X, Y, Z] and points [X, Y, Z, 3]."""
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
                parts.append(self.compute_alpha(points, step_length(points)))
            alpha = jt.concat(parts, dim=0).reshape(gridSize)
            alpha.sync()
        return alpha.stop_grad(), dense_xyz.stop_grad()

    def updateAlphaMask(self, step_length: StepLength, gridSize=(200, 200, 200)) -> np.ndarray | None:
        """Rebuild the alpha grid from the current field; return the tight box around occupied space.

        When nothing is occupied the previous mask is kept and None is returned, with a warning,
        rather than masking out every sample (which would stop training for good).
        """
        with jt.no_grad():
            alpha, dense_xyz = self.getDenseAlpha(step_length, gridSize)
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

    # -------------------------------------------------------------- evaluation
    def shade(self, points: jt.Var, viewdirs: jt.Var) -> jt.Var:
        """Colour [M, 3] of normalised points [M, 3] seen along viewdirs [M, 3]."""
        with stage("field"):
            features = self.compute_appfeature(points)
        with stage("shading"):
            return self.renderModule(points, viewdirs, features)

    def density(self, xyz: jt.Var) -> jt.Var:
        """Density [N] at model-space points [N, 3]."""
        with stage("field"):
            return self.feature2density(self.compute_densityfeature(self.normalize_coord(xyz)))


def _numpy(box) -> np.ndarray:
    """A box given as numpy, a list or a ``jt.Var``, as a numpy array."""
    return box.numpy() if isinstance(box, jt.Var) else np.asarray(box)
