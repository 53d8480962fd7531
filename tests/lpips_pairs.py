"""The image pairs of the LPIPS fixture, made the same way by the fixture's generator and the tests.

Renders of the demo scene (``demo_scene.render_view``, numpy only) and the kinds of damage a
radiance field's renders show: noise, blur, a shift, quantisation, another viewpoint; plus an
identical pair (distance 0) and sizes from 64 pixels to 800x800. Deterministic: fixed views
and ``numpy.random.default_rng`` seeds; ``pair_digest`` lets the test check that it scores
the very images the fixture was made from.
"""
from __future__ import annotations

import hashlib
import sys
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _scene_module():
    """``tensorf_jt.dataLoader.demo_scene`` without running the packages' ``__init__`` (which
    imports Jittor), so the generator can run where only torch is installed."""
    if "tensorf_jt" not in sys.modules:
        for name, folder in (("tensorf_jt", ROOT / "tensorf_jt"), ("tensorf_jt.dataLoader", ROOT / "tensorf_jt" / "dataLoader")):
            package = types.ModuleType(name)
            package.__path__ = [str(folder)]
            sys.modules[name] = package
    from tensorf_jt.dataLoader import demo_scene
    return demo_scene


def _render(size: int, view: int, supersampling: int = 2) -> np.ndarray:
    """Test view ``view`` of the demo scene at ``size`` pixels, RGB on white, [H, W, 3] float32 in [0, 1]."""
    scene = _scene_module()
    spec = scene.DemoSceneSpec(image_size=size, n_train=1, n_val=0, n_test=8, supersampling=supersampling)
    rgba, _ = scene.render_view(spec, scene.look_at_origin(scene.camera_positions(spec)["test"][view]))
    rgb = rgba[..., :3] * rgba[..., 3:] + (1.0 - rgba[..., 3:])
    return np.clip(rgb, 0.0, 1.0).astype(np.float32)


def _blur(image: np.ndarray) -> np.ndarray:
    """A 5x5 binomial blur, edges repeated."""
    taps = np.array([1, 4, 6, 4, 1], np.float32) / 16
    padded = np.pad(image, ((2, 2), (2, 2), (0, 0)), mode="edge")
    rows = sum(taps[i] * padded[i:i + image.shape[0]] for i in range(5))
    return sum(taps[i] * rows[:, i:i + image.shape[1]] for i in range(5)).astype(np.float32)


def _noisy(image: np.ndarray, sigma: float, seed: int) -> np.ndarray:
    noise = np.random.default_rng(seed).normal(0.0, sigma, image.shape)
    return np.clip(image + noise, 0.0, 1.0).astype(np.float32)


def _smooth_random(height: int, width: int, seed: int) -> np.ndarray:
    """A random image with structure at several scales."""
    rng = np.random.default_rng(seed)
    image = np.zeros((height, width, 3), np.float32)
    for cells in (4, 9, 23):
        coarse = rng.random((cells, cells, 3)).astype(np.float32)
        rows = np.minimum((np.arange(height) * cells) // height, cells - 1)
        cols = np.minimum((np.arange(width) * cells) // width, cells - 1)
        image += _blur(coarse[rows][:, cols]) / 3
    return image


def image_pairs() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, image, reference) for every pair of the fixture; images [H, W, 3] float32 in [0, 1]."""
    view0, view3 = _render(128, 0), _render(128, 3)
    large = _render(800, 1, supersampling=1)
    random_a, random_b = _smooth_random(96, 80, 1), _smooth_random(96, 80, 2)
    return [
        ("render_noise", _noisy(view0, 0.05, 10), view0),
        ("render_blur", _blur(_blur(view0)), view0),
        ("render_shift", np.roll(view0, 3, axis=1), view0),
        ("render_quantised", np.round(view0 * 4) / 4, view0),
        ("render_other_view", view3, view0),
        ("render_identical", view3.copy(), view3),
        ("random_pair", random_a, random_b),
        ("random_noise", _noisy(random_a, 0.2, 11), random_a),
        ("small_64", _noisy(_render(64, 5), 0.1, 12), _render(64, 5)),
        ("render_800", _noisy(_blur(large), 0.03, 13), large),
    ]


def pair_digest(image: np.ndarray, reference: np.ndarray) -> str:
    """SHA-256 of a pair's float32 pixels."""
    data = np.ascontiguousarray(image, np.float32).tobytes() + np.ascontiguousarray(reference, np.float32).tobytes()
    return hashlib.sha256(data).hexdigest()
