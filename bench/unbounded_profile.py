#!/usr/bin/env python3
"""Where an unbounded training step's time goes, against the bounded mode on the same scene.

Trains the built-in room (``bench/unbounded.py``'s, generated at ``--size`` pixels with
``--views`` training views) once per mode in this process, then times ``--steps`` more steps
per stage (``runtime.profiling``: each stage synchronised, so the sum exceeds an unprofiled
step) and counts, for the last batch, the samples kept by the sampler and the samples shaded
(weight above ``rm_weight_mask_thre``; for the unbounded mode also how many of those lie in
the foreground box). The fused path shades only those, so their count
drives the shading stage and most of the backward pass.

    python bench/unbounded_profile.py --iters 600
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def profile_mode(datadir: str, unbounded: str, iters: int, steps: int, basedir: str) -> dict:
    import jittor as jt
    from tensorf_jt.config import load_run_config
    from tensorf_jt.rendering import compositing
    from tensorf_jt.runtime import profiling
    from tensorf_jt.training.trainer import Trainer

    argv = ["--config", str(ROOT / "configs" / "demo_room.txt"), "--dataset_name", "own_data", "--datadir", datadir,
            "--basedir", basedir, "--expname", f"mode_{unbounded}", "--unbounded", unbounded, "--N_vis", "0",
            "--render_test", "0", "--n_iters", str(iters), "--batch_size", "1024", "--N_voxel_init", "32768",
            "--N_voxel_final", "262144", "--upsamp_list", "100", "--upsamp_list", "200",
            "--update_AlphaMask_list", "200", "--update_AlphaMask_list", "500", "--progress_refresh_rate", "1000"]
    trainer = Trainer(load_run_config(argv))
    trainer.run()
    for _ in range(2):  # the first round compiles the kernels the stage boundaries create
        with profiling.collect() as stages:
            started = time.perf_counter()
            for _ in range(steps):
                trainer.train_step()
            wall = time.perf_counter() - started

    counts = {}
    packed_weights = compositing.packed_weights

    def counting(sigma, dist, offsets):
        weights = packed_weights(sigma, dist, offsets)
        counts.update(kept=int(weights.shape[0]),
                      shaded=int((weights > trainer.model.rayMarch_weight_thres).sum().item()))
        return weights

    model = trainer.model
    shade = model.shade

    def counting_shade(points, viewdirs, codes=None):
        # Grid coordinates in [-1, 1]; the foreground box is the middle half of an unbounded grid.
        counts["shaded_in_foreground"] = int((points.abs().max(-1) <= 0.5).sum().item()) if model.unbounded else None
        return shade(points, viewdirs, codes)

    compositing.packed_weights, model.shade = counting, counting_shade
    try:
        trainer.train_step()
    finally:
        compositing.packed_weights = packed_weights
        del model.shade
    jt.sync_all()
    return {"grid": list(trainer.model.gridSize), "samples_kept": counts["kept"], "samples_shaded": counts["shaded"],
            "shaded_in_foreground": counts["shaded_in_foreground"],
            "profiled_step_ms": round(1000 * wall / steps, 1),
            "stages_ms": {name: round(1000 * seconds / steps, 1) for name, seconds in stages.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=48, help="the room's image size in pixels")
    parser.add_argument("--views", type=int, default=24, help="the room's training views")
    parser.add_argument("--iters", type=int, default=600, help="training iterations before profiling")
    parser.add_argument("--steps", type=int, default=20, help="profiled steps per mode")
    args = parser.parse_args()

    import tensorf_jt.runtime
    tensorf_jt.runtime.setup()
    from unbounded import room

    out = ROOT / "bench" / "out" / "unbounded_profile"
    datadir = room(out / f"room_{args.size}_{args.views}", args.size, args.views)
    with tempfile.TemporaryDirectory() as basedir:
        results = {mode: profile_mode(datadir, flag, args.iters, args.steps, basedir)
                   for mode, flag in (("bounded", "0"), ("unbounded", "1"))}
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
