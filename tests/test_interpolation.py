"""Grid lookups against a per-point numpy implementation of grid_sample(align_corners=True, zeros)."""
import numpy as np
import pytest
import jittor as jt

from tensorf_jt.rendering.interpolation import bilinear_sample, linear_sample, trilinear_sample

from numpy_reference import corners_1d

pytestmark = pytest.mark.floats  # two code paths' floats, or floats against fixtures


def np_bilinear(plane, u, v):
    height, width, channels = plane.shape
    out = np.zeros((len(u), channels))
    for n in range(len(u)):
        for y, wy in corners_1d(v[n], height):
            for x, wx in corners_1d(u[n], width):
                out[n] += wx * wy * plane[y, x]
    return out


def test_bilinear_matches_numpy_inside_and_outside_the_grid():
    rng = np.random.default_rng(1)
    plane = rng.normal(size=(7, 5, 4)).astype(np.float32)
    uv = rng.uniform(-1.3, 1.3, size=(300, 2)).astype(np.float32)
    uv[:4] = [[-1, -1], [1, 1], [1, -1], [0.0, 1.0]]  # exact corners and edges
    got = bilinear_sample(jt.array(plane), jt.array(uv[:, 0]), jt.array(uv[:, 1])).numpy()
    np.testing.assert_allclose(got, np_bilinear(plane, uv[:, 0], uv[:, 1]), atol=1e-5)
    assert np.all(got[np.abs(uv).max(1) > 1 + 2 / 4] == 0), "far outside the grid must read zero"


def test_bilinear_gradient_scatters_weights_into_the_plane():
    rng = np.random.default_rng(2)
    plane = rng.normal(size=(6, 8, 3)).astype(np.float32)
    uv = rng.uniform(-1.1, 1.1, size=(50, 2)).astype(np.float32)
    upstream = rng.normal(size=(50, 3)).astype(np.float32)
    plane_var = jt.array(plane)
    out = bilinear_sample(plane_var, jt.array(uv[:, 0]), jt.array(uv[:, 1]))
    grad = jt.grad((out * jt.array(upstream)).sum(), plane_var).numpy()
    expected = np.zeros_like(plane)
    for n in range(len(uv)):
        for y, wy in corners_1d(uv[n, 1], 6):
            for x, wx in corners_1d(uv[n, 0], 8):
                expected[y, x] += wx * wy * upstream[n]
    np.testing.assert_allclose(grad, expected, atol=1e-5)


def test_linear_matches_numpy():
    rng = np.random.default_rng(3)
    line = rng.normal(size=(9, 4)).astype(np.float32)
    t = rng.uniform(-1.2, 1.2, size=100).astype(np.float32)
    expected = np.stack([sum(w * line[i] for i, w in corners_1d(c, 9)) if corners_1d(c, 9) else np.zeros(4)
                         for c in t])
    np.testing.assert_allclose(linear_sample(jt.array(line), jt.array(t)).numpy(), expected, atol=1e-5)


def test_trilinear_matches_numpy_with_xyz_order():
    rng = np.random.default_rng(4)
    volume = rng.uniform(size=(3, 4, 5)).astype(np.float32)  # [D, H, W]
    coords = rng.uniform(-1.2, 1.2, size=(200, 3)).astype(np.float32)
    expected = np.zeros(200)
    for n, (cx, cy, cz) in enumerate(coords):
        for z, wz in corners_1d(cz, 3):
            for y, wy in corners_1d(cy, 4):
                for x, wx in corners_1d(cx, 5):
                    expected[n] += wx * wy * wz * volume[z, y, x]
    got = trilinear_sample(jt.array(volume), jt.array(coords)).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_empty_input_gives_empty_output():
    plane = jt.array(np.ones((4, 4, 2), np.float32))
    empty = jt.zeros(0, dtype="float32")
    assert tuple(bilinear_sample(plane, empty, empty).shape) == (0, 2)
