"""Lean views: rays and colours made on demand are the eager loaders' numbers, in the same order.

``fixtures/views_before_lazy_loading.npz`` holds what the loaders gave when they still built
every ray up front (commit dbf9bad, ``fixtures/make_views_before_lazy_loading.py``): each
format's training rays and colours, the first batches the trainer's sampler drew after the
box filter, and the rays an alpha grid kept. The lean loaders must reproduce them bit for bit.
"""
import os

import numpy as np
import pytest
import jittor as jt

from fake_datasets import make_llff, make_nsvf, make_own_data, make_tankstemple
from model_factory import tiny_model
from tensorf_jt import kernels
from tensorf_jt.rendering.alpha_grid import AlphaGridMask
from tensorf_jt.dataLoader import (BlenderDataset, LLFFDataset, NSVFDataset, OwnDataDataset, RayBatchDataset,
                                   TanksTempleDataset)
from tensorf_jt.dataLoader.demo_scene import DemoSceneSpec, generate
from tensorf_jt.training.ray_filtering import filtering_ray_ids

pytestmark = pytest.mark.floats  # two code paths' floats, or floats against fixtures

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "views_before_lazy_loading.npz")


@pytest.fixture(scope="module")
def golden():
    return np.load(FIXTURE)


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    root = tmp_path_factory.mktemp("lean")
    demo = generate(str(root / "demo"), DemoSceneSpec(image_size=24, n_train=6, n_val=1, n_test=2, supersampling=2))
    llff, nsvf = make_llff(str(root / "llff")), make_nsvf(str(root / "nsvf"))
    return {
        "blender": (BlenderDataset, demo, {}), "blender_half": (BlenderDataset, demo, {"downsample": 2.0}),
        "llff": (LLFFDataset, llff, {}), "llff_eighth": (LLFFDataset, llff, {"downsample": 8.0}),
        "nsvf": (NSVFDataset, nsvf, {}), "nsvf_half": (NSVFDataset, nsvf, {"downsample": 2.0}),
        "tankstemple": (TanksTempleDataset, make_tankstemple(str(root / "tanks")), {}),
        "own_data": (OwnDataDataset, make_own_data(str(root / "own")), {}),
    }


@pytest.mark.parametrize("name", ["blender", "blender_half", "llff", "llff_eighth", "nsvf", "nsvf_half",
                                  "tankstemple", "own_data"])
def test_rays_and_colours_are_the_eager_loaders_bit_for_bit(scenes, golden, name):
    loader, folder, options = scenes[name]
    views = loader(folder, "train", **options)
    np.testing.assert_array_equal(views.all_rays, golden[f"{name}_rays"])
    np.testing.assert_array_equal(views.all_rgbs, golden[f"{name}_rgbs"])
    ids = np.random.default_rng(3).permutation(views.n_rays)[:257]  # a batch mixing every view
    np.testing.assert_array_equal(views.rays_at(ids), golden[f"{name}_rays"][ids])
    np.testing.assert_array_equal(views.rgbs_at(ids), golden[f"{name}_rgbs"][ids])
    w, h = views.img_wh
    for view in (0, views.n_views - 1):
        np.testing.assert_array_equal(views.view_rays(view), golden[f"{name}_rays"].reshape(-1, h * w, 6)[view])
        np.testing.assert_array_equal(views.view_rgbs(view), golden[f"{name}_rgbs"].reshape(-1, h * w, 3)[view])
    stacked = loader(folder, "train", is_stack=True, **options)
    assert stacked.all_rays.shape == (views.n_views, h * w, 6) and stacked.all_rgbs.shape == (views.n_views, h, w, 3)
    assert len(stacked) == views.n_views and len(views) == views.n_rays


def test_views_keep_pixels_not_rays(scenes):
    views = BlenderDataset(scenes["blender"][1], "train")
    stored = [value.nbytes for value in vars(views).values() if isinstance(value, np.ndarray)]
    w, h = views.img_wh
    assert views._pixels.dtype == np.uint8 and views._pixels.nbytes == views.n_views * h * w * 4
    assert sum(stored) < views.n_rays * 9 * 4 / 2, "the views must cost far less than float32 rays and colours"


def test_the_sampler_draws_the_same_batches_after_the_same_filtering(scenes, golden):
    views = BlenderDataset(scenes["blender"][1], "train")
    model = tiny_model(grid=(16, 15, 14), density_shift=-2.0)
    rows = filtering_ray_ids(model, views, bbox_only=True)
    np.testing.assert_array_equal(rows, golden["bbox_rows"])
    stream = iter(RayBatchDataset(views, 256, seed=0, rows=rows))
    for k in range(3):
        rays, rgbs = next(stream)
        np.testing.assert_array_equal(rays.numpy(), golden[f"batch{k}_rays"])
        np.testing.assert_array_equal(rgbs.numpy(), golden[f"batch{k}_rgbs"])
    volume = np.zeros((14, 15, 16), np.float32)
    volume[4:10, 3:9, 2:7] = 1.0
    model.field.alphaMask = AlphaGridMask(jt.array(model.field.aabb), jt.array(volume))
    for path in kernels.KERNELS:
        model.kernels = path
        kept = filtering_ray_ids(model, views, rows, bbox_only=False, chunk=1000)
        np.testing.assert_array_equal(kept, golden[f"alpha_rows_{path}"])
