"""TensorVMSplit: the vector-matrix (VM) decomposition of density and appearance grids.

Each of the three axis-aligned planes (XY, XZ, YZ) is paired with a line along the remaining
axis (Z, Y, X). A component's value at a point is plane(u, v) * line(w); density sums all
components, appearance concatenates them and mixes them with ``basis_mat`` into ``app_dim``
features. Parameter names are the reference's; planes are stored [H, W, C] and lines [L, C]
(``models.grid_layout``), where H/W/L follow ``gridSize`` (x, y, z) through ``matMode`` and
``vecMode``, and saved in the reference's [1, C, H, W] and [1, C, L, 1].
"""
from __future__ import annotations

import numpy as np
import jittor as jt
from jittor import nn

from tensorf_jt.rendering.interpolation import bilinear_sample, linear_sample
from tensorf_jt.kernels.vm_field import vm_features
from tensorf_jt.models.grid_layout import LINE, PLANE, line_from_reference, plane_from_reference
from tensorf_jt.models.regularizers import line_orthogonality, total_variation
from tensorf_jt.models.tensor_base import TensorBase, as_trainable


class TensorVMSplit(TensorBase):
    """VM-decomposed radiance field (reference ``models/tensoRF.py: TensorVMSplit``)."""

    stored_layouts = {"density_plane": PLANE, "app_plane": PLANE,
                      "density_line": LINE, "app_line": LINE}

    def init_svd_volume(self) -> None:
        self.density_plane, self.density_line = self._init_one_svd(self.density_n_comp, 0.1)
        self.app_plane, self.app_line = self._init_one_svd(self.app_n_comp, 0.1)
        self.basis_mat = nn.Linear(sum(self.app_n_comp), self.app_dim, bias=False)

    def _init_one_svd(self, n_component: list[int], scale: float) -> tuple[nn.ParameterList, nn.ParameterList]:
        """Random planes and lines, drawn in the reference's layout and order, stored channel-last."""
        planes, lines = [], []
        for i, vec_id in enumerate(self.vecMode):
            mat_id_0, mat_id_1 = self.matMode[i]
            planes.append(as_trainable(plane_from_reference(scale * jt.randn(
                (1, n_component[i], self.gridSize[mat_id_1], self.gridSize[mat_id_0])))))
            lines.append(as_trainable(line_from_reference(
                scale * jt.randn((1, n_component[i], self.gridSize[vec_id], 1)))))
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
    def _plane_line_products(self, planes, lines, xyz_normed: jt.Var) -> list[jt.Var]:
        """Per axis i, plane_i(u, v) * line_i(w) for every component: a list of [N, C_i]."""
        products = []
        for i, vec_id in enumerate(self.vecMode):
            mat_id_0, mat_id_1 = self.matMode[i]
            plane_values = bilinear_sample(planes[i], xyz_normed[:, mat_id_0], xyz_normed[:, mat_id_1])
            line_values = linear_sample(lines[i], xyz_normed[:, vec_id])
            products.append(plane_values * line_values)
        return products

    def density_grids(self) -> tuple[list[jt.Var], list[jt.Var]]:
        """The three density planes [H, W, C] and lines [L, C], in matMode/vecMode order."""
        return list(self.density_plane), list(self.density_line)

    def app_grids(self) -> tuple[list[jt.Var], list[jt.Var]]:
        """The three appearance planes and lines, as ``density_grids``."""
        return list(self.app_plane), list(self.app_line)

    def compute_densityfeature(self, xyz_normed: jt.Var) -> jt.Var:
        planes, lines = self.density_grids()
        if self.fused:
            return vm_features(xyz_normed, planes, lines, density_mode=True)
        return sum(p.sum(-1) for p in self._plane_line_products(planes, lines, xyz_normed))

    def compute_appfeature(self, xyz_normed: jt.Var) -> jt.Var:
        planes, lines = self.app_grids()
        if self.fused:
            products = vm_features(xyz_normed, planes, lines, density_mode=False)
        else:
            products = jt.concat(self._plane_line_products(planes, lines, xyz_normed), dim=-1)
        return self.basis_mat(products)

    # ------------------------------------------------------------- regularisers
    # Written over ``density_grids`` / ``app_grids``, so TensorVM's stacked storage shares them.
    def vector_comp_diffs(self) -> jt.Var:
        """Orthogonality penalty over the components of every density and appearance line."""
        return line_orthogonality(self.density_grids()[1] + self.app_grids()[1])

    def density_L1(self) -> jt.Var:
        """Mean absolute value of every density plane and line (sparsity prior)."""
        total = 0.0
        for plane, line in zip(*self.density_grids()):
            total = total + plane.abs().mean() + line.abs().mean()
        return total

    def TV_loss_density(self) -> jt.Var:
        return sum(total_variation(plane) * 1e-2 for plane in self.density_grids()[0])

    def TV_loss_app(self) -> jt.Var:
        return sum(total_variation(plane) * 1e-2 for plane in self.app_grids()[0])

    # --------------------------------------------------------- grid operations
    def upsample_volume_grid(self, res_target) -> None:
        """Resize planes and lines to ``res_target`` (x, y, z) by bilinear interpolation (in the
        reference's layout, where ``nn.interpolate`` works)."""
        res_target = [int(r) for r in res_target]
        plane_to, plane_from = PLANE
        line_to, line_from = LINE
        with jt.no_grad():
            for planes, lines in ((self.app_plane, self.app_line), (self.density_plane, self.density_line)):
                for i, vec_id in enumerate(self.vecMode):
                    mat_id_0, mat_id_1 = self.matMode[i]
                    planes[i] = as_trainable(plane_from(nn.interpolate(
                        plane_to(planes[i]), size=(res_target[mat_id_1], res_target[mat_id_0]),
                        mode="bilinear", align_corners=True)))
                    lines[i] = as_trainable(line_from(nn.interpolate(
                        line_to(lines[i]), size=(res_target[vec_id], 1), mode="bilinear", align_corners=True)))
        self.set_grid_size(res_target)

    def shrink(self, new_aabb: np.ndarray) -> None:
        """Crop planes and lines to the voxels covering ``new_aabb`` and shrink the box to match.

        The crop snaps to whole voxels; when the alpha grid's resolution differs from the
        model's, the box is corrected to the snapped voxel bounds (as the reference does), and
        likewise when an axis had to be widened to two voxels.
        """
        top_left, bottom_right, widened = self.shrink_bounds(new_aabb)
        with jt.no_grad():
            for i, vec_id in enumerate(self.vecMode):
                lo, hi = top_left[vec_id], bottom_right[vec_id]
                self.density_line[i] = as_trainable(self.density_line[i][lo:hi])
                self.app_line[i] = as_trainable(self.app_line[i][lo:hi])
                mode0, mode1 = self.matMode[i]
                rows = slice(top_left[mode1], bottom_right[mode1])
                cols = slice(top_left[mode0], bottom_right[mode0])
                self.density_plane[i] = as_trainable(self.density_plane[i][rows, cols])
                self.app_plane[i] = as_trainable(self.app_plane[i][rows, cols])

        self.finish_shrink(new_aabb, top_left, bottom_right, widened)
