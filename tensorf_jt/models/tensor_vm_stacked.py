"""TensorVM: the VM decomposition with all planes in one tensor and all lines in another.

The reference's first VM variant: ``plane_coef`` [3, C_app + C_density, res, res] and
``line_coef`` [3, C_app + C_density, res, 1], one slice per axis, appearance channels first
and density channels last. The field is the same plane x line sum as TensorVMSplit's, so the
lookups (and the fused kernels) are shared; only the storage differs: the tensors keep the
reference's layout, and each step reads its per-axis slices channel-last through a copy (one
tensor holds both fields' channels, so no single layout serves both).

The reference ships this class but cannot run it: its component counts are per-axis lists, so
allocating the tensors fails, and it has no shrink, L1 or TV terms. Here it runs, with these
constraints that one shared tensor imposes: the grid is a cube (res = the x resolution, as the
reference's ``init_svd_volume(gridSize[0])``), every axis has the same component counts, and
the box never shrinks (a cube cannot be cropped to a non-cubic box; the alpha grid still masks
empty space).
"""
from __future__ import annotations

import numpy as np
import jittor as jt
from jittor import nn

from tensorf_jt.errors import ConfigError
from tensorf_jt.kernels.layout import permute
from tensorf_jt.models.tensor_base import as_trainable
from tensorf_jt.models.tensor_vm import TensorVMSplit


class TensorVM(TensorVMSplit):
    """Single-tensor VM radiance field (reference ``models/tensoRF.py: TensorVM``)."""

    crops_grid = False
    stored_layouts = {}

    def init_svd_volume(self) -> None:
        for name, counts in (("n_lamb_sigma", self.density_n_comp), ("n_lamb_sh", self.app_n_comp)):
            if len(set(counts)) != 1:
                raise ConfigError(f"TensorVM stores all axes in one tensor, so {name} needs the same count on "
                                  f"every axis (e.g. [{counts[0]}]), got {counts}.")
        res = self.gridSize[0]
        if self.gridSize != [res] * 3:
            self.set_grid_size([res] * 3)
        channels = self.app_n_comp[0] + self.density_n_comp[0]
        self.plane_coef = as_trainable(0.1 * jt.randn((3, channels, res, res)))
        self.line_coef = as_trainable(0.1 * jt.randn((3, channels, res, 1)))
        self.basis_mat = nn.Linear(3 * self.app_n_comp[0], self.app_dim, bias=False)

    def _split(self, channels: slice) -> tuple[list[jt.Var], list[jt.Var]]:
        """Per axis, the plane [res, res, C] and line [res, C] of ``channels``, channel-last."""
        return ([permute(self.plane_coef[i, channels], (1, 2, 0)) for i in range(3)],
                [permute(self.line_coef[i, channels, :, 0], (1, 0)) for i in range(3)])

    def density_grids(self) -> tuple[list[jt.Var], list[jt.Var]]:
        return self._split(slice(self.app_n_comp[0], None))

    def app_grids(self) -> tuple[list[jt.Var], list[jt.Var]]:
        return self._split(slice(0, self.app_n_comp[0]))

    def get_optparam_groups(self, lr_init_spatialxyz: float = 0.02, lr_init_network: float = 0.001) -> list[dict]:
        return [
            {"params": [self.line_coef], "lr": lr_init_spatialxyz},
            {"params": [self.plane_coef], "lr": lr_init_spatialxyz},
            {"params": self.basis_mat.parameters(), "lr": lr_init_network},
            {"params": self.renderModule.parameters(), "lr": lr_init_network},
        ]

    # --------------------------------------------------------- grid operations
    def upsample_volume_grid(self, res_target) -> None:
        """Resize the cube to res_target[0] on every axis (the reference scales by x alone)."""
        res = int(res_target[0])
        with jt.no_grad():
            self.plane_coef = as_trainable(nn.interpolate(self.plane_coef, size=(res, res), mode="bilinear",
                                                          align_corners=True))
            self.line_coef = as_trainable(nn.interpolate(self.line_coef, size=(res, 1), mode="bilinear",
                                                         align_corners=True))
        self.set_grid_size([res] * 3)

    def shrink(self, new_aabb: np.ndarray) -> None:
        raise NotImplementedError("TensorVM keeps its cubic box (crops_grid is False)")
