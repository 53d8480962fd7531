"""Data-parallel scaling on one machine: N MPI ranks x (cores / N) threads against one process
using every core, same config and global batch, one after the other in one run.

    python bench/mpi_scaling.py                      # bench/yardstick.txt, 2 ranks
    python bench/mpi_scaling.py --ranks 4 --iters 300

Needs MPI in the environment (``pip install -e '.[mpi]'``). Each run is ``train.py`` itself;
the table gives its training-loop wall time and median seconds per iteration (as train.py
reports them), test PSNR, and the ratio between the two runs. Then it times what data
parallelism adds to every step, the all-reduce of the gradients, for lego's model at the
yardstick's final grid (128^3) and at lego's (300^3), on the same ranks (``--probe``).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = re.compile(r"wall time ([\d.]+) s, ([\d.]+) s/iter \(median\), peak RSS (\d+) MB")
PSNR = re.compile(r"test: PSNR ([\d.]+)")


def train(command: list[str], env: dict, log: Path) -> dict:
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    log.write_text(done.stdout + done.stderr)
    report, psnr = REPORT.search(done.stdout), PSNR.search(done.stdout)
    if done.returncode != 0 or not report:
        raise SystemExit(f"{' '.join(command[:6])} ... failed (exit status {done.returncode}); log: {log}")
    return {"loop_s": float(report.group(1)), "s_per_iter": float(report.group(2)), "rss_mb": int(report.group(3)),
            "psnr": float(psnr.group(1)) if psnr else float("nan")}


def lego_model_parameters(voxels_per_side: int) -> int:
    """Trainable numbers in lego's TensorVMSplit (16 + 48 components, MLP_Fea) on a cube grid,
    counted from a model built with the trainer's own classes."""
    import numpy as np
    from tensorf_jt.models import MODELS
    model = MODELS["TensorVMSplit"](np.array([[-1.5] * 3, [1.5] * 3]), [voxels_per_side] * 3,
                                    density_n_comp=[16] * 3, appearance_n_comp=[48] * 3, app_dim=27,
                                    shadingMode="MLP_Fea", view_pe=2, fea_pe=2, featureC=128,
                                    fea2denseAct="softplus")
    return sum(int(np.prod(var.shape)) for var in model.parameters())


def probe_allreduce(repeats: int = 10) -> None:
    """Under mpirun: milliseconds for one step's gradient all-reduce, per-tensor as Jittor's
    optimizers do it, for the 128^3 and 300^3 models' tensor sizes."""
    import tensorf_jt  # noqa: F401  (sets Jittor's environment before Jittor is imported)
    import jittor as jt
    from tensorf_jt.runtime import distributed
    for side in (128, 300):
        count = lego_model_parameters(side)
        grads = [jt.rand(count // 4) for _ in range(4)]  # four tensors of the model's total size
        for _ in range(2):  # compile and warm up
            jt.sync([g.mpi_all_reduce("mean") for g in grads])
        started = time.perf_counter()
        for _ in range(repeats):
            jt.sync([g.mpi_all_reduce("mean") for g in grads])
        seconds = (time.perf_counter() - started) / repeats
        if distributed.is_main():
            print(f"ALLREDUCE {side} {count} {seconds * 1e3:.2f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(ROOT / "bench" / "yardstick.txt"))
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--iters", type=int, default=None, help="override n_iters")
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)  # the all-reduce timing, per rank
    args = parser.parse_args()
    if args.probe:
        probe_allreduce()
        return 0

    mpirun = Path(sys.executable).parent / "mpirun"
    if not mpirun.exists():
        raise SystemExit("MPI is not installed in this environment: pip install -e '.[mpi]'")
    cores = os.cpu_count() or 1
    out = ROOT / "bench" / "out" / "mpi_scaling"
    out.mkdir(parents=True, exist_ok=True)
    flags = ["train.py", "--config", args.config, "--basedir", str(out), "--N_vis", "0", "--render_test", "1"]
    if args.iters:
        flags += ["--n_iters", str(args.iters)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), PATH=f"{mpirun.parent}{os.pathsep}{os.environ.get('PATH', '')}",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    single_env = dict(env, OMP_NUM_THREADS=str(cores))
    print(f"1 process x {cores} threads ...", flush=True)
    single = train([sys.executable, *flags, "--expname", "one_process"], single_env, out / "one_process.log")
    threads = max(1, cores // args.ranks)
    ranks_env = dict(env, OMP_NUM_THREADS=str(threads))
    print(f"{args.ranks} ranks x {threads} thread(s) ...", flush=True)
    ranks = train([str(mpirun), "--oversubscribe", "-np", str(args.ranks), sys.executable, *flags,
                   "--expname", f"{args.ranks}_ranks"], ranks_env, out / f"{args.ranks}_ranks.log")

    print("\n| run | training loop | s/iter (median) | peak RSS (rank 0) | test PSNR |\n|---|---|---|---|---|")
    for name, run in ((f"1 process x {cores} threads", single), (f"{args.ranks} ranks x {threads} thread(s)", ranks)):
        print(f"| {name} | {run['loop_s']:.0f} s | {run['s_per_iter']:.3f} | {run['rss_mb']} MB | "
              f"{run['psnr']:.2f} dB |")
    print(f"\n{args.ranks} ranks / 1 process, same run: s/iter {ranks['s_per_iter'] / single['s_per_iter']:.2f}x, "
          f"loop wall time {ranks['loop_s'] / single['loop_s']:.2f}x")

    probe = subprocess.run([str(mpirun), "--oversubscribe", "-np", str(args.ranks), sys.executable, __file__,
                            "--probe"], cwd=ROOT, env=ranks_env, capture_output=True, text=True)
    rows = [line.split()[1:] for line in probe.stdout.splitlines() if line.startswith("ALLREDUCE ")]
    if probe.returncode != 0 or not rows:
        raise SystemExit(f"the all-reduce probe failed:\n{probe.stdout[-2000:]}{probe.stderr[-2000:]}")
    print(f"\nGradient all-reduce per step, {args.ranks} ranks on this machine:")
    for side, count, ms in rows:
        print(f"  lego model at {side}^3: {int(count) / 1e6:.1f} M parameters ({int(count) * 4 / 2**20:.0f} MiB), "
              f"{float(ms):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
