"""``train.py``: train a model from a config (reference flags), or render/export from ``--ckpt``.

With no arguments at all it trains the built-in demo scene (``configs/demo.txt``).
``--export_mesh 1`` writes the mesh of ``--ckpt`` and stops (the reference goes on to train);
with ``--render_only 1`` it also renders what the render flags ask for, into the reference's
folders: ``{checkpoint folder}/{expname}/imgs_test_all/`` and ``.../{expname}/imgs_path_all/``,
but ``{checkpoint folder}/imgs_train_all/`` (``expname`` from the flags or config, else the
one the checkpoint records, else its file name; see ``tensorf_jt.cli.render``). Without
``--render_only``, ``--ckpt`` is the model a new training run starts from (a checkpoint of
ours or of the PyTorch TensoRF); the run's schedule starts from iteration 0. ``--resume STATE``
continues a saved run. SIGINT / SIGTERM stop training after the current step, save, and exit
with status 130 / 143 (128 + the signal's number) after printing how to resume.
"""
from __future__ import annotations

import signal
import sys

from tensorf_jt.cli import exit_process, run_cli
from tensorf_jt.config import DEMO_CONFIG, parse_run_config, require_for_rendering
from tensorf_jt.errors import ConfigError
from tensorf_jt.runtime import setup


def _main(argv: list[str]) -> int:
    if not argv:
        if not DEMO_CONFIG.is_file():
            raise ConfigError(f"No arguments given and the demo config '{DEMO_CONFIG}' is missing; "
                              "pass --config FILE.")
        argv = ["--config", str(DEMO_CONFIG)]
    config, explicit = parse_run_config(argv)
    setup()
    require_for_rendering(config)
    from tensorf_jt.runtime.error_hints import jittor_error_hints
    if config.render.render_only or config.render.export_mesh:
        from tensorf_jt.cli.render import render_checkpoint
        with jittor_error_hints(config, "rendering"):
            render_checkpoint(config, explicit, render=config.render.render_only, layout="reference")
        return 0
    from tensorf_jt.runtime import distributed
    from tensorf_jt.training.run import train
    with jittor_error_hints(config, "preparing training"):  # the trainer names the iteration once it runs
        result = train(config, explicit)
    if not distributed.is_main():  # under mpirun, rank 0 reports for all, and its status is the job's
        return 0
    if result.stopped_by_signal is not None:
        print(f"{signal.Signals(result.stopped_by_signal).name}: training stopped after {result.iterations} "
              f"iterations. Saved the training state '{result.state}' and the model '{result.checkpoint}'.\n"
              f"Resume with: python train.py --resume {result.state}", file=sys.stderr)
        return 128 + result.stopped_by_signal
    print(f"checkpoint: {result.checkpoint}")
    print(f"wall time {result.wall_time_s:.1f} s, {result.seconds_per_iter_median:.3f} s/iter (median), "
          f"peak RSS {result.peak_rss_mb:.0f} MB, final train PSNR {result.final_train_psnr:.2f}")
    if result.test_metrics:
        from tensorf_jt.cli.render import metrics_line
        print(f"test: {metrics_line(result.test_metrics)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cli(lambda: _main(sys.argv[1:] if argv is None else list(argv)))


def entry_point() -> None:
    """The ``tensorf-train`` command: ``main``, then leave the process (at once after a failure)."""
    exit_process(main)


if __name__ == "__main__":
    entry_point()
