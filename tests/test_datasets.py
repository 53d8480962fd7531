"""The blender loader, the ray-batch Dataset and the demo scene generator."""
import json
import os
import shutil
import time

import imageio.v3 as iio
import numpy as np
import pytest
import jittor as jt

from tensorf_jt.dataLoader import BlenderDataset, RayBatchDataset
from tensorf_jt.dataLoader.ray_batches import ArrayRays
from tensorf_jt.dataLoader.views import ViewDataset
from tensorf_jt.dataLoader.demo_scene import DemoSceneSpec, camera_positions, ensure_generated, generate
from tensorf_jt.errors import ConfigError, DatasetError


def test_demo_scene_layout(tiny_scene):
    for split, count in (("train", 6), ("val", 1), ("test", 2)):
        meta = json.load(open(os.path.join(tiny_scene, f"transforms_{split}.json")))
        assert np.isclose(meta["camera_angle_x"], 0.6911112070083618) and len(meta["frames"]) == count
        frame = meta["frames"][0]
        image = iio.imread(os.path.join(tiny_scene, frame["file_path"] + ".png"))
        assert image.shape == (24, 24, 4) and image.dtype == np.uint8
        assert image[0, 0, 3] == 0 and image[:, :, 3].max() == 255, "transparent background, opaque objects"
        c2w = np.array(frame["transform_matrix"])
        assert c2w.shape == (4, 4) and np.isclose(np.linalg.norm(c2w[:3, 3]), 4.0) and c2w[2, 3] > 0
        assert np.allclose(c2w[:3, :3] @ c2w[:3, :3].T, np.eye(3), atol=1e-9)
        # Blender cameras look along their -z axis: towards the origin here.
        assert np.allclose(-c2w[:3, 2], -c2w[:3, 3] / 4.0, atol=1e-9)
    depth = np.load(os.path.join(tiny_scene, "test", "r_0_depth.npy"))
    alpha = iio.imread(os.path.join(tiny_scene, "test", "r_0.png"))[..., 3]
    assert depth.dtype == np.float32 and depth.shape == (24, 24)
    assert np.all(depth[alpha == 255] > 2.0) and np.all(depth[alpha == 0] == 0)
    assert np.all(depth < 6.0)


def test_demo_scene_is_deterministic_and_regenerated_on_spec_change(tmp_path):
    spec = DemoSceneSpec(image_size=8, n_train=2, n_val=1, n_test=1, supersampling=1)
    first, second = generate(str(tmp_path / "a"), spec), generate(str(tmp_path / "b"), spec)
    for name in ("train/r_1.png", "test/r_0_depth.npy", "transforms_train.json"):
        assert open(os.path.join(first, name), "rb").read() == open(os.path.join(second, name), "rb").read()
    assert ensure_generated(first, spec) is False
    assert ensure_generated(first, DemoSceneSpec(image_size=10, n_train=2, n_val=1, n_test=1, supersampling=1))
    assert iio.imread(os.path.join(first, "train/r_0.png")).shape == (10, 10, 4)


def test_demo_cameras_cover_the_upper_hemisphere():
    positions = camera_positions(DemoSceneSpec(n_train=100))
    elevation = np.degrees(np.arcsin(positions["train"][:, 2] / 4.0))
    assert 7 < elevation.min() < 10 and 78 < elevation.max() < 81
    azimuth = np.arctan2(positions["train"][:, 1], positions["train"][:, 0])
    assert np.histogram(azimuth, bins=8)[0].min() >= 8, "training views spread around the scene"


def test_blender_loader_shapes_and_white_background(tiny_scene):
    train = BlenderDataset(tiny_scene, "train")
    assert train.all_rays.shape == (6 * 24 * 24, 6) and train.all_rays.dtype == np.float32
    assert train.all_rgbs.shape == (6 * 24 * 24, 3) and train.all_rgbs.dtype == np.float32
    assert train.img_wh == (24, 24) and np.isclose(train.focal, 12 / np.tan(0.5 * 0.6911112070083618))
    np.testing.assert_allclose(np.linalg.norm(train.all_rays[:, 3:], axis=1), 1, atol=1e-6)
    np.testing.assert_allclose(train.all_rgbs[0], [1, 1, 1])  # corner pixel: background composited white
    test = BlenderDataset(tiny_scene, "test", is_stack=True)
    assert test.all_rays.shape == (2, 576, 6) and test.all_rgbs.shape == (2, 24, 24, 3)
    assert test.all_depths.shape == (2, 24, 24)


def test_downsample_really_resizes(tiny_scene):
    half = BlenderDataset(tiny_scene, "test", downsample=2.0, is_stack=True)
    full = BlenderDataset(tiny_scene, "test", is_stack=True)
    assert half.img_wh == (12, 12) and half.all_rgbs.shape == (2, 12, 12, 3)
    assert np.isclose(half.focal, full.focal / 2)
    assert half.all_depths.shape == (2, 12, 12)
    coarse = full.all_rgbs.reshape(2, 12, 2, 12, 2, 3).mean((2, 4))
    assert np.abs(half.all_rgbs - coarse).mean() < 0.05


def test_loader_errors_name_the_problem(tiny_scene, tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        BlenderDataset(str(tmp_path / "nowhere"), "train")
    broken = tmp_path / "broken"
    shutil.copytree(tiny_scene, broken)
    (broken / "transforms_train.json").write_text("{not json")
    with pytest.raises(DatasetError, match="not valid JSON"):
        BlenderDataset(str(broken), "train")
    (broken / "transforms_train.json").write_text(json.dumps({"frames": []}))
    with pytest.raises(DatasetError, match="lacks the key 'camera_angle_x'"):
        BlenderDataset(str(broken), "train")
    meta = json.load(open(os.path.join(tiny_scene, "transforms_train.json")))
    meta["frames"][1]["file_path"] = "./train/missing"
    (broken / "transforms_train.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match="missing.png' listed in the transforms file does not exist"):
        BlenderDataset(str(broken), "train")


def test_ray_batches_cover_each_epoch_without_repeats():
    rays = np.arange(100 * 6, dtype=np.float32).reshape(100, 6)
    rgbs = rays[:, :3].copy()
    batches = RayBatchDataset(ArrayRays(rays, rgbs), batch_size=30, seed=1)
    assert len(batches) == 3
    stream = iter(batches)
    seen = []
    for _ in range(3):
        batch_rays, batch_rgbs = next(stream)
        assert isinstance(batch_rays, jt.Var) and tuple(batch_rays.shape) == (30, 6)
        np.testing.assert_array_equal(batch_rays.numpy()[:, :3], batch_rgbs.numpy())
        seen.extend((batch_rays.numpy()[:, 0] / 6).astype(int).tolist())
    assert len(set(seen)) == 90, "no ray repeats within an epoch"
    next_epoch = (next(stream)[0].numpy()[:, 0] / 6).astype(int)
    assert len(set(next_epoch)) == 30
    with pytest.raises(ConfigError, match="batch_size must be positive"):
        RayBatchDataset(ArrayRays(rays, rgbs), batch_size=0)


@pytest.mark.parametrize("n_rays, batch_size, rays_per_batch", [(100, 30, 30), (25, 30, 24)])
def test_the_shares_of_a_batch_together_are_the_batch_one_process_draws(n_rays, batch_size, rays_per_batch):
    """Data-parallel shares: same permutation, consecutive equal parts; with fewer rays than a
    batch, as many as split evenly (25 rays over 3 processes: 24)."""
    rays = np.arange(n_rays * 6, dtype=np.float32).reshape(n_rays, 6)
    source = ArrayRays(rays, rays[:, :3].copy())
    parts = [RayBatchDataset(source, batch_size, seed=4, part=(index, 3)) for index in range(3)]
    whole = RayBatchDataset(source, batch_size - batch_size % 3, seed=4)
    for batch in range(len(parts[0])):
        union = np.concatenate([part.ray_ids(batch) for part in parts])
        assert len(union) == rays_per_batch
        np.testing.assert_array_equal(union, whole.ray_ids(batch)[:rays_per_batch])
    with pytest.raises(ConfigError, match=r"batch_size \(31\) does not split into 3 equal shares"):
        RayBatchDataset(source, 31, part=(0, 3))
    with pytest.raises(DatasetError, match="2 training rays cannot be shared among 3 processes"):
        RayBatchDataset(ArrayRays(rays[:2], rays[:2, :3]), 30, part=(0, 3))


def median_batch_seconds(batches: RayBatchDataset, count: int = 20, repeats: int = 3) -> float:
    """Median time to get one batch onto Jittor's device, after a first one: the lowest of
    ``repeats`` medians, so that a moment of load from another process on the shared machine
    does not decide the figure."""
    medians = []
    for _ in range(repeats):
        stream = iter(batches)
        next(stream)[0].sync()
        timings = []
        for _ in range(count):
            start = time.perf_counter()
            batch_rays, batch_rgbs = next(stream)
            batch_rays.sync(), batch_rgbs.sync()
            timings.append(time.perf_counter() - start)
        medians.append(float(np.median(timings)))
    return min(medians)


def test_a_batch_made_from_lean_views_is_fast():
    """Rays made on demand for a 4096-ray batch drawn from 10 views of 200x200: < 5 ms too."""
    views = ViewDataset()
    views.img_wh, views.is_stack = (200, 200), False
    rng = np.random.default_rng(0)
    pixels = [rng.integers(0, 256, (200, 200, 4), dtype=np.uint8) for _ in range(10)]
    poses = np.tile(np.eye(4), (10, 1, 1))
    poses[:, :3, 3] = rng.normal(size=(10, 3))
    views.store_views(pixels, [np.float32(255)] * 10, poses, rng.normal(size=(200, 200, 3)))
    seconds = median_batch_seconds(RayBatchDataset(views, batch_size=4096))
    assert seconds < 0.005, f"median {seconds * 1e3:.2f} ms per batch"


def test_ray_batch_is_served_whole_and_fast():
    """A 4096-ray batch must cost far less than a training step (~0.1-0.5 s here): < 5 ms."""
    rays = np.random.default_rng(0).normal(size=(400_000, 6)).astype(np.float32)
    seconds = median_batch_seconds(RayBatchDataset(ArrayRays(rays, rays[:, :3]), batch_size=4096))
    assert seconds < 0.005, f"median {seconds * 1e3:.2f} ms per batch"
