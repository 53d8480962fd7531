"""Jittor's memory between training steps: the cleanups of ``--gc_every`` and ``--gc_growth``.

Jittor's allocator (``sfrl``) keeps every freed block for reuse, hands a block out only for a
request no larger than it, and gives nothing back until an allocation fails. While the
samples a step keeps grow from step to step (as densities first appear, and after each
upsampling), every step needs blocks a little larger than the cached ones: new ones are
allocated and the old ones stay. On lego's config on the CPU (4096 rays, ~440 samples each)
that held 11.7 GB by iteration 44, and 23 GB (the machine's all; killed) by iteration 60,
where one step needs about 4 GB.
On the CPU nothing fails before the system runs out; on a GPU the cache fills the device.
So the trainer hands the cache back after every step on the CPU (``default_gc_every``) and,
on a GPU, every 500 steps and whenever the cache has doubled (``CacheTrim``).
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


def default_gc_every() -> int:
    """Iterations between full cleanups when ``--gc_every`` is not given: every one on the CPU,
    where handing memory back and taking it again cost no measurable time and halved the peak
    at lego's scale; 500 on a GPU, where each cleanup frees device memory that the next step
    must allocate again."""
    return 500 if jt.flags.use_cuda else 1


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
        """Forget the baseline (after a full cleanup, or when tensor sizes change)."""
        self.baseline = None
