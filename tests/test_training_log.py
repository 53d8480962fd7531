"""The training log: CSV rows as training goes, JSON copy and PSNR plot at the end."""
import csv
import json

import imageio.v3 as iio
import jittor as jt
import numpy as np
import pytest

from tensorf_jt.config import load_run_config
from tensorf_jt.training.trainer import Trainer

COLUMNS = ["iteration", "wall_time_s", "mse", "train_psnr", "test_psnr", "lr_grid", "lr_network",
           "grid_size", "n_rays", "event"]


def make_trainer(tiny_scene, tmp_path, *extra):
    return Trainer(load_run_config([
        "--config", "configs/demo.txt", "--dataset_name", "blender", "--datadir", tiny_scene,
        "--basedir", str(tmp_path), "--expname", "logged", "--n_iters", "30", "--batch_size", "256",
        "--progress_refresh_rate", "5", "--N_voxel_init", "4096", "--N_voxel_final", "32768",
        "--upsamp_list", "10", "--update_AlphaMask_list", "12", "--update_AlphaMask_list", "20",
        "--density_shift", "-2", "--vis_every", "15", "--N_vis", "1", "--render_test", "0", *extra]))


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return reader.fieldnames, list(reader)


def read_scalars(folder) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the run's event files, read with TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
            for tag in accumulator.Tags()["scalars"]}


def test_training_writes_log_plot_and_path(tiny_scene, tmp_path):
    trainer = make_trainer(tiny_scene, tmp_path, "--render_path", "1", "--render_test", "1",
                           "--TV_weight_density", "0.1", "--TV_weight_app", "0.1", "--Ortho_weight", "0.001",
                           "--tensorboard_every", "3")
    trainer.test_dataset.render_path = trainer.test_dataset.render_path[:2]  # two frames are enough here
    trainer.run()

    folder = tmp_path / "logged"
    columns, rows = read_rows(folder / "train_log.csv")
    assert columns == COLUMNS
    iterations = [int(row["iteration"]) for row in rows]
    assert iterations == sorted(iterations)
    progress = [row for row in rows if row["train_psnr"]]
    assert [int(row["iteration"]) for row in progress] == list(range(0, 30, 5))
    assert all(float(row["train_psnr"]) > 5 and float(row["mse"]) > 0 for row in progress)
    events = {row["event"].split(" ")[0]: row for row in rows if row["event"]}
    assert set(events) == {"upsample", "alpha", "shrink", "ray", "test"}, list(events)
    assert int(events["upsample"]["iteration"]) == 10 and int(events["ray"]["iteration"]) == 20
    assert float(events["test"]["test_psnr"]) > 5
    assert progress[1]["grid_size"] == "16x16x16" and progress[-1]["grid_size"] != "16x16x16"
    assert int(progress[-1]["n_rays"]) <= int(progress[0]["n_rays"])
    assert float(progress[-1]["lr_grid"]) < float(progress[0]["lr_grid"]) and float(progress[0]["lr_network"]) > 0
    assert [float(row["wall_time_s"]) for row in rows] == sorted(float(row["wall_time_s"]) for row in rows)

    records = json.loads((folder / "train_log.json").read_text())
    assert [record["iteration"] for record in records] == iterations
    assert records[0]["test_psnr"] is None and isinstance(records[0]["train_psnr"], float)
    plot = iio.imread(folder / "train_psnr.png")
    assert plot.ndim == 3 and plot.shape[0] > 100 and plot.std() > 0

    assert sorted(p.name for p in (folder / "imgs_path_all").glob("*.png")) == ["000.png", "001.png"]
    assert (folder / "imgs_path_all" / "video.mp4").is_file()
    assert (folder / "imgs_path_all" / "depthvideo.mp4").is_file()

    assert len(list(folder.glob("events.out.tfevents.*"))) == 1
    scalars = read_scalars(folder)
    every_step = ["train/PSNR", "train/mse", "train/reg", "train/reg_tv_density", "train/reg_tv_app",
                  "train/s_per_iter", "train/lr_grid", "train/lr_network", "train/grid_voxels", "train/n_rays"]
    for tag in every_step:
        assert [step for step, _ in scalars[tag]] == list(range(0, 30, 3)), tag
    l1_steps = [step for step, _ in scalars["train/reg_l1"]]
    assert l1_steps == list(range(0, 30, 3)), "the demo config's L1 weight stays positive after the first mask update"
    assert [step for step, _ in scalars["test/psnr"]] == [14, 29]
    assert scalars["test/psnr_all"] == [(29, pytest.approx(float(np.loadtxt(folder / "imgs_test_all" / "mean.txt")[0]),
                                                          abs=1e-4))]
    psnr = dict(scalars["train/PSNR"])
    mse = dict(scalars["train/mse"])
    assert all(abs(psnr[step] + 10 * np.log10(mse[step])) < 1e-3 for step in psnr)
    logged_mse = {int(row["iteration"]): float(row["mse"]) for row in progress}
    shared = [step for step in logged_mse if step in mse]
    assert shared == [0, 15] and all(abs(mse[step] - logged_mse[step]) < 1e-6 for step in shared), "the CSV's loss"
    assert dict(scalars["train/grid_voxels"])[0] == 16 ** 3 and dict(scalars["train/grid_voxels"])[27] > 16 ** 3


def test_a_crashed_run_keeps_its_rows(tiny_scene, tmp_path):
    trainer = make_trainer(tiny_scene, tmp_path, "--tensorboard", "0")
    steps = []

    def step_then_crash():
        steps.append(1)
        if len(steps) > 12:
            raise RuntimeError("simulated crash")
        return jt.array([0.01])

    trainer.train_step = step_then_crash
    with pytest.raises(RuntimeError, match="simulated crash"):
        trainer.run()
    _, rows = read_rows(tmp_path / "logged" / "train_log.csv")
    assert [int(row["iteration"]) for row in rows if row["train_psnr"]] == [0, 5, 10]
    assert np.isclose(float(rows[0]["train_psnr"]), 20.0)
    assert rows[-1]["event"].startswith("upsample"), "events up to the crash are there"
    assert not list((tmp_path / "logged").glob("events.out.tfevents.*")), "--tensorboard 0 writes no event file"
