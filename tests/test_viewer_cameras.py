"""The viewer's camera conventions, camera-path files and bad-input paths, without a browser:
a browser camera put at a training pose makes exactly that view's rays (blender-style, LLFF/NDC
and the real fern capture), quaternions agree with viser's own, camera paths round-trip and
pass through their keyframes, and the errors name what to fix."""
from __future__ import annotations

import json
import math
import socket

import numpy as np
import pytest

from conftest import REPO_ROOT, free_port
from fake_datasets import make_llff
from tensorf_jt.dataLoader import BlenderDataset, LLFFDataset
from tensorf_jt.errors import ConfigError
from tensorf_jt.viewer.keyframes import PathCamera, interpolate, read_camera_path, write_camera_path
from tensorf_jt.viewer.cameras import (camera_from_viser, matrix_from_quaternion, quaternion_from_matrix,
                                       scene_cameras)
from tensorf_jt.viewer.server import check_port_free

FERN = REPO_ROOT.parent / "shared" / "data" / "fern_8"


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def test_quaternions_agree_with_visers_own_conversion():
    from viser import transforms

    rng = np.random.default_rng(3)
    rotations = [random_rotation(rng) for _ in range(50)]
    rotations += [np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]), np.diag([-1.0, -1.0, 1.0]), np.eye(3)]
    for rotation in rotations:
        wxyz = quaternion_from_matrix(rotation)
        theirs = transforms.SO3.from_matrix(rotation).wxyz
        assert np.allclose(wxyz, theirs, atol=1e-9) or np.allclose(wxyz, -theirs, atol=1e-9)  # q and -q: one rotation
        assert np.allclose(matrix_from_quaternion(wxyz), rotation, atol=1e-9)
        assert np.allclose(transforms.SO3(wxyz).as_matrix(), rotation, atol=1e-9)


def test_browser_image_size_follows_its_aspect_within_the_limit():
    pose = np.eye(3)
    wide = camera_from_viser(quaternion_from_matrix(pose), np.zeros(3), 0.8, 16 / 9, 512)
    tall = camera_from_viser(quaternion_from_matrix(pose), np.zeros(3), 0.8, 0.5, 512)
    assert (wide.width, wide.height) == (512, 288) and (tall.width, tall.height) == (256, 512)
    assert math.isclose(wide.focal, 144 / math.tan(0.4))


def browser_camera_at_training_view(cameras, view: int):
    """What a browser reports once the server has put its camera at training view ``view``."""
    pose = cameras.viewer_pose(cameras.poses[view])
    width, height = cameras.image_size
    return camera_from_viser(quaternion_from_matrix(pose[:, :3]), pose[:, 3], cameras.fov_y, width / height,
                             max(width, height))


def assert_training_views_reproduced(dataset) -> None:
    cameras = scene_cameras(dataset)
    viewer_rotations = np.stack([cameras.viewer_pose(p)[:, :3] for p in cameras.poses])
    assert np.allclose(np.linalg.det(viewer_rotations), 1.0), "browser cameras must be proper rotations"
    for view in range(dataset.n_views):
        camera = browser_camera_at_training_view(cameras, view)
        assert (camera.width, camera.height) == tuple(dataset.img_wh)
        np.testing.assert_allclose(cameras.rays(camera), dataset.view_rays(view), atol=2e-5)


def test_a_browser_camera_at_a_training_pose_makes_that_views_rays_blender(tiny_scene):
    assert_training_views_reproduced(BlenderDataset(tiny_scene, split="train", is_stack=True))


def test_a_browser_camera_at_a_training_pose_makes_that_views_rays_llff_ndc(tmp_path):
    dataset = LLFFDataset(make_llff(tmp_path), split="train", downsample=4, is_stack=True)
    cameras = scene_cameras(dataset)
    assert cameras.ndc is not None and cameras.world_to_viewer[0, 0] == -1.0  # LLFF's centred world is mirrored
    assert_training_views_reproduced(dataset)


@pytest.mark.skipif(not FERN.is_dir(), reason="the real capture ../shared/data/fern_8 is not here")
def test_a_browser_camera_at_a_training_pose_makes_that_views_rays_real_fern():
    assert_training_views_reproduced(LLFFDataset(str(FERN), split="train", downsample=8, is_stack=True))


def test_forward_facing_start_view_looks_into_the_scene(tmp_path):
    dataset = LLFFDataset(make_llff(tmp_path), split="train", downsample=4, is_stack=True)
    cameras = scene_cameras(dataset)
    position, look_at = cameras.start_view(None)
    forward = (look_at - position) / np.linalg.norm(look_at - position)
    mean_axis = np.mean([cameras.viewer_pose(p)[:, 2] for p in cameras.poses], axis=0)
    assert forward @ mean_axis / np.linalg.norm(mean_axis) > 0.95
    up = cameras.up_direction()
    assert abs(up @ forward) < 0.2


# ----------------------------------------------------------------------------- camera paths
def orbit_keyframes() -> list[PathCamera]:
    keyframes = []
    for angle, fov in ((0.0, 40.0), (0.7, 45.0), (1.4, 50.0), (2.0, 40.0)):
        position = np.array([4 * math.cos(angle), 4 * math.sin(angle), 1.0])
        forward = -position / np.linalg.norm(position)
        right = np.cross(forward, [0.0, 0.0, 1.0])
        right /= np.linalg.norm(right)
        down = np.cross(forward, right)
        keyframes.append(PathCamera(np.column_stack([right, down, forward, position]), math.radians(fov)))
    return keyframes


def test_camera_path_passes_through_its_keyframes_and_round_trips(tmp_path):
    keyframes = orbit_keyframes()
    frames = interpolate(keyframes, 31)
    for index, keyframe in zip((0, 10, 20, 30), keyframes):
        np.testing.assert_allclose(frames[index].c2w, keyframe.c2w, atol=1e-9)
        assert math.isclose(frames[index].fov_y, keyframe.fov_y)
    for frame in frames:
        assert np.allclose(frame.c2w[:, :3] @ frame.c2w[:, :3].T, np.eye(3), atol=1e-9)
    path = tmp_path / "orbit.json"
    written = write_camera_path(str(path), keyframes, 64, 48, fps=10, seconds=3.1)
    assert len(written["frames"]) == 31
    read = read_camera_path(str(path))
    assert (read.width, read.height, read.fps) == (64, 48, 10.0)
    assert len(read.frames) == 31 and len(read.keyframes) == 4
    for ours, theirs in zip(read.frames, frames):
        np.testing.assert_allclose(ours.c2w, theirs.c2w, atol=1e-8)
        assert math.isclose(ours.fov_y, theirs.fov_y, abs_tol=1e-9)


@pytest.mark.parametrize("content, fragment", [
    (None, "does not exist; save one from the viewer"),
    ("{not json", "is not valid JSON"),
    ({"format": "nerfstudio"}, "is not a camera path file (its 'format' must be 'tensorf_jt-camera-path')"),
    ({"format": "tensorf_jt-camera-path", "render_width": "wide", "render_height": 4}, "needs integer 'render_width'"),
    ({"format": "tensorf_jt-camera-path", "render_width": 0, "render_height": 4}, "must be positive"),
    ({"format": "tensorf_jt-camera-path", "render_width": 8, "render_height": 4, "frames": []}, "lists no 'frames'"),
    ({"format": "tensorf_jt-camera-path", "render_width": 8, "render_height": 4,
      "frames": [{"camera_to_world": [[1, 0, 0]], "fov_y_degrees": 40}]}, "Frame 0 of"),
])
def test_bad_camera_path_files_are_refused_with_the_reason(tmp_path, content, fragment):
    path = tmp_path / "path.json"
    if content is not None:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ConfigError) as caught:
        read_camera_path(str(path))
    assert fragment in str(caught.value) and str(path) in str(caught.value)


# ----------------------------------------------------------------------------- bad input
def test_a_port_in_use_is_refused_with_another_suggested():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port} .*--viewer_port {port + 1}"):
            check_port_free("127.0.0.1", port)


def test_view_cli_reports_unreadable_checkpoints_and_ports(tmp_path, capsys):
    from tensorf_jt.cli.view import main as view_main

    broken = tmp_path / "broken.th"
    broken.write_bytes(b"not a checkpoint")
    assert view_main(["--ckpt", str(broken), "--viewer_port", str(free_port())]) == 2
    assert str(broken) in capsys.readouterr().err
    assert view_main(["--ckpt", str(tmp_path / "missing.th"), "--viewer_port", str(free_port())]) == 2
    assert "missing.th" in capsys.readouterr().err
    assert view_main(["--viewer_port", str(free_port())]) == 2
    assert "--ckpt is required" in capsys.readouterr().err
    assert view_main(["--ckpt", str(broken), "--viewer_port", "70000"]) == 2
    assert "viewer_port must be a port number" in capsys.readouterr().err


def test_render_cli_renders_a_camera_path_file(tiny_scene, tmp_path, capsys):
    from test_outputs import saved_model
    from tensorf_jt.cli.render import main as render_main

    ckpt = saved_model(tmp_path, "model.th", tiny_scene)
    path = tmp_path / "my path.json"
    write_camera_path(str(path), orbit_keyframes()[:2], 20, 16, fps=4, seconds=1.5)
    assert render_main(["--ckpt", ckpt, "--camera_path", str(path)]) == 0
    folder = tmp_path / "imgs_my path"
    assert sorted(p.name for p in folder.glob("*.png")) == [f"{i:03d}.png" for i in range(6)]
    assert (folder / "video.mp4").is_file() and (folder / "depthvideo.mp4").is_file()
    assert not (tmp_path / "imgs_test_all").exists()
    assert "camera path: 6 frames" in capsys.readouterr().out
    assert render_main(["--ckpt", ckpt, "--camera_path", str(tmp_path / "none.json")]) == 2
    assert "does not exist; save one from the viewer" in capsys.readouterr().err


def open_viewer(tmp_path, cameras=None, thumbnails=(), training=True):
    """A viewer on a free port with no model behind it (the tests drive its frame scheduling)."""
    from tensorf_jt.viewer import server
    from tensorf_jt.viewer.frames import RenderSettings

    settings = RenderSettings(white_bg=True, chunk=4096, near_far=(2.0, 6.0))
    return server.Viewer(server.SceneView(cameras, list(thumbnails), (2.0, 6.0)), settings, str(tmp_path),
                         port=free_port(), training=training)


def test_a_training_model_is_redrawn_at_most_every_live_interval(tmp_path):
    """A browser's frame of the learning model is refreshed no more often than LIVE_EVERY_S; a
    camera change is answered at once."""
    import time

    from tensorf_jt.viewer import server

    viewer = open_viewer(tmp_path)
    try:
        assert viewer.url == f"http://127.0.0.1:{viewer.server.get_port()}", "the address it is bound to"
        view = server.ClientView(client=None, camera=(np.array([1.0, 0, 0, 0]), np.array([0, 0, 4.0]), 0.8, 1.0),
                                 camera_version=1)
        view.shown = (1, False, viewer.model_version, view.output, view.max_side)
        view.sent_at = time.perf_counter()
        viewer.model_changed()
        assert not viewer._prepare_job(view), "a new frame of the training model came too soon"
        view.sent_at -= server.LIVE_EVERY_S
        assert viewer._prepare_job(view)
        view.job, view.sent_at = None, time.perf_counter()
        view.camera_version = 2
        assert viewer._prepare_job(view), "a camera change waits for nothing"
    finally:
        viewer.close()


def test_a_training_models_frame_is_not_rendered_full_size_until_paused(tmp_path):
    """Right after a reduced frame of the learning model is sent, nothing more is rendered for it
    (a full-size frame would be out of date long before it is done); once paused, the full size is."""
    from tensorf_jt.viewer import server

    viewer = open_viewer(tmp_path)
    try:
        view = server.ClientView(client=None, camera=(np.array([1.0, 0, 0, 0]), np.array([0, 0, 4.0]), 0.8, 1.0),
                                 camera_version=1)
        view.shown = (1, False, viewer.model_version, view.output, view.max_side)
        assert not viewer._prepare_job(view) and view.job is None
        viewer.paused = True
        assert viewer._prepare_job(view)
        assert view.job.tag[1] and view.job.rays.shape[0] == view.max_side ** 2, "the full-size frame"
    finally:
        viewer.close()


@pytest.mark.parametrize("training", [False, True])
def test_training_cameras_start_hidden_only_while_training(tiny_scene, tmp_path, training):
    """Drawing 60 textured frustums dominates a software-drawn page's redraws, so a training run's
    page starts without them (the checkbox shows them); a checkpoint's page starts with them."""
    dataset = BlenderDataset(tiny_scene, split="train", is_stack=True)
    thumbnails = [np.zeros((8, 8, 3), np.uint8)] * dataset.n_views
    viewer = open_viewer(tmp_path, scene_cameras(dataset), thumbnails, training)
    try:
        frusta = viewer.training_frusta
        assert len(frusta) == dataset.n_views and viewer.show_cameras.value is not training
        assert [frustum.visible for frustum in frusta] == [not training] * dataset.n_views
        viewer.show_cameras.value = training  # as the page's checkbox does
        assert [frustum.visible for frustum in frusta] == [training] * dataset.n_views
    finally:
        viewer.close()
