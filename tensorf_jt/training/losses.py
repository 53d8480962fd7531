"""The training loss beyond the photometric MSE: the reference's weighted regularisers."""
from __future__ import annotations

import jittor as jt

from tensorf_jt.models import TensorBase
from tensorf_jt.training.schedules import ScheduleState


def regularisation(model: TensorBase, weights: ScheduleState, ortho_weight: float, lr_factor: float) -> jt.Var | float:
    """This iteration's weighted regularisers (reference ``train.py``): orthogonality of the line
    components, L1 of the density grids, TV of both grids. The TV weights in ``weights`` decay by
    ``lr_factor`` each time, as the learning rates do; a zero weight skips its term (and its cost)."""
    total = 0.0
    if ortho_weight > 0:
        total = total + ortho_weight * model.vector_comp_diffs()
    if weights.L1_reg_weight > 0:
        total = total + weights.L1_reg_weight * model.density_L1()
    if weights.TV_weight_density > 0:
        weights.TV_weight_density *= lr_factor
        total = total + model.TV_loss_density() * weights.TV_weight_density
    if weights.TV_weight_app > 0:
        weights.TV_weight_app *= lr_factor
        total = total + model.TV_loss_app() * weights.TV_weight_app
    return total
