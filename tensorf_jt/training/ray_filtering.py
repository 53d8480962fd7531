"""Which training rays are trained on: the reference's ``filtering_rays``, kept as a mask.

At the start, rays that miss the scene box are dropped (``bbox_only``; in an unbounded scene
every ray sees the background and is kept); at the second alpha-mask update, rays whose
samples all fall in empty space are too (the model's sampler decides, ``TensoRFModel.rays_hit``).
The result is a mask over the dataset's rays, which a training state stores in one bit per
ray; the rays themselves are made a chunk at a time from the dataset's views. Under MPI each
rank tests its part of the rays and every rank receives the whole mask.
"""
from __future__ import annotations

import warnings

import numpy as np
import jittor as jt

from tensorf_jt.dataLoader import RayBatchDataset
from tensorf_jt.models import TensoRFModel
from tensorf_jt.runtime import distributed

CHUNK = 10240 * 5  # rays tested at once


def ray_batches(dataset, batch_size: int, seed: int, keep: np.ndarray | None) -> RayBatchDataset:
    """A fresh batch stream over the dataset's rays where ``keep`` is true (all of them for None);
    under MPI, this rank's share of every batch."""
    rows = None if keep is None else np.flatnonzero(keep)
    return RayBatchDataset(dataset, batch_size, seed=seed, rows=rows,
                           part=(distributed.rank(), distributed.world_size()))


def batch_jitter(model: TensoRFModel, batches: RayBatchDataset, perturb: bool, n_samples: int) -> jt.Var | None:
    """Under MPI, this rank's share of a batch's per-ray jitter, drawn for the whole batch so that
    the shares are the numbers one process would draw; None (the model draws) otherwise."""
    sampler = model.sampler
    if distributed.world_size() == 1 or not perturb or not sampler.jitter_per_ray:
        return None
    return sampler.draw_jitter(batches.rays_per_batch, n_samples)[batches.share]


def kept_ray_ids(hit: np.ndarray, ray_ids: np.ndarray | None = None) -> np.ndarray:
    """The numbers of the rays ``hit`` marks (``ray_ids[i]`` for mark i; i itself for None).
    If none is marked, all are kept and a warning says so, as the reference's filter does
    not leave a scene without training rays."""
    if not hit.any():
        warnings.warn("Ray filtering would remove every training ray; keeping them all. "
                      "Check the dataset's scene box and camera poses.")
        return np.arange(len(hit)) if ray_ids is None else np.asarray(ray_ids)
    kept = np.flatnonzero(hit)
    return kept if ray_ids is None else np.asarray(ray_ids)[kept]


def ray_hit_mask(model: TensoRFModel, source, ray_ids: np.ndarray | slice, n_samples: int = 256,
                 chunk: int = CHUNK, bbox_only: bool = False) -> np.ndarray:
    """For each of the ``source``'s rays numbered ``ray_ids`` (an array, or a slice of all its
    ray numbers), whether it can see anything (``TensoRFModel.rays_hit``). ``source`` makes rays by
    number (``ViewDataset.rays_at``), a chunk at a time, so no array of every ray is built."""
    if isinstance(ray_ids, slice):
        first, stop, _ = ray_ids.indices(source.n_rays)
        total = max(stop - first, 0)
    else:
        first, total = 0, len(ray_ids)
    hit = np.zeros(total, dtype=bool)
    for start in range(0, total, chunk):
        ids = (np.arange(first + start, first + min(start + chunk, total)) if isinstance(ray_ids, slice)
               else ray_ids[start:start + chunk])
        hit[start:start + len(ids)] = model.rays_hit(source.rays_at(ids), n_samples, bbox_only)
    return hit


def filtering_ray_ids(model: TensoRFModel, source, ray_ids: np.ndarray | None = None, n_samples: int = 256,
                      chunk: int = CHUNK, bbox_only: bool = False) -> np.ndarray:
    """The reference's ``filtering_rays`` over rays made on demand: of the ``source``'s rays
    numbered ``ray_ids`` (None: all ``source.n_rays``), the numbers of those that can see
    anything, in order."""
    hit = ray_hit_mask(model, source, slice(None) if ray_ids is None else ray_ids, n_samples, chunk, bbox_only)
    return kept_ray_ids(hit, ray_ids)


def filter_training_rays(model: TensoRFModel, dataset, rows: np.ndarray | None, bbox_only: bool) -> np.ndarray:
    """The mask over the dataset's rays of those among ``rows`` (all rays for None) that the
    model says can see something: that cross the box (``bbox_only``) or an occupied voxel."""
    candidates = dataset.n_rays if rows is None else len(rows)
    share = distributed.share_of(candidates)
    with jt.no_grad():
        hit = ray_hit_mask(model, dataset, share if rows is None else rows[share], bbox_only=bbox_only)
    kept = kept_ray_ids(distributed.gather_mask(hit, candidates), rows)
    keep = np.zeros(dataset.n_rays, dtype=bool)
    keep[kept] = True
    return keep
