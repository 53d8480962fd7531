"""Random batches of training rays, served by a ``jittor.dataset.Dataset``.

Jittor's Dataset fetches items one by one and collates them, which costs ~26 ms for a
4096-ray batch of rows. Here one *item* is one whole batch: ``__getitem__(k)`` slices the
k-th window of the epoch's permutation with numpy fancy indexing (~1 ms), and collation
passes it through. Sampling matches the reference's ``SimpleSampler``: a fresh permutation
per epoch, full batches only.
"""
from __future__ import annotations

import numpy as np
from jittor.dataset import Dataset

from tensorf_jt.errors import ConfigError, DatasetError


class RayBatchDataset(Dataset):
    """Endless stream of (rays [B, 6], rgbs [B, 3]) float32 batches; ``len()`` is batches per epoch."""

    def __init__(self, rays: np.ndarray, rgbs: np.ndarray, batch_size: int, seed: int = 0) -> None:
        super().__init__()
        if batch_size <= 0:
            raise ConfigError(f"batch_size must be positive, got {batch_size}.")
        if rays.shape[0] == 0:
            raise DatasetError("There are no training rays to sample from.")
        if rays.shape[0] != rgbs.shape[0]:
            raise DatasetError(f"{rays.shape[0]} rays but {rgbs.shape[0]} colours.")
        self.rays = np.ascontiguousarray(rays, dtype=np.float32)
        self.rgbs = np.ascontiguousarray(rgbs, dtype=np.float32)
        self.rays_per_batch = min(int(batch_size), self.rays.shape[0])
        self._rng = np.random.default_rng(seed)
        self._order = None
        self.set_attrs(total_len=self.rays.shape[0] // self.rays_per_batch, batch_size=1,
                       shuffle=False, drop_last=False, endless=True)

    def __getitem__(self, batch_index: int) -> tuple[np.ndarray, np.ndarray]:
        if batch_index == 0 or self._order is None:
            self._order = self._rng.permutation(self.rays.shape[0])
        ids = self._order[batch_index * self.rays_per_batch:(batch_index + 1) * self.rays_per_batch]
        return self.rays[ids], self.rgbs[ids]

    def collate_batch(self, batch: list) -> tuple[np.ndarray, np.ndarray]:
        """Each item already is a whole batch: unwrap it instead of stacking."""
        return batch[0]
