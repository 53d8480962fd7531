"""A trained checkpoint exported as splats: the command's defaults, its output read back, the test
views of the splats scored within a stated margin of the checkpoint's own, by our rasteriser
and by the independent numpy renderer; a checkpoint with nothing opaque and outputs it must not
replace are refused."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

import splat_numpy
from model_factory import tiny_model

from tensorf_jt.cli.export_splats import default_out, main as export_main
from tensorf_jt.cli.render import main as render_main
from tensorf_jt.dataLoader import BlenderDataset
from tensorf_jt.formats.checkpoint import save_checkpoint
from tensorf_jt.formats.gaussian_ply import read_splats
from tensorf_jt.splats.camera import dataset_cameras

# Measured here (the tiny demo, 32x32, 16 views, 300 iterations; its checkpoint 26.87 dB on the
# test views): its splats after 600 refinement steps 25.96 dB. The margin leaves room for
# another CPU's rounding of both trainings.
EXPORT_ITERATIONS = 600
MARGIN_DB = 2.0


@pytest.fixture(scope="module")
def exported(tiny_demo_run, tmp_path_factory):
    """(folder, checkpoint, splat file, the export's printed line) of the tiny demo's splats."""
    folder = tmp_path_factory.mktemp("splats")
    ckpt = folder / "tiny.th"
    shutil.copy(tiny_demo_run[1].checkpoint, ckpt)
    assert export_main(["--ckpt", str(ckpt), "--iterations", str(EXPORT_ITERATIONS)]) == 0
    return folder, ckpt, default_out(str(ckpt))


def scene_of(folder) -> str:
    return str(folder / "scene")


@pytest.mark.slow
def test_splats_score_near_their_checkpoint(exported, tiny_demo_run, capsys):
    folder, ckpt, splat_path = exported
    assert splat_path == str(folder / "tiny_splats.ply") and os.path.isfile(splat_path)
    splats = read_splats(splat_path)
    assert splats.sh_degree == 3 and 100 < splats.count
    scene = scene_of(tiny_demo_run[0])
    checkpoint_psnr = tiny_demo_run[1].test_metrics["psnr"]
    assert render_main(["--splats", splat_path, "--datadir", scene, "--dataset_name", "demo",
                        "--demo_image_size", "32", "--demo_n_train", "16", "--demo_n_test", "2"]) == 0
    metrics = json.load(open(folder / "imgs_test_tiny_splats" / "metrics.json"))
    print(f"checkpoint {checkpoint_psnr:.2f} dB, splats {metrics['psnr']:.2f} dB")
    assert metrics["psnr"] > checkpoint_psnr - MARGIN_DB, (metrics["psnr"], checkpoint_psnr)
    assert {"ssim", "depth_abs_error"} <= set(metrics)


@pytest.mark.slow
def test_an_independent_renderer_sees_what_ours_sees(exported, tiny_demo_run):
    """The file, rendered at a test camera by the numpy renderer (reference conventions, white
    background), against the PNG our rasteriser wrote: 8-bit rounding apart, the same image."""
    import imageio.v3 as iio

    folder, _, splat_path = exported
    test = BlenderDataset(scene_of(tiny_demo_run[0]), "test", is_stack=True)
    camera = dataset_cameras(test)[0]
    window = (8, 24, 8, 24)  # the middle, where the objects are
    image, _, _ = splat_numpy.render(read_splats(splat_path), camera, np.ones(3), window)
    ours = iio.imread(folder / "imgs_test_tiny_splats" / "000.png").astype(np.float64) / 255.0
    rows, cols = slice(window[0], window[1]), slice(window[2], window[3])
    assert np.abs(np.clip(image[rows, cols], 0, 1) - ours[rows, cols]).max() <= 1.0 / 255.0 + 1e-4


def test_a_checkpoint_with_nothing_opaque_is_refused(tmp_path, tiny_scene, capsys):
    ckpt = save_checkpoint(tiny_model(density_shift=-10.0), str(tmp_path / "empty.th"))
    status = export_main(["--ckpt", ckpt, "--datadir", tiny_scene, "--dataset_name", "blender", "--iterations", "0"])
    error = capsys.readouterr().err
    assert status == 2 and "renders no pixel of the 6 training views at least 0.5 opaque" in error, error
    assert not os.path.exists(default_out(ckpt)), "no empty file"


def test_bad_options_and_foreign_outputs_are_refused(tmp_path, capsys):
    (tmp_path / "x.th").write_bytes(b"")
    (tmp_path / "mine.ply").write_text("ply\nformat ascii 1.0\nelement vertex 0\nend_header\n")
    for argv, fragment in (
            (["--sh_degree", "4"], "--sh_degree must be 0 to 3, got 4."),
            (["--max_splats", "0"], "--max_splats must be positive, got 0."),
            (["--iterations", "-1"], "--iterations must be 0 or more, got -1."),
            (["--out", str(tmp_path / "no" / "f.ply")], "does not exist; create it first"),
            (["--out", str(tmp_path / "x.th")], "--out must differ from --ckpt"),
            (["--out", str(tmp_path / "mine.ply")], "mine.ply' is a file tensorf_jt did not write")):
        status = export_main(["--ckpt", str(tmp_path / "x.th"), *argv])
        error = capsys.readouterr().err
        assert status == 2 and fragment in error, (argv, error)
    assert (tmp_path / "mine.ply").read_text().startswith("ply\nformat ascii")
