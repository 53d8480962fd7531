"""Jittor's operator profile of one training step: how many operators it runs, their time, and
which of them move data between layouts (transpose, permute, reindex).

    python bench/step_operators.py                       # the yardstick's model at its final grid
    python bench/step_operators.py --kernels reference --steps 10

Trains ``bench/yardstick.txt`` at its final grid from the first step (no upsampling, no alpha
mask: the shapes stay put) for ``--iters`` iterations, so that every kernel is compiled, then
runs ``--steps`` steps under Jittor's profiler. Prints per step the operators run and their
time, the layout operators among them, and the slowest operators. Results also go to
``bench/out/step_operators.json``.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LAYOUT_OPERATORS = ("transpose", "permute", "reindex")


def profile(kernels: str, iters: int, steps: int, basedir: str) -> dict:
    import tensorf_jt.runtime  # configures Jittor before it is imported
    import jittor as jt
    tensorf_jt.runtime.setup()
    from tensorf_jt.config import load_run_config
    from tensorf_jt.training.trainer import Trainer

    config = load_run_config(["--config", str(ROOT / "bench" / "yardstick.txt"), "--kernels", kernels,
                              "--n_iters", str(iters), "--render_test", "0", "--N_vis", "0", "--basedir", basedir,
                              "--datadir", str(ROOT / "data" / "demo_scene"), "--N_voxel_init", "2097152",
                              "--upsamp_list", "100000", "--update_AlphaMask_list", "100000"])
    trainer = Trainer(config)
    trainer.run()
    trainer.train_step()
    jt.sync_all()
    with jt.profile_scope() as report:
        for _ in range(steps):
            trainer.train_step()
        jt.sync_all()
    header, rows = report[0], report[1:]
    name, count, total = header.index("Name"), header.index("Count"), header.index("TotalTime")
    ops = [{"name": row[name][:200], "count": int(float(row[count])) / steps, "ms": float(row[total]) / 1e6 / steps}
           for row in rows]
    layout = [op for op in ops if any(word in op["name"] for word in LAYOUT_OPERATORS)]
    return {"kernels": kernels, "grid": trainer.model.gridSize, "steps": steps,
            "operators_per_step": sum(op["count"] for op in ops), "ms_per_step": sum(op["ms"] for op in ops),
            "layout_operators_per_step": sum(op["count"] for op in layout),
            "layout_ms_per_step": sum(op["ms"] for op in layout),
            "layout": sorted(layout, key=lambda op: -op["ms"]), "slowest": sorted(ops, key=lambda op: -op["ms"])[:12]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default="fused")
    parser.add_argument("--iters", type=int, default=20, help="training iterations before profiling")
    parser.add_argument("--steps", type=int, default=5, help="steps under the profiler")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "step_operators.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as basedir:
        result = profile(args.kernels, args.iters, args.steps, basedir)
    print(f"{result['kernels']} kernels, grid {result['grid']}, per step over {result['steps']} profiled steps: "
          f"{result['operators_per_step']:.0f} operators, {result['ms_per_step']:.1f} ms; layout operators "
          f"(transpose, permute, reindex): {result['layout_operators_per_step']:.0f}, "
          f"{result['layout_ms_per_step']:.2f} ms")
    for title, key in (("layout operators", "layout"), ("slowest operators", "slowest")):
        print(f"\n| {title} | calls per step | ms per step |\n|---|---|---|")
        for op in result[key]:
            print(f"| `{op['name'][:120]}` | {op['count']:g} | {op['ms']:.2f} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
