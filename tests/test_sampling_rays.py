"""Camera rays and AABB sampling against closed-form expectations."""
import numpy as np
import pytest
import jittor as jt

from tensorf_jt.rendering.rays import BLENDER_TO_OPENCV, camera_rays, focal_from_fov, get_ray_directions, get_rays
from tensorf_jt.rendering.sampling import ray_box_intersection, sample_along_rays, sample_distances

pytestmark = pytest.mark.floats  # two code paths' floats, or floats against fixtures

AABB = np.array([[-1.5, -1.5, -1.5], [1.5, 1.5, 1.5]], np.float32)


def test_ray_directions_follow_pixel_centres():
    d = get_ray_directions(4, 6, (2.0, 3.0))
    assert d.shape == (4, 6, 3) and d.dtype == np.float64
    # pixel (row 1, col 4): centre (4.5, 1.5), principal point (3, 2)
    np.testing.assert_allclose(d[1, 4], [(4.5 - 3) / 2.0, (1.5 - 2) / 3.0, 1.0])


def test_blender_camera_looks_along_its_minus_z():
    # Blender camera at (0, 0, 4) looking down -z (identity rotation): centre ray goes to the origin.
    c2w = np.eye(4)
    c2w[2, 3] = 4.0
    rays = camera_rays(3, 3, focal_from_fov(3, 0.7), c2w @ BLENDER_TO_OPENCV)
    assert rays.dtype == np.float32 and rays.shape == (9, 6)
    np.testing.assert_allclose(rays[4], [0, 0, 4, 0, 0, -1], atol=1e-7)
    np.testing.assert_allclose(np.linalg.norm(rays[:, 3:], axis=1), 1.0, atol=1e-6)
    # Image row 0 is the top of the picture: its rays point up (+y in Blender's camera frame).
    assert rays[1, 4] > 0 and rays[7, 4] < 0
    o, d = get_rays(get_ray_directions(3, 3, (1.0, 1.0)), c2w @ BLENDER_TO_OPENCV)
    np.testing.assert_allclose(o, np.tile([0, 0, 4.0], (9, 1)))


def test_box_intersection_hand_computed():
    rays_o = jt.array(np.array([[-4, 0, 0], [0, 0, 0], [-4, 3, 0]], np.float32))
    rays_d = jt.array(np.array([[1, 0, 0], [0, 0, 1], [1, 0, 0]], np.float32))
    t_enter, t_exit = ray_box_intersection(rays_o, rays_d, jt.array(AABB))
    np.testing.assert_allclose(t_enter.numpy()[:2], [2.5, -1.5], atol=1e-5)
    np.testing.assert_allclose(t_exit.numpy()[:2], [5.5, 1.5], atol=1e-5)
    assert t_exit.numpy()[2] <= t_enter.numpy()[2], "a ray passing above the box misses it"


def test_samples_start_at_clamped_entry_and_step_evenly():
    rays_o = jt.array(np.array([[-4, 0, 0], [-10, 0.5, 0]], np.float32))
    rays_d = jt.array(np.array([[1, 0, 0], [1, 0, 0]], np.float32))
    xyz, z, inside = sample_along_rays(rays_o, rays_d, jt.array(AABB), (2.0, 6.0), 0.25, 40, jitter=None)
    z = z.numpy()
    np.testing.assert_allclose(z[0], 2.5 + 0.25 * np.arange(40), atol=1e-5)
    np.testing.assert_allclose(z[1], 6.0 + 0.25 * np.arange(40), atol=1e-5)  # entry 8.5 clamped to far
    np.testing.assert_allclose(xyz.numpy()[0, :, 0], -4 + z[0], atol=1e-5)
    inside_expected = np.abs(-4 + z[0]) <= 1.5
    np.testing.assert_array_equal(inside.numpy()[0], inside_expected)
    np.testing.assert_allclose(sample_distances(jt.array(z)).numpy()[0], [0.25] * 39 + [0.0], atol=1e-5)


def test_jitter_shifts_each_ray_by_one_fraction_of_a_step():
    rays_o = jt.array(np.tile(np.array([[-4, 0, 0]], np.float32), (64, 1)))
    rays_d = jt.array(np.tile(np.array([[1, 0, 0]], np.float32), (64, 1)))
    _, z, _ = sample_along_rays(rays_o, rays_d, jt.array(AABB), (2.0, 6.0), 0.25, 10, jitter=jt.rand(rays_o.shape[0]))
    shift = (z.numpy() - (2.5 + 0.25 * np.arange(10))) / 0.25
    assert np.allclose(shift, shift[:, :1], atol=1e-4), "all samples of a ray move together"
    assert shift.min() >= 0 and shift.max() < 1 and shift.std() > 0.1
