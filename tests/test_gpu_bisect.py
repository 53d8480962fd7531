"""tools/gpu_bisect.py on the CPU: probes pass, an injected compiler failure is reported with its command."""
import importlib.util
import json
import re
import sys

import pytest

from conftest import REPO_ROOT, run_python

BISECT = REPO_ROOT / "tools" / "gpu_bisect.py"
TWO_PROBES = "import_and_basics,where_nonzero"


@pytest.fixture(scope="module")
def bisect():
    """tools/gpu_bisect.py as a module (importing it does not import Jittor)."""
    spec = importlib.util.spec_from_file_location("gpu_bisect_under_test", BISECT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def run_bisect(tmp_path, *argv):
    # TMPDIR: the probes' fake compilers and scratch folders stay inside tmp_path.
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return run_python([str(BISECT), *argv], env={"TENSORF_JT_CPU": "1", "TMPDIR": str(tmp_path / "tmp")},
                      timeout=300)


def test_probes_pass_on_the_cpu(tmp_path):
    out = tmp_path / "out"
    result = run_bisect(tmp_path, "--only", TWO_PROBES, "--out", str(out))
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    assert "ALL 2 PROBES PASSED" in result.stdout
    for name in ("environment.txt", "bisect_report.json", "bisect_report.txt",
                 "probe_01_import_and_basics.log", "probe_02_where_nonzero.log"):
        assert (out / name).is_file(), name
    assert "ALL 2 PROBES PASSED" in (out / "bisect_report.txt").read_text()
    results = json.loads((out / "bisect_report.json").read_text())
    assert [(r["probe"], r["passed"], r["status"]) for r in results] == [
        ("import_and_basics", True, 0), ("where_nonzero", True, 0)]


def test_injected_compiler_failure_is_reported_with_its_command(tmp_path):
    out = tmp_path / "out"
    result = run_bisect(tmp_path, "--inject-failing-compiler", "--only", TWO_PROBES, "--out", str(out))
    assert result.returncode == 1, (result.stdout[-3000:], result.stderr[-3000:])
    text = result.stdout
    assert "FIRST FAILURE: probe 'import_and_basics'" in text, text[-3000:]
    command_lines = [line for line in text.splitlines() if line.strip().startswith("failing command:")]
    assert len(command_lines) == 1 and "failing_compiler.sh" in command_lines[0], text[-3000:]
    assert "the command run again on its own: exit 1 (it fails on its own too)" in text, text[-3000:]
    assert "what Jittor reports: Jittor could not compile the operator '" in text
    # The bisect stops at the first failure: where_nonzero never ran.
    progress = re.findall(r"^\[\s*\d+ s\] (\S+)", text, flags=re.MULTILINE)
    assert progress == ["import_and_basics"], text[-3000:]
    assert not (out / "probe_02_where_nonzero.log").exists()
    results = json.loads((out / "bisect_report.json").read_text())
    assert [r["probe"] for r in results] == ["import_and_basics"]
    failure = results[0]
    assert not failure["passed"] and failure["status"] == 1
    assert "failing_compiler.sh" in failure["command"] and failure["standalone_rerun"]["status"] == 1
    assert "FIRST FAILURE: probe 'import_and_basics'" in (out / "bisect_report.txt").read_text()


def test_list_names_every_probe(bisect):
    result = run_python([str(BISECT), "--list"], timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    listed = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
    assert listed == list(bisect.PROBES)
    assert {"import_and_basics", "where_nonzero", "fused_kernels", "trainer_fused", "lego_step"} <= set(listed)


def test_read_failure_finds_a_crash_and_the_debuggers_signal(bisect):
    log = ("probe model_fused: a model's forward, backward and Adam step, --kernels fused; use_cuda=1\n"
           "[i 1130 12:00:00.000000 00 op.cc:250] Compile op __opkey0_array__T_float32«JIT:1«JIT_cuda:1\n"
           "\x1b[38;5;1m[e 1130 12:00:01.000000 00 helper_cuda.h:128] Caught segfault at address 0x10, "
           "thread_name: 'C1', flush log...\x1b[m\n"
           "\n"
           "Thread 7 \"python\" received signal SIGSEGV, Segmentation fault.\n"
           "[Switching to Thread 0x7fffd0bfe640 (LWP 12345)]\n"
           "0x00007ffff7e3a1b2 in ?? () from /lib/x86_64-linux-gnu/libc.so.6\n")
    found = bisect.read_failure(log)
    assert found["crash_address"] == "0x10"
    assert found["crash_thread"] == "C1"
    assert found["debugger_signal"] == 'Thread 7 "python" received signal SIGSEGV'
    assert found["last_compiled"] == "__opkey0_array__T_float32«JIT:1«JIT_cuda:1"
    assert "command" not in found and "summary" not in found  # no compile failure in this log
    described = bisect.describe({"probe": "model_fused", "status": -11, "log": "x.log", **found})
    assert "crash at address: 0x10" in described and "crash in thread: C1" in described
    assert "the debugger saw: Thread 7" in described


def test_read_failure_on_a_log_with_nothing_to_report(bisect):
    assert bisect.read_failure("probe x: ...\nsome output\n") == {}
