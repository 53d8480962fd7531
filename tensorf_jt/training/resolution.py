"""How fine an unbounded scene's grid is worth making: no finer than the photos' pixels.

A voxel smaller than what one training pixel covers at the object is seen by no pixel on its
own; the photos leave it free, and in a capture taken around an object the model spends that
freedom on floaters that only the views between the photos show. So an unbounded run caps
its grid where a foreground voxel is as wide as a pixel's footprint at the foreground's
centre (the median over the training cameras). Full-size phone photos resolve far finer
grids than any schedule asks for, so the cap only acts on small or heavily downsampled
images. Measured in docs/BENCHMARKS.md#views-between-the-photos.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tensorf_jt.rendering.contraction import MODEL_BOX
from tensorf_jt.training.schedules import ScheduleState, TrainingSchedule

if TYPE_CHECKING:
    from tensorf_jt.config import ScheduleConfig
    from tensorf_jt.dataLoader.views import ViewDataset
    from tensorf_jt.models.factory import SceneSpace


def pixel_footprint(camera_poses: np.ndarray, intrinsics: np.ndarray, point: np.ndarray) -> float:
    """Width one pixel covers at ``point`` (world units), the median over the cameras:
    distance / focal length. ``camera_poses`` [N, 3, 4] camera-to-world, ``intrinsics`` [3, 3]."""
    distances = np.linalg.norm(np.asarray(camera_poses, np.float64)[:, :3, 3] - np.asarray(point, np.float64), axis=1)
    focal = float(np.sqrt(intrinsics[0][0] * intrinsics[1][1]))
    return float(np.median(distances)) / focal


def resolvable_voxels(foreground: np.ndarray, footprint: float) -> int:
    """Voxels of the contracted grid whose foreground voxels are ``footprint`` wide.

    The foreground fills the middle half of the grid's cube along each axis (contraction maps
    it to [-1, 1] of ``MODEL_BOX``'s [-2, 2]); the geometric mean of its sides stands for its
    size.
    """
    foreground = np.asarray(foreground, np.float64).reshape(2, 3)
    size = float(np.exp(np.mean(np.log(foreground[1] - foreground[0]))))
    model_width = float(MODEL_BOX[1, 0] - MODEL_BOX[0, 0])
    per_axis = size / footprint * model_width / 2.0
    return max(int(round(per_axis ** 3)), 8)


def grid_cap(space: SceneSpace, dataset: ViewDataset) -> int | None:
    """The most voxels worth training for an unbounded ``space`` on ``dataset``'s training views;
    None for bounded and NDC scenes (the reference's, left as they are)."""
    if not space.unbounded:
        return None
    centre = np.asarray(space.foreground, np.float64).reshape(2, 3).mean(0)
    return resolvable_voxels(space.foreground, pixel_footprint(dataset.camera_poses, dataset.intrinsics, centre))


def capped_schedule(config: ScheduleConfig, space: SceneSpace, dataset: ViewDataset, speaks: bool) -> TrainingSchedule:
    """The run's grid schedule, its final grid capped at ``grid_cap``; ``speaks``: this process
    says so when the cap acts (the first rank)."""
    cap = grid_cap(space, dataset)
    if speaks and cap is not None and cap < config.N_voxel_final:
        print(f"grid: at most {cap:,} voxels (N_voxel_final {config.N_voxel_final:,}): a finer foreground voxel "
              "would be smaller than a training pixel at the object", flush=True)
    return TrainingSchedule.from_config(config, cap)


def resumed_schedule(schedule: TrainingSchedule, config: ScheduleConfig, space: SceneSpace, dataset: ViewDataset,
                     state: ScheduleState, speaks: bool) -> TrainingSchedule:
    """``schedule`` (``capped_schedule``'s) for a resumed run, uncapped when the saved run (trained
    before grids were capped) is already finer than the cap: it goes on as it began rather than
    shrink its grid."""
    cap = grid_cap(space, dataset)
    if cap is None or int(np.prod(state.reso_cur)) <= cap:
        return schedule
    if speaks:
        print(f"grid: the saved run's grid {list(state.reso_cur)} is finer than the {cap:,} voxels its photos "
              "resolve; it goes on uncapped, as it began", flush=True)
    return TrainingSchedule.from_config(config)
