"""The schedule's events between training steps: alpha-mask updates, shrinking, upsampling.

Each function changes the model (under ``no_grad``: new tensors must not join the graph) and
the ``ScheduleState``, and returns what happened as text for the log. What follows from it
for the optimizer (a new Adam over replaced tensors), for the other MPI ranks and for the
training rays is the trainer's part (``tensorf_jt.training.trainer``).
"""
from __future__ import annotations

import numpy as np
import jittor as jt

from tensorf_jt.config import ModelConfig, ScheduleConfig
from tensorf_jt.models import TensorBase
from tensorf_jt.runtime import distributed
from tensorf_jt.training.schedules import N_to_reso, ScheduleState, cal_n_samples

# Below this many voxels the alpha grid has the model grid's resolution; above, it keeps the
# last one (the reference's ``if reso_cur[0] * reso_cur[1] * reso_cur[2] < 256**3``).
ALPHA_GRID_MAX_VOXELS = 256 ** 3


def update_alpha_mask(model: TensorBase, state: ScheduleState) -> tuple[np.ndarray | None, list[str]]:
    """Rebuild the alpha grid (reference ``updateAlphaMask``); returns the box the occupied
    voxels span (rank 0's under MPI; None if nothing is occupied) and the event text."""
    with jt.no_grad():
        if int(np.prod(state.reso_cur)) < ALPHA_GRID_MAX_VOXELS:
            state.reso_mask = state.reso_cur
        new_aabb = distributed.broadcast_optional(model.updateAlphaMask(tuple(state.reso_mask)),
                                                  shape=(2, 3), dtype=np.float32)
    if new_aabb is None:
        return None, []
    occupied = 100 * model.alphaMask.occupied_fraction()
    return new_aabb, [f"alpha mask {list(state.reso_mask)}, {occupied:.1f}% occupied"]


def shrink(model: TensorBase, new_aabb: np.ndarray | None) -> tuple[bool, list[str]]:
    """Crop the grids to ``new_aabb`` (reference ``shrink``, at the first mask update); returns
    whether the model's tensors were replaced, and the event text."""
    if new_aabb is None:
        return False, []
    if not model.can_shrink:
        return False, [f"{type(model).__name__} keeps its box (no shrink)"]
    with jt.no_grad():
        model.shrink(new_aabb)
    return True, [f"shrink to grid {model.gridSize}"]


def upsample(model: TensorBase, state: ScheduleState, n_voxels: int, settings: ModelConfig) -> str:
    """Resample the grids to ``n_voxels`` in the current box (reference ``upsample_volume_grid``)
    and march with as many samples as the new grid's diagonal needs at ``settings.step_ratio``
    (at most ``settings.nSamples``; an unbounded model's sampler decides); returns the event text."""
    state.reso_cur = N_to_reso(n_voxels, model.aabb)
    model.upsample_volume_grid(state.reso_cur)
    # An unbounded model's sampler sets its own count (the foreground run and the background's).
    state.nSamples = model.nSamples if model.unbounded else samples_per_ray(state.reso_cur, settings)
    return f"upsample to {state.reso_cur}"


def samples_per_ray(reso: list[int], settings: ModelConfig) -> int:
    """Samples per ray for a grid of resolution ``reso`` (reference ``min(nSamples, cal_n_samples(...))``)."""
    return min(settings.nSamples, cal_n_samples(reso, settings.step_ratio))


def learning_rate_scale_after_upsample(schedule: ScheduleConfig, iteration: int) -> float:
    """The learning rates after an upsampling relative to ``lr_init`` / ``lr_basis``: back to
    them (``lr_upsample_reset``), or where the decay has taken them by ``iteration``."""
    if schedule.lr_upsample_reset:
        return 1.0
    return schedule.lr_decay_target_ratio ** (iteration / schedule.n_iters)
