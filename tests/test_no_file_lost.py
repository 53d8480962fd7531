"""No user file lost: every command, run against a dataset folder, a capture folder and a
checkpoint folder, leaves each file that was there before byte for byte as it was, except the
command's own documented outputs (docs/RENDERING.md, docs/TRAINING.md, docs/CAPTURES.md), the
splat export and the renders of its file included. Where
an output's path holds a file the project did not write, the command refuses with exit status 2
before writing anything, and says which file and what to do.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

import synthetic_capture as capture_lib
from conftest import REPO_ROOT, run_python
from test_resume import tiny_argv

from tensorf_jt.cli.export_splats import main as export_splats_main
from tensorf_jt.cli.export_torch import main as export_main
from tensorf_jt.cli.render import main as render_main
from tensorf_jt.cli.train import main as train_main
from tensorf_jt.dataLoader.demo_scene import SPEC_FILE, DemoSceneSpec, ensure_generated, generate, is_generated
from tensorf_jt.errors import OutputConflict
from tensorf_jt.formats.ownership import RENDERS_MARK, unused_path

sys.path.insert(0, str(REPO_ROOT / "tools"))
import colmap_to_transforms  # noqa: E402
import preview_scene  # noqa: E402

TINY_SPEC = DemoSceneSpec(image_size=8, n_train=2, n_val=1, n_test=1, supersampling=1)


def snapshot(root) -> dict[str, str]:
    """SHA-256 of every file under ``root``, by '/'-separated relative path."""
    digests = {}
    for parent, _, names in os.walk(root):
        for name in names:
            path = os.path.join(parent, name)
            with open(path, "rb") as handle:
                digests[os.path.relpath(path, root).replace(os.sep, "/")] = hashlib.sha256(handle.read()).hexdigest()
    return digests


def assert_kept(before: dict[str, str], root, outputs: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file of ``before`` is still in ``root`` unchanged, unless it matches one of the
    command's documented ``outputs`` (glob patterns); returns the new snapshot."""
    after = snapshot(root)
    lost = sorted(path for path, digest in before.items() if after.get(path) != digest
                  and not any(fnmatch.fnmatch(path, pattern) for pattern in outputs))
    assert not lost, f"changed or removed: {lost}"
    return after


def run_main(cli_main, argv, capsys) -> tuple[int, str]:
    status = cli_main([str(a) for a in argv])
    return status, capsys.readouterr().err


def user_dataset(tiny_scene: str, folder: Path) -> str:
    """A NeRF-synthetic-style dataset of the user's: the tiny scene's views without the
    generator's mark, plus files of names the generator never writes."""
    shutil.copytree(tiny_scene, folder)
    (folder / SPEC_FILE).unlink()
    (folder / "test" / "r_0_depth_0000.png").write_bytes((folder / "test" / "r_0.png").read_bytes())
    (folder / "README.txt").write_text("my lego scene\n")
    return str(folder)


# --------------------------------------------------------------------------- the demo generator
def test_the_demo_config_on_a_dataset_exits_2_and_changes_nothing(tiny_scene, tmp_path):
    """The reported case: the demo's config pointed at a NeRF-synthetic folder."""
    dataset = user_dataset(tiny_scene, tmp_path / "lego")
    before = snapshot(dataset)
    result = run_python(["train.py", "--config", "configs/demo.txt", "--datadir", dataset, "--n_iters", "1",
                         "--basedir", str(tmp_path / "log")], timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert f"'{dataset}' holds files the demo generator did not write" in result.stderr
    assert "--dataset_name blender" in result.stderr
    assert_kept(before, dataset)
    assert snapshot(dataset).keys() == before.keys(), "nothing written into the dataset"
    assert not (tmp_path / "log").exists(), "refused before the run's folder was made"


@pytest.mark.parametrize("config", ["configs/demo_room.txt", "configs/demo.txt"])
def test_every_demo_entry_refuses_a_dataset(tiny_scene, tmp_path, capsys, config):
    dataset = user_dataset(tiny_scene, tmp_path / "data")
    before = snapshot(dataset)
    status, err = run_main(train_main, ["--config", config, "--datadir", dataset, "--n_iters", 1,
                                        "--basedir", tmp_path / "log"], capsys)
    assert status == 2 and "holds files the demo generator did not write" in err
    result = run_python(["tools/make_scene.py", dataset, "--size", "8"], timeout=120)
    assert result.returncode == 2 and "holds files the demo generator did not write" in result.stderr
    assert_kept(before, dataset)
    assert snapshot(dataset).keys() == before.keys()


def test_generator_names_without_its_mark_are_refused(tmp_path):
    """A blender dataset laid out exactly as the generator would write one, but not by it."""
    generate(str(tmp_path / "scene"), TINY_SPEC)
    (tmp_path / "scene" / SPEC_FILE).unlink()
    before = snapshot(tmp_path / "scene")
    with pytest.raises(OutputConflict, match=r"holds files the demo generator did not write \("
                                             r"'transforms_test.json', 'transforms_train.json', 'transforms_val.json', "
                                             r"'test/r_0.png', 'test/r_0_depth.npy' and more\).*--dataset_name blender"):
        ensure_generated(str(tmp_path / "scene"), TINY_SPEC)
    assert_kept(before, tmp_path / "scene")


def test_a_demo_scene_of_other_settings_is_regenerated_only_when_nothing_else_is_there(tmp_path):
    root = tmp_path / "demo"
    generate(str(root), DemoSceneSpec(image_size=8, n_train=3, n_val=1, n_test=1, supersampling=1))
    assert ensure_generated(str(root), TINY_SPEC)
    assert is_generated(str(root), TINY_SPEC)
    assert not (root / "train" / "r_2.png").exists(), "views of the earlier settings are removed"
    (root / "notes.txt").write_text("mine")
    before = snapshot(root)
    other = DemoSceneSpec(image_size=10, n_train=2, n_val=1, n_test=1, supersampling=1)
    with pytest.raises(OutputConflict, match=r"holds a demo scene and files the demo generator did not write "
                                             r"\('notes.txt'\)"):
        ensure_generated(str(root), other)
    assert_kept(before, root)
    assert not ensure_generated(str(root), TINY_SPEC), "the same settings: nothing to write"


def test_an_interrupted_generation_is_redone(tmp_path):
    root = tmp_path / "demo"
    generate(str(root), TINY_SPEC)
    marker = json.loads((root / SPEC_FILE).read_text())
    (root / SPEC_FILE).write_text(json.dumps({**marker, "complete": False}))
    (root / "train" / "r_1.png").write_bytes(b"half a png")
    assert not is_generated(str(root), TINY_SPEC)
    assert ensure_generated(str(root), TINY_SPEC)
    assert (root / "train" / "r_1.png").read_bytes()[:4] == b"\x89PNG"
    legacy = {key: value for key, value in json.loads((root / SPEC_FILE).read_text()).items() if key != "complete"}
    (root / SPEC_FILE).write_text(json.dumps(legacy))
    assert is_generated(str(root), TINY_SPEC), "a mark without 'complete' was written last, by earlier versions"


def test_empty_folders_and_a_file_in_the_way(tmp_path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    assert ensure_generated(str(tmp_path / "empty"), TINY_SPEC)
    (tmp_path / "file").write_text("mine")
    with pytest.raises(OutputConflict, match="is a file, not a folder for the demo scene"):
        ensure_generated(str(tmp_path / "file"), TINY_SPEC)
    assert (tmp_path / "file").read_text() == "mine"


# --------------------------------------------------------------------------- a capture folder
@pytest.fixture(scope="module")
def capture_folder(tmp_path_factory) -> Path:
    """A COLMAP capture with distorted images (so the converter resamples them), unconverted."""
    root = tmp_path_factory.mktemp("capture") / "scene"
    capture_lib.make_capture(str(root), image_size=24, n_views=12, seed=5, points_per_view=60, supersampling=1)
    return root


CONVERTER_OUTPUTS = ("transforms.json", "sparse_points.ply", "images_undistorted/*")


def test_the_converter_writes_only_its_outputs_and_replaces_only_its_own(capture_folder, tmp_path, capsys):
    root = tmp_path / "scene"
    shutil.copytree(capture_folder, root)
    before = snapshot(root)
    assert colmap_to_transforms.main([str(root)]) == 0
    first = assert_kept(before, root)
    assert {"transforms.json", "sparse_points.ply", "images_undistorted/undistort.json"} <= set(first) - set(before)
    assert all(fnmatch.fnmatch(path, "images_undistorted/*") for path in set(first) - set(before)
               if path not in ("transforms.json", "sparse_points.ply"))
    assert colmap_to_transforms.main([str(root)]) == 0, "its own outputs are replaced"
    assert_kept(first, root, CONVERTER_OUTPUTS)

    content = json.loads((root / "transforms.json").read_text())
    del content["written_by"]  # as earlier versions wrote it: still recognised by its own keys
    (root / "transforms.json").write_text(json.dumps(content))
    assert colmap_to_transforms.main([str(root)]) == 0
    assert json.loads((root / "transforms.json").read_text())["written_by"] == "tensorf_jt colmap_to_transforms"


@pytest.mark.parametrize("foreign, fragment", [
    ("transforms.json", "transforms.json' is a file tensorf_jt did not write; refusing to replace it"),
    ("sparse_points.ply", "sparse_points.ply' is a file tensorf_jt did not write; refusing to replace it"),
    ("images_undistorted/IMG_0001.png", "images_undistorted' holds files tensorf_jt did not write "
                                        "('IMG_0001.png'); refusing to write undistorted images into it"),
])
def test_the_converter_refuses_files_it_did_not_write(capture_folder, tmp_path, capsys, foreign, fragment):
    root = tmp_path / "scene"
    shutil.copytree(capture_folder, root)
    (root / foreign).parent.mkdir(parents=True, exist_ok=True)
    # nerfstudio's ns-process-data writes a transforms.json of its own into such a folder
    (root / foreign).write_text(json.dumps({"camera_model": "OPENCV", "frames": [], "applied_transform": []}))
    before = snapshot(root)
    status, err = run_main(colmap_to_transforms.main, [root], capsys)
    assert status == 2 and fragment in err and "--overwrite" in err and "--out" in err, err
    assert snapshot(root) == before
    assert colmap_to_transforms.main([str(root), "--overwrite"]) == 0
    assert_kept(before, root, CONVERTER_OUTPUTS)


def test_the_converter_never_writes_over_its_inputs(capture_folder, tmp_path, capsys):
    root = tmp_path / "scene"
    shutil.copytree(capture_folder, root)
    before = snapshot(root)
    status, err = run_main(colmap_to_transforms.main, [root, "--out", root / "images" / "transforms.json"], capsys)
    assert status == 2 and "which holds or is inside the image folder" in err, err
    status, err = run_main(colmap_to_transforms.main, [root, "--out", root / "images" / "view_003.png",
                                                       "--overwrite"], capsys)
    assert status == 2 and "is the input file" in err, err
    (root / "images_undistorted").mkdir()
    for path in (root / "images").iterdir():
        shutil.copy(path, root / "images_undistorted" / path.name)
    before = snapshot(root)
    status, err = run_main(colmap_to_transforms.main, [root, "--images", root / "images_undistorted",
                                                       "--overwrite"], capsys)
    assert status == 2 and "holds or is inside the image folder" in err, err
    status, err = run_main(colmap_to_transforms.main, [root, "--out", root / "sparse" / "0" / "images.bin",
                                                       "--overwrite"], capsys)
    assert status == 2 and "is the input file" in err, err
    assert snapshot(root) == before


def test_the_preview_replaces_only_its_own_files(capture_folder, tmp_path, capsys):
    root = tmp_path / "scene"
    shutil.copytree(capture_folder, root)
    assert colmap_to_transforms.main([str(root)]) == 0
    before = snapshot(root)
    assert preview_scene.main([str(root)]) == 0
    first = assert_kept(before, root)
    assert set(first) - set(before) == {"preview.png", "preview.ply"}
    assert preview_scene.main([str(root)]) == 0
    assert_kept(first, root, ("preview.png", "preview.ply"))
    shutil.copy(root / "images" / "view_000.png", root / "preview.png")  # a photo of the user's
    before = snapshot(root)
    status, err = run_main(preview_scene.main, [root], capsys)
    assert status == 2 and "preview.png' is a file tensorf_jt did not write" in err and "--overwrite" in err
    assert snapshot(root) == before
    assert preview_scene.main([str(root), "--overwrite"]) == 0


# --------------------------------------------------------------------------- a checkpoint folder
@pytest.fixture(scope="module")
def trained(tiny_scene, tmp_path_factory) -> tuple[str, Path]:
    """(the user's dataset, the run folder) of a short training run on it."""
    top = tmp_path_factory.mktemp("trained")
    dataset = user_dataset(tiny_scene, top / "lego")
    before = snapshot(dataset)
    argv = tiny_argv(dataset, top / "log")
    assert train_main(argv) == 0
    assert_kept(before, dataset)
    assert snapshot(dataset).keys() == before.keys()
    return dataset, top / "log" / "run"


def test_render_export_and_mesh_write_only_their_outputs(trained, tmp_path, capsys):
    dataset, run = trained
    folder = tmp_path / "run"
    shutil.copytree(run, folder)
    ckpt = folder / "run.th"
    (folder / "notes.txt").write_text("what I tried")
    data_before, before = snapshot(dataset), snapshot(folder)
    assert render_main(["--ckpt", str(ckpt), "--export_mesh", "1", "--render_test", "1",
                        "--compute_extra_metrics", "0"]) == 0
    assert export_main(["--ckpt", str(ckpt), "--out", str(folder / "for_pytorch.th")]) == 0
    assert export_splats_main(["--ckpt", str(ckpt), "--iterations", "5"]) == 0
    assert render_main(["--splats", str(folder / "run_splats.ply"), "--datadir", dataset, "--dataset_name", "blender",
                        "--compute_extra_metrics", "0"]) == 0
    after = assert_kept(before, folder, ("imgs_test_all/*",))  # the run's own final renders, replaced
    assert {"run.ply", "for_pytorch.th", "run_splats.ply", "imgs_test_run_splats/000.png"} <= set(after) - set(before)
    assert export_splats_main(["--ckpt", str(ckpt), "--iterations", "0"]) == 0, "its own earlier export, replaced"
    assert export_main(["--ckpt", str(ckpt), "--out", str(folder / "for_pytorch.th")]) == 0, "its own export"
    assert_kept(data_before, dataset)

    (folder / "theirs.th").write_bytes(b"a file of the user's")
    before = snapshot(folder)
    status, err = run_main(export_main, ["--ckpt", ckpt, "--out", folder / "theirs.th"], capsys)
    assert status == 2 and "theirs.th' is a file tensorf_jt did not write" in err and "--overwrite" in err
    status, err = run_main(export_main, ["--ckpt", ckpt, "--out", ckpt, "--overwrite"], capsys)
    assert status == 2 and "--out must differ from --ckpt" in err
    os.link(ckpt, folder / "same.th")
    status, err = run_main(export_main, ["--ckpt", folder / "same.th", "--out", ckpt, "--overwrite"], capsys)
    assert status == 2 and "--out must differ from --ckpt" in err, "the same file under another name"
    (folder / "same.th").unlink()

    (folder / "run.ply").write_text("ply\nformat ascii 1.0\nelement vertex 0\nend_header\n")  # a scan of the user's
    before = snapshot(folder)
    status, err = run_main(render_main, ["--ckpt", ckpt, "--export_mesh", 1], capsys)
    assert status == 2 and "run.ply' is a file tensorf_jt did not write" in err, err
    assert snapshot(folder) == before


def test_a_pytorch_tensorf_run_folder_is_never_written_over(trained, tmp_path, capsys):
    """The reference's own run folder: its checkpoint and renders have the names ours would."""
    dataset, run = trained
    reference = tmp_path / "log" / "tensorf_lego_VM"
    reference.mkdir(parents=True)
    assert export_main(["--ckpt", str(run / "run.th"), "--out", str(reference / "tensorf_lego_VM.th")]) == 0
    (reference / "imgs_test_all").mkdir()
    (reference / "imgs_test_all" / "000.png").write_bytes((Path(dataset) / "test" / "r_0.png").read_bytes())
    (reference / "imgs_test_all" / "mean.txt").write_text("31.2\n")
    before = snapshot(reference)

    status, err = run_main(train_main, [*tiny_argv(dataset, tmp_path / "log", "--n_iters", "2"),
                                        "--expname", "tensorf_lego_VM"], capsys)
    assert status == 2 and "tensorf_lego_VM' holds files tensorf_jt did not write" in err
    assert "Give another --expname or --basedir" in err
    render = ["--ckpt", reference / "tensorf_lego_VM.th", "--datadir", dataset, "--dataset_name", "blender",
              "--compute_extra_metrics", "0"]
    status, err = run_main(render_main, render, capsys)
    assert status == 2 and "imgs_test_all' holds files tensorf_jt did not write ('000.png', 'mean.txt')" in err
    assert snapshot(reference) == before

    shutil.rmtree(reference / "imgs_test_all")  # the user moved them away
    before = snapshot(reference)
    assert run_main(render_main, render, capsys)[0] == 0
    assert (reference / "imgs_test_all" / RENDERS_MARK).is_file()
    assert run_main(render_main, render, capsys)[0] == 0, "a render folder of ours is rendered again"
    assert_kept(before, reference)


def test_rendering_a_demo_checkpoint_on_a_dataset_changes_nothing(trained, tmp_path, capsys):
    dataset, run = trained
    before = snapshot(dataset)
    status, err = run_main(render_main, ["--ckpt", run / "run.th", "--dataset_name", "demo", "--datadir", dataset],
                           capsys)
    assert status == 2 and "holds files the demo generator did not write" in err, err
    assert snapshot(dataset) == before


def test_a_run_never_replaces_the_checkpoint_it_starts_from(trained, tmp_path, capsys):
    dataset, run = trained
    folder = tmp_path / "log" / "run"
    shutil.copytree(run, folder)
    before = snapshot(folder)
    status, err = run_main(train_main, [*tiny_argv(dataset, tmp_path / "log", "--n_iters", "2"),
                                        "--ckpt", folder / "run.th"], capsys)
    assert status == 2 and "is the checkpoint this run would write at its end" in err, err
    assert snapshot(folder) == before


def test_outputs_named_by_the_time_never_replace_each_other(tmp_path):
    path = tmp_path / "view_20261207-101500_rgb.png"
    assert unused_path(str(path)) == str(path)
    path.write_bytes(b"first")
    assert unused_path(str(path)) == str(tmp_path / "view_20261207-101500_rgb-2.png")
    (tmp_path / "view_20261207-101500_rgb-2.png").write_bytes(b"second")
    assert unused_path(str(path)) == str(tmp_path / "view_20261207-101500_rgb-3.png")
