"""Results pinned by fixtures that an earlier version of the code wrote (``fixtures/README.md``):
the same training gives the same checkpoint bit for bit, and its saved files still load and resume.

The digests are per tensor (``checkpoint_digest.py``). Float32 results depend on which
kernels oneDNN picks for the CPU, so the bit-identity checks run only on a CPU with the
vector extensions of the one that made the fixtures (the machines this project is tested on).
They also depend on the code g++ generates for the CPU (Jittor compiles its kernels with
``-march=native -Ofast``): where a fixture holds results for this CPU's ``-march`` under
``by_march`` (the same commit's code, run there), those are the expected ones.
"""
import functools
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import jittor as jt

from checkpoint_digest import checkpoint_digest
from conftest import run_python

from tensorf_jt.config import RunConfig
from tensorf_jt.formats.checkpoint import load_checkpoint
from tensorf_jt.training.state import read_state

FIXTURES = Path(__file__).resolve().parent / "fixtures"
YARDSTICK = json.loads((FIXTURES / "yardstick_300_digest.json").read_text())
LEGACY = json.loads((FIXTURES / "legacy_run.json").read_text())


def cpu_flags() -> list[str]:
    with open("/proc/cpuinfo", encoding="ascii") as info:
        flags = next(line for line in info if line.startswith("flags")).split(":", 1)[1].split()
    return sorted(flag for flag in flags if flag.startswith(("avx", "fma", "sse4", "amx")))


@functools.lru_cache(maxsize=1)
def gcc_march() -> str:
    """What ``-march=native`` means to g++ on this CPU (e.g. znver1), '' if g++ does not say."""
    listing = subprocess.run(["g++", "-march=native", "-Q", "--help=target"], capture_output=True, text=True).stdout
    return next((line.split()[1] for line in listing.splitlines() if line.split()[:1] == ["-march="]), "")


def for_this_cpu(fixture: dict) -> dict:
    """The fixture's values, with those recorded for this CPU's ``-march`` where there are any."""
    return {**fixture, **fixture.get("by_march", {}).get(gcc_march(), {})}


def require_the_fixtures_cpu(fixture: dict) -> None:
    if cpu_flags() != fixture["cpu_flags"]:
        pytest.skip(f"this CPU's vector extensions {cpu_flags()} differ from those the fixture was made with "
                    f"{fixture['cpu_flags']}; float32 results may differ in the last bit")


def assert_same_digest(actual: dict, expected: dict) -> None:
    assert actual["kwargs"] == expected["kwargs"]
    differing = sorted(name for name in expected["tensors"] if actual["tensors"].get(name) != expected["tensors"][name])
    assert set(actual["tensors"]) == set(expected["tensors"])
    assert not differing, f"tensors that differ from the pinned run: {differing}"


@pytest.mark.slow
def test_the_yardstick_trains_to_the_pinned_checkpoint_bit_for_bit(tmp_path):
    require_the_fixtures_cpu(YARDSTICK)
    result = run_python(["train.py", *YARDSTICK["flags"], "--basedir", str(tmp_path / "log"),
                         "--datadir", str(tmp_path / "scene")])
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_digest(checkpoint_digest(jt.load(str(tmp_path / "log" / "yardstick" / "yardstick.th"))),
                       for_this_cpu(YARDSTICK))


def test_a_saved_state_reads_into_the_typed_configuration():
    state = read_state(str(FIXTURES / "legacy_run_state.th"))
    assert state["iteration"] == LEGACY["state_iteration"]
    config = RunConfig.from_flags(state["train_args"])
    newer_flags = {"compute_extra_metrics": 1, "tensorboard": 1, "viewer": 0, "viewer_port": 8080,  # added since;
                   "viewer_host": "127.0.0.1", "camera_path": None, "scene_bbox": None,  # their defaults fill in
                   "near_far": None, "pose_format": "c2w_opengl"}
    assert config.to_flags() == {**state["train_args"], **newer_flags}
    assert config.model.n_lamb_sigma == (4, 4, 4) and config.schedule.upsamp_list == (25, 35)
    model, ckpt = load_checkpoint(str(FIXTURES / "legacy_run.th"))
    assert RunConfig.from_flags(ckpt["train_args"]).output.expname == "legacy_run"
    assert model.alphaMask is not None and list(model.gridSize) == [int(n) for n in ckpt["kwargs"]["gridSize"]]


@pytest.mark.slow
def test_a_saved_state_resumes_to_the_pinned_checkpoint_and_renders_as_before(tmp_path):
    require_the_fixtures_cpu(LEGACY)
    run = tmp_path / "legacy_run"
    run.mkdir()
    shutil.copy(FIXTURES / "legacy_run_state.th", run / "legacy_run_state.th")
    scene = tmp_path / "scene"
    result = run_python(["train.py", "--resume", str(run / "legacy_run_state.th"), "--datadir", str(scene)])
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_digest(checkpoint_digest(jt.load(str(run / "legacy_run.th"))), for_this_cpu(LEGACY)["final_digest"])

    rendered = tmp_path / "render"
    rendered.mkdir()
    shutil.copy(FIXTURES / "legacy_run.th", rendered / "legacy_run.th")
    result = run_python(["render.py", "--ckpt", str(rendered / "legacy_run.th"), "--datadir", str(scene)])
    assert result.returncode == 0, result.stderr[-3000:]
    psnr = float((rendered / "imgs_test_all" / "mean.txt").read_text().split()[0])
    assert psnr == pytest.approx(for_this_cpu(LEGACY)["test_psnr"], abs=1e-9)
