#!/usr/bin/env python3
"""What compiling new kernels one at a time costs a cold first training step.

Jittor compiles a step's new kernels on several threads (``use_parallel_op_compiler``, one of
its documented flags, also read from the environment variable of that name); 0 compiles them
one after the other, which also runs its kernel tuners one at a time. This bench times the
first training step (forward, backward and Adam step) of each of the three models with every
kernel new (a number never used before in Jittor's compiler flags), in a fresh process per
setting, Jittor's default against the flag at 0, alternating for ``--rounds`` rounds.

    python bench/cold_compile.py --rounds 3
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
sys.path.insert(0, "tests")
import tensorf_jt.runtime
import jittor as jt
tensorf_jt.runtime.setup()
jt.flags.cc_flags = jt.flags.cc_flags + f" -DTENSORF_JT_BENCH_NONCE={time.time_ns()} "
from model_factory import rays_towards_box, tiny_model
from tensorf_jt.training.optimizer import make_optimizer
seconds = {}
for name in ("TensorVMSplit", "TensorCP", "TensorVM"):
    model = tiny_model((10, 10, 10), model_name=name, density_n_comp=[3], appearance_n_comp=[3], density_shift=-1.0)
    optimizer = make_optimizer(model, 0.02, 0.001)
    started = time.perf_counter()
    rgb = model(jt.array(rays_towards_box(64, seed=5)), white_bg=True, perturb=True).rgb
    field = model.field
    loss = jt.sqr(rgb - 0.3).mean() + field.density_L1() + field.TV_loss_density() + field.vector_comp_diffs()
    optimizer.step(loss)
    jt.sync_all(True)
    seconds[name] = time.perf_counter() - started
print("COLD_STEPS " + json.dumps(seconds))
"""

SETTINGS = {"parallel (Jittor's default)": {}, "serial (use_parallel_op_compiler=0)": {"use_parallel_op_compiler": "0"}}


def cold_steps(switches: dict[str, str]) -> dict[str, float]:
    env = dict(os.environ, **switches, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, cwd=ROOT,
                          timeout=1800)
    line = next((line for line in done.stdout.splitlines() if line.startswith("COLD_STEPS ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"the cold step failed:\n{done.stderr[-3000:]}")
    return json.loads(line.split(" ", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "cold_compile.json"))
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in SETTINGS}
    for round_number in range(1, args.rounds + 1):
        for name, switches in SETTINGS.items():
            runs[name].append(cold_steps(switches))
            total = sum(runs[name][-1].values())
            print(f"round {round_number}, {name}: {json.dumps(runs[name][-1])} total {total:.1f} s", flush=True)
    report = {}
    for name, rounds in runs.items():
        report[name] = {model: statistics.median(r[model] for r in rounds) for model in rounds[0]}
        report[name]["total"] = statistics.median(sum(r.values()) for r in rounds)
    default, serial = (report[name]["total"] for name in SETTINGS)
    report["serial / default, median totals"] = serial / default
    print(json.dumps(report, indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rounds": runs, "medians": report}, indent=1))


if __name__ == "__main__":
    main()
