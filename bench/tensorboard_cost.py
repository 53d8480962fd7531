#!/usr/bin/env python3
"""What the TensorBoard scalars cost a training step, and that they leave the results unchanged.

Trains the yardstick (``bench/yardstick.txt``) in this process once per setting, timing the
iteration's TensorBoard work (``TensorBoardLog.training_step``: copying out the regularisers
and writing the scalars, spread over every iteration) against the whole iteration, which is far
less noisy on a shared machine than comparing two runs' wall times. Settings: ``--tensorboard 0``, ``--tensorboard_every 1``
(every iteration, as the reference writes) and the default ``--tensorboard_every 10``. The
checkpoints of all settings must be identical bit for bit.

    python bench/tensorboard_cost.py --iters 300
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

SETTINGS = {"off": ["--tensorboard", "0"], "every 1": ["--tensorboard_every", "1"],
            "every 10 (default)": ["--tensorboard_every", "10"]}


def measure(flags: list[str], iters: int, folder: str) -> dict:
    import jittor as jt
    from checkpoint_digest import checkpoint_digest
    from tensorf_jt.config import load_run_config
    from tensorf_jt.training.trainer import Trainer

    config = load_run_config(["--config", str(ROOT / "bench" / "yardstick.txt"), "--n_iters", str(iters),
                              "--render_test", "0", "--basedir", folder, "--datadir", str(ROOT / "data" / "demo_scene"),
                              *flags])
    trainer = Trainer(config)
    logging_time: list[float] = []
    log = trainer.tensorboard.training_step

    def timed(*args) -> None:
        started = time.perf_counter()
        log(*args)
        logging_time.append(time.perf_counter() - started)

    trainer.tensorboard.training_step = timed
    result = trainer.run()
    steps = result.wall_time_s / result.iterations
    logging = sum(logging_time) / result.iterations
    return {"logging_s_per_iter": logging, "wall_s_per_iter": steps,
            "median_step_s": result.seconds_per_iter_median,
            "share": logging / steps,
            "digest": checkpoint_digest(jt.load(result.checkpoint))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "tensorboard_cost.json"))
    args = parser.parse_args()
    import tensorf_jt.runtime

    tensorf_jt.runtime.setup()
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, flags in SETTINGS.items():
            results[name] = measure(flags, args.iters, str(Path(folder) / name.split()[0]))
            print(f"{name}: TensorBoard {1000 * results[name]['logging_s_per_iter']:.2f} ms of "
                  f"{1000 * results[name]['wall_s_per_iter']:.1f} ms per iteration "
                  f"({100 * results[name]['share']:.2f} %)", flush=True)
    digests = [result.pop("digest") for result in results.values()]
    same = all(digest == digests[0] for digest in digests)
    print(f"checkpoints identical: {same}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"iters": args.iters, "results": results, "identical": same}, indent=1))


if __name__ == "__main__":
    main()
