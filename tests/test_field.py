"""TensorVMSplit's field, upsampling and shrinking against numpy computations on its parameters."""
import numpy as np
import pytest
import jittor as jt

from model_factory import tiny_model
from numpy_reference import bilinear, linear, resize_align_corners

pytestmark = pytest.mark.floats  # two code paths' floats, or floats against fixtures


def tiny_field(grid=(8, 9, 10), **settings):
    return tiny_model(grid, **settings).field


def saved(model, name: str) -> np.ndarray:
    """Parameter ``name`` in the reference's layout, as a checkpoint holds it."""
    return model.reference_state_dict()[name].numpy()


def saved_grids(model, kind: str) -> list[np.ndarray]:
    """The three ``kind`` ('density_plane', 'app_line', ...) tensors in the reference's layout."""
    return [saved(model, f"{kind}.{i}") for i in range(3)]


def np_products(model, planes, lines, points):
    """Per point, the concatenated plane*line products of the three axes (reference layout)."""
    rows = []
    for p in points:
        parts = []
        for i, vec_id in enumerate(model.vecMode):
            m0, m1 = model.matMode[i]
            plane = planes[i][0]
            line = lines[i][0, :, :, 0]
            parts.append(bilinear(plane, p[m0], p[m1]) * linear(line, p[vec_id]))
        rows.append(np.concatenate(parts))
    return np.array(rows)


def test_density_and_appearance_features_match_numpy():
    model = tiny_field()
    points = np.random.default_rng(0).uniform(-1.05, 1.05, (64, 3)).astype(np.float32)
    density = model.compute_densityfeature(jt.array(points)).numpy()
    expected_density = np_products(model, saved_grids(model, "density_plane"), saved_grids(model, "density_line"),
                                   points).sum(1)
    np.testing.assert_allclose(density, expected_density, atol=1e-5)
    app = model.compute_appfeature(jt.array(points)).numpy()
    expected_app = (np_products(model, saved_grids(model, "app_plane"), saved_grids(model, "app_line"), points)
                    @ model.basis_mat.weight.numpy().T)
    np.testing.assert_allclose(app, expected_app, atol=1e-5)
    assert app.shape == (64, 5)


def test_saved_layout_follows_the_reference_and_stored_layout_is_channel_last():
    model = tiny_field(grid=(8, 9, 10))
    # plane i spans matMode[i] = (w axis, h axis); line i runs along vecMode[i]
    assert saved(model, "density_plane.0").shape == (1, 2, 9, 8)
    assert saved(model, "density_plane.1").shape == (1, 3, 10, 8)
    assert saved(model, "density_plane.2").shape == (1, 2, 10, 9)
    assert saved(model, "density_line.0").shape == (1, 2, 10, 1)
    assert saved(model, "app_line.2").shape == (1, 3, 8, 1)
    assert tuple(model.basis_mat.weight.shape) == (5, 8)
    assert set(model.state_dict()) >= {"density_plane.0", "app_line.2", "basis_mat.weight",
                                       "renderModule.mlp.0.weight", "renderModule.mlp.4.bias"}
    # in memory a texel's components are contiguous: planes [H, W, C], lines [L, C]
    assert tuple(model.density_plane[1].shape) == (10, 8, 3)
    assert tuple(model.app_line[2].shape) == (8, 3)
    np.testing.assert_array_equal(saved(model, "density_plane.1")[0].transpose(1, 2, 0), model.density_plane[1].numpy())
    np.testing.assert_array_equal(saved(model, "app_line.2")[0, :, :, 0].T, model.app_line[2].numpy())
    for name, value in model.reference_state_dict().items():
        np.testing.assert_array_equal(model.from_reference(name, value).numpy(), model.state_dict()[name].numpy())


def test_step_size_and_sample_count():
    sampler = tiny_model(grid=(11, 11, 11)).sampler
    assert np.isclose(sampler.step_size, 0.5 * 3.0 / 10)
    assert sampler.n_samples == int(np.sqrt(27.0) / 0.15) + 1


def test_upsampling_is_bilinear_with_aligned_corners():
    model = tiny_field(grid=(4, 5, 6))
    before_plane = saved(model, "app_plane.1")[0]
    before_line = saved(model, "density_line.0")[0]
    model.upsample_volume_grid([7, 9, 11])
    assert model.gridSize == [7, 9, 11]
    np.testing.assert_allclose(saved(model, "app_plane.1")[0], resize_align_corners(before_plane, 11, 7), atol=1e-5)
    np.testing.assert_allclose(saved(model, "density_line.0")[0], resize_align_corners(before_line, 11, 1), atol=1e-5)


def test_shrink_crops_to_voxel_aligned_box():
    model = tiny_field(grid=(10, 10, 10))
    voxel = 3.0 / 9
    top_left, bottom_right = np.array([3, 2, 4]), np.array([6, 8, 9])
    new_aabb = np.stack([-1.5 + top_left * voxel, -1.5 + bottom_right * voxel]).astype(np.float32)
    plane0, line0 = saved(model, "density_plane.0"), saved(model, "app_line.0")
    model.shrink(new_aabb)
    assert model.gridSize == [4, 7, 6]
    np.testing.assert_allclose(model.aabb, new_aabb, atol=1e-6)
    np.testing.assert_array_equal(saved(model, "density_plane.0"), plane0[:, :, 2:9, 3:7])
    np.testing.assert_array_equal(saved(model, "app_line.0"), line0[:, :, 4:10, :])  # line 0 runs along z


def test_regularisers_match_numpy():
    model = tiny_field()
    planes, lines = saved_grids(model, "density_plane"), saved_grids(model, "density_line")
    l1 = sum(np.abs(p).mean() + np.abs(l).mean() for p, l in zip(planes, lines))
    np.testing.assert_allclose(model.density_L1().item(), l1, rtol=1e-5)

    def tv(x):
        b, c, h, w = x.shape
        vertical = np.sum((x[:, :, 1:] - x[:, :, :-1]) ** 2) / (c * (h - 1) * w)
        horizontal = np.sum((x[:, :, :, 1:] - x[:, :, :, :-1]) ** 2) / max(c * h * (w - 1), 1)
        return 2 * (vertical + horizontal) / b

    np.testing.assert_allclose(model.TV_loss_density().item(), sum(tv(p) * 1e-2 for p in planes), rtol=1e-5)
    ortho = 0.0
    for line in saved_grids(model, "density_line") + saved_grids(model, "app_line"):
        v = line[0, :, :, 0]
        gram = v @ v.T
        ortho += np.abs(gram[~np.eye(len(v), dtype=bool)]).mean()
    np.testing.assert_allclose(model.vector_comp_diffs().item(), ortho, rtol=1e-5)


def test_regulariser_gradients_match_numpy():
    # The regularisers read the parameters as stored (planes [H, W, C], lines [L, C]); their
    # gradients against the closed forms, computed in numpy on the same arrays.
    model = tiny_field()
    planes, density_lines, app_lines = list(model.density_plane), list(model.density_line), list(model.app_line)
    loss = model.density_L1() + model.TV_loss_density() + model.vector_comp_diffs()
    grads = jt.grad(loss, planes + density_lines + app_lines)

    def tv_grad(x):
        g = np.zeros_like(x)
        for axis in (0, 1):
            if x.shape[axis] < 2:
                continue
            d = np.diff(x, axis=axis) * (4.0 / (x.size / x.shape[axis] * (x.shape[axis] - 1)))
            lead, lag = [slice(None)] * 3, [slice(None)] * 3
            lead[axis], lag[axis] = slice(1, None), slice(None, -1)
            g[tuple(lead)] += d
            g[tuple(lag)] -= d
        return g

    def ortho_grad(v):
        c = v.shape[1]
        signs = np.sign(v.T @ v) * (1 - np.eye(c))
        return v @ (signs + signs.T) / (c * (c - 1))

    for plane, grad in zip(planes, grads[:3]):
        x = plane.numpy().astype(np.float64)
        expected = np.sign(x) / x.size + 1e-2 * tv_grad(x)
        np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-4, atol=1e-7)
    for line, grad in zip(density_lines, grads[3:6]):
        v = line.numpy().astype(np.float64)
        np.testing.assert_allclose(grad.numpy(), np.sign(v) / v.size + ortho_grad(v), rtol=1e-4, atol=1e-7)
    for line, grad in zip(app_lines, grads[6:]):
        np.testing.assert_allclose(grad.numpy(), ortho_grad(line.numpy().astype(np.float64)), rtol=1e-4, atol=1e-7)


def test_shrink_to_a_flat_region_keeps_two_voxels():
    voxel = 3.0 / 9
    flat = np.array([[-1.5 + 2 * voxel, -1.5 + 3 * voxel, -1.5 + 9 * voxel],
                     [-1.5 + 5 * voxel, -1.5 + 6 * voxel, -1.5 + 9 * voxel]], np.float32)  # z: one layer, at the top
    scene = tiny_model(grid=(10, 10, 10))
    scene.shrink(flat)
    assert scene.gridSize == [4, 4, 2]
    np.testing.assert_allclose(scene.field.aabb[:, 2], [-1.5 + 8 * voxel, 1.5], atol=1e-6)
    assert np.isfinite(scene.sampler.step_size) and scene.sampler.step_size > 0
