"""The Jittor bootstrap: offline/CPU-safe defaults, user settings win, errors stay loud."""
import pytest
import jittor as jt

from conftest import run_python


def test_import_on_this_machine_configures_jittor():
    result = run_python(["-c", "import os, tensorf_jt, jittor, jittor.compile_extern as ce;"
                               "print(repr(os.environ.get('nvcc_path')), os.environ.get('log_silent'),"
                               " jittor.flags.use_cuda, ce.mkl_ops is not None)"])
    assert result.returncode == 0, result.stderr
    nvcc_path, log_silent, use_cuda, onednn = result.stdout.split()
    assert log_silent == "1" and onednn == "True"
    if use_cuda == "0":
        assert nvcc_path == "''", "without a usable GPU, Jittor must not look for nvcc"
    assert "[i " not in result.stderr, "info logs should be silent by default"


def test_user_environment_wins():
    result = run_python(["-c", "import os, tensorf_jt; print(os.environ['log_silent'], os.environ['use_cutlass'])"],
                        env={"log_silent": "0", "use_cutlass": "1"})
    assert result.stdout.split() == ["0", "1"], result.stderr


def test_verbose_flag_shows_jittor_logs():
    result = run_python(["-c", "import tensorf_jt, jittor; jittor.array([1.0]).sync()", "--verbose"])
    assert result.returncode == 0 and "[i " in result.stderr


def test_fatal_errors_still_raise_when_logs_are_silent():
    with pytest.raises(RuntimeError, match="backward"):
        jt.array([1.0, 2.0]).sum().backward()


IMPORT_THEN_SETUP = """
import jittor as jt, jittor_utils
def settings():
    log = jittor_utils.LOG
    return (jt.flags.cc_flags, jt.flags.python_path, type(log)._log, "_log" in vars(log), log.log_silent,
            jt.flags.use_cuda)
before = settings()
import tensorf_jt, tensorf_jt.models, tensorf_jt.rendering, tensorf_jt.runtime
print("unchanged" if settings() == before else f"changed: {before} -> {settings()}")
first = tensorf_jt.runtime.setup()
print("setup", jt.flags.cc_flags.count("-include"), first is tensorf_jt.runtime.setup(),
      first.kernel_launcher is not None and jt.flags.python_path == str(first.kernel_launcher))
"""


def test_importing_the_package_leaves_an_imported_jittor_as_it_is():
    """import jittor, then tensorf_jt and its model and rendering packages: Jittor's compiler
    flags, its build helper's interpreter and its logger are what they were; setup() then
    switches the kernel build route, once however often it is called."""
    result = run_python(["-c", IMPORT_THEN_SETUP], env={"nvcc_path": ""})
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.split("\n")
    assert lines[0] == "unchanged", lines[0]
    assert lines[1] == "setup 1 True True", lines[1]


def test_importing_the_package_first_builds_nothing_and_keeps_the_compiler_flags():
    result = run_python(["-c", "import tensorf_jt, jittor as jt; print('-include' in jt.flags.cc_flags, "
                               "'kernel_compile_' in jt.flags.python_path)"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False", "False"]
