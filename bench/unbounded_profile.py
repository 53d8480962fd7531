#!/usr/bin/env python3
"""Where an unbounded training step's time goes, against the bounded mode on the same scene.

Trains a scene once per run in this process: the bounded mode, the unbounded mode and each
``--variant NAME "FLAGS"`` (the unbounded mode with FLAGS added). The scene is the built-in
room (``bench/unbounded.py``'s, generated at ``--size`` pixels with ``--views`` training views)
or ``--datadir`` (an own_data folder, e.g. a converted COLMAP capture), trained with
``--config`` for ``--iters`` iterations and the flags after ``--`` (by default the room's
schedule: batch 1024, grid 32^3 -> 64^3 upsampled at 100 and 200, alpha masks at 200 and 500).
Then it times training steps of all runs in turns, ``--rounds`` rounds of ``--steps`` steps
each, so that a machine whose speed drifts slows all runs alike, and reports each run's median
step and its ratio to the bounded one. One more turn per run times each stage
(``runtime.profiling``: each stage synchronised, so their sum exceeds an unprofiled step) and
counts, for its last batch, the samples kept by the sampler and the samples shaded (for
unbounded runs also how many of those lie in the foreground box). The fused path shades only
those, so their count drives the shading stage and most of the backward pass. With
``--test_metrics`` each run also renders its test views once trained, and reports their
metrics, so that one training per run gives both its quality and its step time.

    python bench/unbounded_profile.py --iters 600 --variant imp32 "--importance_samples 32"
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


ROOM_SCHEDULE = ["--batch_size", "1024", "--N_voxel_init", "32768", "--N_voxel_final", "262144",
                 "--upsamp_list", "100", "--upsamp_list", "200", "--update_AlphaMask_list", "200",
                 "--update_AlphaMask_list", "500"]


def trained(config: str, datadir: str, name: str, unbounded: str, flags: list[str], iters: int, basedir: str,
            test_metrics: bool):
    """The run's trainer after ``iters`` iterations, and its test metrics (None unless ``test_metrics``)."""
    from tensorf_jt.config import load_run_config
    from tensorf_jt.training.trainer import Trainer

    argv = ["--config", config, "--dataset_name", "own_data", "--datadir", datadir, "--basedir", basedir,
            "--expname", name, "--unbounded", unbounded, "--N_vis", "0", "--render_test", str(int(test_metrics)),
            "--n_iters", str(iters), "--progress_refresh_rate", "1000", *flags]
    trainer = Trainer(load_run_config(argv))
    trainer.run()
    if not test_metrics:
        return trainer, None
    metrics = json.loads((Path(basedir) / name / "imgs_test_all" / "metrics.json").read_text())
    return trainer, {key: value for key, value in metrics.items() if key != "views"}


def timed_steps(trainer, steps: int) -> list[float]:
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        trainer.train_step()
        times.append(time.perf_counter() - started)
    return times


def profiled(trainer, steps: int) -> dict:
    """Stage times of ``steps`` steps, and the samples kept and shaded in one more."""
    import jittor as jt
    from tensorf_jt.rendering import compositing
    from tensorf_jt.runtime import profiling

    for _ in range(2):  # the first round compiles the kernels the stage boundaries create
        with profiling.collect() as stages:
            started = time.perf_counter()
            for _ in range(steps):
                trainer.train_step()
            wall = time.perf_counter() - started

    counts = {"shaded": 0, "shaded_in_foreground": 0}
    packed_weights = compositing.packed_weights
    model, field = trainer.model, trainer.model.field
    shade = field.shade
    unbounded = not model.sampler.model_space_is_world

    def counting(sigma, dist, offsets):
        counts["kept"] = int(sigma.shape[0])
        return packed_weights(sigma, dist, offsets)

    def counting_shade(points, viewdirs):
        counts["shaded"] += int(points.shape[0])
        # Grid coordinates in [-1, 1]; the foreground box is the middle half of an unbounded grid.
        counts["shaded_in_foreground"] += int((points.abs().max(-1) <= 0.5).sum().item())
        return shade(points, viewdirs)

    compositing.packed_weights, field.shade = counting, counting_shade
    try:
        trainer.train_step()
    finally:
        compositing.packed_weights = packed_weights
        del field.shade
    jt.sync_all()
    return {"grid": list(model.gridSize), "samples_kept": counts["kept"], "samples_shaded": counts["shaded"],
            "shaded_in_foreground": counts["shaded_in_foreground"] if unbounded else None,
            "profiled_step_ms": round(1000 * wall / steps, 1),
            "stages_ms": {name: round(1000 * seconds / steps, 1) for name, seconds in stages.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datadir", help="an own_data scene (default: the built-in room)")
    parser.add_argument("--config", default=str(ROOT / "configs" / "demo_room.txt"),
                        help="the config every run starts from")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "unbounded_profile"),
                        help="where results.json (and the generated room) go")
    parser.add_argument("--size", type=int, default=48, help="the room's image size in pixels")
    parser.add_argument("--views", type=int, default=24, help="the room's training views")
    parser.add_argument("--iters", type=int, default=600, help="training iterations before timing")
    parser.add_argument("--steps", type=int, default=10, help="steps per run and round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of timed steps, all runs in turn")
    parser.add_argument("--test_metrics", action="store_true",
                        help="render each run's test views once trained and report their metrics")
    parser.add_argument("--variant", nargs=2, action="append", default=[], metavar=("NAME", "FLAGS"),
                        help="also time the unbounded mode with FLAGS added, reported under NAME")
    parser.add_argument("--no_unbounded", action="store_true",
                        help="leave out the plain unbounded run (the bounded one and the variants remain)")
    parser.add_argument("flags", nargs=argparse.REMAINDER,
                        help="-- then train.py flags for every run (default: the room's schedule)")
    args = parser.parse_args()
    flags = [flag for flag in args.flags if flag != "--"] or ROOM_SCHEDULE

    import tensorf_jt.runtime
    tensorf_jt.runtime.setup()
    from unbounded import room

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    datadir = args.datadir or room(out / f"room_{args.size}_{args.views}", args.size, args.views)
    runs = [("bounded", "0", [])] + ([] if args.no_unbounded else [("unbounded", "1", [])])
    runs += [(name, "1", shlex.split(extra)) for name, extra in args.variant]
    with tempfile.TemporaryDirectory() as basedir:
        trainers, metrics = {}, {}
        for name, mode, extra in runs:
            trainers[name], metrics[name] = trained(args.config, datadir, name, mode, flags + extra, args.iters,
                                                    basedir, args.test_metrics)
        steps = {name: [] for name in trainers}
        for round_index in range(args.rounds + 1):
            for name, trainer in trainers.items():
                times = timed_steps(trainer, args.steps)
                if round_index > 0:  # the first round compiles what the timing loop's shapes need
                    steps[name] += times
        results = {name: profiled(trainer, args.steps) for name, trainer in trainers.items()}
    bounded = statistics.median(steps["bounded"])
    for name, result in results.items():
        median = statistics.median(steps[name])
        result.update(step_ms_median=round(1000 * median, 1), step_ms_min=round(1000 * min(steps[name]), 1),
                      step_ms_max=round(1000 * max(steps[name]), 1), ratio_to_bounded=round(median / bounded, 2))
        if metrics[name] is not None:
            result["test"] = metrics[name]
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
