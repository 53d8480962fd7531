"""The training log: ``train_log.csv`` written row by row, ``train_log.json`` and ``train_psnr.png`` at the end.

A row is written at every progress refresh and at every schedule event (upsample, alpha-mask
update, shrink, ray filtering, a periodic test render), and flushed at once, so a run that
crashes keeps its log up to that point.
"""
from __future__ import annotations

import csv
import datetime
import json
import os
import time
from typing import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tensorf_jt.config import OutputConfig
from tensorf_jt.errors import ConfigError

CSV_NAME, JSON_NAME, PLOT_NAME = "train_log.csv", "train_log.json", "train_psnr.png"

# mse: photometric MSE of that iteration's batch (without regularisers); train_psnr: mean
# over the iterations since the previous progress row; test_psnr: where test views were
# rendered; lr_grid / lr_network: the optimizer's current rates; n_rays: training rays left.
COLUMNS = ("iteration", "wall_time_s", "mse", "train_psnr", "test_psnr", "lr_grid", "lr_network",
           "grid_size", "n_rays", "event")


def is_run_folder(folder: str) -> bool:
    """Whether ``folder`` holds a training run of this project: the log every run writes first."""
    return os.path.isfile(os.path.join(folder, CSV_NAME))


def run_folder(output: OutputConfig, folder: str | None, create: bool) -> str:
    """The run's folder: ``folder``, or ``basedir/expname`` (with a timestamp for
    ``add_timestamp``); ``create`` makes it with its ``imgs_vis/``."""
    if folder is None:
        folder = output.run_folder(datetime.datetime.now().strftime("-%Y%m%d-%H%M%S") if output.add_timestamp else "")
    try:
        if create:
            os.makedirs(os.path.join(folder, "imgs_vis"), exist_ok=True)
    except OSError as err:
        raise ConfigError(f"Cannot create the log folder '{folder}' ({err.strerror}); "
                          "choose a writable --basedir.") from None
    return folder


class TrainingLog:
    """Rows of one training run in ``folder``; ``close()`` writes the JSON copy and the plot."""

    def __init__(self, folder: str, rows: Sequence[dict] = (), elapsed_s: float = 0.0, write: bool = True) -> None:
        """A new log; a resumed run passes its earlier ``rows`` (written first) and the training
        time already spent, ``elapsed_s``, from which ``wall_time_s`` continues. ``write`` False
        keeps the rows in memory only (the ranks of a data-parallel run other than rank 0)."""
        self.folder = folder
        self.rows: list[dict] = []
        self._started = time.time() - elapsed_s
        self._handle = open(os.path.join(folder, CSV_NAME), "w", newline="", encoding="utf-8") if write else None
        self._writer = csv.DictWriter(self._handle, fieldnames=COLUMNS) if write else None
        if write:
            self._writer.writeheader()
        for record in rows:
            self._write(dict(record))

    def row(self, iteration: int, *, lr_grid: float, lr_network: float, grid_size: Sequence[int], n_rays: int,
            mse: float | None = None, train_psnr: float | None = None, test_psnr: float | None = None,
            event: str = "") -> dict:
        """Append a row: the given values, the current learning rates, grid size and training rays."""
        record = {
            "iteration": int(iteration),
            "wall_time_s": round(time.time() - self._started, 3),
            "mse": mse,
            "train_psnr": train_psnr,
            "test_psnr": test_psnr,
            "lr_grid": float(lr_grid),
            "lr_network": float(lr_network),
            "grid_size": "x".join(str(n) for n in grid_size),
            "n_rays": int(n_rays),
            "event": event,
        }
        self._write(record)
        return record

    def _write(self, record: dict) -> None:
        self.rows.append(record)
        if self._handle is not None:
            self._writer.writerow({key: "" if value is None else value for key, value in record.items()})
            self._handle.flush()

    def close(self) -> None:
        """Close the CSV, write every row to ``train_log.json`` and plot PSNR to ``train_psnr.png``."""
        if self._handle is None:
            return
        self._handle.close()
        with open(os.path.join(self.folder, JSON_NAME), "w", encoding="utf-8") as handle:
            json.dump(self.rows, handle, indent=1)
        plot_psnr(self.rows, os.path.join(self.folder, PLOT_NAME))


def plot_psnr(rows: list[dict], path: str) -> None:
    """Train PSNR over iterations as a line, test PSNR as points (Agg canvas, no display needed)."""
    figure = Figure(figsize=(7, 4), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for key, style, label in (("train_psnr", "-", "train (window mean)"), ("test_psnr", "o", "test views")):
        points = [(row["iteration"], row[key]) for row in rows if row[key] is not None]
        if points:
            iterations, values = zip(*points)
            axes.plot(iterations, values, style, label=label)
    axes.set_xlabel("iteration")
    axes.set_ylabel("PSNR (dB)")
    axes.grid(alpha=0.3)
    if axes.lines:
        axes.legend()
    figure.tight_layout()
    figure.savefig(path)
