"""Shared fixtures. Importing ``tensorf_jt`` first configures Jittor for this machine; the suite
then runs with the process set-up the command-line tools use (``tensorf_jt.runtime.setup``)."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorf_jt.runtime  # must precede any jittor import
import jittor as jt

tensorf_jt.runtime.setup()
# Jittor answers SIGINT and SIGTERM by exiting with status 1 at once, so a stray signal would end
# the suite without a report. Python's own handling lets pytest say where it was stopped.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))


@pytest.fixture(autouse=True)
def _seeded():
    jt.sync_all()
    jt.set_global_seed(0)
    yield


@pytest.fixture(scope="session")
def tiny_scene(tmp_path_factory) -> str:
    """A 24x24-pixel demo scene with 6 training and 2 test views, generated once per session."""
    from tensorf_jt.dataLoader.demo_scene import DemoSceneSpec, generate

    root = tmp_path_factory.mktemp("scene") / "demo"
    return generate(str(root), DemoSceneSpec(image_size=24, n_train=6, n_val=1, n_test=2, supersampling=2))


@pytest.fixture(scope="session")
def tiny_demo_run(tmp_path_factory):
    """(folder, TrainResult) of the 32x32 demo scene trained on its full tiny schedule
    (``test_train_regression.train_tiny``), once, for every test that only reads it."""
    from test_train_regression import train_tiny

    folder = tmp_path_factory.mktemp("fused")
    return folder, train_tiny(folder, "fused")


def run_python(args: list[str], cwd: Path | str = REPO_ROOT, env: dict | None = None, timeout: int = 900):
    """Run ``python args...`` in a subprocess with this interpreter; returns CompletedProcess."""
    import subprocess

    from tensorf_jt.bootstrap import CHOSEN_ENV

    full_env = {k: v for k, v in os.environ.items() if k not in CHOSEN_ENV}
    full_env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.run([sys.executable, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(condition, timeout: float, what: str, poll: float = 0.02) -> None:
    """Poll ``condition`` every ``poll`` seconds; fail naming ``what`` after ``timeout`` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)


def np_rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)
