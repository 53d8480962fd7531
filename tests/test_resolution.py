"""An unbounded run's grid stops where a foreground voxel would be smaller than a pixel."""
import numpy as np
import pytest

from tensorf_jt.config import parse_run_config
from tensorf_jt.dataLoader.demo_scene import DemoSceneSpec, generate
from tensorf_jt.training.resolution import pixel_footprint, resolvable_voxels
from tensorf_jt.training.schedules import voxel_counts
from tensorf_jt.training.state import read_state
from tensorf_jt.training.trainer import Trainer


def test_a_pixels_footprint_is_the_median_distance_over_the_focal_length():
    poses = np.zeros((3, 3, 4))
    poses[:, :, :3] = np.eye(3)
    poses[:, :, 3] = [[0, 0, 2.0], [0, 3.0, 0], [10.0, 0, 0]]  # 2, 3 and 10 from the origin
    intrinsics = np.array([[100.0, 0, 50], [0, 400.0, 50], [0, 0, 1]])  # sqrt(fx fy) = 200
    assert pixel_footprint(poses, intrinsics, np.zeros(3)) == pytest.approx(3.0 / 200)


def test_the_foreground_fills_half_the_contracted_grid():
    cube = np.array([[-0.6, -0.6, -0.6], [0.6, 0.6, 0.6]])
    assert resolvable_voxels(cube, 0.01) == 240 ** 3  # 120 voxels across the foreground, 240 across the grid
    flat = np.array([[0, 0, 0], [2.0, 2.0, 0.5]])  # geometric mean of the sides: 1.26
    assert resolvable_voxels(flat, 0.05) == round((2 * 2.0 ** (2 / 3) * 0.5 ** (1 / 3) / 0.05) ** 3)


@pytest.fixture(scope="module")
def small_room(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("room") / "demo_room"
    return generate(str(root), DemoSceneSpec(image_size=32, n_train=12, n_val=1, n_test=2, room=True))


def room_trainer(datadir: str, tmp_path, *extra) -> Trainer:
    argv = ["--config", "configs/demo_room.txt", "--dataset_name", "own_data", "--datadir", datadir,
            "--basedir", str(tmp_path), "--N_voxel_init", "4096", "--N_voxel_final", "8000000", "--N_vis", "0", *extra]
    return Trainer(parse_run_config(argv)[0])


def test_an_unbounded_run_on_small_photos_caps_its_grid_and_says_so(small_room, tmp_path, capsys):
    trainer = room_trainer(small_room, tmp_path)
    # 32-pixel views (focal 44.4 px) 4 units from the centre of the 3-unit foreground: 0.09 units a pixel.
    focal = 16 / np.tan(DemoSceneSpec.camera_angle_x / 2)
    expected = round((2 * 3.0 / (4.0 / focal)) ** 3)
    assert trainer.schedule.voxel_targets[-1] == expected < 8_000_000
    assert f"grid: at most {expected:,} voxels (N_voxel_final 8,000,000)" in capsys.readouterr().out


def test_bounded_runs_keep_the_reference_schedule(small_room, tmp_path, capsys):
    trainer = room_trainer(small_room, tmp_path, "--unbounded", "0")
    assert trainer.schedule.voxel_targets == voxel_counts(4096, 8_000_000, 4)  # demo_room's four upsamplings
    assert "grid: at most" not in capsys.readouterr().out


def test_a_run_saved_before_grids_were_capped_goes_on_uncapped(small_room, tmp_path, monkeypatch, capsys):
    """Its grid is already finer than the cap; resuming must not shrink it at the next upsampling."""
    import signal
    from test_resume import stop_with_signal_after
    from tensorf_jt.cli.train import main
    from tensorf_jt.training import resolution

    argv = ["--config", "configs/demo_room.txt", "--dataset_name", "own_data", "--datadir", small_room,
            "--basedir", str(tmp_path), "--expname", "old", "--n_iters", "4", "--batch_size", "256",
            "--N_voxel_init", "512000", "--N_voxel_final", "1000000", "--upsamp_list", "3",
            "--update_AlphaMask_list", "2", "--N_vis", "0", "--render_test", "0", "--tensorboard", "0"]
    monkeypatch.setattr(resolution, "grid_cap", lambda space, dataset: None)  # the code before the cap
    stop_with_signal_after(monkeypatch, 2, signal.SIGTERM)
    assert main(argv) == 128 + signal.SIGTERM
    monkeypatch.undo()
    capsys.readouterr()
    assert main(["--resume", str(tmp_path / "old" / "old_state.th")]) == 0
    assert "it goes on uncapped, as it began" in capsys.readouterr().out
    state = read_state(str(tmp_path / "old" / "old_state.th"))
    assert np.prod(state["schedule"]["reso_cur"]) > 512_000  # upsampled towards 10^6, not shrunk to the cap
