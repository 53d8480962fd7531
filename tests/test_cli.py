"""Bad input to the CLIs ends with exit status 2 and a message naming the problem, no traceback."""
import pytest

from conftest import run_python


def assert_clean_failure(result, *fragments):
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize("argv, fragments", [
    (["--config", "configs/lego.txt", "--datadir", "/nonexistent/lego", "--basedir", "{tmp}"],
     ["/nonexistent/lego/transforms_train.json' not found", "does not exist"]),
    (["--config", "configs/lego.txt", "--N_voxel_final", "1000"], ["N_voxel_final (1000) must not be smaller"]),
    (["--config", "configs/lego.txt", "--batch_size", "0"], ["batch_size must be positive"]),
    (["--config", "configs/lego.txt", "--dataset_name", "colmap"], ["dataset_name 'colmap' is not supported"]),
    (["--config", "configs/lego.txt", "--model_name", "TensorXY"], ["model_name 'TensorXY' is not supported"]),
    (["--config", "{tmp}/unknown.txt"], ["every key must be one of the flags"]),
    (["--config", "{tmp}/no_such_config.txt"], ["no_such_config.txt"]),
    (["--config", "configs/lego.txt", "--lindisp"], ["lindisp = True has no effect", "disparity"]),
    (["--config", "configs/lego.txt", "--idx_view", "3"], ["idx_view = 3 has no effect", "Remove it"]),
    (["--config", "configs/lego.txt", "--perturb", "0.5"], ["perturb must be 0 (no jitter) or 1"]),
    (["--config", "configs/lego.txt", "--downsample_test", "0"], ["downsample_train and downsample_test must be"]),
    (["--config", "configs/lego.txt", "--model_name", "TensorVM", "--n_lamb_sigma", "16", "--n_lamb_sigma", "4",
      "--n_lamb_sigma", "4", "--datadir", "{scene}", "--basedir", "{tmp}"], ["n_lamb_sigma needs the same count"]),
    (["--config", "configs/lego.txt", "--vis_every", "0"], ["vis_every must be positive"]),
    (["--config", "configs/lego.txt", "--render_only", "1", "--render_test", "0"], ["renders nothing"]),
])
def test_train_rejects_bad_input(tmp_path, tiny_scene, argv, fragments):
    (tmp_path / "unknown.txt").write_text("expname = x\nlearning_speed = 3\n")
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{scene}", tiny_scene) for a in argv]
    assert_clean_failure(run_python(["train.py", *argv], timeout=300), *fragments)


def test_render_rejects_missing_and_corrupt_checkpoints(tmp_path):
    assert_clean_failure(run_python(["render.py", "--ckpt", str(tmp_path / "none.th")]), "does not exist")
    (tmp_path / "junk.th").write_bytes(b"\x00" * 64)
    assert_clean_failure(run_python(["render.py", "--ckpt", str(tmp_path / "junk.th")]), "corrupted")


def test_unwritable_basedir_is_reported(tiny_scene, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_python(["train.py", "--config", "configs/lego.txt", "--datadir", tiny_scene,
                         "--basedir", str(blocker / "sub"), "--n_iters", "1"], timeout=300)
    assert_clean_failure(result, "Cannot create the log folder", "writable --basedir")


@pytest.mark.slow
def test_reference_lego_config_trains_on_a_blender_folder(tiny_scene, tmp_path):
    """configs/lego.txt unchanged but for the data folder and a few iterations."""
    result = run_python(["train.py", "--config", "configs/lego.txt", "--datadir", tiny_scene,
                         "--basedir", str(tmp_path), "--n_iters", "3", "--batch_size", "256"], timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "test: PSNR" in result.stdout
    assert (tmp_path / "tensorf_lego_VM" / "tensorf_lego_VM.th").is_file()
    assert (tmp_path / "tensorf_lego_VM" / "imgs_test_all" / "mean.txt").is_file()
