"""The reference's camera attributes on every pinhole loader: ``intrinsics``, ``poses``, ``proj_mat``,
and the downsample warning for images already at the size the original would train on."""
import warnings

import numpy as np
import pytest

from fake_datasets import make_llff, make_nsvf, make_own_data, make_tankstemple
from tensorf_jt.dataLoader import BlenderDataset, LLFFDataset, NSVFDataset, OwnDataDataset, TanksTempleDataset
from tensorf_jt.dataLoader.demo_scene import DemoSceneSpec, generate
from tensorf_jt.rendering.rays import BLENDER_TO_OPENCV


@pytest.fixture(scope="module")
def datasets(tmp_path_factory, tiny_scene):
    root = tmp_path_factory.mktemp("attributes")
    return {
        "blender": BlenderDataset(tiny_scene, "test"),
        "llff": LLFFDataset(make_llff(str(root / "llff")), "test"),
        "nsvf": NSVFDataset(make_nsvf(str(root / "nsvf")), "train"),
        "tankstemple": TanksTempleDataset(make_tankstemple(str(root / "tanks")), "train"),
        "own_data": OwnDataDataset(make_own_data(str(root / "own")), "test"),
    }


@pytest.mark.parametrize("name", ["blender", "llff", "nsvf", "tankstemple", "own_data"])
def test_proj_mat_is_intrinsics_times_the_inverse_pose(datasets, name):
    views = datasets[name]
    poses = views.poses.astype(np.float64)
    if name == "llff":
        poses = poses @ BLENDER_TO_OPENCV
    expected = views.intrinsics[None] @ np.linalg.inv(poses)[:, :3]
    assert views.proj_mat.shape == (views.n_views, 3, 4) and views.proj_mat.dtype == np.float32
    np.testing.assert_allclose(views.proj_mat, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["blender", "nsvf", "own_data"])
def test_proj_mat_projects_a_pixel_rays_points_back_onto_that_pixel(datasets, name):
    views = datasets[name]
    w, h = views.img_wh
    view, row, col = views.n_views - 1, h // 3, w - 2
    ray = views.view_rays(view)[row * w + col].astype(np.float64)
    point = np.append(ray[:3] + 1.7 * ray[3:], 1.0)
    u, v, z = views.proj_mat[view].astype(np.float64) @ point
    np.testing.assert_allclose([u / z, v / z], [col + 0.5, row + 0.5], atol=1e-3)


def test_images_already_at_the_originals_size_are_named_with_the_flag_that_matches_it(tmp_path):
    scene = generate(str(tmp_path / "scene100"), DemoSceneSpec(image_size=100, n_train=2, n_val=0, n_test=1,
                                                               supersampling=1))
    with pytest.warns(UserWarning, match=r"These images are 100x100: the original TensoRF reads downsample 8 as "
                                         r"800x800 / 8, .* giving 12x12. For the original's result set "
                                         r"downsample_train = 1 and downsample_test = 1"):
        views = BlenderDataset(scene, "train", downsample=8.0)
    assert views.img_wh == (12, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert BlenderDataset(scene, "train").img_wh == (100, 100)
        assert BlenderDataset(scene, "train", downsample=2.0).img_wh == (50, 50)  # the original would want 400 px
