"""Per-iteration times summarised per grid phase, shared by our benchmark and the original's harness.

A *phase* is the run of iterations trained on one grid resolution: training starts on the
initial grid, and each iteration listed in ``upsamp_list`` is the last one before the next,
finer grid. Medians are used throughout, so the few iterations that compile kernels or carry
a grid event (alpha mask, shrink, ray filtering, upsampling) do not move them; the time those
iterations spend beyond their phase's median is reported on its own as one-off time.
Pure Python: it runs in the original's environment too, where Jittor is not installed.
"""
from __future__ import annotations

import statistics

# Iterations slower than this many times their phase's median count as one-off (compiles, events).
OUTLIER_FACTOR = 3.0


def phase_bounds(upsamp_list: list[int], n_iters: int) -> list[tuple[int, int]]:
    """[first, last] iteration of each grid phase (upsampling happens after iteration ``u``)."""
    ends = sorted(u for u in upsamp_list if u < n_iters - 1) + [n_iters - 1]
    bounds, first = [], 0
    for end in ends:
        if end >= first:
            bounds.append((first, end))
            first = end + 1
    return bounds


def phase_summary(step_seconds: list[float | None], upsamp_list: list[int], n_iters: int) -> list[dict]:
    """Median and mean seconds per iteration of each phase, and its one-off seconds.

    ``step_seconds[i]`` is iteration i's time; None where it was not measured.
    """
    phases = []
    for first, last in phase_bounds(upsamp_list, n_iters):
        times = [t for t in step_seconds[first:last + 1] if t is not None]
        if not times:
            continue
        median = statistics.median(times)
        one_off = sum(t - median for t in times if t > OUTLIER_FACTOR * median)
        phases.append({"first": first, "last": last, "iterations": len(times), "median_s": median,
                       "mean_s": statistics.fmean(times), "one_off_s": one_off})
    return phases


def one_off_seconds(phases: list[dict]) -> float:
    """Time spent beyond the phase medians in outlier iterations: kernel compiles and grid events."""
    return sum(p["one_off_s"] for p in phases)
