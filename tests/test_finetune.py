"""``train.py --config configs/lego.txt --ckpt original.th``: training continues from a checkpoint
written by the original PyTorch TensoRF (the fixtures of ``tests/fixtures/README.md``).

Flags on top of lego's config, and why:
- ``--datadir`` the tiny scene: the same procedural scene the fixtures were trained on (at 32
  pixels, 30 views; here 24 pixels, 6 views), so the checkpoint already fits it.
- ``--n_iters 40``: enough for the loss to fall; the learning rates decay over these 40.
- ``--batch_size 512``: the scene has 6 x 24 x 24 = 3456 rays (2967 inside the checkpoint's
  box), fewer than lego's 4096.
- ``--N_voxel_init 31212`` (34 x 34 x 27, the fixtures' final grid): like the reference, the
  trainer takes the samples per ray from N_voxel_init, not from the loaded model; lego's 128^3
  would march ~440 samples through a 34-voxel grid, most of them past its (shrunk) box.
- lego's upsamplings and alpha-mask updates (iterations 2000 and later) never come, so the
  model keeps the checkpoint's grid and mask, as fine-tuning a finished model should.
"""
import csv

import jittor as jt
import numpy as np
import pytest

from conftest import REPO_ROOT
from tensorf_jt.formats.checkpoint import read_checkpoint
from tensorf_jt.cli.train import main
from tensorf_jt.training.trainer import Trainer

FIXTURES = REPO_ROOT / "tests" / "fixtures"
N_ITERS = 40


def finetune_argv(scene: str, basedir, fixture: str, *extra) -> list[str]:
    return ["--config", "configs/lego.txt", "--datadir", scene, "--basedir", str(basedir), "--expname", "finetune",
            "--ckpt", str(FIXTURES / fixture), "--n_iters", str(N_ITERS), "--batch_size", "512",
            "--N_voxel_init", "31212", "--progress_refresh_rate", "5", *extra]


def progress_rows(folder) -> list[dict]:
    with open(folder / "train_log.csv", newline="") as handle:
        return [row for row in csv.DictReader(handle) if row["mse"]]


@pytest.mark.parametrize("name, extra", [("vm", ()), ("cp", ("--model_name", "TensorCP"))])
def test_training_continues_from_a_checkpoint_of_the_original(tiny_scene, tmp_path, monkeypatch, name, extra):
    fixture = f"reference_{name}_tiny.th"
    original = read_checkpoint(str(FIXTURES / fixture))
    expected = np.load(FIXTURES / f"reference_{name}_tiny_outputs.npz")
    first_step = {}
    step = Trainer.train_step

    def record_first_step(self):
        if not first_step:
            with jt.no_grad():
                rgb = self.model(jt.array(expected["rays"]), white_bg=bool(expected["white_bg"])).rgb
            first_step.update(
                model=self.model, rgb=rgb.numpy(), lrs=[group["lr"] for group in self.optimizer.param_groups],
                state={key: var.numpy() for key, var in self.model.field.reference_state_dict().items()})
        return step(self)

    monkeypatch.setattr(Trainer, "train_step", record_first_step)
    assert main(finetune_argv(tiny_scene, tmp_path, fixture, *extra)) == 0

    # The first step starts from the checkpoint's tensors, alpha mask and box, with a new Adam at lr_init.
    model = first_step["model"]
    assert model.model_name == original["model_name"]
    assert first_step["state"].keys() == original["state_dict"].keys()
    for key, value in original["state_dict"].items():
        np.testing.assert_array_equal(first_step["state"][key], value, err_msg=key)
    np.testing.assert_array_equal(np.asarray(model.field.aabb), original["kwargs"]["aabb"])
    assert model.alphaMask is not None and model.alphaMask.grid_size == list(original["alphaMask.shape"][::-1][:3])
    assert np.abs(first_step["rgb"] - expected["rgb_map"]).max() <= 1e-4, "renders as the original did"
    assert first_step["lrs"][0] == pytest.approx(0.02) and first_step["lrs"][-1] == pytest.approx(1e-3)

    # It trains: the batch loss falls from where the original left it.
    folder = tmp_path / "finetune"
    rows = progress_rows(folder)
    first, last = float(rows[0]["train_psnr"]), float(rows[-1]["train_psnr"])
    assert int(rows[0]["iteration"]) == 0 and int(rows[-1]["iteration"]) >= N_ITERS - 5
    assert first > 20, f"a trained model starts near its 22-25 dB, not at a fresh model's ~10 dB: {first:.2f}"
    assert last > first + 1.0, [(row["iteration"], row["train_psnr"]) for row in rows]
    assert float(rows[-1]["mse"]) < float(rows[0]["mse"])

    # The result is a checkpoint of ours with the same model and grid, changed tensors, and the run recorded.
    result = read_checkpoint(str(folder / "finetune.th"))
    assert result["model_name"] == original["model_name"]
    assert result["train_args"]["ckpt"] == str(FIXTURES / fixture)
    for key, value in original["state_dict"].items():
        assert result["state_dict"][key].shape == tuple(value.shape)
    changed = [key for key, value in original["state_dict"].items()
               if not np.array_equal(result["state_dict"][key].numpy(), value)]
    assert len(changed) == len(original["state_dict"]), "every tensor trained"
    assert (folder / "finetune_state.th").is_file() and (folder / "imgs_test_all" / "mean.txt").is_file()
