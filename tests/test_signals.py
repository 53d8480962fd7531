"""Ctrl-C on a real ``python train.py``: it finishes the step, saves, says how to resume, and exits 130."""
import csv
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from conftest import REPO_ROOT, run_python
from test_resume import N_ITERS, tiny_argv

from tensorf_jt.bootstrap import CHOSEN_ENV
from tensorf_jt.runtime.signals import stop_requests
from tensorf_jt.training.state import read_state


def start_training(argv: list[str], log_dir) -> subprocess.Popen:
    """``python train.py argv`` in the background, with the environment ``run_python`` uses."""
    env = {k: v for k, v in os.environ.items() if k not in CHOSEN_ENV}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    with open(log_dir / "stdout.txt", "w") as stdout, open(log_dir / "stderr.txt", "w") as stderr:
        return subprocess.Popen([sys.executable, "train.py", *argv], cwd=REPO_ROOT, env=env, stdout=stdout,
                                stderr=stderr)


def wait_for_training_rows(process: subprocess.Popen, csv_path, timeout: float = 240.0) -> None:
    """Block until the training log has a data row (the loop is running), or fail."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if csv_path.is_file() and len(csv_path.read_text().splitlines()) > 1:
            return
        assert process.poll() is None, f"train.py exited early with status {process.returncode}"
        time.sleep(0.05)
    process.kill()
    raise AssertionError("train.py did not start training in time")


def test_sigint_saves_prints_how_to_resume_and_the_run_resumes(tiny_scene, tmp_path):
    argv = tiny_argv(tiny_scene, tmp_path / "log", "--progress_refresh_rate", "1", "--render_test", "0",
                     "--save_every", "0")
    folder = tmp_path / "log" / "run"
    process = start_training(argv, tmp_path)
    wait_for_training_rows(process, folder / "train_log.csv")
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 130
    stderr = (tmp_path / "stderr.txt").read_text()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert "SIGINT: training stopped after" in stderr
    state_file = folder / "run_state.th"
    assert f"Resume with: python train.py --resume {state_file}" in stderr
    assert (folder / "run.th").is_file()
    stopped_at = read_state(str(state_file))["iteration"]
    assert 0 < stopped_at < N_ITERS, stopped_at

    resumed = run_python(["train.py", "--resume", str(state_file)], timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert read_state(str(state_file))["iteration"] == N_ITERS
    with open(folder / "train_log.csv", newline="") as handle:
        progress = [int(row["iteration"]) for row in csv.DictReader(handle) if row["train_psnr"]]
    assert progress == list(range(N_ITERS)), "one progress row per iteration, none twice"


def test_a_stop_request_does_not_break_the_system_call_it_lands_in():
    """Jittor's C++ does not retry an interrupted call (waiting for its compile lock, say): while
    stop requests are caught, a signal must let the call carry on, not fail it with EINTR."""
    libc = ctypes.CDLL(None, use_errno=True)
    read_end, write_end = os.pipe()
    requests = []
    main_thread = threading.main_thread().ident

    def blocked_in_read() -> bool:  # the main thread waits in a system call on our pipe
        fields = Path(f"/proc/self/task/{threading.main_thread().native_id}/syscall").read_text().split()
        return len(fields) > 1 and fields[0] != "running" and int(fields[1], 16) == read_end

    def signal_then_write():
        deadline = time.time() + 10
        while not blocked_in_read() and time.time() < deadline:
            time.sleep(0.01)
        signal.pthread_kill(main_thread, signal.SIGTERM)  # lands in the main thread's blocked read()
        time.sleep(0.3)
        os.write(write_end, b"x")

    try:
        with stop_requests(requests.append):
            helper = threading.Thread(target=signal_then_write)
            helper.start()
            got = libc.read(read_end, ctypes.create_string_buffer(1), 1)
            error = ctypes.get_errno()
            helper.join()
    finally:
        os.close(read_end)
        os.close(write_end)
    assert got == 1, f"read() failed with {os.strerror(error)}"
    assert requests == [signal.SIGTERM]
