"""The NaN guard's checks: when a run counts as diverged, and which tensors went bad.

A non-finite loss or parameter sends training back to its last good snapshot with halved
learning rates (``Trainer``); the third time in a row without getting past the iteration
that failed ends the run with ``TrainingDiverged``.
"""
from __future__ import annotations

import numpy as np
import jittor as jt

from tensorf_jt.errors import TensorfError

# A non-finite loss this many times in a row (without getting past the iteration that failed)
# stops training.
MAX_NONFINITE_IN_A_ROW = 3
# How often the NaN guard's in-memory snapshot is taken when --save_every is 0.
SNAPSHOT_EVERY_WITHOUT_SAVES = 1000


class TrainingDiverged(TensorfError):
    """The loss stayed non-finite after going back to the last good state with lower learning rates."""


def nonfinite_parameters(model) -> list[str]:
    """Names of the model field's tensors holding a NaN or an infinity (fetches them; not for every step).

    Checked with numpy on the host, not with ``jt.isfinite``: Jittor generates that operator's
    source through a Python hook (``@python.jittor.auto_parallel``) which its parallel op
    compiler calls from several threads without holding the GIL. Compiling the checks of all
    tensors at once crashes the process in those threads (``Caught segfault ... thread_name:
    'C1'``): on a GPU at the first snapshot, on the CPU now and then. The copy to the host
    costs milliseconds, once per snapshot.
    """
    state = model.field.state_dict()
    jt.sync(list(state.values()))
    return [name for name, var in state.items() if not np.isfinite(var.numpy()).all()]


class NanGuard:
    """The last good snapshot of a run and how often in a row training had to go back to it."""

    def __init__(self) -> None:
        self.snapshot: dict | None = None
        self.failures = 0
        self._failed_at = -1

    def keep(self, snapshot: dict) -> None:
        self.snapshot = snapshot

    def fail(self, iteration: int, what: str, advice: str) -> dict:
        """Record a failure at ``iteration``; the snapshot to go back to, or ``TrainingDiverged``
        once it has happened ``MAX_NONFINITE_IN_A_ROW`` times without getting past it."""
        self.failures += 1
        back_to = self.snapshot["iteration"]
        if self.failures >= MAX_NONFINITE_IN_A_ROW:
            raise TrainingDiverged(
                f"Training diverged: {what} at iteration {iteration}, {self.failures} times in a row, although "
                f"training went back to iteration {back_to} with halved learning rates each time. {advice}")
        self._failed_at = max(self._failed_at, iteration)
        return self.snapshot

    def passed(self, iteration: int) -> None:
        """Iteration ``iteration`` went through: past the one that failed, the count starts again."""
        if self.failures and iteration >= self._failed_at:
            self.failures = 0
