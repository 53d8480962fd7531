"""Jittor's memory between training steps: the cleanups of ``--gc_every`` and ``--gc_growth``.

Jittor's allocator (``sfrl``) keeps every freed block for reuse, hands a block out only for a
request no larger than it, and gives nothing back until an allocation fails. While the
samples a step keeps grow from step to step (as densities first appear, and after each
upsampling), every step needs blocks a little larger than the cached ones: new ones are
allocated and the old ones stay, until the cache holds several times what one step needs
(lego's config runs a 24 GB machine out of memory; docs/BENCHMARKS.md#memory-at-legos-scale).
On the CPU no allocation fails before the system runs out; on a GPU the cache fills the
device. Handing the cache back after every step bounds it too, but then every step pays for
fresh pages, so ``CacheTrim`` hands it back only once it has grown by a quarter.
"""
from __future__ import annotations

import resource
from typing import Callable

import jittor as jt


def free_memory() -> None:
    """Drop Jittor's recorded graph and cached allocations (the ``--gc_every`` cleanup)."""
    jt.clean_graph()
    jt.sync_all()
    jt.gc()


def held_bytes() -> int:
    """Bytes Jittor's allocators hold on the host and the device, in use or cached (no sync)."""
    info = jt.get_mem_info()
    return int(info.total_cpu_used) + int(info.total_cuda_used)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class CacheTrim:
    """Hands Jittor's cached blocks back once it holds ``growth`` times what it held after the
    first check that followed the last cleanup; ``growth`` 0 turns it off.

    Call ``check()`` between steps, when a step's temporaries are back in the cache: what is
    held then is the model, the optimiser's state and the cache. A working set that stays
    the same reuses its blocks and never triggers it; one that keeps growing does, every time
    it has grown by that factor, which bounds the cache to about ``growth`` times the largest
    working set. ``held`` and ``release`` are Jittor's unless given (for tests).
    """

    def __init__(self, growth: float, held: Callable[[], int] = held_bytes,
                 release: Callable[[], None] = jt.gc) -> None:
        if growth != 0 and growth <= 1:
            raise ValueError(f"growth must be 0 (off) or above 1, got {growth}")
        self.growth = growth
        self._held, self._release = held, release
        self.baseline: int | None = None
        self.trims = 0

    def check(self) -> bool:
        """Release the cache if it has grown past the limit; True if it did."""
        if not self.growth:
            return False
        held = self._held()
        if self.baseline is None:
            self.baseline = held
            return False
        if held <= self.growth * self.baseline:
            return False
        self._release()
        self.trims += 1
        self.baseline = None  # measured again after the next step, once its blocks are cached
        return True

    def reset(self) -> None:
        """Forget the baseline: after a full cleanup it is measured again."""
        self.baseline = None
