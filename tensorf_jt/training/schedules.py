"""Training schedules: grid resolutions, samples per ray, learning-rate decay, loss weights.

The reference computes these with float32 torch tensors; they are mirrored here in float32
numpy so that every resolution and sample count comes out identical (e.g. lego's
``N_voxel_init = 2097156``, 128^3 + 4, exists to survive that float32 cube root).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tensorf_jt.rendering.torch_numerics import linspace_f32

if TYPE_CHECKING:
    from tensorf_jt.config import RenderConfig, RunConfig, ScheduleConfig


def N_to_reso(n_voxels: int, bbox) -> list[int]:
    """Per-axis resolution giving ~``n_voxels`` cubic voxels in the box ``bbox`` [2, 3].

    float32 like the reference's tensors; the division by the voxel count and the cube root
    round once to float32, as torch's scalar arithmetic does. Deliberate guard the reference
    lacks: every axis gets at least two voxels (a one-voxel axis has no voxel size, and a very
    flat box or a tiny count would give one or none), as ``TensorBase.shrink_bounds`` keeps.
    """
    bbox = np.asarray(bbox, dtype=np.float32)
    extent = bbox[1] - bbox[0]
    volume = np.float32(np.float32(extent[0] * extent[1]) * extent[2])
    per_voxel = np.float32(np.float64(volume) / np.float64(n_voxels))
    voxel_size = np.float32(np.float64(per_voxel) ** (1.0 / 3.0))
    return [max(int(r), 2) for r in (extent / voxel_size).astype(np.int64)]


def voxel_counts(N_voxel_init: int, N_voxel_final: int, n_upsamples: int) -> list[int]:
    """Voxel totals after each upsampling step, evenly spaced in log space (init excluded).

    Mirrors ``round(exp(torch.linspace(log(init), log(final), n + 1)))`` in float32, including
    how torch's linspace fills its second half backwards from the end point; e.g. lego's final
    count is 26999994, so its last grid is 299^3, not 300^3.
    """
    logs = linspace_f32(np.log(N_voxel_init), np.log(N_voxel_final), n_upsamples + 1)
    counts = np.exp(logs.astype(np.float64)).astype(np.float32)
    return [int(v) for v in np.round(counts).astype(np.int64)][1:]


def lr_decay_factor(target_ratio: float, decay_iters: int) -> float:
    """Per-iteration multiplier that takes a learning rate to ``target_ratio`` of itself in ``decay_iters``."""
    return float(target_ratio ** (1.0 / decay_iters))


@dataclass
class TrainingSchedule:
    """When the trainer's events fire, and the grid size each upsampling step reaches.

    ``upsamp_list`` iterations grow the grid to the next entry of ``voxel_targets``;
    ``update_AlphaMask_list`` iterations rebuild the alpha grid, the first also shrinking the
    box and switching the L1 weight, the second also filtering the training rays.
    """

    upsamp_list: list[int] = field(default_factory=list)
    update_AlphaMask_list: list[int] = field(default_factory=list)
    voxel_targets: list[int] = field(default_factory=list)
    initial_voxels: int = 0

    @classmethod
    def from_config(cls, schedule: ScheduleConfig, voxel_cap: int | None = None) -> "TrainingSchedule":
        """The config's schedule; ``voxel_cap`` (``training.resolution.grid_cap``) lowers
        ``N_voxel_init`` and ``N_voxel_final`` to at most that many voxels."""
        upsamp = list(schedule.upsamp_list)
        masks = list(schedule.update_AlphaMask_list)
        first, last = schedule.N_voxel_init, schedule.N_voxel_final
        if voxel_cap is not None:
            first, last = min(first, voxel_cap), min(last, voxel_cap)
        return cls(upsamp, masks, voxel_counts(first, last, len(upsamp)), first)

    def updates_alpha_mask(self, iteration: int) -> bool:
        return iteration in self.update_AlphaMask_list

    def shrinks(self, iteration: int) -> bool:
        return bool(self.update_AlphaMask_list) and iteration == self.update_AlphaMask_list[0]

    def filters_rays(self, iteration: int) -> bool:
        return len(self.update_AlphaMask_list) > 1 and iteration == self.update_AlphaMask_list[1]

    def upsamples(self, iteration: int) -> bool:
        return iteration in self.upsamp_list

    def voxels_after_upsample(self, iteration: int) -> int:
        """Voxel total the grid grows to at upsampling iteration ``iteration``."""
        return self.voxel_targets[sorted(self.upsamp_list).index(iteration)]


@dataclass
class ScheduleState:
    """The values the schedule changes as training goes (a training state's ``schedule``).

    ``reso_cur``: the grid's resolution; ``reso_mask``: the alpha grid's; ``nSamples``:
    samples per ray; the loss weights (L1 switches at the first mask update, TV decays with
    the learning rate every step); ``lr_scale``: learning rates relative to the schedule's
    (the NaN guard halves it).
    """

    reso_cur: list[int]
    reso_mask: list[int]
    nSamples: int
    L1_reg_weight: float
    TV_weight_density: float
    TV_weight_app: float
    lr_scale: float = 1.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, saved: dict) -> "ScheduleState":
        return cls(reso_cur=list(saved["reso_cur"]), reso_mask=list(saved["reso_mask"]),
                   nSamples=int(saved["nSamples"]), L1_reg_weight=saved["L1_reg_weight"],
                   TV_weight_density=saved["TV_weight_density"], TV_weight_app=saved["TV_weight_app"],
                   lr_scale=saved["lr_scale"])


def renders_test_views_after(render: RenderConfig, iteration: int) -> bool:
    """Whether the periodic test renders (``--N_vis``, ``--vis_every``) follow ``iteration``."""
    return render.N_vis != 0 and iteration % render.vis_every == render.vis_every - 1


def reads_losses_after(config: RunConfig, schedule: TrainingSchedule, iteration: int) -> bool:
    """Whether a run reads its steps' losses after ``iteration``: to log them, and before anything
    that must start from finite parameters (test renders, grid events). The same answer on
    every MPI rank, since they agree on stopping there. Snapshots read them too."""
    output = config.output
    return (iteration % output.progress_refresh_rate == 0
            or (output.tensorboard and iteration % output.tensorboard_every == 0)
            or renders_test_views_after(config.render, iteration)
            or schedule.updates_alpha_mask(iteration) or schedule.upsamples(iteration))
