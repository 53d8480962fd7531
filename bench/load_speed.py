"""Loading a lego-sized scene: wall time and peak memory of tensorf_jt and, optionally, of the
original PyTorch TensoRF, side by side in one run.

    python bench/load_speed.py                                   # tensorf_jt only
    python bench/load_speed.py --original ../TensoRF --original_python ../venv/bin/python

The scene is the built-in one rendered at NeRF-synthetic's size (800x800, 100 training and 200
test views; ``tools/make_scene.py``, once, into ``bench/out/scene_800``). Each implementation
runs ``train.py --config configs/lego.txt --datadir SCENE --n_iters 5 --render_test 0 --N_vis 0``
(load both splits, set the model up, filter the rays, five iterations) in its own process;
the table gives its wall time and peak RSS (the process's own, from ``wait4``).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ["--config", str(ROOT / "configs" / "lego.txt"), "--n_iters", "5", "--render_test", "0", "--N_vis", "0"]


def run_measured(command: list[str], cwd: Path, log: Path, env: dict | None = None) -> tuple[float, float, int]:
    """Run ``command``; return (wall seconds, peak RSS in MB of that process, exit status)."""
    started = time.perf_counter()
    with open(log, "w") as output:
        process = subprocess.Popen(command, cwd=cwd, stdout=output, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
    return time.perf_counter() - started, usage.ru_maxrss / 1024.0, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scene", default=str(ROOT / "bench" / "out" / "scene_800"))
    parser.add_argument("--original", default=None, help="checkout of the original PyTorch TensoRF")
    parser.add_argument("--original_python", default=None, help="Python with PyTorch for --original")
    args = parser.parse_args()
    if args.original and not args.original_python:
        parser.error("--original needs --original_python")

    scene = Path(args.scene)
    if not (scene / "demo_scene.json").is_file():
        print(f"rendering the scene into {scene} (once) ...", flush=True)
        subprocess.run([sys.executable, str(ROOT / "tools" / "make_scene.py"), str(scene), "--size", "800",
                        "--n_train", "100", "--n_val", "0", "--n_test", "200", "--supersampling", "1"], check=True)
    out = ROOT / "bench" / "out" / "load_speed"
    out.mkdir(parents=True, exist_ok=True)
    flags = FLAGS + ["--datadir", str(scene.resolve()), "--basedir", str(out)]

    rows = []
    wall, rss, status = run_measured([sys.executable, str(ROOT / "train.py"), *flags, "--expname", "tensorf_jt"],
                                     ROOT, out / "tensorf_jt.log")
    rows.append(("tensorf_jt", wall, rss, status, out / "tensorf_jt.log"))
    if args.original:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        wall, rss, status = run_measured([args.original_python, "train.py", *flags, "--expname", "original"],
                                         Path(args.original).resolve(), out / "original.log", env)
        rows.append(("original PyTorch TensoRF", wall, rss, status, out / "original.log"))

    print("| implementation | wall time (load, set-up, 5 iterations) | peak RSS |\n|---|---|---|")
    for name, wall, rss, status, log in rows:
        note = "" if status == 0 else f" (failed, exit status {status}: {log})"
        print(f"| {name} | {wall:.1f} s | {rss / 1024:.2f} GB |{note}")
    if len(rows) == 2 and all(row[3] == 0 for row in rows):
        print(f"\ntensorf_jt / original, same run: wall time {rows[0][1] / rows[1][1]:.2f}x, "
              f"peak RSS {rows[0][2] / rows[1][2]:.2f}x")
    return 0 if all(row[3] == 0 for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
