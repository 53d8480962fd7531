"""Per-view appearance codes and pose corrections (tensorf_jt/models/view_corrections.py): the
rotation against numpy, what the model does with and without view numbers, gradients on both
kernel paths, training, checkpoints, export and the refusals."""
import json

import numpy as np
import pytest
import jittor as jt

from model_factory import rays_towards_box, tiny_model
from test_resume import tiny_argv
from tensorf_jt.cli.train import main as train_main
from tensorf_jt.config import load_run_config, parse_run_config
from tensorf_jt.dataLoader import RayBatchDataset
from tensorf_jt.dataLoader.ray_batches import ArrayRays
from tensorf_jt.errors import CheckpointError, ConfigError
from tensorf_jt.formats.checkpoint import load_checkpoint, save_checkpoint
from tensorf_jt.formats.checkpoint_checks import check_model_kwargs
from tensorf_jt.formats.reference_checkpoint import to_reference
from tensorf_jt.models.view_corrections import rotate
from tensorf_jt.training.trainer import Trainer


def numpy_rotation(axis_angle: np.ndarray) -> np.ndarray:
    """Rotation matrix of an axis-angle vector: the exponential of its skew matrix, by series."""
    skew = np.array([[0, -axis_angle[2], axis_angle[1]], [axis_angle[2], 0, -axis_angle[0]],
                     [-axis_angle[1], axis_angle[0], 0]], dtype=np.float64)
    result, term = np.eye(3), np.eye(3)
    for k in range(1, 30):
        term = term @ skew / k
        result = result + term
    return result


def corrected_model(**overrides):
    settings = dict(density_shift=0.0, appearance_dim=4, refine_poses=True, n_views=3)
    settings.update(overrides)
    return tiny_model(**settings)


# ------------------------------------------------------------------ formulas
def test_rotation_matches_the_matrix_exponential():
    rng = np.random.default_rng(3)
    angles = np.concatenate([rng.normal(size=(40, 3)), rng.normal(size=(40, 3)) * 1e-3, np.zeros((1, 3))])
    vectors = rng.normal(size=(angles.shape[0], 3))
    got = rotate(jt.array(angles.astype(np.float32)), jt.array(vectors.astype(np.float32))).numpy()
    expected = np.stack([numpy_rotation(w) @ v for w, v in zip(angles, vectors)])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=2e-6)


def test_rotation_gradient_at_zero_is_the_cross_product():
    """d(R(w) v)/dw at w = 0 is -[v]x: finite, and the small-angle branch gives it exactly."""
    w = jt.zeros((1, 3), dtype="float32")
    v = np.array([[0.3, -1.2, 0.5]], np.float32)
    gradient = jt.grad(rotate(w, jt.array(v))[:, 0].sum(), w).numpy()
    np.testing.assert_allclose(gradient, [[0.0, v[0, 2], -v[0, 1]]], atol=1e-7)


# ------------------------------------------------------------------ the model
def test_views_without_a_number_use_the_mean_code_and_their_poses():
    model = corrected_model()
    model.appearance.codes.update(jt.array(np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)))
    model.pose_corrections.translation.update(jt.array(np.full((3, 3), 0.2, np.float32)))
    rays = jt.array(rays_towards_box(128, seed=1))
    mean = model.appearance.codes.numpy().mean(0)
    np.testing.assert_allclose(model.appearance(None, 5).numpy(), np.tile(mean, (5, 1)), rtol=1e-6)
    with jt.no_grad():
        plain = model(rays)[0].numpy()
        model.appearance.codes.update(jt.array(np.tile(mean, (3, 1)).astype(np.float32)))
        model.pose_corrections.translation.update(jt.zeros((3, 3)))
        numbered = model(rays, view_ids=jt.array(np.arange(128) % 3).int32())[0].numpy()
    np.testing.assert_allclose(numbered, plain, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kernels", ["fused", "reference"])
def test_zero_pose_corrections_change_nothing(kernels):
    model = corrected_model(appearance_dim=0, kernels=kernels)
    rays = jt.array(rays_towards_box(256, seed=2))
    with jt.no_grad():
        given = model(rays)[0].numpy()
        corrected = model(rays, view_ids=jt.array(np.arange(256) % 3).int32())[0].numpy()
    np.testing.assert_allclose(corrected, given, rtol=1e-5, atol=1e-6)


def test_corrections_get_the_same_gradients_on_both_kernel_paths():
    """The fused path marches without gradients, so it recomputes positions from the corrected
    rays and looks the grids up in Jittor: its gradients must be the reference path's."""
    model = corrected_model()
    rng = np.random.default_rng(4)
    model.pose_corrections.rotation.update(jt.array((rng.normal(size=(3, 3)) * 0.01).astype(np.float32)))
    model.appearance.codes.update(jt.array((rng.normal(size=(3, 4)) * 0.1).astype(np.float32)))
    rays = jt.array(rays_towards_box(256, seed=5))
    views = jt.array(np.arange(256) % 3).int32()
    params = [model.appearance.codes, model.pose_corrections.rotation, model.pose_corrections.translation]
    gradients = {}
    for kernels in ("fused", "reference"):
        model.kernels = kernels
        rgb, depth = model(rays, view_ids=views)
        gradients[kernels] = [g.numpy() for g in jt.grad(jt.sqr(rgb - 0.3).sum() + 0.01 * depth.sum(), params)]
    # Position gradients are sums over many samples that largely cancel; the two paths' compositing
    # backward passes round differently (measured: within 1.2% of the largest entry).
    for fused, reference in zip(gradients["fused"], gradients["reference"]):
        assert np.abs(reference).max() > 0
        np.testing.assert_allclose(fused, reference, rtol=0, atol=0.03 * np.abs(reference).max())
    assert model.fused_lookups is False and model.renderModule.fused is False  # reference kernels were set last
    model.kernels = "fused"
    assert model.fused_lookups and model.renderModule.fused, "fused lookups return after a corrected render"


def test_batches_carry_view_numbers_when_asked():
    rays = np.arange(60 * 6, dtype=np.float32).reshape(60, 6)
    views = np.repeat(np.arange(6), 10)
    rays_batch, rgbs_batch, view_batch = next(iter(RayBatchDataset(ArrayRays(rays, rays[:, :3], views), 20,
                                                                   seed=1, with_views=True)))
    np.testing.assert_array_equal(view_batch.numpy(), rays_batch.numpy()[:, 0].astype(int) // 60)
    assert len(next(iter(RayBatchDataset(ArrayRays(rays, rays[:, :3]), 20, seed=1)))) == 2


# --------------------------------------------------------- training and files
def test_training_learns_codes_and_poses_and_saves_them(tiny_scene, tmp_path):
    argv = tiny_argv(tiny_scene, tmp_path, "--n_iters", "30", "--appearance_dim", "3", "--refine_poses", "1")
    train_main(argv)
    checkpoint = tmp_path / "run" / "run.th"
    model, _ = load_checkpoint(str(checkpoint))
    assert (model.appearance_dim, model.refine_poses, model.n_views) == (3, True, 6)
    codes = model.appearance.codes.numpy()
    assert np.abs(codes).max() > 0 and np.abs(codes - codes.mean(0)).max() > 0, "codes trained, per view"
    assert np.abs(model.pose_corrections.rotation.numpy()).max() > 0
    # Test views render with the mean code at their given poses; measured on these settings:
    # 8.83 dB without corrections, 9.06 with codes, 8.84 with pose corrections (30 iterations).
    assert json.loads((tmp_path / "run" / "imgs_test_all" / "metrics.json").read_text())["psnr"] > 8.0

    with pytest.raises(CheckpointError, match="appearance codes cannot be exported"):
        to_reference(model)


def test_export_leaves_pose_corrections_out():
    exported = to_reference(corrected_model(appearance_dim=0))
    assert set(exported["state_dict"]) == set(tiny_model().state_dict())
    assert not any(name.startswith("pose_corrections.") for name in exported["state_dict"])
    assert "n_views" not in exported["kwargs"] and "refine_poses" not in exported["kwargs"]


def test_bad_settings_are_refused(tiny_scene, tmp_path):
    with pytest.raises(ConfigError, match="MLP shader"):
        tiny_model(shadingMode="SH", app_dim=27, appearance_dim=4, n_views=2)
    with pytest.raises(ConfigError, match="need n_views"):
        tiny_model(refine_poses=True)
    base = ["--datadir", tiny_scene, "--basedir", str(tmp_path)]
    with pytest.raises(ConfigError, match="appearance_dim must be 0"):
        parse_run_config(base + ["--appearance_dim", "-2"])
    with pytest.raises(ConfigError, match="refine_poses must be 0"):
        parse_run_config(base + ["--refine_poses", "2"])
    with pytest.raises(ConfigError, match="set refine_poses = 0 for a forward-facing NDC scene"):
        parse_run_config(base + ["--refine_poses", "1", "--ndc_ray", "1"])
    kwargs = corrected_model().get_kwargs()
    with pytest.raises(CheckpointError, match=r"refine_poses should be True or False, found 'yes'"):
        check_model_kwargs(dict(kwargs, refine_poses="yes"), "f.th")
    with pytest.raises(CheckpointError, match=r"n_views"):
        check_model_kwargs(dict(kwargs, n_views=-1), "f.th")


def test_a_checkpoint_for_other_views_is_refused(tiny_scene, tmp_path):
    model = corrected_model(n_views=5)
    path = save_checkpoint(model, str(tmp_path / "five.th"))
    config = load_run_config(tiny_argv(tiny_scene, tmp_path, "--ckpt", path, "--appearance_dim", "4"))
    with pytest.raises(ConfigError, match="corrections for 5 training views, but this dataset has 6"):
        Trainer(config)
