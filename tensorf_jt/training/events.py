"""The schedule's events between training steps: alpha-mask updates, shrinking, upsampling.

Each function changes the model (under ``no_grad``: new tensors must not join the graph) and
the ``ScheduleState``, and reports what happened in an ``EventOutcome``: the texts for the
log, and what follows for the optimizer (a new Adam over replaced tensors) and for the
training rays. Applying that -- and sharing the new tensors with the other MPI ranks -- is the
trainer's part (``tensorf_jt.training.trainer``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import jittor as jt

from tensorf_jt.config import ModelConfig, ScheduleConfig
from tensorf_jt.models import TensoRFModel
from tensorf_jt.runtime import distributed
from tensorf_jt.training.schedules import N_to_reso, ScheduleState, TrainingSchedule

# Below this many voxels the alpha grid has the model grid's resolution; above, it keeps the
# last one (the reference's ``if reso_cur[0] * reso_cur[1] * reso_cur[2] < 256**3``).
ALPHA_GRID_MAX_VOXELS = 256 ** 3


@dataclass
class EventOutcome:
    """What an event did: ``texts`` for the log; ``restart_optimizer``: the model's tensors were
    replaced, so Adam must start over them -- at its current learning rates
    (``keep_learning_rates``) or at the schedule's times ``lr_scale``; ``filter_rays``: the
    training rays are to be filtered against the new alpha grid."""

    texts: list[str] = field(default_factory=list)
    restart_optimizer: bool = False
    keep_learning_rates: bool = True
    lr_scale: float = 1.0
    filter_rays: bool = False


def update_alpha_mask(model: TensoRFModel, state: ScheduleState, schedule: TrainingSchedule,
                      settings: ScheduleConfig, iteration: int) -> EventOutcome:
    """Rebuild the alpha grid (reference ``updateAlphaMask``); at the schedule's first update
    also crop the grid to the occupied box (``shrink``) and switch the L1 weight, at its second
    also filter the training rays (where the sampler filters them)."""
    with jt.no_grad():
        if int(np.prod(state.reso_cur)) < ALPHA_GRID_MAX_VOXELS:
            state.reso_mask = state.reso_cur
        new_aabb = distributed.broadcast_optional(model.update_alpha_mask(tuple(state.reso_mask)),
                                                  shape=(2, 3), dtype=np.float32)
    outcome = EventOutcome()
    if new_aabb is not None:
        outcome.texts.append(f"alpha mask {list(state.reso_mask)}, {100 * model.alphaMask.occupied_fraction():.1f}% "
                             "occupied")
    if schedule.shrinks(iteration):
        outcome.restart_optimizer, text = shrink(model, new_aabb)
        outcome.texts += text
        state.L1_reg_weight = settings.L1_weight_rest
    outcome.filter_rays = schedule.filters_rays(iteration) and model.sampler.filters_rays
    return outcome


def shrink(model: TensoRFModel, new_aabb: np.ndarray | None) -> tuple[bool, list[str]]:
    """Crop the grids to ``new_aabb`` (reference ``shrink``, at the first mask update); returns
    whether the model's tensors were replaced, and the event text."""
    if new_aabb is None:
        return False, []
    if not model.can_shrink:
        return False, [f"{model.model_name} keeps its box (no shrink)"]
    with jt.no_grad():
        model.shrink(new_aabb)
    return True, [f"shrink to grid {model.gridSize}"]


def upsample(model: TensoRFModel, state: ScheduleState, n_voxels: int, settings: ModelConfig,
             schedule: ScheduleConfig, iteration: int) -> EventOutcome:
    """Resample the grids to ``n_voxels`` in the current box (reference ``upsample_volume_grid``),
    march with as many samples as the sampler asks for the new grid (``Sampler.samples_per_ray``,
    at most ``settings.nSamples`` where it takes a cap), and restart Adam at the schedule's rates."""
    state.reso_cur = N_to_reso(n_voxels, model.field.aabb)
    model.upsample(state.reso_cur)
    state.nSamples = model.sampler.samples_per_ray(state.reso_cur, settings.nSamples)
    return EventOutcome([f"upsample to {state.reso_cur}"], restart_optimizer=True, keep_learning_rates=False,
                        lr_scale=learning_rate_scale_after_upsample(schedule, iteration) * state.lr_scale)


def learning_rate_scale_after_upsample(schedule: ScheduleConfig, iteration: int) -> float:
    """The learning rates after an upsampling relative to ``lr_init`` / ``lr_basis``: back to
    them (``lr_upsample_reset``), or where the decay has taken them by ``iteration``."""
    if schedule.lr_upsample_reset:
        return 1.0
    return schedule.lr_decay_target_ratio ** (iteration / schedule.n_iters)
