"""Per-stage wall time of training steps, for the benchmark.

Stages are marked in the code with ``with stage("name"):``; outside ``collect()`` that is a
no-op. Inside it, each stage synchronises Jittor before and after (Jittor runs lazily, so
without that, work would be billed to whichever stage happens to force it), which makes
profiled steps somewhat slower than unprofiled ones.
"""
from __future__ import annotations

import contextlib
import time
from typing import Iterator

import jittor as jt

STAGES = ("batch", "sampling", "field", "compositing", "shading", "backward", "optimizer")
_timings: dict[str, float] | None = None


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    if _timings is None:
        yield
        return
    jt.sync_all()
    start = time.perf_counter()
    try:
        yield
    finally:
        jt.sync_all()
        _timings[name] = _timings.get(name, 0.0) + time.perf_counter() - start


@contextlib.contextmanager
def collect() -> Iterator[dict[str, float]]:
    """Accumulate stage times (seconds) into the yielded dict while the block runs."""
    global _timings
    _timings = {}
    try:
        yield _timings
    finally:
        _timings = None
