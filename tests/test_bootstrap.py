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
