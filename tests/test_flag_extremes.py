"""Whatever train.py accepts, render.py reads back: training at each bounded flag's extreme values.

The bounds are the configuration's (tensorf_jt/config/limits.py), which the flag parser and the
checkpoint readers both enforce; a run at a bound must write a checkpoint that renders. Bounds too large to
train in a test (a 65536-wide MLP layer, 2^31 voxels) are trained at the largest size that fits.
"""
import math
import os

import pytest

from tensorf_jt.cli.render import main as render_main
from tensorf_jt.cli.train import main as train_main
from tensorf_jt.config import limits

TINY = ["--config", "configs/demo.txt", "--dataset_name", "blender", "--n_iters", "3", "--batch_size", "64",
        "--N_voxel_init", "4096", "--N_voxel_final", "8000", "--upsamp_list", "1", "--update_AlphaMask_list", "2",
        "--render_test", "0", "--render_path", "0", "--N_vis", "0", "--tensorboard", "0"]

EXTREMES = {
    "smallest": ["--featureC", "1", "--data_dim_color", "1", "--n_lamb_sigma", "1", "--n_lamb_sh", "1",
                 "--pos_pe", "0", "--view_pe", "0", "--fea_pe", "0", "--N_voxel_init", "1", "--N_voxel_final", "1",
                 "--importance_samples", "0"],
    "encodings": [f"--{name}={limits.MAX_ENCODING_FREQUENCIES}" for name in ("pos_pe", "view_pe", "fea_pe")],
    "importance_samples": ["--unbounded", "1", f"--importance_samples={limits.MAX_IMPORTANCE_SAMPLES}"],
    "components": [f"--n_lamb_sigma={limits.MAX_COMPONENTS}", f"--n_lamb_sh={limits.MAX_COMPONENTS}"],
    "width": [f"--data_dim_color={limits.MAX_WIDTH}", "--view_pe", "0", "--fea_pe", "0"],
}
HEAVY = {"components", "width"}  # about half a minute each on two cores


@pytest.mark.parametrize("case", [pytest.param(name, marks=pytest.mark.slow) if name in HEAVY else name
                                  for name in EXTREMES])
def test_a_run_at_the_bounds_renders(case, tiny_scene, tmp_path, capsys):
    assert train_main([*TINY, "--datadir", tiny_scene, "--basedir", str(tmp_path), "--expname", case,
                       *EXTREMES[case]]) == 0
    checkpoint = tmp_path / case / f"{case}.th"
    assert render_main(["--ckpt", str(checkpoint), "--datadir", tiny_scene]) == 0
    renders = tmp_path / case / "imgs_test_all"
    assert sorted(path.name for path in renders.glob("*.png")) == ["000.png", "001.png"]
    assert math.isfinite(float((renders / "mean.txt").read_text().split()[0]))  # three steps: PSNR barely above 2
    assert "Traceback" not in capsys.readouterr().err


def test_flags_past_the_bounds_are_refused_before_training(tiny_scene, tmp_path, capsys):
    for flag, value, message in (("importance_samples", limits.MAX_IMPORTANCE_SAMPLES + 1, "must be between"),
                                 ("fea_pe", -1, "must be between"), ("featureC", 0, "must be positive"),
                                 ("n_lamb_sh", limits.MAX_COMPONENTS + 1, "must be between")):
        assert train_main([*TINY, "--datadir", tiny_scene, "--basedir", str(tmp_path), f"--{flag}={value}"]) == 2
        assert f"{flag} {message}" in capsys.readouterr().err
    assert not os.listdir(tmp_path)
