"""Importance resampling of unbounded rays: the bin edges against an independent inverse CDF,
where the bins go, the fused kernel against the reference, both kernel paths alike, the
pixels against a numpy composition, checkpoints, the refusals, and a small room trained from
resampled rays."""
import json

import numpy as np
import pytest
import jittor as jt

from model_factory import tiny_model
from tensorf_jt.cli.train import main as train_main
from tensorf_jt.config import parse_run_config
from tensorf_jt.errors import CheckpointError, ConfigError
from tensorf_jt.formats.checkpoint import load_checkpoint, save_checkpoint
from tensorf_jt.formats.checkpoint_checks import check_model_kwargs
from tensorf_jt.kernels.resampling import packed_importance_edges
from tensorf_jt.rendering import compositing
from tensorf_jt.rendering.resampling import UNIFORM_PADDING, importance_edges
from test_unbounded import UNBOUNDED_PSNR, mixed_rays, room, room_argv, unbounded_model  # noqa: F401 (room: a fixture)

pytestmark = pytest.mark.floats  # two code paths' floats, or floats against fixtures


def random_intervals(n_rays: int, width: int, seed: int):
    """Ascending intervals per ray, with gaps between some and empty slots (start == end) at
    random, and weights with zeros among them."""
    rng = np.random.default_rng(seed)
    lengths = rng.uniform(0.05, 1.0, (n_rays, width))
    gaps = rng.uniform(0.0, 0.5, (n_rays, width)) * (rng.uniform(size=(n_rays, width)) < 0.3)
    empty = rng.uniform(size=(n_rays, width)) < 0.2
    lengths[empty] = 0.0
    start = np.cumsum(lengths + gaps, 1) - lengths + rng.uniform(0.5, 2.0, (n_rays, 1))
    end = start + lengths
    weights = rng.uniform(0, 1, (n_rays, width)) ** 3 * (rng.uniform(size=(n_rays, width)) < 0.7)
    return start.astype(np.float32), end.astype(np.float32), weights.astype(np.float32)


def inverse_cdf_numpy(start, end, weights, n_bins, jitter):
    """The edges by interpolating each ray's piecewise-linear CDF of distance (independent of
    the module's comparisons)."""
    edges = np.zeros((start.shape[0], n_bins + 1))
    for r in range(start.shape[0]):
        valid = end[r] > start[r]
        w = np.where(valid, weights[r], 0.0).astype(np.float64)
        w = w + valid * (UNIFORM_PADDING * w.sum() + 1e-12) / max(valid.sum(), 1)
        w = w[valid] / w[valid].sum()
        knots_t = np.stack([start[r][valid], end[r][valid]], 1).reshape(-1)
        knots_u = np.stack([np.cumsum(w) - w, np.cumsum(w)], 1).reshape(-1)
        levels = np.clip((np.arange(n_bins + 1) + jitter[r] - 0.5) / n_bins, 0.0, 1.0 - 1e-5)
        edges[r] = np.interp(levels, knots_u, knots_t)
    return edges


def test_importance_edges_invert_the_padded_cdf():
    start, end, weights = random_intervals(40, 25, seed=1)
    jitter = np.random.default_rng(2).uniform(0, 1, 40).astype(np.float32)
    edges = importance_edges(jt.array(start), jt.array(end), jt.array(weights), 12, jt.array(jitter)).numpy()
    np.testing.assert_allclose(edges, inverse_cdf_numpy(start, end, weights, 12, jitter), rtol=1e-4, atol=2e-4)
    assert (np.diff(edges, axis=1) >= -1e-5).all()
    middle = importance_edges(jt.array(start), jt.array(end), jt.array(weights), 12, None).numpy()
    np.testing.assert_allclose(middle, inverse_cdf_numpy(start, end, weights, 12, np.full(40, 0.5)),
                               rtol=1e-4, atol=2e-4)


def test_bins_crowd_where_the_weight_is():
    """One opaque interval among faint ones: as many bins as its share of the padded weight lie
    in it, and without jitter the first and last edges are where the ray's distribution begins
    and ends."""
    start = np.arange(20, dtype=np.float32)[None] + 1.0
    end = start + 1.0
    weights = np.full((1, 20), 1e-6, np.float32)
    weights[0, 7] = 0.9
    edges = importance_edges(jt.array(start), jt.array(end), jt.array(weights), 100, None).numpy()[0]
    inside = ((edges >= 8.0) & (edges <= 9.0)).sum()
    share = (0.9 + UNIFORM_PADDING * 0.9 / 20) / (0.9 * (1 + UNIFORM_PADDING))  # its share of the padded weight
    assert abs(inside - 100 * share) <= 2
    assert edges[0] == pytest.approx(1.0) and edges[-1] == pytest.approx(21.0, abs=0.05)


def test_the_fused_kernel_finds_the_reference_edges():
    """Packed intervals (empty ones among them, which the kernel skips) against the dense reference."""
    start, end, weights = random_intervals(50, 30, seed=3)
    jitter = np.random.default_rng(4).uniform(0, 1, 50).astype(np.float32)
    offsets = jt.array((np.arange(51) * 30).astype(np.int32))
    fused = packed_importance_edges(jt.array(start.reshape(-1)), jt.array((end - start).reshape(-1)),
                                    jt.array(weights.reshape(-1)), offsets, jt.array(jitter), 9,
                                    UNIFORM_PADDING).numpy()
    reference = importance_edges(jt.array(start), jt.array(end), jt.array(weights), 9, jt.array(jitter)).numpy()
    np.testing.assert_allclose(fused, reference, rtol=1e-4, atol=2e-4)
    empty = packed_importance_edges(jt.zeros(0), jt.zeros(0), jt.zeros(0), jt.zeros(3, dtype="int32"),
                                    jt.array(jitter[:2]), 4, UNIFORM_PADDING).numpy()
    np.testing.assert_array_equal(empty, np.zeros((2, 5), np.float32))


def test_both_paths_resample_and_render_alike_with_gradients():
    model = unbounded_model(density_shift=-1.0, importance_samples=16)
    model.update_alpha_mask((12, 12, 12))
    rays = jt.array(mixed_rays(240, seed=6))
    rng = np.random.default_rng(7)
    jitter = jt.array(rng.uniform(0, 1, 240).astype(np.float32))
    results = {}
    for kernels in ("fused", "reference"):
        model.kernels = kernels
        jt.set_seed(11)  # the same bin jitter in both paths
        output = model(rays, perturb=True, jitter=jitter)
        grads = jt.grad(jt.sqr(output.rgb - 0.3).mean(), list(model.field.state_dict().values()))
        results[kernels] = (output.rgb.numpy(), output.depth.numpy(), [g.numpy() for g in grads])
    (rgb_f, depth_f, grads_f), (rgb_r, depth_r, grads_r) = results["fused"], results["reference"]
    assert np.isfinite(rgb_f).all() and rgb_f.std() > 1e-3
    np.testing.assert_allclose(rgb_f, rgb_r, atol=1e-4)
    np.testing.assert_allclose(depth_f, depth_r, rtol=1e-3, atol=1e-3)
    for name, g_f, g_r in zip(model.field.state_dict(), grads_f, grads_r):
        assert np.isfinite(g_f).all() and np.isfinite(g_r).all(), name
        assert np.abs(g_f - g_r).max() / max(np.abs(g_r).max(), 1e-12) < 5e-3, name


def test_pixels_composite_the_bins_found_in_numpy():
    """A pixel is composited from the bins' middles, with the bins' widths as gaps, the bins
    found here in numpy from the first pass's weights."""
    model = unbounded_model(density_shift=-1.0, importance_samples=6, kernels="reference")
    rays = mixed_rays(30, seed=15)
    rgb = model(jt.array(rays)).rgb.numpy()
    field, scale = model.field, model.compositing.distance_scale
    origins, directions = rays[:, :3], rays[:, 3:6]
    samples = model.sampler.dense(jt.array(origins), jt.array(directions), model.sampler.n_samples, None)
    n_rays, width = samples.z.shape
    kept = np.zeros(n_rays * width, bool)
    kept[samples.kept.numpy()] = True
    sigma = jt.zeros(n_rays * width)
    sigma[samples.kept] = field.density(samples.xyz[samples.kept])
    gaps = samples.dist * scale
    _, weights, _ = compositing.raw2alpha(compositing.cap_optical_depth(sigma.reshape(n_rays, width), gaps), gaps)
    z, dist = samples.z.numpy(), samples.dist.numpy()
    edges = inverse_cdf_numpy(z, np.where(kept.reshape(n_rays, width), z + dist, z), weights.numpy(), 6,
                              np.full(n_rays, 0.5))
    middles, widths = 0.5 * (edges[:, :-1] + edges[:, 1:]), np.diff(edges, axis=1)
    world = jt.array((origins[:, None] + directions[:, None] * middles[..., None]).reshape(-1, 3).astype(np.float32))
    points = model.sampler.to_model(world)
    bin_sigma = field.density(points).numpy().reshape(n_rays, 6).astype(np.float64)
    depth = np.minimum(bin_sigma * widths * scale, compositing.MAX_OPTICAL_DEPTH)
    alpha = 1.0 - np.exp(-depth)
    transmittance = np.cumprod(np.concatenate([np.ones((n_rays, 1)), 1.0 - alpha + 1e-10], 1), 1)[:, :-1]
    bin_weights = alpha * transmittance
    colours = field.shade(field.normalize_coord(points), jt.array(np.repeat(directions, 6, axis=0))).numpy()
    shaded = bin_weights > model.compositing.weight_threshold
    expected = (np.where(shaded, bin_weights, 0)[..., None] * colours.reshape(n_rays, 6, 3)).sum(1)
    assert rgb.std() > 1e-3
    np.testing.assert_allclose(rgb, np.clip(expected, 0, 1), atol=2e-4)


@pytest.mark.slow
def test_a_room_trained_from_resampled_rays_reaches_the_unbounded_floor(room, tmp_path):
    """The regression room of tests/test_unbounded.py, trained and rendered from 32 samples a ray
    (measured here: 22.27 dB, against 22.31 dB from every sample)."""
    assert train_main(room_argv(room, tmp_path, "--expname", "resampled", "--importance_samples", "32")) == 0
    psnr = json.load(open(tmp_path / "resampled" / "imgs_test_all" / "metrics.json"))["psnr"]
    assert psnr > UNBOUNDED_PSNR, psnr
    model, _ = load_checkpoint(str(tmp_path / "resampled" / "resampled.th"))
    assert model.importance_samples == 32 and "scene_contraction" in model.get_kwargs()


def test_checkpoint_keeps_the_importance_samples(tmp_path):
    model = unbounded_model(density_shift=-1.0, importance_samples=24)
    path = str(tmp_path / "u.th")
    save_checkpoint(model, path)
    loaded, _ = load_checkpoint(path)
    assert loaded.importance_samples == 24
    rays = jt.array(mixed_rays(60, seed=9))
    np.testing.assert_allclose(loaded(rays).rgb.numpy(), model(rays).rgb.numpy(), atol=1e-6)


def test_bad_importance_samples_are_refused():
    with pytest.raises(ConfigError, match="importance_samples must be 0 .off. or, for an unbounded scene, positive; "
                                          "got 8 for a bounded scene"):
        tiny_model(importance_samples=8)
    kwargs = unbounded_model(importance_samples=8).get_kwargs()
    with pytest.raises(CheckpointError, match=r"kwargs.importance_samples should be"):
        check_model_kwargs(dict(kwargs, importance_samples=0), "f.th")
    bounded = {key: value for key, value in kwargs.items() if key not in ("scene_contraction", "foreground_aabb")}
    with pytest.raises(CheckpointError, match="has importance_samples but no scene_contraction"):
        check_model_kwargs(bounded, "f.th")


@pytest.mark.parametrize("flags, message", [
    (["--config", "configs/demo_room.txt", "--importance_samples", "-1"],
     "importance_samples must be 0 .off. or positive, got -1"),
    (["--config", "configs/flower.txt", "--importance_samples", "32"],
     "importance_samples places the samples of unbounded scenes, but ndc_ray = 1"),
])
def test_bad_importance_settings_are_refused(flags, message):
    with pytest.raises(ConfigError, match=message):
        parse_run_config(flags)
