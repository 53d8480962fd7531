#!/usr/bin/env python3
"""CPU the viewer's page costs the browser (the system's chromium, software WebGL), per state:
loading the page until its first full-size frame, then ``--seconds`` each of an idle page,
panel text changing every 0.5 s (as the training panel does), and a new frame every 0.5 s.

Reported as chromium's CPU seconds per wall-clock second (summed over its processes), on the
demo checkpoint in a ``--viewport`` page, with and without the training cameras' frustums.

    python bench/browser_cpu.py --seconds 10
    python bench/browser_cpu.py --seconds 10 --query fixedDpr=0.5   # the page drawn at half resolution
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import tensorf_jt.runtime  # noqa: E402  (configures Jittor before it is imported)
import numpy as np  # noqa: E402

from browser import BrowserThread, open_viewer_page, wait_until  # noqa: E402
from conftest import free_port  # noqa: E402
from tensorf_jt.config import parse_run_config  # noqa: E402
from tensorf_jt.viewer.server import Viewer  # noqa: E402

tensorf_jt.runtime.setup()

STATES = ("idle", "panel text every 0.5 s", "frame every 0.5 s")


def chromium_cpu_seconds() -> float:
    """User + system CPU seconds of every running chromium process."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if b"chromium" not in handle.read():
                    continue
            with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:  # the process ended meanwhile
            continue
    return total / os.sysconf("SC_CLK_TCK")


def measure(ckpt: str, seconds: float, viewport: tuple[int, int], frusta: bool, query: str) -> dict:
    from tensorf_jt.cli.view import open_checkpoint_viewer

    add_frusta = Viewer._add_frusta
    if not frusta:
        Viewer._add_frusta = lambda self, cameras: None
    try:
        config, explicit = parse_run_config(["--ckpt", ckpt, "--viewer_port", str(free_port())])
        viewer, model = open_checkpoint_viewer(config, explicit)
    finally:
        Viewer._add_frusta = add_frusta
    result = {}

    def script(browser) -> None:
        cpu, started = chromium_cpu_seconds(), time.perf_counter()
        open_viewer_page(browser, viewer.url + (f"/?{query}" if query else ""), viewport)
        wait_until(lambda: viewer.client_count == 1, 60, "the page to connect")
        view = viewer.clients()[0]
        wait_until(lambda: viewer.is_settled(view), 120, "the first full-size frame")
        result["page load (CPU s, wall s)"] = [chromium_cpu_seconds() - cpu, time.perf_counter() - started]
        text = viewer.server.gui.add_markdown("")
        frame = np.zeros((100, 160, 3), np.uint8)
        for state in STATES:
            cpu, started, tick = chromium_cpu_seconds(), time.perf_counter(), 0
            while time.perf_counter() - started < seconds:
                tick += 1
                if state.startswith("panel"):
                    text.content = f"iteration {tick}"
                elif state.startswith("frame"):
                    frame[:] = (tick * 37) % 256
                    view.client.scene.set_background_image(frame, format="jpeg", jpeg_quality=90)
                time.sleep(0.5)
            result[state] = (chromium_cpu_seconds() - cpu) / (time.perf_counter() - started)

    thread = BrowserThread(script)
    thread.start()
    while thread.is_alive():
        if not viewer.service(model, 0.05):
            time.sleep(0.01)
    viewer.close()
    thread.check()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", default=os.path.join(ROOT, "log", "tensorf_demo_VM", "tensorf_demo_VM.th"))
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per state")
    parser.add_argument("--viewport", default="800x600")
    parser.add_argument("--query", default="", help="the page address's query, e.g. fixedDpr=0.5")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "browser_cpu.json"))
    args = parser.parse_args()
    if not os.path.isfile(args.ckpt):
        sys.exit(f"{args.ckpt} does not exist: train the demo first (make demo) or pass --ckpt.")
    viewport = tuple(int(side) for side in args.viewport.split("x"))
    report = {"viewport": args.viewport, "query": args.query}
    for frusta in (True, False):
        name = "with the training cameras" if frusta else "without the training cameras"
        report[name] = measure(args.ckpt, args.seconds, viewport, frusta, args.query)
        print(name, json.dumps(report[name], indent=1), flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
