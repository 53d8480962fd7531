"""Bad input to the CLIs ends with exit status 2 and a message naming the problem, no traceback."""
import json
import os
import shutil
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import jittor as jt

from conftest import run_python
from fake_datasets import make_llff
from model_factory import tiny_model
from test_resume import tiny_argv

from tensorf_jt.formats.checkpoint import save_checkpoint
from tensorf_jt.cli.render import main as render_main
from tensorf_jt.cli.train import main as train_main
from tensorf_jt.dataLoader import BlenderDataset, LLFFDataset


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
def test_train_rejects_bad_input(tmp_path, tiny_scene, capsys, argv, fragments):
    """In a process of its own where the parser itself refuses (it exits the process) and for the
    first case; in this process otherwise (the same exit status and message, without the
    interpreter's start-up)."""
    (tmp_path / "unknown.txt").write_text("expname = x\nlearning_speed = 3\n")
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{scene}", tiny_scene) for a in argv]
    if argv[1].startswith(str(tmp_path)) or "/nonexistent/" in " ".join(argv):
        assert_clean_failure(run_python(["train.py", *argv], timeout=300), *fragments)
        return
    status, err = run_main(train_main, argv, capsys)
    assert status == 2 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err


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
    assert "Warning" not in result.stderr, result.stderr[-3000:]  # e.g. numpy's about subnormals (bootstrap.py)
    assert (tmp_path / "tensorf_lego_VM" / "tensorf_lego_VM.th").is_file()
    assert (tmp_path / "tensorf_lego_VM" / "imgs_test_all" / "mean.txt").is_file()


# ----------------------------------------------------------------------------------------------
# The rest of the bad-input table (docs/ERRORS.md), run in-process: the same exit status and
# message as the commands above, without a new interpreter per case.
def run_main(cli_main, argv, capsys) -> tuple[int, str]:
    status = cli_main([str(a) for a in argv])
    return status, capsys.readouterr().err


def broken_copy(tiny_scene, tmp_path, damage) -> str:
    """A copy of the tiny scene with ``damage(folder)`` applied."""
    folder = tmp_path / "broken"
    shutil.copytree(tiny_scene, folder)
    damage(folder)
    return str(folder)


def drop_key(folder):
    meta = json.loads((folder / "transforms_train.json").read_text())
    del meta["camera_angle_x"]
    (folder / "transforms_train.json").write_text(json.dumps(meta))


def name_missing_image(folder):
    meta = json.loads((folder / "transforms_train.json").read_text())
    meta["frames"][2]["file_path"] = "./train/gone"
    (folder / "transforms_train.json").write_text(json.dumps(meta))


def shrink_one_image(folder):
    path = folder / json.loads((folder / "transforms_train.json").read_text())["frames"][1]["file_path"]
    path = path.with_suffix(".png")
    iio.imwrite(path, iio.imread(path)[:20, :20])


@pytest.mark.parametrize("damage, fragments", [
    (lambda f: (f / "transforms_train.json").write_text("{ not json"), ["transforms_train.json' is not valid JSON"]),
    (drop_key, ["transforms_train.json' lacks the key 'camera_angle_x'"]),
    (name_missing_image, ["gone.png' listed in the transforms file does not exist"]),
    (shrink_one_image, ["is 20x20 but", "all images of a scene must have the same size"]),
])
def test_train_rejects_broken_blender_scenes(tiny_scene, tmp_path, capsys, damage, fragments):
    scene = broken_copy(tiny_scene, tmp_path, damage)
    status, error = run_main(train_main, tiny_argv(scene, tmp_path / "log"), capsys)
    assert status == 2 and all(fragment in error for fragment in fragments), error


@pytest.mark.parametrize("extra, fragment", [
    (["--shadingMode", "Phong"], "shadingMode 'Phong' is not supported"),
    (["--n_iters", "0"], "n_iters must be positive, got 0"),
    (["--n_iters", "-5"], "n_iters must be positive, got -5"),
    (["--batch_size", "-1"], "batch_size must be positive, got -1"),
    (["--save_every", "-1"], "save_every must be 0 (save only at the end) or positive"),
    (["--gc_every", "-1"], "gc_every must be 0 (never) or positive, got -1."),
    (["--gc_growth", "1"], "gc_growth must be 0 (off) or above 1, got 1.0."),
    (["--gc_growth", "-2"], "gc_growth must be 0 (off) or above 1, got -2.0."),
    (["--resume", "{tmp}/nothing_state.th"], "nothing_state.th' does not exist"),
    (["--resume", "{ckpt}"], "is a model checkpoint, not a training state"),
    (["--resume", "auto", "--ckpt", "{ckpt}"], "--resume continues a saved run: give only one"),
])
def test_train_rejects_bad_flags(tiny_scene, tmp_path, capsys, extra, fragment):
    checkpoint = save_checkpoint(tiny_model(), str(tmp_path / "model.th"))
    extra = [a.replace("{tmp}", str(tmp_path)).replace("{ckpt}", checkpoint) for a in extra]
    status, error = run_main(train_main, tiny_argv(tiny_scene, tmp_path / "log", *extra), capsys)
    assert status == 2 and fragment in error, error


def test_render_rejects_damaged_checkpoints_of_our_format(tmp_path, capsys):
    good = save_checkpoint(tiny_model(), str(tmp_path / "good.th"))
    data = open(good, "rb").read()
    (tmp_path / "truncated.th").write_bytes(data[:len(data) // 2])
    (tmp_path / "empty.th").write_bytes(b"")
    jt.save({"weights": [1, 2, 3]}, str(tmp_path / "foreign.th"))
    for name, fragment in (("truncated", "is corrupted"), ("empty", "is corrupted"),
                           ("foreign", "is not a TensoRF checkpoint")):
        status, error = run_main(render_main, ["--ckpt", tmp_path / f"{name}.th"], capsys)
        assert status == 2 and fragment in error, (name, error)


def test_a_checkpoint_renders_as_the_model_it_records_whatever_model_name_says(tiny_scene, tmp_path, capsys):
    """The reference's issue #11: a TensorCP checkpoint with --model_name TensorVMSplit. The
    checkpoint names its model, so it just works (and a resumed run refuses another model_name:
    tests/test_resume.py)."""
    model = tiny_model((8, 8, 8), model_name="TensorCP", density_n_comp=[4], appearance_n_comp=[6], step_ratio=2.0)
    checkpoint = save_checkpoint(model, str(tmp_path / "cp.th"),
                                 train_args={"dataset_name": "blender", "datadir": tiny_scene})
    status = render_main(["--ckpt", checkpoint, "--model_name", "TensorVMSplit"])
    assert status == 0 and "test: 2 views, PSNR" in capsys.readouterr().out


def test_rgb_and_rgba_images_are_accepted_where_the_other_is_expected(tiny_scene, tmp_path):
    """Decision: a blender scene whose PNGs have no alpha channel is accepted with every pixel
    opaque (its colours are used as they are); an LLFF scene whose images have one keeps their
    colours and ignores the alpha, as the reference's RGB conversion does."""
    def drop_alpha(folder):
        for path in (folder / "train").glob("*.png"):
            iio.imwrite(path, iio.imread(path)[..., :3])

    scene = broken_copy(tiny_scene, tmp_path, drop_alpha)
    rgb_only = BlenderDataset(scene, "train")
    first = iio.imread(os.path.join(scene, "train", "r_0.png")).reshape(-1, 3) / 255.0
    np.testing.assert_allclose(rgb_only.all_rgbs[:first.shape[0]], first, atol=1e-6)

    llff = make_llff(str(tmp_path / "llff"))
    images = sorted((Path(llff) / "images_4").glob("*.png"))
    colours = [iio.imread(path) for path in images]
    for path, rgb in zip(images, colours):
        transparent = np.zeros(rgb.shape[:2] + (1,), np.uint8)
        iio.imwrite(path, np.concatenate([rgb, transparent], axis=-1))
    with_alpha = LLFFDataset(llff, "test", downsample=4.0)
    np.testing.assert_allclose(with_alpha.all_rgbs.reshape(-1, 3),
                               np.concatenate([colours[i].reshape(-1, 3) for i in with_alpha.image_ids]) / 255.0,
                               atol=1e-6)
