"""The trainer's schedule events leave every tensor training with the trainer's own optimizer."""
import numpy as np

from tensorf_jt.config import load_run_config
from tensorf_jt.training.trainer import Trainer


def make_trainer(tiny_scene, tmp_path, *extra):
    return Trainer(load_run_config([
        "--config", "configs/demo.txt", "--dataset_name", "blender", "--datadir", tiny_scene,
        "--basedir", str(tmp_path), "--expname", "events", "--batch_size", "256",
        "--N_voxel_init", "4096", "--N_voxel_final", "32768", "--upsamp_list", "5",
        "--update_AlphaMask_list", "3", "--update_AlphaMask_list", "7", "--density_shift", "-2", *extra]))


def assert_step_updates_everything(trainer):
    before = {name: var.numpy().copy() for name, var in trainer.model.field.state_dict().items()}
    trainer.train_step()
    frozen = [name for name, var in trainer.model.field.state_dict().items()
              if np.array_equal(var.numpy(), before[name])]
    assert not frozen, f"not updated by the trainer's optimizer: {frozen}"


def test_events_keep_all_tensors_training(tiny_scene, tmp_path):
    trainer = make_trainer(tiny_scene, tmp_path)
    lr_before = trainer.optimizer.param_groups[0]["lr"]
    for _ in range(3):
        trainer.train_step()
    trainer.update_alpha_mask(3)  # the first mask update also shrinks
    assert any("shrink" in event for _, event in trainer.progress.events), trainer.progress.events
    assert np.isclose(trainer.optimizer.param_groups[0]["lr"], lr_before * trainer.policy.lr_factor ** 3), \
        "restarting the optimizer after a shrink keeps the decayed learning rate"
    assert_step_updates_everything(trainer)
    trainer.upsample(5)
    assert np.isclose(trainer.optimizer.param_groups[0]["lr"], lr_before), "upsampling resets the lr"
    assert_step_updates_everything(trainer)
    n_rays = trainer.ray_batches.n_rays
    trainer.update_alpha_mask(7)  # the second one filters the training rays
    assert trainer.ray_batches.n_rays <= n_rays
    assert_step_updates_everything(trainer)
