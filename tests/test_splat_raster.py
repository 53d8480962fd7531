"""The splat rasteriser: the fused kernels against the plain-Jittor reference (values and
gradients) and both against an independent numpy renderer; the CUDA kernels compile."""
from __future__ import annotations

import numpy as np
import pytest
import jittor as jt

import splat_numpy
from tensorf_jt.formats.gaussian_ply import Splats
from tensorf_jt.splats.camera import PinholeCamera
from tensorf_jt.splats.params import SplatParameters
from tensorf_jt.splats.rasterizer import render_splats

pytestmark = pytest.mark.floats  # two code paths' floats, or floats against fixtures

BACKGROUND = np.array([0.2, 0.5, 0.9], np.float32)


def look_at(position, target=(0.0, 0.0, 0.0)) -> np.ndarray:
    """[3, 4] OpenCV camera-to-world looking from ``position`` at ``target`` (world +z up)."""
    forward = np.asarray(target, float) - np.asarray(position, float)
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    return np.stack([right, down, forward, np.asarray(position, float)], axis=1)


def camera(width=40, height=28, position=(0.3, -3.0, 1.0)) -> PinholeCamera:
    return PinholeCamera(look_at(position), 36.0, 38.0, width / 2.0 + 0.3, height / 2.0 - 0.2, width, height)


def random_splats(n=120, degree=3, seed=0, spread=0.5) -> Splats:
    """Splats around the origin: elongated and flat, some very opaque (alpha clamped, pixels that
    stop early), some faint, one behind the camera, colours that clamp at 0 in places."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=spread, size=(n, 3))
    means[0] = (0.3, -4.0, 1.0)  # behind the default camera
    log_scales = rng.uniform(np.log(0.03), np.log(0.3), size=(n, 3))
    quats = rng.normal(size=(n, 4))
    logits = rng.uniform(-3.0, 6.0, size=n)
    sh = rng.normal(scale=0.4, size=(n, (degree + 1) ** 2, 3))
    sh[:, 0] = rng.uniform(-1.6, 1.6, size=(n, 3))
    return Splats(*(a.astype(np.float32) for a in (means, log_scales, quats, logits, sh)))


def both_paths(splats: Splats, cam: PinholeCamera, weights: np.ndarray):
    """{kernels: (image, transmittance, gradients by name)} for loss = sum(weights * image)."""
    results = {}
    for kernels in ("fused", "reference"):
        params = SplatParameters.from_splats(splats)
        image, _, transmittance = render_splats(params, cam, BACKGROUND, kernels)
        loss = (image * jt.array(weights)).sum()
        names = list(params.groups())
        grads = jt.grad(loss, list(params.groups().values()))
        results[kernels] = (image.numpy(), transmittance.numpy(),
                            {name: grad.numpy() for name, grad in zip(names, grads)})
    return results


def test_the_numpy_renderer_sees_what_the_scene_is_built_to_show():
    """The test scene exercises the clamps and the early stop it is meant to."""
    splats, cam = random_splats(), camera()
    projected = splat_numpy.project(splats, cam)
    assert not projected["visible"][0], "a splat behind the camera is culled"
    assert projected["visible"].sum() > 100
    assert (projected["opacity"][projected["visible"]] > 0.99).any(), "some alpha is clamped at 0.99"
    image, _, transmittance = splat_numpy.render(splats, cam, BACKGROUND)
    assert transmittance.max() > 0.5, "open pixels"
    assert transmittance.min() < 2e-4, "pixels that stop before their transmittance falls below 1e-4"
    assert np.isfinite(image).all()


@pytest.mark.parametrize("degree", [0, 1, 3])
def test_both_paths_render_what_numpy_renders(degree):
    """Images within 2e-5: each path rounds a pixel's few dozen float32 terms (an exponential, a
    product with its transmittance) in its own order, ~1e-6 each; numpy works in float64."""
    splats, cam = random_splats(degree=degree, seed=degree), camera()
    expected, expected_depth, expected_t = splat_numpy.render(splats, cam, BACKGROUND)
    for kernels in ("fused", "reference"):
        image, depth, transmittance = render_splats(SplatParameters.from_splats(splats), cam, BACKGROUND, kernels)
        np.testing.assert_allclose(image.numpy(), expected, atol=2e-5, err_msg=kernels)
        np.testing.assert_allclose(transmittance.numpy(), expected_t, atol=2e-5, err_msg=kernels)
        np.testing.assert_allclose(depth.numpy(), expected_depth, atol=2e-5 * 4.0, err_msg=kernels)  # z up to ~4


def test_fused_gradients_match_the_reference():
    """Each parameter's gradient within 1e-4 of its largest entry: a gradient sums a splat's
    contributions over its pixels (up to a few hundred here), each through a dozen products of
    the compositing and the projection's chain rule, rounded in another order by each path:
    under 300 x 12 x 2^-24 = 2e-4 of the summed magnitudes at worst, ~1e-6 measured."""
    splats, cam = random_splats(n=60, seed=4), camera(width=36, height=20)
    weights = np.random.default_rng(5).uniform(-1, 1, (cam.height, cam.width, 3)).astype(np.float32)
    results = both_paths(splats, cam, weights)
    fused, reference = results["fused"], results["reference"]
    np.testing.assert_allclose(fused[0], reference[0], atol=2e-5)
    worst = {name: float(np.abs(fused[2][name] - expected).max()) / max(float(np.abs(expected).max()), 1e-8)
             for name, expected in reference[2].items()}
    assert all(np.abs(expected).max() > 0 for expected in reference[2].values()), "every parameter gets a gradient"
    assert max(worst.values()) < 1e-4, worst


def test_an_empty_scene_and_splats_all_behind_the_camera_render_the_background():
    """Exactly the background: 0 + 1 * background is exact in any rounding."""
    cam = camera()
    behind = random_splats(n=5)
    behind.means[:] = (0.3, -4.0, 1.0)
    for kernels in ("fused", "reference"):
        image, _, transmittance = render_splats(SplatParameters.from_splats(behind), cam, BACKGROUND, kernels)
        np.testing.assert_array_equal(image.numpy(), np.broadcast_to(BACKGROUND, image.shape))
        np.testing.assert_array_equal(transmittance.numpy(), 1.0)
