"""Random batches of training rays, served by a ``jittor.dataset.Dataset``.

Jittor's Dataset fetches items one by one and collates them, which costs far more than the
step itself needs for a 4096-ray batch of rows. Here one *item* is one whole batch: ``__getitem__(k)`` takes the k-th
window of the epoch's permutation and asks the ray source for exactly those rays and colours
(a dataset makes them from its pixels and poses, ``ViewDataset.rays_at``), so no array of
every training ray is ever built or gathered from. Sampling matches the reference's
``SimpleSampler``: a fresh permutation per epoch of the rays trained on, full batches only.

The stream is a cursor (the epoch's permutation and the next batch in it) rather than
Jittor's index loop, so that ``state()`` / ``restore()`` can stop and resume it mid-epoch:
the state holds the generator's state from before the epoch's permutation was drawn, which
redraws the same permutation, instead of the permutation itself (8 bytes per ray).
"""
from __future__ import annotations

from typing import Iterator, Protocol

import numpy as np
from jittor.dataset import Dataset

from tensorf_jt.errors import CheckpointError, ConfigError, DatasetError


class RaySource(Protocol):
    """What batches are drawn from: ``n_rays`` rays, made by number (``ViewDataset`` is one)."""

    n_rays: int

    def rays_at(self, ray_ids: np.ndarray) -> np.ndarray: ...

    def rgbs_at(self, ray_ids: np.ndarray) -> np.ndarray: ...


class ArrayRays:
    """A ``RaySource`` over rays [N, 6] and colours [N, 3] already in memory."""

    def __init__(self, rays: np.ndarray, rgbs: np.ndarray) -> None:
        if rays.shape[0] != rgbs.shape[0]:
            raise DatasetError(f"{rays.shape[0]} rays but {rgbs.shape[0]} colours.")
        self.rays = np.ascontiguousarray(rays, dtype=np.float32)
        self.rgbs = np.ascontiguousarray(rgbs, dtype=np.float32)
        self.n_rays = self.rays.shape[0]

    def rays_at(self, ray_ids: np.ndarray) -> np.ndarray:
        return self.rays[ray_ids]

    def rgbs_at(self, ray_ids: np.ndarray) -> np.ndarray:
        return self.rgbs[ray_ids]


def compact_ids(ids: np.ndarray, limit: int) -> np.ndarray:
    """Ray numbers below ``limit`` in the narrowest integer type that holds them (int32 for up
    to 2^31 rays: half the memory of numpy's default for a 64 M-ray scene)."""
    return np.asarray(ids, dtype=np.int32 if limit <= np.iinfo(np.int32).max else np.int64)


class RayBatchDataset(Dataset):
    """Endless stream of (rays [B, 6], rgbs [B, 3]) float32 batches; ``len()`` is batches per epoch.

    ``rows`` lists the source's ray numbers to train on (None: all of them); batches are
    drawn from a permutation of that list, as the reference draws from its filtered arrays.
    ``part`` = (i, n) (data-parallel training) keeps only the i-th of n equal consecutive
    shares of every batch: each process draws the same batches and serves its own share.
    """

    def __init__(self, source: RaySource, batch_size: int, seed: int = 0, rows: np.ndarray | None = None,
                 part: tuple[int, int] = (0, 1)) -> None:
        super().__init__()
        if batch_size <= 0:
            raise ConfigError(f"batch_size must be positive, got {batch_size}.")
        self.source = source
        self.rows = None if rows is None else compact_ids(rows, source.n_rays)
        self.n_rays = source.n_rays if rows is None else len(self.rows)
        if self.n_rays == 0:
            raise DatasetError("There are no training rays to sample from.")
        index, parts = part
        if batch_size % parts:
            raise ConfigError(f"batch_size ({batch_size}) does not split into {parts} equal shares; "
                              f"use a multiple of {parts}.")
        # Fewer rays than a batch (a tiny scene, or after ray filtering): as many as split evenly.
        self.rays_per_batch = min(int(batch_size), self.n_rays - self.n_rays % parts)
        if self.rays_per_batch == 0:
            raise DatasetError(f"{self.n_rays} training rays cannot be shared among {parts} processes.")
        size = self.rays_per_batch // parts
        self.share = slice(index * size, (index + 1) * size) if parts > 1 else None
        self._rng = np.random.default_rng(seed)
        self._epoch_rng_state: dict | None = None  # generator state before this epoch's permutation
        self._order: np.ndarray | None = None
        self._position = 0  # next batch of the epoch
        self.set_attrs(total_len=self.n_rays // self.rays_per_batch, batch_size=1, shuffle=False)

    def _start_epoch(self) -> None:
        self._epoch_rng_state = self._rng.bit_generator.state
        self._order = compact_ids(self._rng.permutation(self.n_rays), self.n_rays)
        self._position = 0

    def ray_ids(self, batch_index: int) -> np.ndarray:
        """The source's ray numbers in batch ``batch_index`` of the current epoch (this share of it)."""
        if self._order is None:
            self._start_epoch()
        ids = self._order[batch_index * self.rays_per_batch:(batch_index + 1) * self.rays_per_batch]
        if self.share is not None:
            ids = ids[self.share]
        return ids if self.rows is None else self.rows[ids]

    def __getitem__(self, batch_index: int) -> tuple[np.ndarray, np.ndarray]:
        """Batch ``batch_index`` of the current epoch (the first call draws the epoch's permutation)."""
        ids = self.ray_ids(batch_index)
        return self.source.rays_at(ids), self.source.rgbs_at(ids)

    def __iter__(self) -> Iterator[tuple]:
        """Batches as Jittor Vars, forever, continuing from the cursor."""
        while True:
            if self._order is None or self._position == len(self):
                self._start_epoch()
            batch = self[self._position]
            self._position += 1
            yield self.to_jittor(batch)

    def state(self) -> dict:
        """Where the stream stands: small, picklable, enough for ``restore`` to continue it exactly."""
        return {"n_rays": int(self.n_rays), "rays_per_batch": self.rays_per_batch,
                "epoch_rng_state": self._epoch_rng_state, "position": self._position}

    def restore(self, state: dict) -> None:
        """Continue the stream ``state`` describes; the rays must be the ones it was saved with."""
        if (state["n_rays"], state["rays_per_batch"]) != (self.n_rays, self.rays_per_batch):
            raise CheckpointError(
                f"The saved ray sampler drew {state['rays_per_batch']} of {state['n_rays']} rays per batch; "
                f"this one draws {self.rays_per_batch} of {self.n_rays}. Resume with the same data "
                "and batch_size.")
        if state["epoch_rng_state"] is None:  # saved before the first batch
            self._order, self._epoch_rng_state, self._position = None, None, 0
            return
        self._rng.bit_generator.state = state["epoch_rng_state"]
        self._start_epoch()
        self._position = int(state["position"])
