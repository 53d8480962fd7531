"""Training speed of tensorf_jt (fused and reference kernel paths) and, optionally, of the
original PyTorch TensoRF, side by side in one run on the same scene and settings.

    python bench/train_speed.py                              # bench/yardstick.txt, both kernel paths
    python bench/train_speed.py --iters 300                  # shorter, for a quick look
    python bench/train_speed.py --kernels fused --original ../TensoRF --original_python ../venv/bin/python
    python bench/train_speed.py --config configs/lego.txt --datadir data/scene_800 -- --upsamp_list 200 ...

Each implementation trains in its own process (so peak memory is its own), one after the
other. ``--original`` names a checkout of apchenstu/TensoRF and ``--original_python`` a Python
with PyTorch and the original's requirements; both are the user's, nothing of the original
is part of this repository (``bench/original_tensorf.py`` drives it). Flags after ``--`` go to
both trainers. A ``dataset_name = demo`` config has its scene generated first and is then read
by both as a blender-layout folder.

The table gives, per implementation: the median seconds per iteration of every grid phase
(``bench/timing.py``) and of the final grid, the training loop's wall time, the one-off
seconds (kernel compiles, grid events) left out of the medians, peak host memory (RSS), peak
GPU memory on the device (``nvidia-smi``, when there is one), and test PSNR / SSIM. Ratios
are only between runs of this one invocation. Results also go to ``bench/out/train_speed.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from timing import one_off_seconds, phase_summary  # noqa: E402


def run_worker(config: str, kernels: str, iters: int | None, profile_steps: int, basedir: str,
               extra: list[str], op_profile_steps: int = 0) -> dict:
    """Train with ``--kernels kernels`` in this process and return the figures."""
    import tensorf_jt.runtime  # configures Jittor before it is imported
    import jittor as jt
    tensorf_jt.runtime.setup()
    from tensorf_jt.runtime import profiling
    from tensorf_jt.config import load_run_config
    from tensorf_jt.runtime.memory import peak_rss_mb
    from tensorf_jt.training.trainer import Trainer

    argv = ["--config", config, "--kernels", kernels, "--expname", f"speed_{kernels}",
            "--basedir", basedir, "--render_test", "1", "--N_vis", "0", *extra]
    if iters:
        argv += ["--n_iters", str(iters)]
    config = load_run_config(argv)
    started = time.time()
    trainer = Trainer(config)
    step_times: list[float | None] = [None] * config.schedule.n_iters
    original_step = trainer.train_step

    def timed_step() -> float:
        tick = time.perf_counter()
        mse = original_step()
        step_times[trainer.iteration] = time.perf_counter() - tick
        return mse

    trainer.train_step = timed_step
    result = trainer.run()
    stages = {}
    if profile_steps:
        for _ in range(2):  # the first round compiles the kernels that the stage boundaries create
            with profiling.collect() as stages:
                for _ in range(profile_steps):
                    original_step()
    ops = operator_profile(original_step, op_profile_steps) if op_profile_steps else []
    phases = phase_summary(step_times, list(config.schedule.upsamp_list), config.schedule.n_iters)
    return {
        "implementation": f"tensorf_jt ({kernels})",
        "use_cuda": int(jt.flags.use_cuda),
        "iterations": result.iterations,
        "phases": phases,
        "final_grid_s_per_iter": phases[-1]["median_s"],
        "loop_s": result.wall_time_s,
        "one_off_s": one_off_seconds(phases),
        "run_s": time.time() - started,
        "peak_rss_mb": peak_rss_mb(),
        "test_psnr": result.test_metrics["psnr"],
        "test_ssim": result.test_metrics["ssim"],
        "stages_ms": {name: 1000 * seconds / profile_steps for name, seconds in stages.items()},
        "final_grid": trainer.model.gridSize,
        "ops_ms": ops,
    }


def operator_profile(step, steps: int, top: int = 15) -> list[dict]:
    """The operators that take the most time over ``steps`` training steps (Jittor's profiler,
    after one unprofiled step), as {name, count, ms per step}, slowest first."""
    import jittor as jt

    step()
    jt.sync_all()
    with jt.profile_scope() as report:
        for _ in range(steps):
            step()
        jt.sync_all()
    header, rows = report[0], report[1:]
    name, count, total = header.index("Name"), header.index("Count"), header.index("TotalTime")
    ops = [{"name": row[name][:160], "count": int(float(row[count])) // steps,
            "ms": float(row[total]) / 1e6 / steps} for row in rows]
    return sorted(ops, key=lambda op: -op["ms"])[:top]


class GpuMemoryMonitor:
    """Peak memory in use on GPU 0 while a block runs (``nvidia-smi`` every 100 ms), in MiB above
    what was in use before it started; None without ``nvidia-smi``."""

    def __init__(self) -> None:
        self.available = shutil.which("nvidia-smi") is not None
        self.peak_mb: float | None = None
        self._stop = threading.Event()

    def _used_mb(self) -> float:
        done = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                              capture_output=True, text=True)
        return float(done.stdout.strip().splitlines()[0])

    def _poll(self, baseline: float) -> None:
        while not self._stop.wait(0.1):
            self.peak_mb = max(self.peak_mb or 0.0, self._used_mb() - baseline)

    def __enter__(self) -> "GpuMemoryMonitor":
        if self.available:
            self._thread = threading.Thread(target=self._poll, args=(self._used_mb(),), daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.available:
            self._stop.set()
            self._thread.join()


def _run_and_collect(command: list[str], what: str, log_path: Path, env: dict | None = None) -> dict | None:
    """Run one training process, its output going to ``log_path`` as it comes (what a cut-short
    run got to stays readable); return its RESULT line's figures plus peak GPU memory."""
    print(f"training {what} (log: {log_path}) ...", flush=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with GpuMemoryMonitor() as gpu, open(log_path, "w") as log:
        done = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    output = log_path.read_text(errors="replace")
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        print(f"{what} failed (exit status {done.returncode}); the end of its log:", output[-6000:],
              file=sys.stderr, sep="\n")
        return None
    result = json.loads(lines[-1][len("RESULT "):])
    result["peak_gpu_mb"] = gpu.peak_mb
    return result


def prepare(config: str, datadir: str | None) -> dict:
    """The config's dataset, generated if it is the demo scene (runs in a worker: it imports Jittor)."""
    import tensorf_jt  # noqa: F401
    from tensorf_jt.config import load_run_config
    from tensorf_jt.dataLoader import prepare_dataset

    data = load_run_config(["--config", config] + (["--datadir", datadir] if datadir else [])).data
    prepare_dataset(data)
    dataset_name = "blender" if data.dataset_name == "demo" else data.dataset_name
    prepared = {"dataset_name": dataset_name, "datadir": str(Path(data.datadir).resolve())}
    if dataset_name == "blender":
        # The original's blender loader takes the images to be 800 pixels wide and divides that
        # by its downsample flag; ours divides the images' real size. Smaller images need the
        # original's flag to match (100-pixel images: 8), so that both train on the same pixels.
        from PIL import Image

        with open(Path(data.datadir) / "transforms_train.json", encoding="utf-8") as handle:
            first = json.load(handle)["frames"][0]["file_path"]
        with Image.open(Path(data.datadir) / f"{first}.png") as image:
            width = image.size[0]
        prepared["original_downsample"] = 800.0 / width * data.downsample_train
    return prepared


def _shared_flags(args) -> tuple[list[str], list[str]] | None:
    """Flags both implementations get (a demo scene is read as the blender folder it is), and
    the flags only the original gets."""
    command = [sys.executable, __file__, "--prepare", "--config", args.config]
    if args.datadir:
        command += ["--datadir", args.datadir]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("PREPARED ")]
    if done.returncode != 0 or not lines:
        print("preparing the dataset failed:", done.stderr[-4000:], file=sys.stderr, sep="\n")
        return None
    dataset = json.loads(lines[-1][len("PREPARED "):])
    flags = ["--config", str(Path(args.config).resolve()), "--dataset_name", dataset["dataset_name"],
             "--datadir", dataset["datadir"]]
    if args.iters:
        flags += ["--n_iters", str(args.iters)]
    original_only = []
    if "original_downsample" in dataset:
        original_only = ["--downsample_train", f"{dataset['original_downsample']:g}"]
    return flags + args.extra, original_only


def format_table(results: list[dict]) -> str:
    def cell(value, pattern: str) -> str:
        return "–" if value is None or value != value else pattern.format(value)

    n_phases = max(len(r["phases"]) for r in results)
    phase_heads = " | ".join(f"phase {k + 1}" for k in range(n_phases))
    lines = [f"| implementation | s/iter per grid phase (median): {phase_heads} | final grid | loop | one-off "
             "| peak RSS | peak GPU | test PSNR | test SSIM |",
             "|---|" + "---|" * (n_phases + 8)]
    for r in results:
        phases = " | ".join(cell(p["median_s"], "{:.4f}") for p in r["phases"])
        phases += " | –" * (n_phases - len(r["phases"]))
        lines.append(f"| {r['implementation']} | {phases} | {cell(r['final_grid_s_per_iter'], '{:.4f}')} | "
                     f"{cell(r.get('loop_s'), '{:.0f} s')} | {cell(r.get('one_off_s'), '{:.0f} s')} | "
                     f"{cell(r.get('peak_rss_mb'), '{:.0f} MB')} | {cell(r.get('peak_gpu_mb'), '{:.0f} MiB')} | "
                     f"{cell(r['test_psnr'], '{:.2f} dB')} | {cell(r.get('test_ssim'), '{:.4f}')} |")
    bounds = ", ".join(f"{p['first']}-{p['last']}" for p in results[0]["phases"])
    lines.append(f"\nphases (iterations): {bounds}")
    original = next((r for r in results if r["implementation"].startswith("original")), None)
    for r in results:
        if original is None or r is original:
            continue
        ratio = r["final_grid_s_per_iter"] / original["final_grid_s_per_iter"]
        text = (f"{r['implementation']} / original, same run: final-grid s/iter {ratio:.2f}x, "
                f"loop wall time {r['loop_s'] / original['loop_s']:.2f}x, "
                f"test PSNR {r['test_psnr'] - original['test_psnr']:+.2f} dB")
        if r.get("peak_gpu_mb") and original.get("peak_gpu_mb"):
            text += f", peak GPU memory {r['peak_gpu_mb'] / original['peak_gpu_mb']:.2f}x"
        lines.append(text)
    stage_names = [s for s in ("batch", "sampling", "field", "compositing", "shading", "backward", "optimizer")
                   if any(s in r.get("stages_ms", {}) for r in results)]
    for r in results:
        if r.get("ops_ms"):
            lines += ["", f"| operator ({r['implementation']}, Jittor's profiler) | calls per step | ms per step |",
                      "|---|---|---|"]
            lines += [f"| `{op['name']}` | {op['count']} | {op['ms']:.2f} |" for op in r["ops_ms"]]
    if stage_names:
        ours = [r for r in results if r.get("stages_ms")]
        lines += ["", "| stage (ms per step, final grid) | " + " | ".join(r["implementation"] for r in ours) + " |",
                  "|---|" + "---|" * len(ours)]
        for name in stage_names:
            lines.append(f"| {name} | " + " | ".join(f"{r['stages_ms'].get(name, 0.0):.1f}" for r in ours) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(ROOT / "bench" / "yardstick.txt"))
    parser.add_argument("--datadir", default=None, help="override the config's datadir")
    parser.add_argument("--kernels", default="fused,reference", help="comma-separated kernel paths to run")
    parser.add_argument("--iters", type=int, default=None, help="override n_iters")
    parser.add_argument("--profile_steps", type=int, default=20, help="extra steps timed per stage (0: none)")
    parser.add_argument("--op_profile_steps", type=int, default=0,
                        help="extra steps under Jittor's operator profiler after training (0: none)")
    parser.add_argument("--original", default=None, help="checkout of the original PyTorch TensoRF to run too")
    parser.add_argument("--original_python", default=None, help="Python with PyTorch for --original")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "train_speed.json"))
    parser.add_argument("--logs", default=str(ROOT / "bench" / "out" / "logs"), help="folder for each run's log")
    parser.add_argument("--basedir", default=str(ROOT / "bench" / "out"), help="folder for the runs' outputs")
    parser.add_argument("--stop_on_failure", action="store_true", help="skip the remaining runs after a failed one")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    args, extra = parser.parse_known_args()
    args.extra = extra[1:] if extra[:1] == ["--"] else extra

    if args.worker:
        print("RESULT " + json.dumps(run_worker(args.config, args.kernels, args.iters, args.profile_steps, args.basedir,
                                                 args.extra, args.op_profile_steps)))
        return 0
    if args.prepare:
        print("PREPARED " + json.dumps(prepare(args.config, args.datadir)))
        return 0
    if args.original and not args.original_python:
        parser.error("--original needs --original_python (a Python with PyTorch and the original's requirements)")

    # This process never imports Jittor: on a GPU it would hold device memory during the runs.
    flags = _shared_flags(args)
    if flags is None:
        return 1
    shared, original_only = flags
    logs = Path(args.logs)
    runs = []
    for path in [p for p in args.kernels.split(",") if p]:
        # shared[:2] is the config, which the worker gets by its own flag
        command = [sys.executable, __file__, "--worker", "--config", args.config, "--kernels", path,
                   "--profile_steps", str(args.profile_steps), "--op_profile_steps", str(args.op_profile_steps),
                   "--basedir", args.basedir, "--", *shared[2:]]
        runs.append((command, f"tensorf_jt with --kernels {path}", logs / f"tensorf_jt_{path}.log", None))
    if args.original:
        out = tempfile.mkdtemp(prefix="original_tensorf_")
        command = [args.original_python, str(ROOT / "bench" / "original_tensorf.py"), "--tensorf_dir", args.original,
                   "--out", os.path.join(out, "result.json"), "--", *shared, *original_only,
                   "--expname", "speed_original", "--basedir", args.basedir, "--render_test", "1",
                   "--N_vis", "0"]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the original runs in its own Python
        runs.append((command, "the original PyTorch TensoRF", logs / "original.log", env))
    results = []
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    for run in runs:
        result = _run_and_collect(*run)
        if result is None and args.stop_on_failure:
            break
        if result is not None:
            results.append(result)
            Path(args.out).write_text(json.dumps(results, indent=2))  # kept if a later run is cut short
            print(format_table([result]), flush=True)
    if len(results) > 1:
        print("\n" + format_table(results))
    return 0 if len(results) == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
