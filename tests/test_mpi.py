"""Data-parallel training under ``mpirun`` on 2 CPU ranks: the same training as one process,
identical ranks, rank 0 alone writing, clean stops and failures (tensorf_jt/runtime/distributed.py)."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT, run_python, wait_until
from test_resume import tiny_argv
from tensorf_jt.runtime import distributed
from tensorf_jt.bootstrap import CHOSEN_ENV, rank_settings
from tensorf_jt.formats.checkpoint import read_checkpoint
from tensorf_jt.training.state import read_state

MPIRUN = Path(sys.executable).parent / "mpirun"
needs_mpi = pytest.mark.skipif(not MPIRUN.exists(), reason="MPI is not installed: pip install -e '.[mpi]'")


def mpi_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CHOSEN_ENV}
    env.update(PATH=f"{MPIRUN.parent}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO_ROOT),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def mpirun_command(*programs: list[str]) -> list[str]:
    """``mpirun`` starting one rank per program (argv lists of Python arguments)."""
    command = [str(MPIRUN), "--oversubscribe"]
    for index, program in enumerate(programs):
        command += ([":"] if index else []) + ["-np", "1", sys.executable, *program]
    return command


# Each job gets a session of its own: Open MPI may pass a signal on to its whole process group,
# and pytest, which imports Jittor, would die of it (Jittor's SIGINT/SIGTERM handler exits with
# status 1 without letting pytest report).
def run(command: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=REPO_ROOT, env=mpi_env(), capture_output=True, text=True, timeout=timeout,
                          start_new_session=True)


def start(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=REPO_ROOT, env=mpi_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def stop(job: subprocess.Popen) -> None:
    """Kill a job still running, ranks first (Open MPI gives them process groups of their own)."""
    if job.poll() is None:
        for pid in rank_pids(job.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        job.kill()
        job.wait(timeout=30)


def parameters(checkpoint: Path) -> dict[str, np.ndarray]:
    state = read_checkpoint(str(checkpoint))["state_dict"]
    return {name: var.numpy().astype(np.float64) for name, var in state.items()}


def files_under(folder: Path) -> list[str]:
    """Files under ``folder``; TensorBoard event files (named by time and host) as 'EVENTS'."""
    return sorted("EVENTS" if path.name.startswith("events.out.tfevents.") else str(path.relative_to(folder))
                  for path in folder.rglob("*") if path.is_file())


@needs_mpi
def test_two_ranks_train_what_one_process_trains(tiny_scene, tmp_path):
    """Same seed, same global batch, through mask + shrink, upsamples and ray filtering."""
    argv = ["train.py", *tiny_argv(tiny_scene, "{base}", "--n_iters", "24")]
    two = run(mpirun_command(*[[a.replace("{base}", str(tmp_path / "two")) for a in argv]] * 2))
    assert two.returncode == 0, two.stdout[-3000:] + two.stderr[-3000:]
    one = run([sys.executable, *[a.replace("{base}", str(tmp_path / "one")) for a in argv]])
    assert one.returncode == 0, one.stderr[-3000:]

    ranks, single = parameters(tmp_path / "two/run/run.th"), parameters(tmp_path / "one/run/run.th")
    assert ranks.keys() == single.keys()
    difference = np.sqrt(sum(np.sum((ranks[k] - single[k]) ** 2) for k in single))
    size = np.sqrt(sum(np.sum(single[k] ** 2) for k in single))
    assert difference / size < 1e-5, f"parameters differ by {difference / size:.2e} (relative L2)"
    psnr = [json.loads((tmp_path / f"{name}/run/imgs_test_all/metrics.json").read_text())["psnr"]
            for name in ("two", "one")]
    assert abs(psnr[0] - psnr[1]) < 0.05, psnr

    # Rank 0 alone writes and reports: the files are one run's, each written once.
    assert files_under(tmp_path / "two") == files_under(tmp_path / "one")
    assert files_under(tmp_path / "two").count("EVENTS") == 1, "one TensorBoard event file, rank 0's"
    log_rows = [(tmp_path / f"{name}/run/train_log.csv").read_text().count("\n") for name in ("two", "one")]
    assert log_rows[0] == log_rows[1]
    assert two.stdout.count("checkpoint: ") == 1 and two.stdout.count("test: PSNR") == 1


DRIVER = """\
import json, sys
import numpy as np
import tensorf_jt.runtime
import jittor as jt
from tensorf_jt.runtime import distributed
from tensorf_jt.config import load_run_config
from tensorf_jt.runtime.distributed import RanksDiverged
from tensorf_jt.training.trainer import Trainer

tensorf_jt.runtime.setup()  # kernels built as train.py builds them: Jittor keeps one build per kernel
trainer = Trainer(load_run_config(sys.argv[1:]))
trainer.run()
state = trainer.model.field.state_dict()
sums = distributed.checksum(list(state.values()))
if distributed.rank() == 1:  # one rank's parameter moves: the check must notice
    var = state["density_line.0"]
    var.assign(var + 1e-3)
try:
    distributed.check_ranks_agree(list(state.values()), list(state))
    noticed = False
except RanksDiverged as err:
    noticed = "density_line.0" in str(err)
if distributed.is_main():
    print("RESULT " + json.dumps({"sums": sums.tolist(), "world": distributed.world_size(), "noticed": noticed}))
"""


@needs_mpi
def test_every_rank_ends_with_the_same_parameters(tiny_scene, tmp_path):
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    argv = [str(driver), *tiny_argv(tiny_scene, tmp_path / "log", "--n_iters", "12", "--render_test", "0")]
    result = run(mpirun_command(argv, argv))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))[7:])
    sums = np.array(report["sums"])
    assert report["world"] == 2 and sums.shape[0] == 2 and sums.shape[1] > 10
    np.testing.assert_array_equal(sums[0], sums[1])
    assert report["noticed"], "a rank whose parameters differ must be reported"


def saved_iteration(state: Path) -> int:
    try:
        return read_state(str(state))["iteration"]
    except Exception:  # not written yet, or being replaced
        return -1


@needs_mpi
def test_sigint_to_mpirun_leaves_one_readable_state_that_resumes_on_another_rank_count(tiny_scene, tmp_path):
    argv = ["train.py", *tiny_argv(tiny_scene, tmp_path / "log", "--n_iters", "150", "--render_test", "0")]
    state = tmp_path / "log/run/run_state.th"
    job = start(mpirun_command(argv, argv))
    try:
        wait_until(lambda: saved_iteration(state) >= 10 or job.poll() is not None, 240, "a saved state",
                   poll=0.2)
        assert job.poll() is None, "the run ended before it could be interrupted"
        job.send_signal(signal.SIGINT)
        job.wait(timeout=60)
    finally:
        stop(job)
    assert job.returncode != 0
    stopped_at = read_state(str(state))["iteration"]
    # Open MPI passes SIGTERM to the ranks and kills them soon after: the state is the one they
    # saved on stopping if there was time, else the last periodic one; complete either way.
    assert 10 <= stopped_at < 150
    resumed = run([sys.executable, "train.py", "--resume", str(state)])  # one process continues two ranks' run
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert read_state(str(state))["iteration"] == 150


def rank_pids(mpirun_pid: int) -> list[int]:
    """The Python ranks started by ``mpirun`` (its children running train.py)."""
    listing = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,args="], capture_output=True, text=True).stdout
    children = [line.split(None, 2) for line in listing.splitlines() if line.strip()]
    return [int(pid) for pid, ppid, args in children if int(ppid) == mpirun_pid and "train.py" in args]


@needs_mpi
def test_sigterm_to_one_rank_stops_every_rank_with_one_saved_state(tiny_scene, tmp_path):
    argv = ["train.py", *tiny_argv(tiny_scene, tmp_path / "log", "--n_iters", "150", "--save_every", "1000",
                                   "--render_test", "0")]
    log = tmp_path / "log/run/train_log.csv"
    job = start(mpirun_command(argv, argv))
    try:
        wait_until(lambda: (log.is_file() and log.read_text().count("\n") > 6) or job.poll() is not None, 240,
                   "training to run", poll=0.2)
        assert job.poll() is None, "the run ended before it could be interrupted"
        pids = rank_pids(job.pid)
        assert len(pids) == 2, pids
        os.kill(pids[-1], signal.SIGTERM)
        output, _ = job.communicate(timeout=120)
    finally:
        stop(job)
    state = tmp_path / "log/run/run_state.th"
    assert state.is_file(), output[-4000:]
    stopped_at = read_state(str(state))["iteration"]
    assert 0 < stopped_at < 150, "the state of the iteration the ranks stopped at, not a periodic one"
    assert output.count("training stopped after") == 1, output[-3000:]
    assert f"training stopped after {stopped_at} iterations" in output


@needs_mpi
def test_a_rank_that_fails_brings_the_job_down_with_its_message(tiny_scene, tmp_path):
    good = ["train.py", *tiny_argv(tiny_scene, tmp_path / "log")]
    bad = ["train.py", *tiny_argv(str(tmp_path / "nowhere"), tmp_path / "log")]
    started = time.time()
    result = run(mpirun_command(good, bad), timeout=240)
    assert result.returncode != 0
    assert "nowhere/transforms_train.json' not found" in result.stderr + result.stdout
    assert time.time() - started < 120, "the healthy rank must not hang"

    uneven = ["train.py", *tiny_argv(tiny_scene, tmp_path / "log", "--batch_size", "255")]
    result = run(mpirun_command(uneven, uneven), timeout=240)
    assert result.returncode != 0
    assert "batch_size (255) must split evenly over the 2 MPI ranks" in result.stderr + result.stdout


def test_a_launcher_without_jittor_mpi_is_refused(tiny_scene, tmp_path):
    result = run_python(["train.py", *tiny_argv(tiny_scene, tmp_path / "log")],  # PMI: a launcher Jittor ignores
                        env={"PMI_SIZE": "2"}, timeout=300)
    assert result.returncode == 2
    assert "started by mpirun as one of 2, but Jittor runs without MPI" in result.stderr
    assert not (tmp_path / "log").exists()


def test_ranks_share_a_machines_cores_and_gpus():
    assert rank_settings(1, None, None, 16, 8, "/venv/bin/mpicc", nccl=True) == {}
    assert rank_settings(4, 1, 2, 16, 0, "/venv/bin/mpicc", nccl=True) == {"OMP_NUM_THREADS": "8",
                                                                           "mpicc_path": "/venv/bin/mpicc"}
    assert rank_settings(2, None, None, 2, 0, None, nccl=False) == {"OMP_NUM_THREADS": "1"}
    assert rank_settings(8, 5, 4, 64, 4, None, nccl=True) == {"OMP_NUM_THREADS": "16", "device_id": "1",
                                                              "use_nccl": "1"}
    assert rank_settings(2, 1, 2, 8, 1, None, nccl=False) == {"OMP_NUM_THREADS": "4"}  # one GPU: shared


@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 100, 1001])
def test_rank_parts_cover_every_item_once_and_pack_into_whole_bytes(monkeypatch, count):
    parts = []
    for index in range(3):
        monkeypatch.setattr(distributed, "world_size", lambda: 3)
        monkeypatch.setattr(distributed, "rank", lambda index=index: index)
        parts.append(distributed.share_of(count))
    assert parts[0].start == 0 and parts[-1].stop == count
    assert all(a.stop == b.start for a, b in zip(parts, parts[1:]))
    assert all(part.start % 8 == 0 for part in parts)
