"""The benchmark's helpers: per-phase timing, and the scene tool that runs without Jittor."""
import filecmp
import json
import sys

import pytest

from conftest import REPO_ROOT, run_python

sys.path.insert(0, str(REPO_ROOT / "bench"))
from timing import one_off_seconds, phase_bounds, phase_summary  # noqa: E402


def test_phases_end_at_each_upsampling_iteration():
    assert phase_bounds([2, 5], 10) == [(0, 2), (3, 5), (6, 9)]
    assert phase_bounds([5, 2, 20], 10) == [(0, 2), (3, 5), (6, 9)]  # unsorted, and one past the end
    assert phase_bounds([], 4) == [(0, 3)]


def test_phase_medians_leave_one_off_iterations_out():
    times = [None, 1.0, 1.0, 9.0, 2.0, 2.0, 2.0, 2.0]  # iteration 0 unmeasured, iteration 3 compiles
    phases = phase_summary(times, [3], 8)
    assert [(p["first"], p["last"], p["iterations"]) for p in phases] == [(0, 3, 3), (4, 7, 4)]
    assert phases[0]["median_s"] == 1.0 and phases[1]["median_s"] == 2.0
    assert phases[0]["one_off_s"] == pytest.approx(8.0) and phases[1]["one_off_s"] == 0.0
    assert one_off_seconds(phases) == pytest.approx(8.0)


def test_scene_tool_renders_the_demo_scene_without_jittor(tmp_path):
    from tensorf_jt.dataLoader.demo_scene import DemoSceneSpec, generate

    out = tmp_path / "parallel"
    script = "\n".join([
        "import runpy, sys",
        f"sys.argv = ['make_scene.py', {str(out)!r}, '--size', '16', '--n_train', '3', '--n_val', '1',"
        " '--n_test', '2', '--supersampling', '1', '--workers', '2']",
        "try:",
        f"    runpy.run_path({str(REPO_ROOT / 'tools' / 'make_scene.py')!r}, run_name='__main__')",
        "except SystemExit as stop:",
        "    assert not stop.code, stop.code",
        "print('JITTOR_IMPORTED', 'jittor' in sys.modules)",
    ])
    result = run_python(["-c", script])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "JITTOR_IMPORTED False" in result.stdout and "6 views of 16x16" in result.stdout

    serial = generate(str(tmp_path / "serial"), DemoSceneSpec(image_size=16, n_train=3, n_val=1, n_test=2,
                                                               supersampling=1))
    for split in ("train", "val", "test"):
        assert json.loads((out / f"transforms_{split}.json").read_text()) == \
            json.loads((tmp_path / "serial" / f"transforms_{split}.json").read_text())
        names = sorted(p.name for p in (out / split).iterdir())
        assert names == sorted(p.name for p in (tmp_path / "serial" / split).iterdir()) and names
        match, mismatch, errors = filecmp.cmpfiles(out / split, tmp_path / "serial" / split, names, shallow=False)
        assert not mismatch and not errors
    assert serial == str(tmp_path / "serial")


def test_scene_tool_refuses_sizes_that_cannot_work(tmp_path):
    result = run_python([str(REPO_ROOT / "tools" / "make_scene.py"), str(tmp_path / "x"), "--size", "0"])
    assert result.returncode == 2
    assert "sizes, view counts (n_val may be 0), supersampling and workers must be positive" in result.stderr
