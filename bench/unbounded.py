#!/usr/bin/env python3
"""The bounded mode against the unbounded mode on one scene with its room: test metrics, s/iter,
peak memory, and the test views of both side by side.

Each mode trains in its own ``train.py`` process, one after the other, with the same flags
(``--config``, by default ``configs/demo_room.txt``, then the flags after ``--``) and differs only in
``--unbounded``. The scene is the built-in room, generated at ``--size`` pixels with
``--views`` training views, or ``--datadir`` (an own_data folder, e.g. a converted COLMAP
capture). Flags after ``--`` go to every run. ``--modes`` picks the modes to run, and each
``--variant NAME "FLAGS"`` adds a run of the unbounded mode with FLAGS added (e.g.
``--importance_samples 32``), reported under NAME.

    python bench/unbounded.py --size 48 --views 24 --picture bench/out/unbounded_room.png -- --n_iters 1000 \\
        --batch_size 1024 --N_voxel_init 32768 --N_voxel_final 262144 --upsamp_list 100 --upsamp_list 200 \\
        --update_AlphaMask_list 200 --update_AlphaMask_list 500
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULT_LINE = re.compile(r"wall time ([\d.]+) s, ([\d.]+) s/iter \(median\), peak RSS (\d+) MB")
PICTURE_VIEWS = 4
MODES = {"bounded": "0", "unbounded": "1"}


def room(folder: Path, size: int, views: int) -> str:
    from tensorf_jt.dataLoader.demo_scene import DemoSceneSpec, ensure_generated

    spec = DemoSceneSpec(image_size=size, n_train=views, n_val=1, n_test=PICTURE_VIEWS, room=True)
    ensure_generated(str(folder), spec)
    return str(folder)


def train(config: str, datadir: str, basedir: Path, name: str, unbounded: str, flags: list[str]) -> dict:
    command = [sys.executable, str(ROOT / "train.py"), "--config", config,
               "--dataset_name", "own_data", "--datadir", datadir, "--basedir", str(basedir), "--expname", name,
               "--unbounded", unbounded, "--N_vis", "0", "--render_test", "1", *flags]
    output = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if output.returncode != 0:
        raise SystemExit(f"{name} run failed:\n{output.stdout[-2000:]}\n{output.stderr[-3000:]}")
    wall, step, rss = RESULT_LINE.search(output.stdout).groups()
    metrics = json.loads((basedir / name / "imgs_test_all" / "metrics.json").read_text())
    return {"wall_time_s": float(wall), "s_per_iter": float(step), "peak_rss_mb": int(rss),
            **{key: value for key, value in metrics.items() if key != "views"}}


def side_by_side(datadir: str, basedir: Path, out: Path, downsample: float) -> None:
    """Rows: ground truth, bounded, unbounded; columns: the first test views."""
    import imageio.v3 as iio
    from tensorf_jt.dataLoader.own_data import OwnDataDataset

    test = OwnDataDataset(datadir, split="test", downsample=downsample, is_stack=True)
    width, height = test.img_wh
    count = min(PICTURE_VIEWS, test.n_views)
    truth = [np.round(test.view_rgbs(v).reshape(height, width, 3) * 255).astype(np.uint8) for v in range(count)]
    rows = [np.concatenate(truth, 1)]
    for mode in MODES:
        renders = [iio.imread(basedir / mode / "imgs_test_all" / f"{v:03d}.png")[..., :3] for v in range(count)]
        rows.append(np.concatenate(renders, 1))
    picture = np.concatenate(rows, 0)
    scale = max(1, 192 // height)
    iio.imwrite(out, np.kron(picture, np.ones((scale, scale, 1), dtype=np.uint8)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datadir", help="an own_data scene (default: the built-in room)")
    parser.add_argument("--config", default=str(ROOT / "configs" / "demo_room.txt"),
                        help="the model and schedule every run starts from (flags after -- override them)")
    parser.add_argument("--size", type=int, default=48, help="the room's image size in pixels")
    parser.add_argument("--views", type=int, default=24, help="the room's training views")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "unbounded"))
    parser.add_argument("--picture", help="where to write the side-by-side test views (PNG)")
    parser.add_argument("--modes", nargs="*", choices=list(MODES), default=list(MODES),
                        help="the modes to run (none: only the variants)")
    parser.add_argument("--variant", nargs=2, action="append", default=[], metavar=("NAME", "FLAGS"),
                        help="also run the unbounded mode with these train.py flags, reported as NAME")
    parser.add_argument("flags", nargs=argparse.REMAINDER, help="-- then train.py flags for every run")
    args = parser.parse_args()
    flags = args.flags[1:] if args.flags[:1] == ["--"] else args.flags
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    datadir = args.datadir or room(out / f"room_{args.size}_{args.views}", args.size, args.views)
    results = {mode: train(args.config, datadir, out, mode, MODES[mode], flags) for mode in args.modes}
    for name, extra in args.variant:
        results[name] = train(args.config, datadir, out, name, MODES["unbounded"], flags + extra.split())
    if set(MODES) <= set(results):
        results["unbounded_minus_bounded_db"] = results["unbounded"]["psnr"] - results["bounded"]["psnr"]
        results["s_per_iter_ratio"] = results["unbounded"]["s_per_iter"] / results["bounded"]["s_per_iter"]
        results["peak_rss_ratio"] = results["unbounded"]["peak_rss_mb"] / results["bounded"]["peak_rss_mb"]
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    if args.picture and set(MODES) <= set(results):
        downsample = float(flags[flags.index("--downsample_test") + 1]) if "--downsample_test" in flags else 1.0
        side_by_side(datadir, out, Path(args.picture), downsample)


if __name__ == "__main__":
    main()
