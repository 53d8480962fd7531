"""One optimisation step, and the training-time choices it makes for each batch.

The reference's training iteration: render the batch with jittered samples (``perturb``),
on a white background where the dataset has one and on half the batches at random otherwise
(where the sampler takes a background colour at all), photometric MSE plus the weighted
regularisers (and, where a capture's sparse points are at hand, ``training.sparse_depth``);
one Adam step; learning-rate decay. The whole step runs in one Jittor graph,
executed at its end so that its time is its own; nothing of it is read back to the host (the
trainer reads the losses of several steps at once, ``training.run_state.PendingLosses``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import jittor as jt

from tensorf_jt.config import ScheduleConfig
from tensorf_jt.models import TensoRFModel
from tensorf_jt.runtime.profiling import stage
from tensorf_jt.training.losses import regularisation
from tensorf_jt.training.optimizer import TorchAdam
from tensorf_jt.training.schedules import ScheduleState, lr_decay_factor
from tensorf_jt.training.sparse_depth import sparse_depth_loss


@dataclass(frozen=True)
class StepPolicy:
    """What a run's steps do besides the reference's loss: ``white_bg`` (the dataset's background
    colour), ``perturb`` (jitter samples along rays), the orthogonality weight,
    ``lr_factor``, the learning rates' (and TV weights') decay per step, and the weight of
    the sparse-depth loss (``training.sparse_depth``)."""

    white_bg: bool
    perturb: bool
    ortho_weight: float
    lr_factor: float
    sparse_depth_weight: float = 0.0

    @classmethod
    def from_config(cls, schedule: ScheduleConfig, white_bg: bool) -> "StepPolicy":
        return cls(white_bg, schedule.perturb > 0, schedule.Ortho_weight,
                   lr_decay_factor(schedule.lr_decay_target_ratio, schedule.decay_iters), schedule.sparse_depth_weight)


def batch_background(model: TensoRFModel, white_bg: bool) -> bool:
    """Whether this batch is composited on white: the dataset's choice, else a coin toss
    (numpy's generator, as the reference draws it), for samplers that take a background."""
    return model.sampler.takes_background and (white_bg or float(np.random.rand()) < 0.5)


def train_step(model: TensoRFModel, optimizer: TorchAdam, batch: tuple[jt.Var, jt.Var], policy: StepPolicy,
               state: ScheduleState, n_samples: int, jitter: jt.Var | None = None,
               keypoints: tuple[jt.Var, jt.Var] | None = None) -> tuple[jt.Var, dict[str, jt.Var]]:
    """One step on ``batch`` (rays [B, 6], colours [B, 3]); ``jitter`` gives the samples' shifts
    (the data-parallel trainer's share of one draw), else the model draws them; ``keypoints``
    (rays [K, 6], depths [K]) add the sparse-depth loss. Returns the batch's photometric MSE
    [1] and the step's other terms by TensorBoard tag, computed and not read."""
    rays, rgbs = batch
    output = model(rays, white_bg=batch_background(model, policy.white_bg), n_samples=n_samples,
                   perturb=policy.perturb, jitter=jitter)
    mse = jt.sqr(output.rgb - rgbs).mean()
    reg, terms = regularisation(model.field, state, policy.ortho_weight, policy.lr_factor)
    if keypoints is not None:
        key_rays, depths = keypoints
        key_jitter = model.sampler.draw_jitter(key_rays.shape[0], n_samples) if policy.perturb else None
        terms["train/sparse_depth"] = sparse_depth_loss(model, key_rays, depths, n_samples, key_jitter)
        reg = reg + policy.sparse_depth_weight * terms["train/sparse_depth"]
    with stage("backward"):
        optimizer.zero_grad()
        optimizer.backward(mse + reg)
    with stage("optimizer"):
        optimizer.step()
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * policy.lr_factor
    # The whole step runs here, in one graph: without this, the update would wait for
    # whatever next needs the parameters, and the step's time would land elsewhere. It runs
    # the work and reads nothing back.
    jt.sync_all()
    return mse, terms
