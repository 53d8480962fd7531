"""A training step reads nothing back from the device: the trainer reads the losses of several
steps at once, where it logs them, and before grid events and snapshots."""
import collections
import csv

import numpy as np
import jittor as jt

from test_resume import tiny_argv

from tensorf_jt.config import load_run_config
from tensorf_jt.training.trainer import Trainer

READ_METHODS = ("numpy", "item", "tolist", "__array__")


def count_reads(monkeypatch, trainer: Trainer) -> collections.Counter:
    """Count every read of a Var's values to the host: by the trainer's iteration at the time,
    and under "in steps" those made inside ``Trainer.train_step``."""
    reads, inside = collections.Counter(), []

    def count() -> None:
        reads["in steps" if inside else trainer.iteration] += 1

    for name in READ_METHODS:
        if not hasattr(jt.Var, name):
            continue
        original = getattr(jt.Var, name)

        def counted(self, *args, _original=original, **kwargs):
            count()
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(jt.Var, name, counted)
    data = jt.Var.data

    def read_data(self):
        count()
        return data.__get__(self)

    monkeypatch.setattr(jt.Var, "data", property(read_data, data.__set__))
    step = trainer.train_step

    def marked_step():
        inside.append(True)
        try:
            return step()
        finally:
            inside.pop()

    trainer.train_step = marked_step
    return reads


def test_steps_between_logs_and_events_read_nothing(tiny_scene, tmp_path, monkeypatch):
    # Losses are read every 8 iterations; grid events at 6, 10, 16 and 20 read theirs first.
    trainer = Trainer(load_run_config(tiny_argv(tiny_scene, tmp_path, "--n_iters", "30", "--progress_refresh_rate",
                                                "8", "--save_every", "0", "--tensorboard", "0",
                                                "--render_test", "0")))
    reads = count_reads(monkeypatch, trainer)
    trainer.run()
    monkeypatch.undo()
    assert reads["in steps"] == 0, "a step reads nothing back"
    events = {6, 10, 16, 20}
    quiet = [i for i in range(1, 30) if i % 8 and i not in events]
    assert {i: reads[i] for i in quiet if reads[i]} == {}, "nothing is read between steps that log nothing"
    assert [reads[8], reads[24]] == [1, 1], "a log row reads the pending losses at once"
    assert all(reads[i] >= 1 for i in events), "grid events read the losses before they change the model"
    with open(tmp_path / "run" / "train_log.csv", newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["train_psnr"]]
    assert [int(row["iteration"]) for row in rows] == [0, 8, 16, 24]
    assert all(np.isfinite(float(row["mse"])) and float(row["mse"]) > 0 for row in rows)
    assert trainer.pending_losses.iterations == [] and np.isfinite(trainer.progress.last_psnr), \
        "the last steps' losses are read when the run saves"
