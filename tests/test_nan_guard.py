"""Training failures: non-finite losses and parameters, running out of memory, inputs left empty."""
import csv

import numpy as np
import pytest
import jittor as jt

from model_factory import tiny_model
from test_resume import tiny_argv

from tensorf_jt.dataLoader.ray_batches import ArrayRays
from tensorf_jt.formats.checkpoint import save_checkpoint
from tensorf_jt.cli.render import main as render_main
from tensorf_jt.cli.train import main
from tensorf_jt.config import load_run_config
from tensorf_jt.evaluation.renders import render_rays
from tensorf_jt.training.nan_guard import nonfinite_parameters
from tensorf_jt.training.ray_filtering import filtering_ray_ids
from tensorf_jt.models import TensoRFModel
from tensorf_jt.training.trainer import Trainer


def inject_nan_after_steps(monkeypatch, plan: list[tuple[int, str]]) -> None:
    """Fill density_plane.0 with NaN right after the step of the plan's next iteration, one plan
    entry at a time (a replayed iteration can come up again); for "loss", also report the
    step's loss as NaN."""
    step = Trainer.train_step
    pending = list(plan)

    def step_then_corrupt(self):
        mse = step(self)
        if pending and self.iteration == pending[0][0]:
            parameter = self.model.field.density_plane[0]
            parameter.update(jt.full_like(parameter, float("nan")))
            return jt.array([float("nan")]) if pending.pop(0)[1] == "loss" else mse
        return mse

    monkeypatch.setattr(Trainer, "train_step", step_then_corrupt)


def test_nonfinite_values_send_training_back_with_halved_learning_rates(tiny_scene, tmp_path, monkeypatch):
    # A NaN in a parameter need not reach the loss (Jittor's ReLU and the fused kernels'
    # comparisons turn NaN into zeros or skipped samples): the parameter check at the snapshot
    # after step 4 finds it and goes back to 0. A NaN loss at step 8, found when the losses are
    # read after step 9, goes back to 5; so does the one at step 7 in the replay, from the same
    # snapshot, which must still hold good values. Each time the learning rates are halved.
    inject_nan_after_steps(monkeypatch, [(4, "parameters"), (8, "loss"), (7, "loss")])
    trainer = Trainer(load_run_config(tiny_argv(tiny_scene, tmp_path, "--n_iters", "14", "--render_test", "0")))
    with pytest.warns(UserWarning) as warned:
        result = trainer.run()
    messages = [str(w.message) for w in warned if "learning rates" in str(w.message)]
    assert len(messages) == 3, messages
    assert messages[0].startswith("parameters density_plane.0 are not finite at iteration 4: back to iteration 0, "
                                  "learning rates x0.5")
    assert messages[1].startswith("the loss is nan at iteration 8: back to iteration 5, learning rates x0.25")
    assert messages[2].startswith("the loss is nan at iteration 7: back to iteration 5, learning rates x0.125")
    assert result.iterations == 14 and trainer.schedule_state.lr_scale == 0.125
    assert nonfinite_parameters(trainer.model) == []
    # The upsample at iteration 10 restarted Adam at lr_init times the guard's scale; 3 steps decayed it since.
    expected_lr = trainer.config.schedule.lr_init * 0.125 * trainer.policy.lr_factor ** 3
    assert np.isclose(trainer.optimizer.param_groups[0]["lr"], expected_lr)
    with open(tmp_path / "run" / "train_log.csv", newline="") as handle:
        events = [row["event"] for row in csv.DictReader(handle) if row["event"].startswith("non-finite")]
    assert len(events) == 3


def test_a_loss_that_stays_nonfinite_stops_with_advice(tiny_scene, tmp_path, monkeypatch, capsys):
    execute = TensoRFModel.execute

    def nan_colours(self, *args, **kwargs):
        output = execute(self, *args, **kwargs)
        output.rgb = output.rgb * float("nan")
        return output

    monkeypatch.setattr(TensoRFModel, "execute", nan_colours)
    with pytest.warns(UserWarning, match="back to iteration 0"):
        assert main(tiny_argv(tiny_scene, tmp_path)) == 2
    error = capsys.readouterr().err
    assert "Training diverged: the loss is nan at iteration 0, 3 times in a row" in error
    assert "--lr_init (now 0.02)" in error and "--batch_size (now 256)" in error and "Traceback" not in error


JITTOR_CUDA_OOM = ("[f 1129 22:10:41.000000 00 cuda_device_allocator.cc:31] Unable to alloc cuda device memory "
                   "for size 17179869184\n(the rest of Jittor's report)")


def test_out_of_memory_names_the_flags_that_need_less(tiny_scene, tmp_path, monkeypatch, capsys):
    def out_of_memory(*args, **kwargs):
        raise RuntimeError(JITTOR_CUDA_OOM)

    monkeypatch.setattr(Trainer, "train_step", out_of_memory)
    assert main(tiny_argv(tiny_scene, tmp_path)) == 2
    error = capsys.readouterr().err
    assert "memory while training (iteration 0) ([f 1129" in error and "Unable to alloc cuda device memory" in error
    for flag in ("--batch_size (rays per training step, now 256)", "--chunk_size", "--N_voxel_final (the final"):
        assert flag in error

    checkpoint = save_checkpoint(tiny_model(), str(tmp_path / "m.th"),
                                 train_args={"dataset_name": "blender", "datadir": tiny_scene})
    monkeypatch.setattr("tensorf_jt.evaluation.renders.evaluate", out_of_memory)
    assert main(["--render_only", "1", "--render_test", "1", "--ckpt", checkpoint]) == 2
    assert "memory while rendering" in capsys.readouterr().err
    assert render_main(["--ckpt", checkpoint]) == 2
    assert "memory while rendering" in capsys.readouterr().err

    def other_failure(*args, **kwargs):
        raise RuntimeError("some other Jittor error")

    monkeypatch.setattr(Trainer, "train_step", other_failure)
    with pytest.raises(RuntimeError, match="some other Jittor error"):
        main(tiny_argv(tiny_scene, tmp_path))


def test_inputs_that_end_up_empty_warn_or_give_empty_results():
    model = tiny_model()
    missing = np.tile(np.array([[0, 0, 10, 1, 0, 0]], np.float32), (8, 1))  # parallel to the box, above it
    with pytest.warns(UserWarning, match="would remove every training ray; keeping them all"):
        kept = filtering_ray_ids(model, ArrayRays(missing, missing[:, :3]), bbox_only=True)
    assert kept.tolist() == list(range(8))
    rgb, depth = render_rays(model, np.zeros((0, 6), np.float32), chunk=4)
    assert rgb.shape == (0, 3) and depth.shape == (0,)


def test_the_finiteness_check_compiles_no_operator(tmp_path):
    """Jittor builds ``jt.isfinite`` through a Python hook that its parallel compiler calls from
    several threads without the GIL (a segfault at every run's first check on a GPU). The check
    must not need any compiled operator: with a compiler that always fails, it still works."""
    failing = tmp_path / "failing_compiler.sh"
    failing.write_text("#!/bin/sh\nexit 1\n")
    failing.chmod(0o755)
    model = tiny_model()
    with jt.no_grad():
        model.field.density_line[1].assign(jt.full(model.field.density_line[1].shape, float("inf")))
    jt.sync_all(True)
    flags = (jt.flags.cc_path, jt.flags.cc_flags)
    try:
        jt.flags.cc_flags = flags[1] + f" -DTENSORF_JT_TEST_NONCE={np.random.randint(1 << 30)} "
        jt.flags.cc_path = str(failing)
        assert nonfinite_parameters(model) == ["density_line.1"]
    finally:
        jt.flags.cc_path, jt.flags.cc_flags = flags
