#!/usr/bin/env python3
"""The viewer's time figures, in a real browser (the system's chromium, software WebGL):

1. checkpoint viewer: seconds from a camera change (made through viser's camera handle, so the
   browser's round trip is included) to the first (preview) frame and to the full-size frame;
2. training: seconds per iteration (wall clock, whole loop) in these modes, alternating in
   rounds so that all see the same load: ``off`` (no viewer), ``idle`` (viewer, no browser),
   ``browser`` (a browser attached: frames re-rendered as the model learns), ``browser_niced``
   (that browser at the lowest CPU priority, ``nice 19``), ``browser_no_frames`` (a browser
   attached but the viewer renders nothing: the browser's own cost on this machine). Reported
   over the whole run (the page's loading included) and over the run's second half (the page
   loaded; the same iterations and grid events in every mode), and as the median training step
   alone (the viewer's own rendering left out: how much the rest slows the steps themselves).
   With ``--browser_cpu N`` the browser runs on CPU N only and training (every mode) on the
   others, as when the browser is on another machine: then the slowdown is what serving the
   page costs training, without the software-rendering browser's own work.

Also writes a screenshot of the page (``--screenshot``, e.g. docs/viewer.png).

    python bench/viewer_latency.py --ckpt log/tensorf_demo_VM/tensorf_demo_VM.th \
        --screenshot docs/viewer.png --train_config bench/yardstick.txt --iters 300 --rounds 2
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]


def _pin_training(argv: list[str]) -> str | None:
    """``--browser_cpu N``: this process (training) keeps the other CPUs, and its OpenMP threads
    match them; set before Jittor is imported. Returns N."""
    if "--browser_cpu" not in argv:
        return None
    browser_cpu = argv[argv.index("--browser_cpu") + 1]
    training_cpus = sorted(os.sched_getaffinity(0) - {int(browser_cpu)})
    os.sched_setaffinity(0, training_cpus)
    os.environ["OMP_NUM_THREADS"] = str(len(training_cpus))
    return browser_cpu


BROWSER_CPU = _pin_training(sys.argv)

import tensorf_jt.runtime  # noqa: E402  (configures Jittor before it is imported)
import numpy as np  # noqa: E402

from browser import (BrowserThread, niced_chromium, open_viewer_page, pinned_chromium, run_with_viewer,  # noqa: E402
                     wait_until)
from conftest import free_port  # noqa: E402
from tensorf_jt.config import parse_run_config  # noqa: E402
from tensorf_jt.viewer.cameras import quaternion_from_matrix  # noqa: E402
from tensorf_jt.viewer.server import Viewer  # noqa: E402

tensorf_jt.runtime.setup()


def spread(values: list[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "n": len(values)}


def checkpoint_latency(ckpt: str, moves: int, screenshot: str | None, viewport: tuple[int, int]) -> dict:
    from tensorf_jt.cli.view import open_checkpoint_viewer

    config, explicit = parse_run_config(["--ckpt", ckpt, "--viewer_port", str(free_port())])
    viewer, model = open_checkpoint_viewer(config, explicit)
    cameras = viewer.scene.cameras
    first, full, sizes = [], [], []

    def script(browser):
        page = open_viewer_page(browser, viewer.url, viewport)
        wait_until(lambda: viewer.client_count == 1, 60, "the page to connect")
        view = viewer.clients()[0]
        wait_until(lambda: viewer.is_settled(view), 120, "the first full-size frame")
        for move in range(moves + 1):  # the first move warms up (kernel compiles at new sizes)
            pose = cameras.viewer_pose(cameras.poses[(7 * move + 3) % len(cameras.poses)])
            started = time.perf_counter()
            with view.client.atomic():
                view.client.camera.position = pose[:, 3]
                view.client.camera.wxyz = quaternion_from_matrix(pose[:, :3])
            wait_until(lambda: view.shown is not None and view.shown[0] == view.camera_version
                       and np.allclose(view.camera[1], pose[:, 3], atol=1e-4), 60, "the preview")
            preview_at = time.perf_counter()
            wait_until(lambda: viewer.is_settled(view), 120, "the full-size frame")
            if move:
                first.append(preview_at - started)
                full.append(time.perf_counter() - started)
                sizes.append(view.last_frame.shape[:2])
        if screenshot:  # twice as far out as the start view, full size, the page's notices closed
            look_at = np.asarray(viewer.server.initial_camera.look_at)
            with view.client.atomic():
                view.client.camera.position = look_at + 2.0 * (viewer.server.initial_camera.position - look_at)
                view.client.camera.look_at = look_at
            time.sleep(1.0)
            wait_until(lambda: viewer.is_settled(view), 120, "the start view's full-size frame")
            close_buttons = page.locator(".mantine-Notification-closeButton")
            for index in range(close_buttons.count()):
                close_buttons.nth(index).click()
            time.sleep(2.0)
            wait_until(lambda: viewer.is_settled(view), 120, "the start view's full-size frame")
            page.screenshot(path=screenshot)

    try:
        run_with_viewer(viewer, model, script, timeout=900)
    finally:
        viewer.close()
    return {"first_frame_s": spread(first), "full_frame_s": spread(full), "full_size_hw": [list(s) for s in sizes[:1]],
            "rays_per_second": viewer.rays_per_second}


def training_seconds_per_iter(config_file: str, iters: int, mode: str, basedir: str,
                              query: str = "") -> tuple[float, float, float]:
    from tensorf_jt.training.run import train

    flags = ["--config", config_file, "--n_iters", str(iters), "--render_test", "0", "--N_vis", "0",
             "--basedir", basedir, "--expname", mode, "--save_every", "0", "--tensorboard", "0"]
    port = free_port()
    if mode != "off":
        flags += ["--viewer", "1", "--viewer_port", str(port)]
    config, explicit = parse_run_config(flags)
    finished = threading.Event()
    thread = None
    if mode.startswith("browser"):
        def script(browser):
            wait_until(lambda: _listening(port) or finished.is_set(), 120, "the viewer to start")
            page = open_viewer_page(browser, f"http://localhost:{port}/" + (f"?{query}" if query else ""), (800, 600))
            wait_until(finished.is_set, 3600, "training to finish")
            page.close()

        if BROWSER_CPU is not None:
            launcher = pinned_chromium(basedir, BROWSER_CPU)
        else:
            launcher = niced_chromium(basedir) if mode == "browser_niced" else None
        thread = BrowserThread(script, launcher)
        thread.start()
    service = Viewer.service
    if mode == "browser_no_frames":
        Viewer.service = lambda self, model, seconds: False
    try:
        result = train(config, explicit)
    finally:
        Viewer.service = service
        finished.set()
        if thread is not None:
            thread.join(60)
            thread.check()
    return result.wall_time_s / result.iterations, _second_half_rate(result.logfolder, iters), \
        result.seconds_per_iter_median


def _second_half_rate(logfolder: str, iters: int) -> float:
    """Seconds per iteration over the run's second half, from its training log: the same
    iterations (and grid events) in every mode, after the page has loaded."""
    import csv

    with open(os.path.join(logfolder, "train_log.csv"), encoding="utf-8") as handle:
        rows = [(int(row["iteration"]), float(row["wall_time_s"])) for row in csv.DictReader(handle)]
    middle = min(rows, key=lambda row: abs(row[0] - iters // 2))
    last = rows[-1]
    return (last[1] - middle[1]) / (last[0] - middle[0])


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", default=os.path.join(ROOT, "log", "tensorf_demo_VM", "tensorf_demo_VM.th"))
    parser.add_argument("--moves", type=int, default=8, help="camera changes timed (0: skip)")
    parser.add_argument("--screenshot", default=None, help="write a screenshot of the page here")
    parser.add_argument("--train_config", default=os.path.join(ROOT, "bench", "yardstick.txt"))
    parser.add_argument("--iters", type=int, default=300, help="iterations per training run (0: skip training)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--modes", default="off,idle,browser,browser_niced,browser_no_frames",
                        help="training modes, comma-separated (see above)")
    parser.add_argument("--query", default="", help="the training page address's query, e.g. fixedDpr=0.5")
    parser.add_argument("--browser_cpu", default=None,
                        help="run the browser on this CPU only and training on the others, as with a "
                             "browser on another machine")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "viewer_latency.json"))
    args = parser.parse_args()
    if not os.path.isfile(args.ckpt):
        sys.exit(f"{args.ckpt} does not exist: train the demo first (make demo) or pass --ckpt.")
    report = {"browser_cpu": args.browser_cpu, "query": args.query}
    if args.moves > 0:
        report["checkpoint"] = checkpoint_latency(args.ckpt, args.moves, args.screenshot, (960, 600))
        print(json.dumps(report["checkpoint"], indent=1), flush=True)
    if args.iters > 0:
        timings = {mode: [] for mode in args.modes.split(",")}
        second_half = {mode: [] for mode in timings}
        steps = {mode: [] for mode in timings}
        for round_ in range(args.rounds):
            for mode in timings:
                basedir = os.path.join(ROOT, "bench", "out", "viewer_runs", f"{mode}{round_}")
                os.makedirs(basedir, exist_ok=True)
                whole, late, step = training_seconds_per_iter(args.train_config, args.iters, mode, basedir,
                                                              args.query)
                timings[mode].append(whole)
                second_half[mode].append(late)
                steps[mode].append(step)
                print(f"round {round_}: {mode}: {whole:.4f} s/iter, second half {late:.4f} s/iter, "
                      f"median training step {step:.4f} s", flush=True)
        report["training_s_per_iter"] = {mode: spread(values) for mode, values in timings.items()}
        report["second_half_s_per_iter"] = {mode: spread(values) for mode, values in second_half.items()}
        report["median_step_s"] = {mode: spread(values) for mode, values in steps.items()}
        for key, values in (("slowdown", timings), ("second_half_slowdown", second_half)):
            off = statistics.median(values["off"])
            report[key] = {mode: statistics.median(times) / off for mode, times in values.items()}
        print(json.dumps({key: report[key] for key in ("slowdown", "second_half_slowdown")}, indent=1))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
