"""The sparse-depth loss: training rays to the capture's sparse points must end at those points.

Photometric error alone lets a model paint a photo onto the wrong depth -- a haze in front of a
wall, the table's texture smeared along the line of sight -- and the views between the photos
show it. Each ray from a training camera to a COLMAP point that its photo observes
(``dataLoader.sparse_points``) ends at that point, at depth D; the loss is the share of the
ray's weight that lies elsewhere,

    1 - sum_i w_i exp(-(z_i - D)^2 / (2 (s D)^2)),   s = ``WINDOW``,

averaged over the rays: weight before the point (a floater in the line of sight), behind it,
or left as transmittance all count. It is DS-NeRF's supervision, with a window that grows with
the depth as the points' triangulation error does, on the weights the sampler's dense samples
give (``rendering.renderer.dense_weights``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import jittor as jt

from tensorf_jt.dataLoader.sparse_points import MIN_VIEWS, KeypointRays
from tensorf_jt.rendering.renderer import dense_weights
from tensorf_jt.runtime import distributed

if TYPE_CHECKING:
    from tensorf_jt.config import ScheduleConfig
    from tensorf_jt.dataLoader.views import ViewDataset
    from tensorf_jt.models import TensoRFModel

# The window's width relative to the depth.
WINDOW = 0.05
# Keypoint rays per step, beside the photometric batch.
BATCH = 512
# A ray none of whose samples has a kernel value above this (none within 1.18 window widths of
# its point: the sampler starts rays that miss the foreground past some points) cannot end
# there and is left out.
MIN_REACH = 0.5


def missed_weight(z: jt.Var, weights: jt.Var, depths: jt.Var, window: float = WINDOW) -> jt.Var:
    """The loss above for samples at distances ``z`` [R, S] with weights [R, S] on rays to points at
    ``depths`` [R]: the mean over the rays that reach their point (0 when none does)."""
    target = depths.unsqueeze(1)
    kernel = jt.exp(-0.5 * jt.sqr((z - target) / (window * target))).stop_grad()
    reach = (kernel.max(dim=1) > MIN_REACH).float32().stop_grad()
    missed = 1.0 - (weights * kernel).sum(-1)
    return (missed * reach).sum() / jt.maximum(reach.sum(), 1.0)


def sparse_depth_loss(model: "TensoRFModel", rays: jt.Var, depths: jt.Var, n_samples: int,
                      jitter: jt.Var | None) -> jt.Var:
    """``missed_weight`` of keypoint rays [R, 6] through ``model``."""
    samples, weights = dense_weights(model.field, model.sampler, model.compositing, rays, n_samples, jitter)
    return missed_weight(samples.z, weights, depths)


class KeypointBatches:
    """``BATCH`` keypoint rays per iteration, drawn from a generator seeded by the run's seed and
    the iteration (a resumed or recovered run draws what it would have); under MPI each rank
    takes its ``share`` of the draw."""

    def __init__(self, keypoints: KeypointRays, seed: int, share: slice = slice(None)) -> None:
        self.keypoints, self.seed, self.share = keypoints, int(seed), share

    def batch(self, iteration: int) -> tuple[jt.Var, jt.Var]:
        rows = np.random.default_rng([self.seed, int(iteration)]).integers(0, len(self.keypoints.depths), BATCH)
        rows = rows[self.share]
        return jt.array(self.keypoints.rays[rows]), jt.array(self.keypoints.depths[rows])


def keypoint_batches(schedule: ScheduleConfig, dataset: ViewDataset, speaks: bool) -> KeypointBatches | None:
    """The loss's rays for a run, where ``sparse_depth_weight`` asks for them and ``dataset`` (the
    training split) has sparse points; ``speaks``: this process says which (the first rank)."""
    weight = schedule.sparse_depth_weight
    if weight <= 0:
        return None
    keypoints, source = dataset.sparse_points()
    if keypoints is not None and len(keypoints.depths) == 0:
        keypoints, source = None, f"no sparse point is seen by {MIN_VIEWS} training photos ({source})"
    if speaks:
        print(f"sparse depth: {keypoints.summary()} {source}, weight {weight:g}" if keypoints is not None else
              f"sparse depth: off, {source}", flush=True)
    if keypoints is None:
        return None
    share = distributed.share_of(BATCH) if distributed.world_size() > 1 else slice(None)
    return KeypointBatches(keypoints, schedule.seed, share)
