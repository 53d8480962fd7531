"""Headless chromium from the system's packages, driven by playwright, for the viewer's tests.

playwright's sync API belongs to the thread that starts it, and Jittor to the test's thread,
which must keep rendering for the viewer; so the browser runs a script on a thread of its own
while the test's thread services the viewer (``run_with_viewer``).
"""
from __future__ import annotations

import os
import shutil
import threading
import time
from typing import Callable

import numpy as np
import pytest

from conftest import wait_until

# viser's client needs WebGL: software rendering, as on a machine without a GPU. --no-sandbox:
# CI runs as root, where chromium refuses its sandbox.
CHROMIUM_ARGS = ["--use-gl=swiftshader", "--enable-unsafe-swiftshader", "--no-sandbox"]
INSTALL_HINT = "the viewer's browser tests need Debian's chromium: apt-get install -y chromium"


def chromium_path() -> str:
    """The system's chromium; skips the test without it, except on CI, where it must be there."""
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(INSTALL_HINT + " (.ci/run installs it)")
        pytest.skip(INSTALL_HINT)
    return path


def niced_chromium(folder: str) -> str:
    """A launcher running the system's chromium at the lowest CPU priority: on a machine it shares
    with training, it then takes what training leaves, as a browser on another machine would."""
    return _chromium_launcher(folder, "chromium-nice", "nice -n 19")


def pinned_chromium(folder: str, cpus: str) -> str:
    """A launcher running the system's chromium on the CPUs ``cpus`` only (``taskset -c``)."""
    return _chromium_launcher(folder, "chromium-pinned", f"taskset -c {cpus}")


def _chromium_launcher(folder: str, name: str, prefix: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w", encoding="ascii") as launcher:
        launcher.write(f'#!/bin/sh\nexec {prefix} {chromium_path()} "$@"\n')
    os.chmod(path, 0o755)
    return path


class BrowserThread(threading.Thread):
    """Runs ``script(browser)`` with a launched chromium (``executable``: another launcher for it);
    keeps its exception for the test."""

    def __init__(self, script: Callable, executable: str | None = None) -> None:
        super().__init__(daemon=True)
        self.script, self.error, self.executable = script, None, executable or chromium_path()

    def run(self) -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=self.executable, args=CHROMIUM_ARGS)
                try:
                    self.script(browser)
                finally:
                    browser.close()
        except BaseException as err:  # reported on the test's thread
            self.error = err

    def check(self) -> None:
        if self.error is not None:
            raise self.error


def run_with_viewer(viewer, model, script: Callable, timeout: float = 180.0) -> None:
    """Run ``script(browser)`` on a browser thread while this thread renders for ``viewer``."""
    thread = BrowserThread(script)
    thread.start()
    deadline = time.monotonic() + timeout
    while thread.is_alive() and time.monotonic() < deadline:
        if not viewer.service(model, 0.05):
            time.sleep(0.01)
    thread.check()
    assert not thread.is_alive(), f"the browser script did not finish within {timeout:.0f} s"


def canvas_pixels(page) -> np.ndarray:
    """The viewer's 3-D canvas as shown, uint8 [H, W, 3]."""
    import imageio.v3 as iio

    return iio.imread(page.locator("canvas").first.screenshot(), extension=".png")[..., :3]


def open_viewer_page(browser, url: str, size: tuple[int, int] = (640, 480)):
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.goto(url)
    page.wait_for_selector("canvas", timeout=60000)
    return page
