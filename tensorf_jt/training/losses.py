"""The training loss beyond the photometric MSE: the reference's weighted regularisers."""
from __future__ import annotations

import jittor as jt

from tensorf_jt.models import TensorBase
from tensorf_jt.training.schedules import ScheduleState


def regularisation(field: TensorBase, weights: ScheduleState, ortho_weight: float,
                   lr_factor: float) -> tuple[jt.Var | float, dict[str, jt.Var]]:
    """This iteration's weighted regularisers (reference ``train.py``): orthogonality of the line
    components, L1 of the density grids, TV of both grids. The TV weights in ``weights`` decay by
    ``lr_factor`` each time, as the learning rates do; a zero weight skips its term (and its cost).

    Returns the sum and the terms as the reference logs them to TensorBoard: ``train/reg`` and
    ``train/reg_l1`` unweighted, the two TV terms weighted.
    """
    total, terms = 0.0, {}
    if ortho_weight > 0:
        terms["train/reg"] = field.vector_comp_diffs()
        total = total + ortho_weight * terms["train/reg"]
    if weights.L1_reg_weight > 0:
        terms["train/reg_l1"] = field.density_L1()
        total = total + weights.L1_reg_weight * terms["train/reg_l1"]
    if weights.TV_weight_density > 0:
        weights.TV_weight_density *= lr_factor
        terms["train/reg_tv_density"] = field.TV_loss_density() * weights.TV_weight_density
        total = total + terms["train/reg_tv_density"]
    if weights.TV_weight_app > 0:
        weights.TV_weight_app *= lr_factor
        terms["train/reg_tv_app"] = field.TV_loss_app() * weights.TV_weight_app
        total = total + terms["train/reg_tv_app"]
    return total, terms
