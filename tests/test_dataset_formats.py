"""Every dataset format (llff, nsvf, tankstemple, own_data; blender's render path), camera paths,
NDC rays and the COLMAP converter, on the tiny scenes of ``fake_datasets``."""
import json
import os
import shutil
import sys

import imageio.v3 as iio
import numpy as np
import pytest

from fake_datasets import (LLFF_FOCAL, LLFF_FULL_WH, LLFF_N_IMAGES, NSVF_BBOX, NSVF_INTRINSICS, OWN_CAMERA,
                           OWN_N_FRAMES, TANKS_BBOX, look_at_opencv, make_llff, make_nsvf, make_own_data,
                           make_tankstemple, own_data_poses_opengl, pattern_image)
from tensorf_jt.dataLoader import (BlenderDataset, LLFFDataset, NSVFDataset, OwnDataDataset, TanksTempleDataset,
                                   dataset_dict)
from tensorf_jt.dataLoader.camera_paths import average_pose, focus_depth, orbit_path
from tensorf_jt.dataLoader.nsvf import read_intrinsics
from tensorf_jt.errors import DatasetError
from tensorf_jt.rendering.rays import get_ray_directions, get_ray_directions_blender, ndc_rays_blender

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import colmap_to_transforms  # noqa: E402


@pytest.fixture(scope="module")
def scenes(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("formats")
    return {"llff": make_llff(root), "nsvf": make_nsvf(root), "tankstemple": make_tankstemple(root),
            "own_data": make_own_data(root), "own_single": make_own_data(root, single_file=True),
            "nsvf_traj": make_nsvf(root / "traj", with_traj=True)}


def copy_scene(scene: str, tmp_path) -> str:
    target = str(tmp_path / os.path.basename(scene))
    shutil.copytree(scene, target)
    return target


def image_indices(dataset, count: int) -> list[int]:
    """Which fake image each view is: its blue channel encodes index / (count - 1)."""
    w, h = dataset.img_wh
    blue = np.median(dataset.all_rgbs.reshape(-1, h * w, 3)[:, :, 2], axis=1)  # robust to white pixels
    return [int(round(b * (count - 1))) for b in blue]


def assert_common_interface(dataset, n_views: int, is_stack: bool) -> None:
    w, h = dataset.img_wh
    rays_shape = (n_views, h * w, 6) if is_stack else (n_views * h * w, 6)
    rgbs_shape = (n_views, h, w, 3) if is_stack else (n_views * h * w, 3)
    assert dataset.all_rays.shape == rays_shape and dataset.all_rays.dtype == np.float32
    assert dataset.all_rgbs.shape == rgbs_shape and dataset.all_rgbs.dtype == np.float32
    assert 0.0 <= dataset.all_rgbs.min() and dataset.all_rgbs.max() <= 1.0
    assert dataset.poses.shape == (n_views, 4, 4) and dataset.poses.dtype == np.float32
    assert dataset.scene_bbox.shape == (2, 3) and dataset.scene_bbox.dtype == np.float32
    assert len(dataset.near_far) == 2 and all(isinstance(v, float) for v in dataset.near_far)
    assert dataset.all_depths is None
    assert dataset.render_path.ndim == 3 and dataset.render_path.shape[1:] == (4, 4)
    assert dataset.render_path.dtype == np.float32
    rays = dataset.rays_for_pose(dataset.render_path[0])
    assert rays.shape == (h * w, 6) and rays.dtype == np.float32
    # rays_for_pose makes a view's rays exactly as the loader made them
    np.testing.assert_allclose(dataset.rays_for_pose(dataset.poses[-1]),
                               dataset.all_rays.reshape(n_views, h * w, 6)[-1], atol=2e-6)


def assert_looks_at(c2w_opencv: np.ndarray, target, atol: float = 1e-5) -> None:
    """Each camera's optical axis (OpenCV +z) passes through ``target``."""
    to_target = np.asarray(target) - c2w_opencv[:, :3, 3]
    to_target /= np.linalg.norm(to_target, axis=-1, keepdims=True)
    np.testing.assert_allclose(c2w_opencv[:, :3, 2], to_target, atol=atol)
    np.testing.assert_allclose(np.linalg.det(c2w_opencv[:, :3, :3]), 1.0, atol=1e-5)


def test_every_reference_name_is_registered():
    assert dataset_dict == {"blender": BlenderDataset, "llff": LLFFDataset, "nsvf": NSVFDataset,
                            "tankstemple": TanksTempleDataset, "own_data": OwnDataDataset, "demo": BlenderDataset,
                            "demo_room": OwnDataDataset}


# ------------------------------------------------------------------ rays and NDC
def test_opengl_directions_flip_y_and_z():
    cv = get_ray_directions(3, 4, (2.0, 2.5), center=(1.5, 1.0))
    gl = get_ray_directions_blender(3, 4, (2.0, 2.5), center=(1.5, 1.0))
    np.testing.assert_allclose(gl, cv * np.array([1.0, -1.0, -1.0]))
    np.testing.assert_allclose(gl[0, 0], [(0.5 - 1.5) / 2.0, -(0.5 - 1.0) / 2.5, -1.0])


def test_ndc_rays_map_points_onto_their_projection():
    """A point at depth z on a world ray lands at parameter t = 1 + near / z of its NDC ray,
    at the point's perspective projection (-a x/z, -b y/z, 1 + 2 near/z)."""
    rng = np.random.default_rng(0)
    width, height, focal, near = 40, 30, 35.0, 1.0
    rays_o = rng.uniform(-0.3, 0.3, (50, 3))
    rays_d = np.concatenate([rng.uniform(-0.4, 0.4, (50, 2)), -np.ones((50, 1))], axis=1)
    ndc_o, ndc_d = ndc_rays_blender(height, width, focal, near, rays_o, rays_d)
    np.testing.assert_allclose(ndc_o[:, 2], -1.0)
    for depth in (2.0, 7.5, 300.0):
        s = (-depth - rays_o[:, 2]) / rays_d[:, 2]
        point = rays_o + s[:, None] * rays_d
        expected = np.stack([-(2 * focal / width) * point[:, 0] / point[:, 2],
                             -(2 * focal / height) * point[:, 1] / point[:, 2],
                             1.0 + 2.0 * near / point[:, 2]], axis=-1)
        t = 1.0 + near / point[:, 2]
        np.testing.assert_allclose(ndc_o + t[:, None] * ndc_d, expected, atol=1e-9)


# ------------------------------------------------------------------ LLFF
def test_llff_splits_shapes_and_constants(scenes):
    train = LLFFDataset(scenes["llff"], "train", downsample=4.0)
    test = LLFFDataset(scenes["llff"], "test", downsample=4.0, is_stack=True)
    assert train.img_wh == (16, 12) and np.allclose(train.focal, [LLFF_FOCAL / 4] * 2)
    assert_common_interface(train, 8, is_stack=False)
    assert_common_interface(test, 2, is_stack=True)
    assert image_indices(test, LLFF_N_IMAGES) == [0, 8], "every 8th image, from the first, is held out"
    assert image_indices(train, LLFF_N_IMAGES) == [1, 2, 3, 4, 5, 6, 7, 9]
    assert LLFFDataset(scenes["llff"], "val").image_ids.tolist() == [0, 8]
    assert LLFFDataset(scenes["llff"], "train", hold_every=3).image_ids.tolist() == [1, 2, 4, 5, 7, 8]
    np.testing.assert_allclose(train.scene_bbox, [[-1.5, -1.67, -1.0], [1.5, 1.67, 1.0]])
    assert train.near_far == [0.0, 1.0] and train.white_bg is False
    np.testing.assert_allclose(train.all_rays[:, 2], -1.0, atol=1e-5)  # NDC origins on the near plane
    np.testing.assert_allclose(test.all_rgbs[1, 0, 0], pattern_image(16, 12, 8, 10)[0, 0] / 255.0, atol=1e-6)


def test_llff_recentring_against_independent_numpy(scenes):
    """Centred poses = a reflection (world x -> -x) of the poses expressed in their natural
    right-handed average frame, scaled so the nearest bound is 1/0.75."""
    poses_bounds = np.load(os.path.join(scenes["llff"], "poses_bounds.npy"))
    llff = poses_bounds[:, :15].reshape(-1, 3, 5)
    down, right, back, position = llff[..., 0], llff[..., 1], llff[..., 2], llff[..., 3]
    gl = np.tile(np.eye(4), (len(llff), 1, 1))
    gl[:, :3, :4] = np.stack([right, -down, back, position], axis=-1)
    z = back.mean(0) / np.linalg.norm(back.mean(0))
    y = -down.mean(0) - (-down.mean(0) @ z) * z
    y /= np.linalg.norm(y)
    frame = np.eye(4)
    frame[:3] = np.stack([np.cross(y, z), y, z, position.mean(0)], axis=1)
    expected = np.diag([-1.0, 1.0, 1.0, 1.0]) @ np.linalg.inv(frame) @ gl
    expected[:, :3, 3] /= poses_bounds[:, 15].min() * 0.75

    dataset = LLFFDataset(scenes["llff"], "train", downsample=8.0)
    np.testing.assert_allclose(dataset.all_poses, expected, atol=1e-10)
    np.testing.assert_allclose(dataset.near_fars, poses_bounds[:, 15:] / (poses_bounds[:, 15].min() * 0.75))
    assert np.isclose(dataset.near_fars.min(), 1 / 0.75)
    # In the centred frame the mean camera sits at the origin looking down -z with +y up;
    # the reference's own average of the centred poses is that frame, x reflected.
    np.testing.assert_allclose(dataset.all_poses[:, :3, 3].mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(average_pose(dataset.all_poses), np.diag([-1.0, 1.0, 1.0, 0.0])[:3], atol=1e-12)


def test_llff_rays_are_ndc_of_the_pinhole_rays(scenes):
    dataset = LLFFDataset(scenes["llff"], "test", downsample=4.0, is_stack=True)
    w, h = dataset.img_wh
    f = LLFF_FOCAL / 4
    c2w = dataset.all_poses[8]
    row, col = 7, 3
    direction = c2w[:3, :3] @ np.array([(col + 0.5 - w / 2) / f, -(row + 0.5 - h / 2) / f, -1.0])
    point = c2w[:3, 3] + 3.0 * direction  # some point on the pixel's ray
    ndc_point = np.array([-(2 * f / w) * point[0] / point[2], -(2 * f / h) * point[1] / point[2],
                          1.0 + 2.0 / point[2]])
    ray = dataset.all_rays[1, row * w + col].astype(np.float64)
    t = (ndc_point[2] - ray[2]) / ray[5]
    np.testing.assert_allclose(ray[:3] + t * ray[3:], ndc_point, atol=1e-5)


def test_llff_render_path_is_the_reference_spiral(scenes):
    dataset = LLFFDataset(scenes["llff"], "train", downsample=8.0)
    path = dataset.render_path.astype(np.float64)
    assert path.shape == (120, 4, 4)
    # Same handedness as the centred training poses (both reflected), so videos are not mirrored.
    np.testing.assert_allclose(np.linalg.det(path[:, :3, :3]), np.linalg.det(dataset.all_poses[0, :3, :3]), atol=1e-5)
    # Every camera looks (OpenGL: along -z) at the focus point on the mean viewing axis.
    focus = np.array([0.0, 0.0, -focus_depth(dataset.near_fars)])
    to_focus = focus - path[:, :3, 3]
    np.testing.assert_allclose(-path[:, :3, 2], to_focus / np.linalg.norm(to_focus, axis=-1, keepdims=True), atol=1e-5)
    radii = np.percentile(np.abs(dataset.all_poses[:, :3, 3]), 90, axis=0)
    np.testing.assert_allclose(path[0, :3, 3], [-radii[0], 0.0, 0.0], atol=1e-6)  # theta = 0
    np.testing.assert_allclose(np.abs(path[:, 0, 3]).max(), radii[0], rtol=1e-6)


def test_llff_image_folder_follows_downsample(scenes, tmp_path):
    eight = LLFFDataset(scenes["llff"], "test", downsample=8.0, is_stack=True)
    assert eight.img_wh == (8, 6) and eight.all_rgbs.shape == (2, 6, 8, 3)
    assert os.path.basename(os.path.dirname(eight.image_paths[0])) == "images_8"
    assert np.allclose(eight.focal, [LLFF_FOCAL / 8] * 2)
    full = LLFFDataset(scenes["llff"], "test", downsample=1.0, is_stack=True)
    assert full.img_wh == LLFF_FULL_WH and os.path.basename(os.path.dirname(full.image_paths[0])) == "images"
    fractional = LLFFDataset(scenes["llff"], "test", downsample=2.5, is_stack=True)
    assert fractional.img_wh == (25, 19) and fractional.all_rgbs.shape == (2, 19, 25, 3)
    assert np.allclose(fractional.focal, [LLFF_FOCAL * 25 / 64, LLFF_FOCAL * 19 / 48])
    coarse = full.all_rgbs.reshape(2, 6, 8, 8, 8, 3).mean((2, 4))
    assert np.abs(eight.all_rgbs - coarse).max() < 0.02, "the 8x folder shows the same pictures"
    with pytest.raises(DatasetError,
                       match=r"images_2' for downsample 2 does not exist; .* has images, images_4, images_8"):
        LLFFDataset(scenes["llff"], "train", downsample=2.0)


def test_llff_errors_name_the_problem(scenes, tmp_path):
    with pytest.raises(DatasetError, match="poses_bounds.npy' not found.*does not exist"):
        LLFFDataset(str(tmp_path / "nowhere"))
    scene = copy_scene(scenes["llff"], tmp_path)
    poses_bounds = np.load(os.path.join(scene, "poses_bounds.npy"))
    os.remove(os.path.join(scene, "images_4", "IMG_0003.png"))
    with pytest.raises(DatasetError, match="holds 9 images but poses_bounds.npy has 10 poses"):
        LLFFDataset(scene, downsample=4.0)
    np.save(os.path.join(scene, "poses_bounds.npy"), poses_bounds[:, :15])
    with pytest.raises(DatasetError, match=r"has shape \(10, 15\); expected \[N, 17\]"):
        LLFFDataset(scene)
    bad_bounds = poses_bounds.copy()
    bad_bounds[2, 15] = 0.0
    np.save(os.path.join(scene, "poses_bounds.npy"), bad_bounds)
    with pytest.raises(DatasetError, match=r"'near' of image 2 \(row 2\) of '.*poses_bounds.npy' is 0; it must be a "
                                           "finite positive number"):
        LLFFDataset(scene)
    with open(os.path.join(scene, "poses_bounds.npy"), "wb") as handle:
        handle.write(b"not numpy")
    with pytest.raises(DatasetError, match="Cannot read .*poses_bounds.npy"):
        LLFFDataset(scene)
    np.save(os.path.join(scene, "poses_bounds.npy"), poses_bounds[:1])
    for name in ("images", "images_4", "images_8"):
        shutil.rmtree(os.path.join(scene, name))
    os.makedirs(os.path.join(scene, "images_4"))
    iio.imwrite(os.path.join(scene, "images_4", "a.png"), pattern_image(16, 12, 0, 1))
    with pytest.raises(DatasetError, match="train split .* is empty"):
        LLFFDataset(scene, "train")
    with pytest.raises(DatasetError, match="downsample must be positive"):
        LLFFDataset(scene, downsample=0)


# ------------------------------------------------------------------ NSVF
def test_nsvf_splits_shapes_and_rays(scenes):
    train = NSVFDataset(scenes["nsvf"], "train")
    assert_common_interface(train, 4, is_stack=False)
    assert image_indices(train, 7) == [0, 1, 2, 3]
    assert image_indices(NSVFDataset(scenes["nsvf"], "val", is_stack=True), 7) == [4]
    test = NSVFDataset(scenes["nsvf"], "test", is_stack=True)
    assert_common_interface(test, 2, is_stack=True)
    assert image_indices(test, 7) == [5, 6]
    np.testing.assert_allclose(train.scene_bbox, NSVF_BBOX)
    assert train.near_far == [0.5, 6.0] and train.white_bg is True
    np.testing.assert_allclose(np.linalg.norm(train.all_rays[:, 3:], axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(test.all_rgbs[:, 0], 1.0)  # transparent top row composited onto white
    # a pixel's ray, from the file's focal length and principal point and the pose as written
    focal, cx, cy = NSVF_INTRINSICS
    pose = np.loadtxt(os.path.join(scenes["nsvf"], "pose", "2_0001.txt"))
    row, col = 5, 11
    direction = pose[:3, :3] @ np.array([(col + 0.5 - cx) / focal, (row + 0.5 - cy) / focal, 1.0])
    np.testing.assert_allclose(test.all_rays[1, row * 16 + col],
                               np.concatenate([pose[:3, 3], direction / np.linalg.norm(direction)]), atol=1e-6)


def test_nsvf_render_path_from_test_traj_or_an_orbit(scenes):
    traj = NSVFDataset(scenes["nsvf_traj"], "test")
    written = np.loadtxt(os.path.join(scenes["nsvf_traj"], "test_traj.txt")).reshape(-1, 4, 4)
    np.testing.assert_allclose(traj.render_path, written, atol=1e-6)
    orbit = NSVFDataset(scenes["nsvf"], "test").render_path.astype(np.float64)
    center = np.mean(NSVF_BBOX, axis=0)
    assert orbit.shape == (120, 4, 4)
    assert_looks_at(orbit, center)
    train_poses = NSVFDataset(scenes["nsvf"], "train").poses.astype(np.float64)
    distances = np.linalg.norm(orbit[:, :3, 3] - center, axis=-1)
    np.testing.assert_allclose(distances, np.linalg.norm(train_poses[:, :3, 3] - center, axis=-1).mean(), rtol=1e-5)


def test_nsvf_downsample_resizes_and_scales_intrinsics(scenes):
    half = NSVFDataset(scenes["nsvf"], "test", downsample=2.0, is_stack=True)
    full = NSVFDataset(scenes["nsvf"], "test", is_stack=True)
    assert half.img_wh == (8, 6) and half.all_rgbs.shape == (2, 6, 8, 3)
    focal, cx, cy = NSVF_INTRINSICS
    np.testing.assert_allclose(half.intrinsics, [[focal / 2, 0, cx / 2], [0, focal / 2, cy / 2], [0, 0, 1]])
    coarse = full.all_rgbs.reshape(2, 6, 2, 8, 2, 3).mean((2, 4))
    assert np.abs(half.all_rgbs - coarse)[:, 3:].max() < 0.03  # away from the transparent top row


def test_nsvf_errors_name_the_problem(scenes, tmp_path):
    with pytest.raises(DatasetError, match="folder .*nowhere' does not exist"):
        NSVFDataset(str(tmp_path / "nowhere"))
    with pytest.raises(DatasetError, match="Unknown split 'dev'"):
        NSVFDataset(scenes["nsvf"], "dev")
    scene = copy_scene(scenes["nsvf"], tmp_path)
    os.remove(os.path.join(scene, "pose", "0_0002.txt"))
    with pytest.raises(DatasetError, match=r"4 images '0_\*' .* but 3 pose files"):
        NSVFDataset(scene, "train")
    with open(os.path.join(scene, "pose", "0_0002.txt"), "w") as handle:
        handle.write("1 0 0\n0 1 0\n")
    with pytest.raises(DatasetError, match="0_0002.txt' does not hold a 4x4"):
        NSVFDataset(scene, "train")
    with open(os.path.join(scene, "pose", "0_0002.txt"), "w") as handle:
        handle.write("1 0 0 x\n")
    with pytest.raises(DatasetError, match="line 1: '1 0 0 x' is not a row of numbers"):
        NSVFDataset(scene, "train")
    with open(os.path.join(scene, "bbox.txt"), "w") as handle:
        handle.write("1 1 1 0 0 0\n")
    with pytest.raises(DatasetError, match="maxima .* must exceed the minima"):
        NSVFDataset(scene, "train")
    with open(os.path.join(scene, "bbox.txt"), "w") as handle:
        handle.write("1 1 1\n")
    with pytest.raises(DatasetError, match="bbox.txt' has 3 numbers"):
        NSVFDataset(scene, "train")
    os.remove(os.path.join(scene, "bbox.txt"))
    with pytest.raises(DatasetError, match="Bounding-box file .*bbox.txt' not found"):
        NSVFDataset(scene, "train")
    scene = copy_scene(scenes["nsvf"], tmp_path / "b")
    os.remove(os.path.join(scene, "intrinsics.txt"))
    with pytest.raises(DatasetError, match="Intrinsics file .*intrinsics.txt' not found"):
        NSVFDataset(scene)
    with open(os.path.join(scene, "intrinsics.txt"), "w") as handle:
        handle.write("0 8 6 0\n")
    with pytest.raises(DatasetError, match="non-positive focal length"):
        NSVFDataset(scene)
    shutil.copy(os.path.join(scenes["nsvf"], "intrinsics.txt"), scene)
    for name in os.listdir(os.path.join(scene, "rgb")):
        if name.startswith("2_") or name.startswith("1_"):
            os.remove(os.path.join(scene, "rgb", name))
    with pytest.raises(DatasetError, match=r"No images for the test split .* 2_\*.png or 1_\*.png"):
        NSVFDataset(scene, "test")
    shutil.rmtree(os.path.join(scene, "pose"))
    with pytest.raises(DatasetError, match="pose' not found: .* one camera-to-world matrix per image"):
        NSVFDataset(scene)


def test_nsvf_intrinsics_styles(tmp_path):
    path = str(tmp_path / "intrinsics.txt")
    styles = {
        "3x3 matrix": "20 0 8.5\n0 21 6\n0 0 1\n",
        "4x4 matrix and image size": "20 0 8.5 0\n0 21 6 0\n0 0 1 0\n0 0 0 1\n12 16\n",
        "16 numbers on a line": "20 0 8.5 0 0 21 6 0 0 0 1 0 0 0 0 1\n",
    }
    for style, text in styles.items():
        open(path, "w").write(text)
        assert read_intrinsics(path) == (20.0, 21.0, 8.5, 6.0), style
    open(path, "w").write("20 8.5 6 0.\n0. 0. 0.\n0.\n1.\n12 16\n")
    assert read_intrinsics(path) == (20.0, 20.0, 8.5, 6.0), "DeepVoxels style"
    open(path, "w").write("20 8.5\n")
    with pytest.raises(DatasetError, match="neither a 3x3/4x4 matrix nor starts with 'focal cx cy'"):
        read_intrinsics(path)


# ------------------------------------------------------------------ Tanks&Temples
def test_tankstemple_constants_splits_and_circle_path(scenes):
    train = TanksTempleDataset(scenes["tankstemple"], "train")
    test = TanksTempleDataset(scenes["tankstemple"], "test", is_stack=True)
    assert_common_interface(train, 4, is_stack=False)
    assert_common_interface(test, 2, is_stack=True)
    assert image_indices(test, 6) == [4, 5], "no 2_ files: the 1_ views are the test split"
    assert train.img_wh == (16, 9) and np.allclose(train.focal, [15.0, 15.0])
    np.testing.assert_allclose(train.scene_bbox, np.asarray(TANKS_BBOX) * 1.2, rtol=1e-6)
    assert train.near_far == [0.01, 6.0] and train.white_bg is True
    path = test.render_path.astype(np.float64)
    center = test.scene_bbox.astype(np.float64).mean(0)
    assert path.shape == (200, 4, 4)
    assert_looks_at(path, center)
    offsets = path[:, :3, 3] - center
    radius = np.linalg.norm(test.scene_bbox[1] - center) * 1.2
    np.testing.assert_allclose(np.linalg.norm(offsets[:, [0, 2]], axis=-1), radius, rtol=1e-5)
    np.testing.assert_allclose(offsets[:, 1], -0.2 * test.poses[:, 1, 1].mean(), atol=1e-6)
    np.testing.assert_allclose(offsets[0], [radius, offsets[0, 1], 0.0], atol=1e-5)
    assert np.all(path[:, :3, 1] @ test.poses[:, :3, 1].mean(0) > 0), "image 'down' as the views' mean"
    half = TanksTempleDataset(scenes["tankstemple"], "test", downsample=2.0, is_stack=True)
    assert half.img_wh == (8, 4) and half.all_rgbs.shape == (2, 4, 8, 3)


# ------------------------------------------------------------------ own data
def test_own_data_split_files_camera_and_rays(scenes):
    train = OwnDataDataset(scenes["own_data"], "train")
    test = OwnDataDataset(scenes["own_data"], "test", is_stack=True)
    assert_common_interface(train, 8, is_stack=False)
    assert_common_interface(test, 2, is_stack=True)
    assert image_indices(test, OWN_N_FRAMES) == [0, 8]
    assert train.img_wh == (16, 12) and train.focal == [OWN_CAMERA["fl_x"], OWN_CAMERA["fl_y"]]
    np.testing.assert_allclose(train.scene_bbox, [[-1.5] * 3, [1.5] * 3])
    assert train.near_far == [0.1, 100.0] and train.white_bg is True
    np.testing.assert_allclose(np.linalg.norm(train.all_rays[:, 3:], axis=1), 1.0, atol=1e-6)
    gl = own_data_poses_opengl()[8]
    row, col = 2, 13
    camera = np.array([(col + 0.5 - OWN_CAMERA["cx"]) / OWN_CAMERA["fl_x"],
                       -(row + 0.5 - OWN_CAMERA["cy"]) / OWN_CAMERA["fl_y"], -1.0])  # OpenGL camera frame
    direction = gl[:3, :3] @ camera
    np.testing.assert_allclose(test.all_rays[1, row * 16 + col],
                               np.concatenate([gl[:3, 3], direction / np.linalg.norm(direction)]), atol=1e-6)
    path = test.render_path.astype(np.float64)
    assert path.shape == (120, 4, 4)
    assert_looks_at(path, np.zeros(3))
    np.testing.assert_allclose(np.linalg.norm(path[:, :3, 3], axis=-1), 3.0, rtol=1e-5)
    assert np.all(path[:, 2, 1] < 0), "image 'down' points down the world z axis (the cameras' mean)"


def test_own_data_single_transforms_file_is_split_every_8th(scenes):
    test = OwnDataDataset(scenes["own_single"], "test", is_stack=True)
    train = OwnDataDataset(scenes["own_single"], "train")
    assert os.path.basename(test.transforms_path) == "transforms.json"
    assert image_indices(test, OWN_N_FRAMES) == [0, 8], "sorted by file_path, positions 0 and 8"
    assert image_indices(train, OWN_N_FRAMES) == [1, 2, 3, 4, 5, 6, 7, 9]
    assert image_indices(OwnDataDataset(scenes["own_single"], "val"), OWN_N_FRAMES) == [0, 8]


def test_own_data_angles_default_centre_and_downsample(scenes, tmp_path):
    scene = copy_scene(scenes["own_data"], tmp_path)
    full = OwnDataDataset(scene, "test", is_stack=True)
    half = OwnDataDataset(scene, "test", downsample=2.0, is_stack=True)
    assert half.img_wh == (8, 6) and half.all_rgbs.shape == (2, 6, 8, 3)
    np.testing.assert_allclose(half.intrinsics, full.intrinsics * np.array([[0.5], [0.5], [1.0]]))
    coarse = full.all_rgbs.reshape(2, 6, 2, 8, 2, 3).mean((2, 4))
    assert np.abs(half.all_rgbs - coarse).max() < 0.02
    path = os.path.join(scene, "transforms_test.json")
    meta = json.load(open(path))
    for key in ("fl_x", "fl_y", "cx", "cy", "w", "h"):
        del meta[key]
    meta["camera_angle_x"] = 2 * np.arctan(16 / (2 * 18.0))
    json.dump(meta, open(path, "w"))
    angles = OwnDataDataset(scene, "test", is_stack=True)
    assert angles.img_wh == (16, 12)
    np.testing.assert_allclose(angles.intrinsics, [[18.0, 0, 8.0], [0, 18.0, 6.0], [0, 0, 1]])


def test_own_data_errors_name_the_problem(scenes, tmp_path):
    with pytest.raises(DatasetError,
                       match="Neither .*transforms_train.json' nor .*transforms.json' exists.*does not exist"):
        OwnDataDataset(str(tmp_path / "nowhere"))
    scene = copy_scene(scenes["own_data"], tmp_path)
    path = os.path.join(scene, "transforms_test.json")
    meta = json.load(open(path))

    def write(content):
        with open(path, "w") as handle:
            handle.write(content if isinstance(content, str) else json.dumps(content))

    write("{broken")
    with pytest.raises(DatasetError, match="transforms_test.json' is not valid JSON"):
        OwnDataDataset(scene, "test")
    write({**meta, "frames": []})
    with pytest.raises(DatasetError, match="lists no frames"):
        OwnDataDataset(scene, "test")
    write({**meta, "frames": [{"file_path": "./images/0000.png", "transform_matrix": [[1, 0, 0], [0, 1, 0]]}]})
    with pytest.raises(DatasetError, match="Frame 0 of .*'transform_matrix' must be a 4x4 matrix"):
        OwnDataDataset(scene, "test")
    write({key: value for key, value in meta.items() if key not in ("fl_x", "camera_angle_x")})
    with pytest.raises(DatasetError, match="gives no focal length: add 'fl_x'"):
        OwnDataDataset(scene, "test")
    write({**meta, "w": 20})
    with pytest.raises(DatasetError, match="0000.png. is 16x12 but .* says .* 20x12"):
        OwnDataDataset(scene, "test")
    write({**meta, "frames": [{"file_path": "./images/missing", "transform_matrix": np.eye(4).tolist()}]})
    with pytest.raises(DatasetError, match="missing.png' listed in the transforms file does not exist"):
        OwnDataDataset(scene, "test")
    single = copy_scene(scenes["own_single"], tmp_path / "s")
    meta = json.load(open(os.path.join(single, "transforms.json")))
    json.dump({**meta, "frames": meta["frames"][:1]}, open(os.path.join(single, "transforms.json"), "w"))
    with pytest.raises(DatasetError, match="has 1 frames: too few for a train split"):
        OwnDataDataset(single, "train")


# ------------------------------------------------------------------ blender / demo scene
def test_blender_render_path_circles_at_the_training_cameras(tiny_scene):
    test = BlenderDataset(tiny_scene, "test", is_stack=True)
    train = BlenderDataset(tiny_scene, "train")
    path = test.render_path.astype(np.float64)
    assert path.shape == (120, 4, 4)
    np.testing.assert_allclose(test.render_path, train.render_path, atol=1e-6)  # training cameras either way
    assert_looks_at(path, np.zeros(3))
    np.testing.assert_allclose(np.linalg.norm(path[:, :3, 3], axis=-1), 4.0, rtol=1e-5)
    elevation = np.arcsin(train.poses[:, 2, 3] / np.linalg.norm(train.poses[:, :3, 3], axis=-1)).mean()
    np.testing.assert_allclose(path[:, 2, 3], 4.0 * np.sin(elevation), rtol=1e-5)
    assert np.all(path[:, 2, 1] < 0), "image 'down' points down the world z axis"
    w, h = test.img_wh
    np.testing.assert_allclose(test.rays_for_pose(test.poses[1]), test.all_rays[1], atol=1e-6)
    assert test.rays_for_pose(test.render_path[5]).shape == (w * h, 6)


def test_orbit_path_estimates_up_and_clamps_elevation():
    up = np.array([0.0, 1.0, 0.0])
    center = np.array([0.5, -1.0, 2.0])
    poses = np.stack([look_at_opencv(center + 2.0 * np.array([np.cos(a), 0.9, np.sin(a)]) / np.hypot(1, 0.9),
                                     center, up) for a in np.arange(3) * 2 * np.pi / 3 + 0.1])
    path = orbit_path(poses, center, n_views=12)
    assert path.shape == (12, 4, 4)
    assert_looks_at(path, center)
    np.testing.assert_allclose(path[:, 1, 3] - center[1], 2.0 * 0.9 / np.hypot(1, 0.9), rtol=1e-6)
    overhead = np.stack([look_at_opencv(center + [0.0, 3.0, 0.0], center, [1.0, 0.0, 0.0])])
    steep = orbit_path(overhead, center, n_views=4, up=up)
    np.testing.assert_allclose((steep[:, 1, 3] - center[1]) / 3.0, np.sin(np.radians(80.0)), rtol=1e-6)


# ------------------------------------------------------------------ COLMAP -> transforms.json
def rotation_to_quaternion(rotation: np.ndarray) -> np.ndarray:
    """(w, x, y, z) of a proper rotation matrix (Shepperd's method, largest-component branch)."""
    trace = np.trace(rotation)
    candidates = [trace, rotation[0, 0], rotation[1, 1], rotation[2, 2]]
    k = int(np.argmax(candidates))
    if k == 0:
        w = 0.5 * np.sqrt(1 + trace)
        return np.array([w, (rotation[2, 1] - rotation[1, 2]) / (4 * w), (rotation[0, 2] - rotation[2, 0]) / (4 * w),
                         (rotation[1, 0] - rotation[0, 1]) / (4 * w)])
    i, j, l = (k - 1), k % 3, (k + 1) % 3
    q = np.zeros(4)
    q[1 + i] = 0.5 * np.sqrt(1 + rotation[i, i] - rotation[j, j] - rotation[l, l])
    q[0] = (rotation[l, j] - rotation[j, l]) / (4 * q[1 + i])
    q[1 + j] = (rotation[j, i] + rotation[i, j]) / (4 * q[1 + i])
    q[1 + l] = (rotation[l, i] + rotation[i, l]) / (4 * q[1 + i])
    return q


def write_colmap_text_model(folder, poses_opengl: np.ndarray, names: list[str], camera_line: str) -> None:
    """cameras.txt and images.txt for OpenGL camera-to-world poses (COLMAP: world-to-camera, OpenCV)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "cameras.txt"), "w") as handle:
        handle.write("# Camera list with one line of data per camera:\n" + camera_line + "\n")
    lines = ["# Image list with two lines of data per image:"]
    for index, (pose, name) in enumerate(zip(poses_opengl, names)):
        c2w_cv = pose @ np.diag([1.0, -1.0, -1.0, 1.0])
        rotation = c2w_cv[:3, :3].T
        translation = -rotation @ c2w_cv[:3, 3]
        q = rotation_to_quaternion(rotation) * (-1 if index % 2 else 1)  # q and -q: the same rotation
        lines.append(f"{index + 1} {' '.join(f'{v:.12f}' for v in (*q, *translation))} 1 {name}")
        lines.append("" if index == 0 else "10.5 20.5 -1 3.0 4.0 17")  # 2-D points; may be empty
    with open(os.path.join(folder, "images.txt"), "w") as handle:
        handle.write("\n".join(lines) + "\n")


def test_colmap_text_model_converts_to_a_loadable_transforms_json(scenes, tmp_path, capsys):
    scene = tmp_path / "colmap_scene"
    shutil.copytree(os.path.join(scenes["own_data"], "images"), scene / "images")
    names = sorted(os.listdir(scene / "images"))
    poses = own_data_poses_opengl()
    camera = f"1 PINHOLE 16 12 {OWN_CAMERA['fl_x']} {OWN_CAMERA['fl_y']} {OWN_CAMERA['cx']} {OWN_CAMERA['cy']}"
    order = [3, 0, 7, 1, 9, 2, 8, 4, 6, 5]  # COLMAP lists images in registration order
    write_colmap_text_model(scene / "text", poses[order], [names[i] for i in order], camera)

    out = str(scene / "transforms.json")
    assert colmap_to_transforms.main(["--model", str(scene / "text"), "--images", str(scene / "images"),
                                      "--out", out, "--no_normalize"]) == 0
    meta = json.load(open(out))
    assert [frame["file_path"] for frame in meta["frames"]] == [f"./images/{name}" for name in names]
    np.testing.assert_allclose([frame["transform_matrix"] for frame in meta["frames"]], poses, atol=1e-9)
    assert (meta["w"], meta["h"], meta["fl_x"], meta["fl_y"], meta["cx"], meta["cy"]) == (16, 12, 18.0, 19.0, 7.5, 6.5)
    np.testing.assert_allclose(meta["camera_angle_x"], 2 * np.arctan(16 / 36.0))
    assert not os.path.exists(scene / "images_undistorted"), "a shared pinhole camera needs no resampling"

    assert colmap_to_transforms.main(["--model", str(scene / "text"), "--images", str(scene / "images"),
                                      "--out", out]) == 0
    meta = json.load(open(out))
    normalized = np.array([frame["transform_matrix"] for frame in meta["frames"]])
    up = normalized[:, :3, 1].mean(0)
    np.testing.assert_allclose(up / np.linalg.norm(up), [0, 0, 1], atol=1e-9)
    box = np.array(meta["aabb"])  # no sparse points: fitted to where the views overlap, centred, largest side 3
    np.testing.assert_allclose(box.mean(0), 0, atol=1e-9)
    np.testing.assert_allclose((box[1] - box[0]).max(), 3.0)
    dataset = OwnDataDataset(str(scene), "test", is_stack=True)
    assert image_indices(dataset, OWN_N_FRAMES) == [0, 8] and dataset.all_rays.shape == (2, 192, 6)
    np.testing.assert_allclose(dataset.scene_bbox, box, rtol=1e-6)

    write_colmap_text_model(scene / "fov", poses[:2], names[:2], "1 FOV 16 12 18 19 7.5 6.5 0.1")
    capsys.readouterr()
    assert colmap_to_transforms.main(["--model", str(scene / "fov"), "--images", str(scene / "images"),
                                      "--out", str(tmp_path / "x.json")]) == 2
    assert "Camera 1 uses the FOV model, which is not supported" in capsys.readouterr().err
    two_cameras = scene / "two_cameras"
    write_colmap_text_model(two_cameras, poses[:4], names[:4], camera + "\n2 PINHOLE 16 12 30 30 8 6")
    images_txt = (two_cameras / "images.txt").read_text().replace(f" 1 {names[1]}", f" 2 {names[1]}")
    (two_cameras / "images.txt").write_text(images_txt)
    assert colmap_to_transforms.main(["--model", str(two_cameras), "--images", str(scene / "images"),
                                      "--out", str(tmp_path / "two" / "transforms.json")]) == 0
    assert "resampled into one pinhole camera" in capsys.readouterr().out
    assert len(os.listdir(tmp_path / "two" / "images_undistorted")) == 4 + 1  # and the stamp file
    assert colmap_to_transforms.main(["--model", str(tmp_path / "none"), "--images", "x", "--out", "y"]) == 2
    assert "holds no COLMAP model" in capsys.readouterr().err
