"""End to end: an operator that does not compile ends train.py / render.py with a clear message.

The CLI runs in a subprocess whose Jittor compiler is replaced by a script that exits 1 with no
output; a nonce in ``cc_flags`` makes every operator compile again even with a warm cache.
"""
import re
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, run_python
from model_factory import tiny_model
from test_resume import tiny_argv

from tensorf_jt.formats.checkpoint import save_checkpoint

WRAPPER = '''\
import runpy
import sys
import time

import tensorf_jt  # noqa: F401  (configures Jittor, then imports it)
import jittor as jt

jt.flags.cc_flags = jt.flags.cc_flags + f" -DTENSORF_JT_TEST_NONCE={{time.time_ns()}} "
jt.flags.cc_path = {compiler!r}
sys.argv = {argv!r}
runpy.run_path({script!r}, run_name="__main__")
'''


def run_with_failing_compiler(tmp_path, script: str, argv: list[str], cwd):
    compiler = tmp_path / "failing_compiler.sh"
    compiler.write_text("#!/bin/sh\nexit 1\n")
    compiler.chmod(0o755)
    wrapper = tmp_path / "run_with_failing_compiler.py"
    path = str(REPO_ROOT / script)
    wrapper.write_text(WRAPPER.format(compiler=str(compiler), argv=[path, *argv], script=path))
    started = time.time()
    result = run_python([str(wrapper)], cwd=cwd, timeout=180)
    return result, time.time() - started


def tracebacks(text: str) -> list[list[str]]:
    """The ``File "..."`` lines of each Python traceback in ``text``."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("Traceback (most recent call last):"):
            current = []
            blocks.append(current)
        elif current is not None and line.startswith("  File "):
            current.append(line)
        elif current is not None and not line.startswith(" "):
            current = None
    return blocks


def assert_compile_failure_reported(result, seconds, report: Path, cwd):
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-3000:])
    error = result.stderr
    assert "error: Jittor could not compile the operator '" in error, error[-3000:]
    assert "--verbose" in error, error[-3000:]
    assert "Out of" not in error, error[-3000:]
    # No traceback of this process. Jittor echoes a failed compiler command's output to stderr,
    # and on the CPU that command is Jittor's asm_tuner.py, whose assertion prints a traceback.
    for frames in tracebacks(error):
        assert frames and all("jittor/utils/asm_tuner.py" in frame for frame in frames), "\n".join(frames)
    named = re.search(r"Jittor's full report, with the compiler command, is in '([^']+)'", error)
    assert named, error[-3000:]
    assert Path(cwd, named.group(1)).resolve() == report.resolve()
    assert report.is_file()
    assert "Run cmd failed" in report.read_text(encoding="utf-8")
    assert seconds < 60, f"the process took {seconds:.0f} s to end after the failure"


def test_train_reports_an_operator_that_does_not_compile(tiny_scene, tmp_path):
    basedir = tmp_path / "log"
    argv = tiny_argv(tiny_scene, basedir, "--n_iters", "3", "--render_test", "0")
    result, seconds = run_with_failing_compiler(tmp_path, "train.py", argv, cwd=REPO_ROOT)
    assert_compile_failure_reported(result, seconds, basedir / "run_jittor_error.log", REPO_ROOT)
    assert not (basedir / "run" / "run.th").exists()


def test_render_reports_an_operator_that_does_not_compile(tiny_scene, tmp_path):
    checkpoint = save_checkpoint(tiny_model(), str(tmp_path / "m.th"),
                                 train_args={"dataset_name": "blender", "datadir": tiny_scene})
    # render.py keeps its report in --basedir (default ./log): run it in tmp_path.
    result, seconds = run_with_failing_compiler(tmp_path, "render.py", ["--ckpt", checkpoint], cwd=tmp_path)
    assert_compile_failure_reported(result, seconds, tmp_path / "log" / "tensorf_jittor_error.log", tmp_path)


EXIT_PROCESS = '''\
import atexit
import sys

from tensorf_jt.cli import exit_process

atexit.register(lambda: print("exit handlers ran", flush=True))  # stands in for Jittor's (which may hang)
outcome = sys.argv[1]


def main():
    print("main ran")  # buffered: exit_process must flush it before leaving
    if outcome == "raise":
        raise ValueError("a bug")
    if outcome == "system_exit":
        raise SystemExit("usage: ...")
    return int(outcome)


exit_process(main)
'''


@pytest.mark.parametrize("outcome, status", [("0", 0), ("2", 2), ("130", 130), ("raise", 1), ("system_exit", 1)])
def test_exit_process_skips_exit_handlers_after_a_failure(tmp_path, outcome, status):
    script = tmp_path / "exit_process.py"
    script.write_text(EXIT_PROCESS)
    result = run_python([str(script), outcome], timeout=120)
    assert result.returncode == status, (result.stdout, result.stderr[-2000:])
    assert "main ran" in result.stdout
    assert ("exit handlers ran" in result.stdout) == (status == 0), result.stdout
    assert ("Traceback" in result.stderr and "ValueError: a bug" in result.stderr) == (outcome == "raise")
    assert ("usage: ..." in result.stderr) == (outcome == "system_exit")
