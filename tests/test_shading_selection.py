"""The shading roulette: its draws and selection against numpy, the two render paths alike,
the pixel colour unbiased, and the bounded mode left as the reference."""
import numpy as np
import pytest
import jittor as jt

from model_factory import rays_towards_box, tiny_model
from tensorf_jt.config import parse_run_config
from tensorf_jt.errors import ConfigError
from tensorf_jt.rendering import renderer
from tensorf_jt.rendering.shading_selection import PHI, plan_shading, roulette_draws, weighted_colours
from test_unbounded import mixed_rays, unbounded_model

THRESHOLD = 1e-4


def test_draws_step_each_rays_number_by_the_golden_ratio():
    rng = np.random.default_rng(0)
    ray_draws = rng.uniform(0, 1, 50).astype(np.float32)
    ordinal = rng.integers(0, 300, 50).astype(np.int32)
    draws = roulette_draws(jt.array(ray_draws), jt.array(ordinal)).numpy()
    expected = np.modf(ordinal.astype(np.float64) * PHI + ray_draws)[0]
    np.testing.assert_allclose(draws, expected, atol=1e-4)
    assert draws.min() >= 0 and draws.max() < 1


def test_the_plan_matches_numpy():
    rng = np.random.default_rng(1)
    weights = np.concatenate([rng.uniform(0, 2 * THRESHOLD, 200), rng.uniform(0, 0.02, 300),
                              rng.uniform(0.01, 0.5, 100)]).astype(np.float32)
    value_draws, grad_draws = rng.uniform(0, 1, (2, weights.size)).astype(np.float32)
    tau = 0.01
    plan = plan_shading(jt.array(weights), THRESHOLD, tau, jt.array(value_draws), jt.array(grad_draws))
    eligible = weights > THRESHOLD
    in_value = (weights > tau) | (eligible & (value_draws * tau < weights))
    in_grad = (weights > tau) | (eligible & (grad_draws * tau < weights))
    factor = np.maximum(tau / np.maximum(weights, THRESHOLD), 1.0)
    np.testing.assert_array_equal(plan.graded.numpy(), np.flatnonzero(in_grad))
    np.testing.assert_array_equal(plan.value_only.numpy(), np.flatnonzero(in_value & ~in_grad))
    np.testing.assert_allclose(plan.grad_scale.numpy(), factor[in_grad], rtol=1e-6)
    np.testing.assert_allclose(plan.value_scale.numpy(), np.where(in_value, factor, 0)[in_grad], rtol=1e-6)
    np.testing.assert_allclose(plan.value_only_scale.numpy(), factor[in_value & ~in_grad], rtol=1e-6)
    faint = eligible & (weights <= tau)
    assert 0 < in_grad[faint].sum() < faint.sum() and (in_value & ~in_grad).any()


@pytest.mark.parametrize("tau, draws", [(0.0, True), (0.01, False), (THRESHOLD / 2, True)])
def test_without_roulette_every_sample_above_the_threshold_is_shaded(tau, draws):
    weights = np.random.default_rng(2).uniform(0, 0.02, 500).astype(np.float32)
    given = jt.array(np.full(500, 0.99, np.float32)) if draws else None
    plan = plan_shading(jt.array(weights), THRESHOLD, tau, given, given)
    np.testing.assert_array_equal(plan.graded.numpy(), np.flatnonzero(weights > THRESHOLD))
    assert plan.value_scale is None and plan.grad_scale is None and not plan.has_value_only


def test_a_share_counts_one_factor_in_value_and_the_other_in_gradient():
    rng = np.random.default_rng(3)
    weights_np, colours_np = rng.uniform(0.01, 0.5, 6).astype(np.float32), rng.uniform(0, 1, (6, 3)).astype(np.float32)
    value_scale_np = np.array([1, 0, 4, 2, 0, 1], np.float32)
    grad_scale_np = np.array([1, 3, 0, 2, 5, 1], np.float32)
    weights, colours = jt.array(weights_np), jt.array(colours_np)
    shares = weighted_colours(weights, colours, jt.array(value_scale_np), jt.array(grad_scale_np))
    np.testing.assert_allclose(shares.numpy(), (weights_np * value_scale_np)[:, None] * colours_np, rtol=1e-6)
    grad_weights, grad_colours = jt.grad(shares.sum(), [weights, colours])
    np.testing.assert_allclose(grad_weights.numpy(), grad_scale_np * colours_np.sum(1), rtol=1e-6)
    np.testing.assert_allclose(grad_colours.numpy(), np.repeat((weights_np * grad_scale_np)[:, None], 3, 1), rtol=1e-6)


def _faint_model():
    """An unbounded model whose rays hold many samples of weight between its threshold and the
    roulette's (picked with probability 0.1 or more: the average of a few hundred draws sees
    every sample's share, not only the frequent ones)."""
    model = unbounded_model(density_shift=-1.0)
    model.updateAlphaMask((12, 12, 12))
    model.rayMarch_weight_thres = 1e-3
    model.shading_roulette = 0.01
    return model


def test_both_paths_shade_the_same_samples_with_the_same_gradients():
    model = _faint_model()
    n = 240
    rays = jt.array(mixed_rays(n, seed=6))
    rng = np.random.default_rng(7)
    jitter = jt.array(rng.uniform(0, 1, n).astype(np.float32))
    draws = jt.array(rng.uniform(0, 1, (n, 2)).astype(np.float32))
    results = {}
    for name, render in (("packed", lambda: renderer.render_packed(model, rays, False, model.nSamples, jitter, False,
                                                                    None, False, draws)),
                         ("dense", lambda: renderer.render_dense(model, rays, False, True, model.nSamples, False,
                                                                  jitter, False, None, False, draws))):
        model.kernels = "fused" if name == "packed" else "reference"
        rgb = render()[0]
        grads = jt.grad(jt.sqr(rgb - 0.3).mean(), list(model.state_dict().values()))
        results[name] = (rgb.numpy(), [g.numpy() for g in grads])
    np.testing.assert_allclose(results["packed"][0], results["dense"][0], atol=2e-5)
    for g_packed, g_dense in zip(results["packed"][1], results["dense"][1]):
        assert np.abs(g_packed - g_dense).max() <= 2e-3 * max(np.abs(g_dense).max(), 1e-12)
    without = renderer.render_packed(model, rays, False, model.nSamples, jitter, False, None, False, None)[0]
    assert np.abs(without.numpy() - results["packed"][0]).max() > 1e-4  # the roulette did change some pixels


def test_the_colour_and_its_gradient_are_unbiased():
    """Averaged over many draws, the pixel colour comes within five standard errors of shading
    every sample, and so does the loss's gradient against the fully shaded image as target
    (zero: a single draw, in both value and gradient, would give the gradient of its own
    variance there instead)."""
    model = _faint_model()
    n, trials = 120, 200
    rays = jt.array(mixed_rays(n, seed=8))
    rng = np.random.default_rng(9)
    jitter = jt.array(rng.uniform(0, 1, n).astype(np.float32))
    parameters = list(model.state_dict().values())

    def render(draws):
        return renderer.render_packed(model, rays, False, model.nSamples, jitter, False, None, False, draws)[0]

    full = render(None).detach()
    colours, gradients = [], []
    for _ in range(trials):
        rgb = render(jt.array(rng.uniform(0, 1, (n, 2)).astype(np.float32)))
        colours.append(rgb.numpy())
        gradients.append(np.concatenate([g.numpy().ravel() for g in jt.grad(jt.sqr(rgb - full).sum(), parameters)]))
    for samples, expected in ((np.array(colours), full.numpy()), (np.array(gradients), 0.0)):
        spread = samples.std(0)
        assert spread.max() > 1e-3 * np.abs(samples).max()  # random, yet
        rounding = 1e-5 * np.abs(samples).max()  # summation order differs with the samples shaded
        assert (np.abs(samples.mean(0) - expected) <= 5 * spread / np.sqrt(trials) + rounding).all()


def test_the_bounded_mode_and_rendering_outside_training_shade_as_the_reference():
    bounded = tiny_model(density_shift=-1.0)
    rays = jt.array(rays_towards_box(64, seed=3))
    jitter = jt.array(np.random.default_rng(4).uniform(0, 1, 64).astype(np.float32))
    plain = bounded(rays, white_bg=False, is_train=True, jitter=jitter)[0].numpy()
    bounded.shading_roulette = 0.05
    np.testing.assert_array_equal(bounded(rays, white_bg=False, is_train=True, jitter=jitter)[0].numpy(), plain)
    model = _faint_model()
    unbounded_rays = jt.array(mixed_rays(60, seed=5))
    model.shading_roulette = 0.0
    reference = model(unbounded_rays)[0].numpy()
    model.shading_roulette = 0.05
    np.testing.assert_array_equal(model(unbounded_rays)[0].numpy(), reference)


@pytest.mark.parametrize("value", ["-0.01", "1"])
def test_a_roulette_weight_outside_zero_to_one_is_refused(value):
    message = f"shading_roulette must be 0 \\(off\\) or a weight below 1, got {float(value)}"
    with pytest.raises(ConfigError, match=message):
        parse_run_config(["--config", "configs/demo_room.txt", "--shading_roulette", value])
