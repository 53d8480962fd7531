"""TensorCP: the CANDECOMP/PARAFAC (CP) decomposition of density and appearance grids.

A component is the outer product of three lines, one per axis: its value at a point is
line_x(x) * line_y(y) * line_z(z). Density sums all components; appearance keeps them and
mixes them with ``basis_mat``. Far fewer parameters than VM for the same grid, so the
reference trains it with many more components (lego: 96 density, 288 appearance) and a
finer grid. Parameter names are the reference's; lines are stored [L, C] with L the grid
size along ``vecMode[i]`` (``models.grid_layout``) and saved as the reference's [1, C, L, 1];
only the first entry of each component count is used.
"""
from __future__ import annotations

import numpy as np
import jittor as jt
from jittor import nn

from tensorf_jt.rendering.interpolation import linear_sample
from tensorf_jt.kernels.cp_field import cp_features
from tensorf_jt.models.grid_layout import LINE, line_from_reference
from tensorf_jt.models.regularizers import line_orthogonality, total_variation
from tensorf_jt.models.tensor_base import TensorBase, as_trainable


class TensorCP(TensorBase):
    """CP-decomposed radiance field (reference ``models/tensoRF.py: TensorCP``)."""

    stored_layouts = {"density_line": LINE, "app_line": LINE}

    def init_svd_volume(self) -> None:
        self.density_line = self._init_lines(self.density_n_comp[0], 0.2)
        self.app_line = self._init_lines(self.app_n_comp[0], 0.2)
        self.basis_mat = nn.Linear(self.app_n_comp[0], self.app_dim, bias=False)

    def _init_lines(self, n_component: int, scale: float) -> nn.ParameterList:
        """Random lines, drawn in the reference's layout and order, stored [L, C]."""
        return nn.ParameterList([
            as_trainable(line_from_reference(scale * jt.randn((1, n_component, self.gridSize[vec_id], 1))))
            for vec_id in self.vecMode
        ])

    def get_optparam_groups(self, lr_init_spatialxyz: float = 0.02, lr_init_network: float = 0.001) -> list[dict]:
        return [
            {"params": list(self.density_line), "lr": lr_init_spatialxyz},
            {"params": list(self.app_line), "lr": lr_init_spatialxyz},
            {"params": self.basis_mat.parameters(), "lr": lr_init_network},
            {"params": self.renderModule.parameters(), "lr": lr_init_network},
        ]

    # ------------------------------------------------------------ field lookups
    def _line_products(self, lines, xyz_normed: jt.Var) -> jt.Var:
        """Per component, the product of its three line values at each point: [N, C]."""
        product = None
        for line, vec_id in zip(lines, self.vecMode):
            values = linear_sample(line, xyz_normed[:, vec_id])
            product = values if product is None else product * values
        return product

    def compute_densityfeature(self, xyz_normed: jt.Var) -> jt.Var:
        if self.fused:
            return cp_features(xyz_normed, list(self.density_line), density_mode=True)
        return self._line_products(self.density_line, xyz_normed).sum(-1)

    def compute_appfeature(self, xyz_normed: jt.Var) -> jt.Var:
        if self.fused:
            products = cp_features(xyz_normed, list(self.app_line), density_mode=False)
        else:
            products = self._line_products(self.app_line, xyz_normed)
        return self.basis_mat(products)

    # ------------------------------------------------------------- regularisers
    def vector_comp_diffs(self) -> jt.Var:
        """Orthogonality penalty over the components of every line (the reference's TensorCP
        lacks it, so ``Ortho_weight`` > 0 crashes there)."""
        return line_orthogonality(list(self.density_line) + list(self.app_line))

    def density_L1(self) -> jt.Var:
        return sum(line.abs().mean() for line in self.density_line)

    def TV_loss_density(self) -> jt.Var:
        return sum(total_variation(line) * 1e-3 for line in self.density_line)

    def TV_loss_app(self) -> jt.Var:
        return sum(total_variation(line) * 1e-3 for line in self.app_line)

    # --------------------------------------------------------- grid operations
    def upsample_volume_grid(self, res_target) -> None:
        """Resize every line to ``res_target`` along its axis (linear, align_corners, in the
        reference's layout, where ``nn.interpolate`` works)."""
        res_target = [int(r) for r in res_target]
        line_to, line_from = LINE
        with jt.no_grad():
            for lines in (self.density_line, self.app_line):
                for i, vec_id in enumerate(self.vecMode):
                    lines[i] = as_trainable(line_from(nn.interpolate(
                        line_to(lines[i]), size=(res_target[vec_id], 1), mode="bilinear", align_corners=True)))
        self.set_grid_size(res_target)

    def shrink(self, new_aabb: np.ndarray) -> None:
        """Crop every line to the voxels covering ``new_aabb`` and shrink the box to match."""
        top_left, bottom_right, widened = self.shrink_bounds(new_aabb)
        with jt.no_grad():
            for lines in (self.density_line, self.app_line):
                for i, vec_id in enumerate(self.vecMode):
                    lines[i] = as_trainable(lines[i][top_left[vec_id]:bottom_right[vec_id]])
        self.finish_shrink(new_aabb, top_left, bottom_right, widened)
