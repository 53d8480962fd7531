"""A run stopped part-way and resumed from its state file ends exactly where the uninterrupted run does."""
import csv
import json
import os
import shutil
import signal

import numpy as np
import pytest

from tensorf_jt.formats.checkpoint import read_checkpoint, save_atomically
from tensorf_jt.cli.train import main
from tensorf_jt.config import parse_run_config, resumed
from tensorf_jt.dataLoader import RayBatchDataset
from tensorf_jt.dataLoader.ray_batches import ArrayRays
from tensorf_jt.errors import CheckpointError, ConfigError
from tensorf_jt.training.state import read_state
from tensorf_jt.training.run import train
from tensorf_jt.training.trainer import Trainer

N_ITERS = 30
STOP_AFTER = 13  # iterations completed when the run is stopped: after the first upsample, before ray filtering


def tiny_argv(scene: str, basedir, *extra) -> list[str]:
    """A small model on the tiny scene with every schedule event: mask + shrink at 6, upsamples at
    10 and 20, mask + ray filtering at 16."""
    return ["--config", "configs/demo.txt", "--dataset_name", "blender", "--datadir", scene,
            "--basedir", str(basedir), "--expname", "run", "--n_iters", str(N_ITERS), "--batch_size", "256",
            "--N_voxel_init", "4096", "--N_voxel_final", "32768", "--upsamp_list", "10", "--upsamp_list", "20",
            "--update_AlphaMask_list", "6", "--update_AlphaMask_list", "16", "--density_shift", "-2",
            "--n_lamb_sigma", "4", "--n_lamb_sh", "8", "--data_dim_color", "8", "--featureC", "16",
            "--progress_refresh_rate", "3", "--N_vis", "0", "--render_test", "1", "--save_every", "5", *extra]


def parameters(checkpoint: str) -> dict:
    return {name: var.numpy() for name, var in read_checkpoint(checkpoint)["state_dict"].items()}


def log_without_wall_time(folder) -> list[list[str]]:
    with open(os.path.join(folder, "train_log.csv"), newline="") as handle:
        return [row[:1] + row[2:] for row in csv.reader(handle)]


@pytest.fixture(scope="module")
def uninterrupted(tiny_scene, tmp_path_factory):
    basedir = tmp_path_factory.mktemp("whole")
    assert main(tiny_argv(tiny_scene, basedir)) == 0
    return basedir / "run"


def stop_with_signal_after(monkeypatch, iterations: int, signum: int) -> None:
    """Make the trainer send ``signum`` to this process during step ``iterations`` (counting from 1)."""
    step = Trainer.train_step

    def step_then_signal(self):
        mse = step(self)
        if self.iteration == iterations - 1:
            os.kill(os.getpid(), signum)
        return mse

    monkeypatch.setattr(Trainer, "train_step", step_then_signal)


def test_stopped_and_resumed_run_ends_exactly_like_the_uninterrupted_one(uninterrupted, tiny_scene, tmp_path,
                                                                         monkeypatch, capsys):
    stop_with_signal_after(monkeypatch, STOP_AFTER, signal.SIGTERM)
    assert main(tiny_argv(tiny_scene, tmp_path)) == 128 + signal.SIGTERM
    monkeypatch.undo()
    folder = tmp_path / "run"
    state_file = folder / "run_state.th"
    message = capsys.readouterr().err
    assert f"SIGTERM: training stopped after {STOP_AFTER} iterations" in message
    assert f"Resume with: python train.py --resume {state_file}" in message
    assert (folder / "run.th").is_file() and not (folder / "imgs_test_all").exists()
    state = read_state(str(state_file))
    assert state["iteration"] == STOP_AFTER and state["schedule"]["reso_cur"] != [16, 16, 16]
    assert [name for _, name in state["log"]["events"]][-1].startswith("upsample")
    assert [f for f in os.listdir(folder) if f.startswith(".tmp")] == [], "no temporary files left"

    assert main(["--resume", str(state_file)]) == 0  # the saved flags are used; nothing else is needed
    # Exactly equal: every random draw is seeded from (seed, iteration), the sampler restarts from
    # its saved generator state, and Adam's moments and step count are restored bit for bit.
    expected, resumed = parameters(str(uninterrupted / "run.th")), parameters(str(folder / "run.th"))
    assert expected.keys() == resumed.keys()
    for name in expected:
        np.testing.assert_array_equal(resumed[name], expected[name], err_msg=name)
    psnr = [np.loadtxt(f / "imgs_test_all" / "mean.txt")[0] for f in (uninterrupted, folder)]
    assert psnr[0] == psnr[1]
    assert log_without_wall_time(folder) == log_without_wall_time(uninterrupted), "the log continues seamlessly"
    assert read_state(str(state_file))["iteration"] == N_ITERS


def test_resume_auto_finds_the_state_and_flags_must_match(uninterrupted, tiny_scene, capsys):
    basedir = uninterrupted.parent
    argv = tiny_argv(tiny_scene, basedir, "--resume", "auto")
    config, explicit = parse_run_config(argv)
    state = read_state(str(uninterrupted / "run_state.th"))
    merged = resumed(config, explicit, state["train_args"])
    assert merged.schedule.n_iters == N_ITERS and merged.output.resume == "auto"

    assert main([*argv, "--n_iters", "50", "--model_name", "TensorCP"]) == 2
    error = capsys.readouterr().err
    assert "must keep the settings it was started with" in error
    assert "model_name = 'TensorCP' (the saved run has 'TensorVMSplit')" in error and "n_iters = 50" in error
    with pytest.raises(ConfigError, match="give only one"):
        train(*parse_run_config([*argv, "--ckpt", str(uninterrupted / "run.th")]))


def test_resume_refuses_what_is_not_a_training_state(uninterrupted, tmp_path):
    with pytest.raises(CheckpointError, match="is a model checkpoint, not a training state"):
        read_state(str(uninterrupted / "run.th"))
    data = (uninterrupted / "run_state.th").read_bytes()
    (tmp_path / "cut_state.th").write_bytes(data[:len(data) // 3])
    with pytest.raises(CheckpointError, match="corrupted or incomplete"):
        read_state(str(tmp_path / "cut_state.th"))
    with pytest.raises(CheckpointError, match="does not exist"):
        read_state(str(tmp_path / "none_state.th"))


def test_ray_sampler_continues_mid_epoch_from_its_state():
    rays = np.arange(100 * 6, dtype=np.float32).reshape(100, 6)
    stream = RayBatchDataset(ArrayRays(rays, rays[:, :3]), batch_size=30, seed=4)
    batches = iter(stream)
    for _ in range(4):  # into the second epoch
        next(batches)
    saved = stream.state()
    expected = [next(batches)[0].numpy() for _ in range(4)]
    resumed = RayBatchDataset(ArrayRays(rays, rays[:, :3]), batch_size=30, seed=4)
    resumed.restore(saved)
    np.testing.assert_array_equal(np.stack([b[0].numpy() for b, _ in zip(iter(resumed), range(4))]),
                                  np.stack(expected))
    with pytest.raises(CheckpointError, match="Resume with the same data"):
        RayBatchDataset(ArrayRays(rays[:50], rays[:50, :3]), batch_size=30).restore(saved)


def test_a_failed_write_leaves_the_previous_state_file_intact(uninterrupted, tmp_path, monkeypatch):
    target = tmp_path / "run_state.th"
    target.write_bytes((uninterrupted / "run_state.th").read_bytes())

    def disk_full(obj, path):
        with open(path, "wb") as handle:
            handle.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("tensorf_jt.formats.checkpoint.jt.save", disk_full)
    with pytest.raises(CheckpointError, match=r"No space left on device\); the previous file, if any, is unchanged"):
        save_atomically({"iteration": 1}, str(target))
    monkeypatch.undo()
    assert read_state(str(target))["iteration"] == N_ITERS
    assert os.listdir(tmp_path) == ["run_state.th"], "the partial temporary file is removed"
    with pytest.raises(CheckpointError, match="Cannot write .* choose a writable --basedir"):
        save_atomically({}, str(target / "below_a_file.th"))


def test_resuming_on_other_data_is_refused(uninterrupted, tiny_scene, tmp_path):
    scene = tmp_path / "fewer_views"
    shutil.copytree(tiny_scene, scene)
    meta = json.loads((scene / "transforms_train.json").read_text())
    meta["frames"] = meta["frames"][:-1]
    (scene / "transforms_train.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="The saved run trained on 3456 rays; this dataset has 2880"):
        train(*parse_run_config(["--resume", str(uninterrupted / "run_state.th"), "--datadir", str(scene)]))


def test_resume_auto_without_a_saved_state_starts_a_new_run(tiny_scene, tmp_path, capsys):
    argv = tiny_argv(tiny_scene, tmp_path, "--resume", "auto", "--n_iters", "2", "--render_test", "0")
    assert main(argv) == 0
    assert f"no saved state of 'run' under '{tmp_path}' yet; starting a new run" in capsys.readouterr().out
    assert read_state(str(tmp_path / "run" / "run_state.th"))["iteration"] == 2
