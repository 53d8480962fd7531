"""TensorBoard scalars of a training run, with the reference's tags and steps.

Event files go into the run's folder (``tensorboard --logdir log`` shows every run), written
by ``tensorboardX`` (protobuf only: no torch, no TensorFlow). Tags, as the reference's
``train.py`` writes them at every iteration (here every ``--tensorboard_every`` iterations,
10 by default: 1 writes every one): ``train/PSNR`` and ``train/mse`` (the batch's
photometric loss), ``train/reg`` (orthogonality, unweighted), ``train/reg_l1`` (density L1,
unweighted), ``train/reg_tv_density`` and ``train/reg_tv_app`` (TV, weighted), each only while
its weight is positive; ``test/psnr`` at the periodic test renders and ``test/psnr_all`` for
the final test split. Ours besides: ``train/s_per_iter``, ``train/lr_grid``,
``train/lr_network``, ``train/grid_voxels`` and ``train/n_rays``.
"""
from __future__ import annotations

import numpy as np
from tensorboardX import SummaryWriter


class TensorBoardLog:
    """Scalars to the event file in ``folder``; with ``enabled`` False (``--tensorboard 0``, or
    a rank other than 0 under MPI) every call does nothing."""

    def __init__(self, folder: str, enabled: bool = True) -> None:
        self._writer = SummaryWriter(logdir=folder) if enabled else None

    def scalars(self, step: int, values: dict[str, float]) -> None:
        if self._writer is not None:
            for tag, value in values.items():
                self._writer.add_scalar(tag, float(value), global_step=int(step))

    def training_step(self, iteration: int, psnr: float, mse: float, terms: dict, step_seconds: float,
                      learning_rates: tuple[float, float], grid_size: list[int], n_rays: int) -> None:
        """The reference's per-iteration scalars and ours. ``terms`` (the step's regularisers by
        tag, Vars the step computed already) are copied out together, here only."""
        if self._writer is None:
            return
        values = np.concatenate([term.numpy().reshape(-1) for term in terms.values()]) if terms else []
        self.scalars(iteration, {
            "train/PSNR": psnr, "train/mse": mse, **dict(zip(terms, values)), "train/s_per_iter": step_seconds,
            "train/lr_grid": learning_rates[0], "train/lr_network": learning_rates[1],
            "train/grid_voxels": int(np.prod(grid_size)), "train/n_rays": n_rays})

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
