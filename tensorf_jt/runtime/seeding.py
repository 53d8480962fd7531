"""Seeding Python's, numpy's and Jittor's random generators, for the whole run and per iteration."""
from __future__ import annotations

import numpy as np
import jittor as jt


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and Jittor. Pending lazy random Vars would consume Jittor's stream
    after seeding, so everything queued is executed first."""
    jt.sync_all()
    jt.set_global_seed(seed)


def seed_iteration(seed: int, iteration: int) -> None:
    """Reseed Jittor and numpy's global generator from (seed, iteration) before a training step.

    Jittor's generator state cannot be read back, so a resumed run could not continue its
    stream; seeded per iteration, the training jitter and background draws depend on the
    iteration alone. Mixed through SeedSequence because Jittor's CPU generator turns nearby
    seeds into nearby first numbers.
    """
    mixed = int(np.random.SeedSequence([seed, iteration]).generate_state(1)[0])
    jt.set_seed(mixed % (2 ** 31 - 1))
    np.random.seed(mixed)
