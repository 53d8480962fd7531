"""Training speed of the fused kernels against the pure-Jittor reference path, in one run.

    python bench/train_speed.py                      # bench/yardstick.txt, both paths
    python bench/train_speed.py --iters 300          # shorter, for a quick look

Each path trains in its own process (so peak memory is its own) on the same config: the
yardstick settings the original PyTorch TensoRF was timed at. The table reports the median
s/iter over the second half of training (after the compiles and the early small grids), the
training wall time, peak RSS and final test PSNR, then the time per stage of a few extra,
synchronised steps on the final grid (after a round that compiles them). Results also go to bench/out/train_speed.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PYTORCH_YARDSTICK = {"s_per_iter": 0.30, "total_s": 486.0, "peak_rss_mb": 1600.0}


def run_worker(config: str, kernels: str, iters: int | None, profile_steps: int) -> dict:
    """Train one path in this process and return its figures."""
    import tensorf_jt  # noqa: F401  (configures Jittor before it is imported)
    import jittor as jt
    from tensorf_jt import profiling
    from tensorf_jt.config import parse_args
    from tensorf_jt.trainer import Trainer, peak_rss_mb

    argv = ["--config", config, "--kernels", kernels, "--expname", f"speed_{kernels}",
            "--basedir", str(ROOT / "bench" / "out"), "--render_test", "1", "--N_vis", "0"]
    if iters:
        argv += ["--n_iters", str(iters)]
    started = time.time()
    trainer = Trainer(parse_args(argv))
    step_times = []
    original_step = trainer.train_step

    def timed_step() -> float:
        tick = time.perf_counter()
        mse = original_step()
        step_times.append(time.perf_counter() - tick)
        return mse

    trainer.train_step = timed_step
    result = trainer.run()
    for _ in range(2):  # the first round compiles the kernels that the stage boundaries create
        with profiling.collect() as stages:
            for _ in range(profile_steps):
                original_step()
    return {
        "kernels": kernels,
        "use_cuda": int(jt.flags.use_cuda),
        "iterations": result.iterations,
        "s_per_iter": statistics.median(step_times[len(step_times) // 2:]),
        "train_wall_s": result.wall_time_s,
        "process_wall_s": time.time() - started,
        "peak_rss_mb": peak_rss_mb(),
        "test_psnr": result.test_metrics["psnr"],
        "test_ssim": result.test_metrics["ssim"],
        "stages_ms": {name: 1000 * seconds / profile_steps for name, seconds in stages.items()},
        "final_grid": trainer.model.gridSize,
    }


def format_table(results: list[dict]) -> str:
    by_path = {r["kernels"]: r for r in results}
    lines = ["| path | s/iter (median) | training wall time | peak RSS | test PSNR |", "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['kernels']} | {r['s_per_iter']:.3f} | {r['train_wall_s']:.0f} s | "
                     f"{r['peak_rss_mb']:.0f} MB | {r['test_psnr']:.2f} dB |")
    y = PYTORCH_YARDSTICK
    lines.append(f"| PyTorch original (issue's figure) | {y['s_per_iter']:.2f} | {y['total_s']:.0f} s | "
                 f"{y['peak_rss_mb']:.0f} MB | – |")
    if "fused" in by_path and "reference" in by_path:
        fused, reference = by_path["fused"], by_path["reference"]
        lines.append("")
        lines.append(f"fused / reference, same run: s/iter {fused['s_per_iter'] / reference['s_per_iter']:.2f}, "
                     f"wall time {fused['train_wall_s'] / reference['train_wall_s']:.2f}, "
                     f"PSNR difference {fused['test_psnr'] - reference['test_psnr']:+.2f} dB")
        lines.append(f"PyTorch original / fused: s/iter {y['s_per_iter'] / fused['s_per_iter']:.2f}x, "
                     f"wall time {y['total_s'] / fused['train_wall_s']:.2f}x")
    stage_names = [s for s in ("batch", "sampling", "field", "compositing", "shading", "backward", "optimizer")
                   if any(s in r["stages_ms"] for r in results)]
    lines += ["", "| stage (ms per step, final grid) | " + " | ".join(r["kernels"] for r in results) + " |",
              "|---|" + "---|" * len(results)]
    for name in stage_names:
        lines.append(f"| {name} | " + " | ".join(f"{r['stages_ms'].get(name, 0.0):.1f}" for r in results) + " |")
    lines.append("| total | " + " | ".join(f"{sum(r['stages_ms'].values()):.1f}" for r in results) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(ROOT / "bench" / "yardstick.txt"))
    parser.add_argument("--kernels", default="fused,reference", help="comma-separated paths to run")
    parser.add_argument("--iters", type=int, default=None, help="override n_iters")
    parser.add_argument("--profile_steps", type=int, default=20)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        print("RESULT " + json.dumps(run_worker(args.config, args.kernels, args.iters, args.profile_steps)))
        return 0

    results = []
    for path in args.kernels.split(","):
        command = [sys.executable, __file__, "--worker", "--config", args.config, "--kernels", path,
                   "--profile_steps", str(args.profile_steps)] + (["--iters", str(args.iters)] if args.iters else [])
        print(f"training with --kernels {path} ...", flush=True)
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            print(done.stdout[-2000:], done.stderr[-4000:], file=sys.stderr)
            return 1
        results.append(json.loads(lines[-1][len("RESULT "):]))
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_speed.json").write_text(json.dumps(results, indent=2))
    print(format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
