"""Where a run stands besides its tensors: its grid events, and the PSNRs its progress shows.

Kept in a training state's ``log`` part (with the training log's rows and the time spent), so
that a resumed run continues its log and its progress display where they were.
"""
from __future__ import annotations

from dataclasses import dataclass, field


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
