"""The held-out-sector split: test views from directions no training photo covers."""
import numpy as np
import pytest

from fake_datasets import look_at_opengl, make_own_data, own_data_poses_opengl

from tensorf_jt.cli.train import main
from tensorf_jt.config import load_run_config
from tensorf_jt.dataLoader import OwnDataDataset
from tensorf_jt.dataLoader.sector_split import camera_azimuths, circular_mean, nearest_to_axes, sector_split
from tensorf_jt.errors import ConfigError, DatasetError


def ring(azimuths_deg, center=(0.5, -0.3, 0.2), radius=4.0, height=1.5) -> np.ndarray:
    """OpenGL cameras on a circle around ``center`` (z up), looking at it."""
    a = np.radians(np.asarray(azimuths_deg, dtype=np.float64))
    positions = np.asarray(center) + np.stack([radius * np.cos(a), radius * np.sin(a), np.full_like(a, height)], -1)
    return np.stack([look_at_opengl(p, center, (0, 0, 1)) for p in positions])


def test_azimuths_and_sector_against_the_cameras_placement():
    azimuths = np.arange(0, 360, 15.0) + 2.0
    c2w = ring(azimuths)
    np.testing.assert_allclose(nearest_to_axes(c2w), [0.5, -0.3, 0.2], atol=1e-9)
    np.testing.assert_allclose(camera_azimuths(c2w, np.array([0.5, -0.3, 0.2])), azimuths, atol=1e-9)
    train, test, center = sector_split(c2w, 60.0, center_deg=92.0)
    assert center == 92.0
    assert azimuths[test].tolist() == [62.0, 77.0, 92.0, 107.0, 122.0]
    assert np.all(np.abs(azimuths[train] - 92.0) > 30.0) and len(train) + len(test) == len(azimuths)


def test_the_default_sector_is_the_middle_of_an_arc():
    azimuths = np.linspace(200.0, 310.0, 23)  # an arc of 110 degrees, like a capture around a shelf
    box = np.array([[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]]) + np.array([0.5, -0.3, 0.2])
    train, test, center = sector_split(ring(azimuths), 30.0, box=box)
    # The cameras' mean up leans towards the arc a little, and the azimuths turn with it.
    assert np.isclose(circular_mean(azimuths), 255.0) and abs(center - 255.0) < 1.0
    assert azimuths[test].min() >= 240.0 and azimuths[test].max() <= 270.0
    nearest = np.abs(azimuths[train][:, None] - azimuths[test][None]).min(0)
    assert nearest.max() >= 15.0 - 1e-9, "the sector's middle view is half the sector away from any photo"


def test_a_sector_without_cameras_is_refused():
    with pytest.raises(DatasetError, match="A 20 degree sector centred at azimuth 180 holds no camera of 'the ring'"):
        sector_split(ring(np.linspace(0, 90, 10)), 20.0, center_deg=180.0, source="'the ring'")
    with pytest.raises(DatasetError, match="leaves at least two outside it"):
        sector_split(ring(np.linspace(0, 90, 10)), 350.0, center_deg=45.0)


@pytest.mark.parametrize("single_file", [False, True])
def test_own_data_pools_every_file_and_splits_by_azimuth(tmp_path, single_file):
    folder = make_own_data(tmp_path, single_file=single_file)
    poses = own_data_poses_opengl()
    azimuths = camera_azimuths(poses, nearest_to_axes(poses))
    train = OwnDataDataset(folder, "train", holdout_sector=100.0, holdout_center=azimuths[3])
    test = OwnDataDataset(folder, "test", is_stack=True, holdout_sector=100.0, holdout_center=azimuths[3])
    expected = {i for i in range(len(poses)) if abs((azimuths[i] - azimuths[3] + 180) % 360 - 180) <= 50}
    names = {int(path[-8:-4]) for path in test.image_paths}
    assert names == expected and 3 in names
    assert {int(path[-8:-4]) for path in train.image_paths} == set(range(len(poses))) - expected
    assert test.holdout_center == pytest.approx(azimuths[3])


def test_holdout_flags_are_checked(tmp_path, capsys):
    base = ["--config", "configs/your_own_360.txt", "--datadir", str(tmp_path)]
    with pytest.raises(ConfigError, match="holdout_sector must be a width in degrees from 0 .off. to below 360, got 400"):
        load_run_config(base + ["--holdout_sector", "400"])
    with pytest.raises(ConfigError, match="holdout_sector must be a finite number, got nan"):
        load_run_config(base + ["--holdout_sector", "nan"])
    with pytest.raises(ConfigError, match="holdout_center must be a finite number, got inf"):
        load_run_config(base + ["--holdout_sector", "30", "--holdout_center", "inf"])
    with pytest.raises(ConfigError, match="apply to dataset_name = own_data or demo_room .this run reads blender"):
        load_run_config(["--config", "configs/lego.txt", "--holdout_sector", "30"])
    folder = make_own_data(tmp_path)
    assert main(["--config", "configs/your_own_360.txt", "--datadir", folder, "--holdout_sector", "10",
                 "--holdout_center", "500", "--basedir", str(tmp_path / "log")]) == 2
    error = capsys.readouterr().err
    assert "A 10 degree sector centred at azimuth 140 holds no camera of" in error and "Traceback" not in error
