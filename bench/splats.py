#!/usr/bin/env python3
"""A checkpoint against its splats: test PSNR / SSIM / LPIPS of both on the same views, the
export's time, count and size, and the time of one 800 x 800 frame by our splat rasteriser, by
the TensoRF renderer and (``--browser``) by viser's splat view in Chromium.

    python bench/splats.py --ckpt log/yardstick/yardstick.th --out bench/out/splats_yardstick
    python bench/splats.py --ckpt log/cup/cup.th --out bench/out/splats_cup --browser

The export runs as ``tensorf-export-splats`` does with its defaults (``--iterations 0`` adds a
row for the placed splats alone); flags after ``--`` go to the export command. Results go to
``OUT/results.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FRAME_SIDE = 800


def run(args: list[str]) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def metrics(folder: Path) -> dict:
    summary = json.loads((folder / "metrics.json").read_text())
    return {key: summary[key] for key in ("psnr", "ssim", "lpips_alex", "lpips_vgg") if key in summary}


def frame_times(ckpt: str, splat_path: str) -> dict:
    """Seconds for one 800 x 800 frame from the first test camera (its lens scaled), each renderer
    warmed up first; the median of three."""
    import numpy as np
    import jittor as jt

    import tensorf_jt.runtime
    tensorf_jt.runtime.setup()
    from tensorf_jt.cli.render import training_scene
    from tensorf_jt.config import parse_run_config
    from tensorf_jt.dataLoader import load_split
    from tensorf_jt.evaluation.renders import render_rays
    from tensorf_jt.formats.checkpoint import load_checkpoint
    from tensorf_jt.formats.gaussian_ply import read_splats
    from tensorf_jt.splats.camera import dataset_cameras
    from tensorf_jt.splats.params import SplatParameters
    from tensorf_jt.splats.placement import model_rays
    from tensorf_jt.splats.rasterizer import render_splats

    config, explicit = parse_run_config(["--ckpt", ckpt])
    model, saved = load_checkpoint(ckpt)
    config = training_scene(config, saved, explicit)
    dataset = load_split(config.data, "test", is_stack=True)
    camera = dataset_cameras(dataset)[0]
    scale = FRAME_SIDE / max(camera.width, camera.height)
    big = replace(camera, fx=camera.fx * scale, fy=camera.fy * scale, cx=camera.cx * scale, cy=camera.cy * scale,
                  width=round(camera.width * scale), height=round(camera.height * scale))
    params = SplatParameters.from_splats(read_splats(splat_path))
    origins, directions, _ = big.pixel_rays()
    rays = model_rays(origins, directions, dataset)

    def timed(render) -> float:
        render()
        seconds = []
        for _ in range(3):
            started = time.perf_counter()
            render()
            seconds.append(time.perf_counter() - started)
        return sorted(seconds)[1]

    def splat_frame():
        with jt.no_grad():
            image, _, _ = render_splats(params, big, np.ones(3))
            image.sync()

    return {"size": [big.width, big.height], "splat_rasteriser_s": timed(splat_frame),
            "tensorf_renderer_s": timed(lambda: render_rays(model, rays, chunk=8192))}


def browser_frame(splat_path: str, datadir: str | None, dataset_name: str | None) -> float:
    """Milliseconds per frame of viser's splat view at 800 x 800 in headless Chromium while the
    camera moves (a frame is drawn per animation frame)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from browser import BrowserThread, open_viewer_page
    from conftest import free_port
    from tensorf_jt.config import parse_run_config
    from tensorf_jt.cli.view import open_splat_viewer

    flags = ["--splats", splat_path, "--viewer_port", str(free_port())]
    if datadir:
        flags += ["--datadir", datadir, "--dataset_name", dataset_name]
    config, explicit = parse_run_config(flags)
    viewer = open_splat_viewer(config, explicit)
    result = {}

    def script(browser):
        page = open_viewer_page(browser, viewer.url, (FRAME_SIDE, FRAME_SIDE))
        time.sleep(10)
        result["ms"] = page.evaluate("""() => new Promise(done => {
            let frames = 0; const start = performance.now();
            function next() { frames++; if (performance.now() - start < 5000) requestAnimationFrame(next);
                              else done((performance.now() - start) / frames); }
            requestAnimationFrame(next); })""")

    thread = BrowserThread(script)
    thread.start()
    thread.join(300)
    viewer.close()
    thread.check()
    return result["ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--browser", action="store_true", help="also time viser's splat view in Chromium")
    parser.add_argument("--placed_only", action="store_true", help="also score the splats before refinement")
    args, export_flags = parser.parse_known_args()
    export_flags = [flag for flag in export_flags if flag != "--"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    ckpt = out / Path(args.ckpt).name
    if not ckpt.exists():
        ckpt.write_bytes(Path(args.ckpt).read_bytes())
    run(["render.py", "--ckpt", str(ckpt)])
    results["checkpoint"] = metrics(out / "imgs_test_all")
    from tensorf_jt.formats.checkpoint import read_checkpoint
    train_args = read_checkpoint(str(ckpt)).get("train_args", {})
    datadir, dataset_name = train_args.get("datadir"), train_args.get("dataset_name")
    scene = ["--datadir", datadir, "--dataset_name", dataset_name]
    scene += [item for name in ("demo_image_size", "demo_n_train", "demo_n_test", "downsample_train",
                                "downsample_test") if train_args.get(name) is not None
              for item in (f"--{name}", str(train_args[name]))]
    runs = [("splats", [])] + ([("placed", ["--iterations", "0"])] if args.placed_only else [])
    for name, flags in runs:
        splat_path = out / f"{name}.ply"
        started = time.perf_counter()
        printed = run(["-m", "tensorf_jt.cli.export_splats", "--ckpt", str(ckpt), "--out", str(splat_path),
                       "--overwrite", *flags, *export_flags])
        seconds = time.perf_counter() - started
        run(["render.py", "--splats", str(splat_path), *scene])
        results[name] = {**metrics(out / f"imgs_test_{name}"), "export_s": seconds,
                         "file_mb": os.path.getsize(splat_path) / 1e6, "printed": printed.strip().splitlines()[-1]}
    results["frames"] = frame_times(str(ckpt), str(out / "splats.ply"))
    if args.browser:
        results["frames"]["browser_ms"] = browser_frame(str(out / "splats.ply"), datadir, dataset_name)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
