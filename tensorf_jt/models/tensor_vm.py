"""TensorVMSplit: the vector-matrix (VM) decomposition of density and appearance grids.

Each of the three axis-aligned planes (XY, XZ, YZ) is paired with a line along the remaining
axis (Z, Y, X). A component's value at a point is plane(u, v) * line(w); density sums all
components, appearance concatenates them and mixes them with ``basis_mat`` into ``app_dim``
features. Parameter names and shapes are the reference's: planes [1, C, H, W], lines
[1, C, L, 1], where H/W/L follow ``gridSize`` (x, y, z) through ``matMode`` and ``vecMode``.
"""
from __future__ import annotations

import numpy as np
import jittor as jt
from jittor import nn

from tensorf_jt import kernels
from tensorf_jt.interpolation import bilinear_sample, linear_sample
from tensorf_jt.kernels.vm_field import vm_features
from tensorf_jt.losses import total_variation
from tensorf_jt.models.tensor_base import TensorBase


def as_trainable(var: jt.Var) -> jt.Var:
    """A fresh leaf that the optimizer will update.

    Vars made under ``jt.no_grad()`` (upsampling, shrinking) are stop-grad: Jittor still lists
    them as parameters, but Adam skips them silently. The copy is detached from the history
    that made it and explicitly re-enabled for gradients.
    """
    leaf = var.detach().clone()
    leaf.start_grad()
    return leaf


class TensorVMSplit(TensorBase):
    """VM-decomposed radiance field (reference ``models/tensoRF.py: TensorVMSplit``)."""

    def init_svd_volume(self) -> None:
        self.density_plane, self.density_line = self._init_one_svd(self.density_n_comp, 0.1)
        self.app_plane, self.app_line = self._init_one_svd(self.app_n_comp, 0.1)
        self.basis_mat = nn.Linear(sum(self.app_n_comp), self.app_dim, bias=False)

    def _init_one_svd(self, n_component: list[int], scale: float) -> tuple[nn.ParameterList, nn.ParameterList]:
        planes, lines = [], []
        for i, vec_id in enumerate(self.vecMode):
            mat_id_0, mat_id_1 = self.matMode[i]
            planes.append(as_trainable(scale * jt.randn(
                (1, n_component[i], self.gridSize[mat_id_1], self.gridSize[mat_id_0]))))
            lines.append(as_trainable(scale * jt.randn((1, n_component[i], self.gridSize[vec_id], 1))))
        return nn.ParameterList(planes), nn.ParameterList(lines)

    def get_optparam_groups(self, lr_init_spatialxyz: float = 0.02, lr_init_network: float = 0.001) -> list[dict]:
        """Parameter groups with the reference's learning rates: grids fast, networks slow."""
        return [
            {"params": list(self.density_line), "lr": lr_init_spatialxyz},
            {"params": list(self.density_plane), "lr": lr_init_spatialxyz},
            {"params": list(self.app_line), "lr": lr_init_spatialxyz},
            {"params": list(self.app_plane), "lr": lr_init_spatialxyz},
            {"params": self.basis_mat.parameters(), "lr": lr_init_network},
            {"params": self.renderModule.parameters(), "lr": lr_init_network},
        ]

    # ------------------------------------------------------------ field lookups
    @staticmethod
    def _channel_last(planes, lines) -> tuple[list[jt.Var], list[jt.Var]]:
        """Planes [1, C, H, W] -> [H, W, C] and lines [1, C, L, 1] -> [L, C]: one texel's
        components become contiguous, which is what the lookups read."""
        return ([plane[0].permute(1, 2, 0) for plane in planes],
                [line[0, :, :, 0].transpose(1, 0) for line in lines])

    def _plane_line_products(self, planes, lines, xyz_normed: jt.Var) -> list[jt.Var]:
        """Per axis i, plane_i(u, v) * line_i(w) for every component: a list of [N, C_i]."""
        planes, lines = self._channel_last(planes, lines)
        products = []
        for i, vec_id in enumerate(self.vecMode):
            mat_id_0, mat_id_1 = self.matMode[i]
            plane_values = bilinear_sample(planes[i], xyz_normed[:, mat_id_0], xyz_normed[:, mat_id_1])
            line_values = linear_sample(lines[i], xyz_normed[:, vec_id])
            products.append(plane_values * line_values)
        return products

    def compute_densityfeature(self, xyz_normed: jt.Var) -> jt.Var:
        if kernels.fused_enabled():
            return vm_features(xyz_normed, *self._channel_last(self.density_plane, self.density_line), density_mode=True)
        products = self._plane_line_products(self.density_plane, self.density_line, xyz_normed)
        return sum(p.sum(-1) for p in products)

    def compute_appfeature(self, xyz_normed: jt.Var) -> jt.Var:
        if kernels.fused_enabled():
            products = vm_features(xyz_normed, *self._channel_last(self.app_plane, self.app_line), density_mode=False)
        else:
            products = jt.concat(self._plane_line_products(self.app_plane, self.app_line, xyz_normed), dim=-1)
        return self.basis_mat(products)

    # ------------------------------------------------------------- regularisers
    def vector_comp_diffs(self) -> jt.Var:
        """Orthogonality penalty: mean |off-diagonal| of each line set's Gram matrix."""
        total = 0.0
        for lines in (self.density_line, self.app_line):
            for line in lines:
                n_comp, n_size = line.shape[1], line.shape[2]
                vectors = line.reshape(n_comp, n_size)
                gram = jt.matmul(vectors, vectors.transpose(1, 0))
                off_diagonal = gram * (1.0 - jt.init.eye(n_comp, "float32"))
                total = total + off_diagonal.abs().sum() / (n_comp * (n_comp - 1))
        return total

    def density_L1(self) -> jt.Var:
        """Mean absolute value of every density plane and line (sparsity prior)."""
        total = 0.0
        for plane, line in zip(self.density_plane, self.density_line):
            total = total + plane.abs().mean() + line.abs().mean()
        return total

    def TV_loss_density(self) -> jt.Var:
        return sum(total_variation(plane) * 1e-2 for plane in self.density_plane)

    def TV_loss_app(self) -> jt.Var:
        return sum(total_variation(plane) * 1e-2 for plane in self.app_plane)

    # --------------------------------------------------------- grid operations
    def upsample_volume_grid(self, res_target) -> None:
        """Resize planes and lines to ``res_target`` (x, y, z) by bilinear interpolation."""
        res_target = [int(r) for r in res_target]
        with jt.no_grad():
            for planes, lines in ((self.app_plane, self.app_line), (self.density_plane, self.density_line)):
                for i, vec_id in enumerate(self.vecMode):
                    mat_id_0, mat_id_1 = self.matMode[i]
                    planes[i] = as_trainable(nn.interpolate(
                        planes[i], size=(res_target[mat_id_1], res_target[mat_id_0]),
                        mode="bilinear", align_corners=True))
                    lines[i] = as_trainable(nn.interpolate(
                        lines[i], size=(res_target[vec_id], 1), mode="bilinear", align_corners=True))
        self.update_stepSize(res_target)

    def shrink(self, new_aabb: np.ndarray) -> None:
        """Crop planes and lines to the voxels covering ``new_aabb`` and shrink the box to match.

        The crop snaps to whole voxels; when the alpha grid's resolution differs from the
        model's, the box is corrected to the snapped voxel bounds (as the reference does), and
        likewise when an axis had to be widened to two voxels.
        """
        new_aabb = np.asarray(new_aabb, dtype=np.float32)
        grid = np.asarray(self.gridSize, dtype=np.int64)
        top_left = np.round((new_aabb[0] - self.aabb[0]) / self.units).astype(np.int64)
        bottom_right = np.round((new_aabb[1] - self.aabb[0]) / self.units).astype(np.int64) + 1
        bottom_right = np.minimum(bottom_right, grid)
        # Deliberate guard the reference lacks: keep at least two voxels per axis, since a
        # one-voxel axis has no voxel size (units divide by gridSize - 1).
        too_thin = bottom_right - top_left < 2
        bottom_right = np.where(too_thin, np.minimum(top_left + 2, grid), bottom_right)
        top_left = np.where(too_thin, np.maximum(bottom_right - 2, 0), top_left)

        with jt.no_grad():
            for i, vec_id in enumerate(self.vecMode):
                lo, hi = top_left[vec_id], bottom_right[vec_id]
                self.density_line[i] = as_trainable(self.density_line[i][:, :, lo:hi, :])
                self.app_line[i] = as_trainable(self.app_line[i][:, :, lo:hi, :])
                mode0, mode1 = self.matMode[i]
                rows = slice(top_left[mode1], bottom_right[mode1])
                cols = slice(top_left[mode0], bottom_right[mode0])
                self.density_plane[i] = as_trainable(self.density_plane[i][:, :, rows, cols])
                self.app_plane[i] = as_trainable(self.app_plane[i][:, :, rows, cols])

        mask_grid_differs = self.alphaMask is not None and list(self.alphaMask.grid_size) != list(self.gridSize)
        if mask_grid_differs or too_thin.any():
            low = top_left.astype(np.float32) / (grid - 1).astype(np.float32)
            high = (bottom_right - 1).astype(np.float32) / (grid - 1).astype(np.float32)
            new_aabb = np.stack([(1 - low) * self.aabb[0] + low * self.aabb[1],
                                 (1 - high) * self.aabb[0] + high * self.aabb[1]]).astype(np.float32)
        self.set_aabb(new_aabb)
        self.update_stepSize(bottom_right - top_left)
