"""Compositing against hand-computed transmittance and weights."""
import numpy as np
import pytest
import jittor as jt

from tensorf_jt.rendering.compositing import accumulate, raw2alpha

pytestmark = pytest.mark.floats  # two code paths' floats, or floats against fixtures


def sigma_for(alphas, dist=1.0):
    return -np.log(1.0 - np.asarray(alphas, dtype=np.float64)) / dist


def test_transmittance_and_weights_hand_computed():
    alphas = [0.3, 0.8, 0.8, 0.0, 0.5]
    sigma = jt.array(sigma_for(alphas)[None].astype(np.float32))
    dist = jt.ones((1, 5))
    alpha, weights, last = raw2alpha(sigma, dist)
    np.testing.assert_allclose(alpha.numpy()[0], alphas, atol=1e-6)
    # T = 1, 0.7, 0.14, 0.028, 0.028 ; w = alpha * T
    np.testing.assert_allclose(weights.numpy()[0], [0.3, 0.56, 0.112, 0.0, 0.014], atol=1e-6)
    np.testing.assert_allclose(last.numpy()[0], [0.014], atol=1e-6)


def test_accumulate_white_background_and_depth():
    weights = jt.array(np.array([[0.3, 0.56, 0.112], [0.0, 0.0, 0.0]], np.float32))
    colours = np.array([[[1, 0, 0], [0, 1, 0], [0, 0, 1]], [[1, 1, 1]] * 3], np.float32)
    z_vals = jt.array(np.array([[2.0, 3.0, 4.0], [2.0, 3.0, 4.0]], np.float32))
    background_depth = jt.array(np.array([0.5, -0.25], np.float32))
    shares = weights.unsqueeze(-1) * jt.array(colours)
    rgb, depth, acc = accumulate(weights, shares, z_vals, background_depth, white_background=True)
    leftover = 1 - 0.972
    np.testing.assert_allclose(rgb.numpy(), [[0.3 + leftover, 0.56 + leftover, 0.112 + leftover], [1, 1, 1]], atol=1e-6)
    np.testing.assert_allclose(acc.numpy(), [0.972, 0.0], atol=1e-6)
    np.testing.assert_allclose(depth.numpy(), [0.3 * 2 + 0.56 * 3 + 0.112 * 4 + leftover * 0.5, -0.25], atol=1e-5)
    rgb_black, _, _ = accumulate(weights, shares, z_vals, background_depth, white_background=False)
    np.testing.assert_allclose(rgb_black.numpy()[1], [0, 0, 0], atol=1e-6)


def test_weight_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    sigma = rng.uniform(0.1, 2.0, size=(3, 6))
    dist = rng.uniform(0.05, 0.3, size=(3, 6))
    colour = rng.uniform(size=(3, 6))

    def objective(s):
        alpha = 1 - np.exp(-s * dist)
        trans = np.cumprod(np.concatenate([np.ones((3, 1)), 1 - alpha + 1e-10], 1), 1)[:, :-1]
        return np.sum(alpha * trans * colour)

    sigma_var = jt.array(sigma.astype(np.float32))
    _, weights, _ = raw2alpha(sigma_var, jt.array(dist.astype(np.float32)))
    grad = jt.grad((weights * jt.array(colour.astype(np.float32))).sum(), sigma_var).numpy()
    numeric = np.zeros_like(sigma)
    for index in np.ndindex(*sigma.shape):
        step = np.zeros_like(sigma)
        step[index] = 1e-6
        numeric[index] = (objective(sigma + step) - objective(sigma - step)) / 2e-6
    np.testing.assert_allclose(grad, numeric, rtol=1e-3, atol=1e-5)


def test_softplus_is_accurate_where_densities_start():
    from tensorf_jt.models.tensor_base import softplus

    x = np.concatenate([np.linspace(-30, 30, 601), [-10.0, -5.0, -4.999, 20.0, 20.001]]).astype(np.float32)
    x_var = jt.array(x)
    expected = np.log1p(np.exp(x.astype(np.float64)))
    np.testing.assert_allclose(softplus(x_var).numpy(), expected, rtol=2e-5)
    grad = jt.grad(softplus(x_var).sum(), x_var).numpy()
    np.testing.assert_allclose(grad, 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-4, atol=1e-7)
