"""Videos (MP4 through ffmpeg, GIF without it) and camera-path rendering."""
import os
import sys

import imageio.v3 as iio
import numpy as np
import pytest

from model_factory import tiny_model
from tensorf_jt.formats.checkpoint import save_checkpoint
from tensorf_jt.cli.render import main as render_main
from tensorf_jt.evaluation import video
from tensorf_jt.errors import ConfigError
from tensorf_jt.evaluation.renders import evaluate_path, render_rays
from tensorf_jt.rendering.rays import camera_rays


def ramp_frames(n: int, height: int, width: int) -> np.ndarray:
    """Smooth frames whose brightness grows with the frame index (survives lossy coding)."""
    base = np.linspace(40, 120, width)[None, :, None] + np.linspace(0, 40, height)[:, None, None]
    return np.stack([np.broadcast_to(base + 25 * k, (height, width, 3)) for k in range(n)]).astype(np.uint8)


def orbit_pose(angle: float, radius: float = 4.0) -> np.ndarray:
    """OpenCV camera-to-world [4, 4] on a circle at height 1, looking at the origin."""
    eye = np.array([radius * np.cos(angle), radius * np.sin(angle), 1.0])
    forward = -eye / np.linalg.norm(eye)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    pose = np.eye(4)
    pose[:3, :3] = np.stack([right, down, forward], axis=1)
    pose[:3, 3] = eye
    return pose.astype(np.float32)


class PathDataset:
    """Stand-in for a dataset split with a camera path (the interface ``evaluate_path`` reads)."""
    img_wh = (7, 5)
    near_far = [2.0, 6.0]
    white_bg = True

    def __init__(self, n_poses: int = 3) -> None:
        self.render_path = np.stack([orbit_pose(a) for a in np.linspace(0, 2, n_poses)])

    def rays_for_pose(self, c2w: np.ndarray) -> np.ndarray:
        width, height = self.img_wh
        return camera_rays(height, width, 6.0, c2w)


def hide_ffmpeg(monkeypatch, how: str) -> None:
    """Make the ffmpeg backend look absent: package not installed, or no binary for the platform."""
    if how == "no package":
        monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)
    else:
        import imageio_ffmpeg

        def missing():
            raise RuntimeError("No ffmpeg exe could be found.")
        monkeypatch.setattr(imageio_ffmpeg, "get_ffmpeg_exe", missing)


def test_mp4_keeps_frames_in_order_and_pads_odd_sizes(tmp_path):
    assert video.ffmpeg_available(), "imageio-ffmpeg is a dependency; its binary should be found"
    frames = ramp_frames(4, 9, 13)
    path = video.write_video(str(tmp_path / "clip"), frames)
    assert path == str(tmp_path / "clip.mp4")
    assert iio.immeta(path, plugin="FFMPEG")["fps"] == 30
    decoded = iio.imread(path, plugin="FFMPEG", index=None)
    assert decoded.shape == (4, 10, 14, 3), "odd sizes are padded to even, not rescaled"
    assert np.abs(decoded[:, :9, :13].astype(float) - frames).mean() < 4
    assert np.all(np.diff(decoded.reshape(4, -1).mean(1)) > 15), "frames stay in order"


@pytest.mark.parametrize("how", ["no package", "no binary"])
def test_gif_when_ffmpeg_is_missing(tmp_path, monkeypatch, how):
    hide_ffmpeg(monkeypatch, how)
    assert not video.ffmpeg_available()
    frames = ramp_frames(3, 9, 13)
    path = video.write_video(str(tmp_path / "clip"), frames)
    assert path == str(tmp_path / "clip.gif")
    decoded = iio.imread(path, index=None)
    assert decoded.shape[:3] == (3, 9, 13)
    assert np.abs(decoded[..., :3].astype(float) - frames).max() <= 12  # GIF palette quantisation


@pytest.mark.parametrize("ffmpeg", [True, False])
def test_evaluate_path_writes_frames_and_videos(tmp_path, monkeypatch, capsys, ffmpeg):
    if not ffmpeg:
        hide_ffmpeg(monkeypatch, "no binary")
    dataset, model = PathDataset(3), tiny_model(density_shift=0.0)
    result = evaluate_path(dataset, model, str(tmp_path / "imgs_path_all"), show_progress=False)

    folder = tmp_path / "imgs_path_all"
    extension = "mp4" if ffmpeg else "gif"
    assert result == {"frames": 3, "video": str(folder / f"video.{extension}"),
                      "depth_video": str(folder / f"depthvideo.{extension}")}
    assert ("writing the path videos as animated GIFs" in capsys.readouterr().out) != ffmpeg
    for idx, pose in enumerate(dataset.render_path):
        rgb, _ = render_rays(model, dataset.rays_for_pose(pose))
        expected = np.round(np.clip(rgb.reshape(5, 7, 3), 0, 1) * 255).astype(np.uint8)
        np.testing.assert_array_equal(iio.imread(folder / f"{idx:03d}.png"), expected)
        rgbd = iio.imread(folder / "rgbd" / f"{idx:03d}.png")
        assert rgbd.shape == (5, 14, 3)
        np.testing.assert_array_equal(rgbd[:, :7], expected)
    for name in ("video", "depth_video"):
        read = {"plugin": "FFMPEG"} if ffmpeg else {}
        assert iio.imread(result[name], index=None, **read).shape[0] == 3
    assert not os.path.exists(folder / f"video.{'gif' if ffmpeg else 'mp4'}")


def test_evaluate_path_needs_a_camera_path(tmp_path):
    dataset = PathDataset(1)
    dataset.render_path = None
    with pytest.raises(ConfigError, match="no camera path"):
        evaluate_path(dataset, tiny_model(), str(tmp_path), show_progress=False)


def test_render_cli_renders_the_datasets_path(tiny_scene, tmp_path):
    save_checkpoint(tiny_model(density_shift=0.0), str(tmp_path / "m.th"))
    assert render_main(["--ckpt", str(tmp_path / "m.th"), "--render_path", "1", "--dataset_name", "blender",
                        "--datadir", tiny_scene]) == 0
    folder = tmp_path / "imgs_path_all"
    n_frames = len(list(folder.glob("*.png")))
    assert n_frames > 1 and len(list((folder / "rgbd").glob("*.png"))) == n_frames
    assert iio.imread(folder / "video.mp4", plugin="FFMPEG", index=None).shape[:3] == (n_frames, 24, 24)
    assert (folder / "depthvideo.mp4").is_file()
    assert not (tmp_path / "imgs_test_all").exists(), "only the path was asked for"
