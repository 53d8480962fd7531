"""Which training rays are trained on: the reference's ``filtering_rays``, kept as a mask.

At the start, rays that miss the scene box are dropped (``bbox_only``); at the second
alpha-mask update, rays whose samples all fall in empty space are too. The result is a mask
over the dataset's rays, which a training state stores in one bit per ray; the rays
themselves are made a chunk at a time from the dataset's views. Under MPI each rank tests its
part of the rays and every rank receives the whole mask.
"""
from __future__ import annotations

import numpy as np
import jittor as jt

from tensorf_jt.dataLoader import RayBatchDataset
from tensorf_jt.models import TensorBase
from tensorf_jt.models.tensor_base import kept_ray_ids
from tensorf_jt.runtime import distributed


def ray_batches(dataset, batch_size: int, seed: int, keep: np.ndarray | None) -> RayBatchDataset:
    """A fresh batch stream over the dataset's rays where ``keep`` is true (all of them for None);
    under MPI, this rank's share of every batch."""
    rows = None if keep is None else np.flatnonzero(keep)
    return RayBatchDataset(dataset, batch_size, seed=seed, rows=rows,
                           part=(distributed.rank(), distributed.world_size()))


def filter_training_rays(model: TensorBase, dataset, rows: np.ndarray | None, bbox_only: bool) -> np.ndarray:
    """The mask over the dataset's rays of those among ``rows`` (all rays for None) that the
    model says can see something: that cross the box (``bbox_only``) or an occupied voxel."""
    candidates = dataset.n_rays if rows is None else len(rows)
    share = distributed.share_of(candidates)
    with jt.no_grad():
        hit = model.ray_hit_mask(dataset, share if rows is None else rows[share], bbox_only=bbox_only)
    kept = kept_ray_ids(distributed.gather_mask(hit, candidates), rows)
    keep = np.zeros(dataset.n_rays, dtype=bool)
    keep[kept] = True
    return keep
