"""Checkpoints round-trip as Vars, render identically, and refuse anything that does not fit."""
import os

import numpy as np
import pytest
import jittor as jt

from model_factory import rays_towards_box, tiny_model
from tensorf_jt.formats.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint
from tensorf_jt.errors import CheckpointError


def all_leaves(obj):
    if isinstance(obj, dict):
        for value in obj.values():
            yield from all_leaves(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from all_leaves(value)
    else:
        yield obj


@pytest.fixture
def trained(tmp_path):
    model = tiny_model(grid=(10, 10, 10), density_shift=-1.0)
    model.upsample([12, 11, 10])
    model.shrink(model.update_alpha_mask((12, 11, 10)))
    path = save_checkpoint(model, str(tmp_path / "run" / "run.th"), train_args={"datadir": "x", "seed": 3})
    return model, path


def test_round_trip_restores_vars_and_identical_renders(trained):
    model, path = trained
    raw = read_checkpoint(path)
    assert not any(isinstance(leaf, np.ndarray) for leaf in all_leaves(raw)), "numpy arrays in checkpoint"
    assert isinstance(raw["kwargs"]["aabb"], jt.Var) and isinstance(raw["alphaMask.mask"], jt.Var)
    assert raw["model_name"] == "TensorVMSplit" and raw["train_args"]["seed"] == 3
    loaded, _ = load_checkpoint(path)
    assert loaded.gridSize == model.gridSize
    np.testing.assert_array_equal(loaded.field.aabb, model.field.aabb)
    for name, var in loaded.field.state_dict().items():
        assert isinstance(var, jt.Var) and not var.is_stop_grad(), name
        np.testing.assert_array_equal(var.numpy(), model.field.state_dict()[name].numpy())
    np.testing.assert_array_equal(loaded.alphaMask.alpha_volume.numpy(), model.alphaMask.alpha_volume.numpy())
    rays = jt.array(rays_towards_box(128))
    expected, got = model(rays), loaded(rays)
    np.testing.assert_array_equal(got.rgb.numpy(), expected.rgb.numpy())
    np.testing.assert_array_equal(got.depth.numpy(), expected.depth.numpy())


def test_save_is_atomic_and_keeps_no_temporary_files(trained, tmp_path):
    _, path = trained
    assert os.listdir(os.path.dirname(path)) == ["run.th"]


def test_strict_loading_refuses_mismatches(trained, tmp_path):
    _, path = trained
    raw = read_checkpoint(path)
    missing = dict(raw, state_dict={k: v for k, v in raw["state_dict"].items() if k != "app_line.1"})
    jt.save(missing, str(tmp_path / "missing.th"))
    with pytest.raises(CheckpointError, match=r"missing \['app_line.1'\]"):
        load_checkpoint(str(tmp_path / "missing.th"))
    wrong = dict(raw, state_dict=dict(raw["state_dict"], **{"density_plane.0": jt.zeros((1, 2, 3, 3))}))
    jt.save(wrong, str(tmp_path / "wrong.th"))
    with pytest.raises(CheckpointError, match=r"'density_plane.0' has shape \(1, 2, 3, 3\)"):
        load_checkpoint(str(tmp_path / "wrong.th"))
    foreign = dict(raw, model_name="TensorQQ")
    jt.save(foreign, str(tmp_path / "foreign.th"))
    with pytest.raises(CheckpointError, match="TensorQQ"):
        load_checkpoint(str(tmp_path / "foreign.th"))


def test_unreadable_files_get_clear_errors(trained, tmp_path):
    _, path = trained
    with pytest.raises(CheckpointError, match="does not exist"):
        read_checkpoint(str(tmp_path / "nope.th"))
    data = open(path, "rb").read()
    (tmp_path / "truncated.th").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="corrupted"):
        read_checkpoint(str(tmp_path / "truncated.th"))
    (tmp_path / "empty.th").write_bytes(b"")
    with pytest.raises(CheckpointError, match="corrupted"):
        read_checkpoint(str(tmp_path / "empty.th"))
    jt.save({"hello": 1}, str(tmp_path / "other.th"))
    with pytest.raises(CheckpointError, match="not a TensoRF checkpoint"):
        read_checkpoint(str(tmp_path / "other.th"))
