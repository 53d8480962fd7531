"""Every model x shading mode trains, and every reference config starts training on its format."""
import math
import os

import numpy as np
import pytest

import fake_datasets
from tensorf_jt.config import load_run_config
from tensorf_jt.models import MODELS
from tensorf_jt.models.shading import SHADING_MODES
from tensorf_jt.training.run import train
from tensorf_jt.training.trainer import Trainer

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
TINY = ["--n_iters", "3", "--batch_size", "256", "--N_voxel_init", "4096", "--N_voxel_final", "8000",
        "--render_test", "0", "--render_path", "0", "--N_vis", "0", "--progress_refresh_rate", "1"]
# The reference's CP variant, commented at the end of its configs.
CP_VARIANT = ["--model_name", "TensorCP", "--n_lamb_sigma", "96", "--n_lamb_sh", "288",
              "--L1_weight_inital", "1e-5", "--L1_weight_rest", "1e-5"]


@pytest.mark.slow
@pytest.mark.parametrize("model_name", sorted(MODELS))
@pytest.mark.parametrize("shading", SHADING_MODES)
def test_model_and_shading_mode_trains(model_name, shading, tiny_scene, tmp_path):
    app_dim = {"SH": "27", "RGB": "3"}.get(shading, "12")
    config = load_run_config(["--config", os.path.join(CONFIGS, "demo.txt"), "--datadir", tiny_scene,
                       "--basedir", str(tmp_path), "--expname", "breadth", "--model_name", model_name,
                       "--shadingMode", shading, "--data_dim_color", app_dim, "--n_lamb_sigma", "4",
                       "--n_lamb_sh", "8", "--batch_size", "512", "--N_voxel_init", "4096",
                       "--N_voxel_final", "4096", "--N_vis", "0", "--seed", "3", "--density_shift", "-2",
                       "--dataset_name", "blender"])  # reads the shared scene, never regenerates it
    trainer = Trainer(config)
    losses = [float(trainer.train_step().item()) for _ in range(40)]
    assert all(math.isfinite(loss) for loss in losses)
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    assert last < 0.8 * first, f"{model_name}/{shading}: loss {first:.4f} -> {last:.4f}"


def _reference_config_cases():
    return [
        ("lego.txt", None, []),
        ("lego.txt", None, CP_VARIANT),
        ("flower.txt", fake_datasets.make_llff, []),
        ("truck.txt", fake_datasets.make_tankstemple, []),
        ("truck.txt", fake_datasets.make_tankstemple, CP_VARIANT),
        ("wineholder.txt", fake_datasets.make_nsvf, []),
        ("wineholder.txt", fake_datasets.make_nsvf, CP_VARIANT),
        ("your_own_data.txt", fake_datasets.make_own_data, []),
        ("your_own_data.txt", fake_datasets.make_own_data, CP_VARIANT),
        ("your_own_360.txt", fake_datasets.make_own_data, []),
    ]


@pytest.mark.slow
@pytest.mark.parametrize("config, make_dataset, variant", _reference_config_cases(),
                         ids=lambda value: getattr(value, "__name__", None) if callable(value) else None)
def test_reference_config_starts_training_on_its_format(config, make_dataset, variant, tiny_scene, tmp_path):
    datadir = tiny_scene if make_dataset is None else make_dataset(str(tmp_path / "data"))
    config = load_run_config(["--config", os.path.join(CONFIGS, config), "--datadir", datadir,
                            "--basedir", str(tmp_path / "log"), *TINY, *variant])
    result = train(config)
    assert result.iterations == 3 and math.isfinite(result.final_train_psnr)
    assert os.path.isfile(result.checkpoint)
    if variant:
        assert config.model.model_name == "TensorCP" and config.model.n_lamb_sh == (288,)
