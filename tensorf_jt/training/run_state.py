"""Where a run stands besides its tensors: its grid events, the PSNRs its progress shows, the
losses of its last steps, not yet read, and what a finished run reports (``TrainResult``).

``RunProgress`` is kept in a training state's ``log`` part (with the training log's rows and
the time spent), so that a resumed run continues its log and its progress display where they
were.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import jittor as jt

from tensorf_jt.runtime import distributed


@dataclass
class TrainResult:
    """``iterations``: completed; ``stopped_by_signal``: the signal that stopped the run early, if any."""

    logfolder: str
    checkpoint: str
    state: str
    iterations: int
    wall_time_s: float
    seconds_per_iter_median: float
    peak_rss_mb: float
    final_train_psnr: float
    test_metrics: dict | None = None
    events: list = field(default_factory=list)
    stopped_by_signal: int | None = None


@dataclass
class RunProgress:
    """``events``: (iteration, text) of every grid event so far, ``logged_events`` of which are in
    the training log; ``recent_psnrs``: train PSNRs since the last progress row; ``test_psnr``:
    the last periodic test render's; ``last_psnr``: the last step's."""

    events: list[tuple[int, str]] = field(default_factory=list)
    logged_events: int = 0
    recent_psnrs: list[float] = field(default_factory=list)
    test_psnr: float = 0.0
    last_psnr: float = 0.0

    def to_dict(self) -> dict:
        return {"events": list(self.events), "logged_events": self.logged_events,
                "recent_psnrs": list(self.recent_psnrs), "test_psnr": self.test_psnr, "last_psnr": self.last_psnr}

    @classmethod
    def from_dict(cls, saved: dict) -> "RunProgress":
        return cls([tuple(event) for event in saved["events"]], saved["logged_events"], list(saved["recent_psnrs"]),
                   saved["test_psnr"], saved["last_psnr"])


class PendingLosses:
    """The photometric losses of the steps since they were last read, as computed Vars [1].

    Reading a value waits for the device, so a step does not read its own loss: the trainer
    reads those of several steps together, when it logs them or must know they are finite
    (before grid events, test renders and snapshots).
    """

    def __init__(self) -> None:
        self.iterations: list[int] = []
        self._losses: list[jt.Var] = []

    def add(self, iteration: int, loss: jt.Var) -> None:
        self.iterations.append(iteration)
        self._losses.append(loss)

    def clear(self) -> None:
        self.iterations, self._losses = [], []

    def read(self, stop: bool) -> tuple[list[tuple[int, float]], bool]:
        """(iteration, loss) of the pending steps, losses averaged over MPI ranks, and whether
        any rank is asked to stop (``stop`` is this rank's answer), in one read; then none is
        pending."""
        values = jt.concat(self._losses) if self._losses else jt.zeros((0,))
        means, stop = distributed.mean_and_any(values, stop)
        read = list(zip(self.iterations, (float(value) for value in means)))
        self.clear()
        return read, stop
