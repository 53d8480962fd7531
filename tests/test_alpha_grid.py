"""Alpha grid construction, lookup and packing."""
import numpy as np
import pytest
import jittor as jt

from tensorf_jt.rendering.alpha_grid import AlphaGridMask, binarize_alpha, occupied_bounds
from model_factory import AABB, tiny_model


def test_binarize_dilates_by_one_voxel_and_transposes_to_zyx():
    dense = np.zeros((6, 7, 8), np.float32)  # [X, Y, Z]
    dense[2, 3, 4] = 0.5
    dense[5, 0, 0] = 1e-5  # below threshold
    occupancy = binarize_alpha(jt.array(dense), 1e-3).numpy()
    assert occupancy.shape == (8, 7, 6)
    expected = np.zeros((8, 7, 6), np.float32)
    expected[3:6, 2:5, 1:4] = 1
    np.testing.assert_array_equal(occupancy, expected)


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 1), (3, 3, 3), (9, 4, 6)])
def test_binarize_is_a_zero_padded_max_pool_on_grids_of_any_size(shape):
    dense = (np.random.default_rng(sum(shape)).random(shape) ** 6).astype(np.float32)  # [X, Y, Z]
    padded = np.pad(dense.transpose(2, 1, 0), 1)
    z, y, x = shape[::-1]
    pooled = np.max([padded[a:a + z, b:b + y, c:c + x] for a in range(3) for b in range(3) for c in range(3)], 0)
    np.testing.assert_array_equal(binarize_alpha(jt.array(dense), 0.2).numpy(), (pooled >= 0.2).astype(np.float32))


def test_occupied_bounds_and_empty_mask():
    grid = np.stack(np.meshgrid(*[np.linspace(-1, 1, n) for n in (5, 5, 5)], indexing="ij"), -1).astype(np.float32)
    occupancy = np.zeros((5, 5, 5), np.float32)
    occupancy[1, 2, 3] = 1  # z=1, y=2, x=3
    bounds = occupied_bounds(jt.array(occupancy), jt.array(grid)).numpy()
    np.testing.assert_allclose(bounds, [[0.5, 0.0, -0.5], [0.5, 0.0, -0.5]])
    assert occupied_bounds(jt.zeros((5, 5, 5)), jt.array(grid)) is None


def test_sample_alpha_is_trilinear_over_the_box():
    volume = np.zeros((3, 3, 3), np.float32)
    volume[1, 1, 2] = 1  # z=1, y=1, x=2 -> world (1.5, 0, 0)
    mask = AlphaGridMask(jt.array(AABB), jt.array(volume))
    points = np.array([[1.5, 0, 0], [0.75, 0, 0], [0, 0, 0], [-1.5, 1.5, 1.5], [2.5, 0, 0], [4.0, 0, 0]], np.float32)
    # 2.5 lies a third of a voxel past the edge: zero padding blends it with the edge voxel
    np.testing.assert_allclose(mask.sample_alpha(jt.array(points)).numpy(), [1, 0.5, 0, 0, 1 / 3, 0], atol=1e-6)
    assert mask.grid_size == [3, 3, 3]


def test_pack_round_trip_is_exact():
    volume = (np.random.default_rng(0).uniform(size=(5, 6, 7)) > 0.6).astype(np.float32)
    packed = AlphaGridMask(jt.array(AABB), jt.array(volume)).packed()
    assert isinstance(packed["alphaMask.mask"], jt.Var) and packed["alphaMask.shape"] == (1, 1, 5, 6, 7)
    restored = AlphaGridMask.unpacked(packed["alphaMask.shape"], packed["alphaMask.mask"], packed["alphaMask.aabb"])
    np.testing.assert_array_equal(restored.alpha_volume.numpy(), volume)
    np.testing.assert_array_equal(restored.aabb.numpy(), AABB)


def test_update_alpha_mask_finds_dense_region_and_warns_when_empty():
    model = tiny_model(grid=(12, 12, 12), density_shift=0.0)
    with pytest.warns(UserWarning, match="alpha mask is empty"):
        empty = tiny_model(grid=(12, 12, 12), density_shift=-60.0)
        assert empty.update_alpha_mask((12, 12, 12)) is None
    assert empty.alphaMask is None
    bounds = model.update_alpha_mask((12, 12, 12))
    assert bounds.shape == (2, 3) and np.all(bounds[0] <= bounds[1])
    assert model.alphaMask is not None and 0 < model.alphaMask.occupied_fraction() <= 1
