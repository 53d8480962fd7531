"""Putting a model together: the scene's space decided once, the sampler chosen from kwargs, the
route from the kernels, and a sampler written outside the package rendering a field."""
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import jittor as jt

from model_factory import AABB, rays_towards_box, tiny_model
from tensorf_jt.config import RunConfig
from tensorf_jt.models import TensoRFModel
from tensorf_jt.models.factory import MODELS, choose_sampler, compose, scene_space
from tensorf_jt.models.tensorf_model import REFERENCE_KWARGS
from tensorf_jt.rendering.contraction import MODEL_BOX
from tensorf_jt.rendering.renderer import Compositing, DenseRoute, PackedRoute, ResampledRoute
from tensorf_jt.rendering.samplers import BoxSampler, NDCSampler, UnboundedSampler

FOREGROUND = [[-0.5, -0.5, -0.5], [0.5, 0.5, 0.5]]


def test_the_composition_in_the_architecture_notes_renders():
    text = (Path(__file__).resolve().parent.parent / "docs" / "ARCHITECTURE.md").read_text()
    snippet = re.search(r"```python\n(from tensorf_jt.models import compose\n.*?)```", text, re.DOTALL).group(1)
    namespace = {"rays": jt.array(rays_towards_box(16))}
    exec(snippet, namespace)
    output = namespace["output"]
    assert tuple(output.rgb.shape) == (16, 3) and tuple(output.depth.shape) == (16,)
    assert tuple(output.opacity.shape) == (16,)


def dataset(unbounded=False, foreground=None):
    return SimpleNamespace(scene_bbox=np.array(AABB), unbounded=unbounded, unbounded_source="the dataset",
                           foreground_bbox=None if foreground is None else np.array(foreground, np.float32),
                           foreground_source="its foreground box" if foreground is not None else "")


@pytest.mark.parametrize("flags, data, unbounded, ndc, source", [
    ({}, dataset(), False, False, "the dataset"),
    ({}, dataset(True), True, False, "the dataset"),
    ({"unbounded": 1}, dataset(), True, False, "--unbounded 1"),
    ({"unbounded": 0}, dataset(True), False, False, "--unbounded 0"),
    ({"ndc_ray": 1}, dataset(True), False, True, "ndc_ray"),
])
def test_the_scene_space_is_decided_from_the_flags_then_the_dataset(flags, data, unbounded, ndc, source):
    space = scene_space(RunConfig.from_flags({"expname": "x", **flags}).data, data)
    assert (space.unbounded, space.ndc_ray, space.source) == (unbounded, ndc, source)
    np.testing.assert_array_equal(space.grid_box, MODEL_BOX if unbounded else AABB)


def test_an_unbounded_space_keeps_the_datasets_foreground_box():
    space = scene_space(RunConfig.from_flags({"expname": "x"}).data, dataset(True, FOREGROUND))
    np.testing.assert_array_equal(space.foreground, FOREGROUND)
    assert space.kwargs()["scene_contraction"] == "inf" and "its foreground box" in space.summary()
    plain = scene_space(RunConfig.from_flags({"expname": "x"}).data, dataset(True))
    np.testing.assert_array_equal(plain.foreground, AABB)


def test_the_sampler_follows_the_kwargs_and_the_route_the_kernels():
    assert type(choose_sampler({})) is BoxSampler and type(choose_sampler({}, ndc_ray=True)) is NDCSampler
    unbounded = {"scene_contraction": "inf", "foreground_aabb": FOREGROUND}
    assert type(choose_sampler(unbounded)) is UnboundedSampler
    assert type(tiny_model().route) is PackedRoute and type(tiny_model(kernels="reference").route) is DenseRoute
    assert type(tiny_model(ndc_ray=True).route) is DenseRoute  # NDC samples have no packed form
    model = tiny_model(aabb=MODEL_BOX, importance_samples=8, **unbounded)
    assert type(model.route) is ResampledRoute
    model.kernels = "reference"
    assert type(model.route) is ResampledRoute and not model.field.fused


def test_kwargs_keep_the_references_keys_in_its_order_and_rebuild_the_model():
    model = tiny_model(density_shift=-1.0)
    kwargs = model.get_kwargs()
    assert tuple(kwargs) == REFERENCE_KWARGS
    again = compose(model.model_name, kwargs)
    for name, value in model.field.state_dict().items():
        again.field.state_dict()[name].update(value)
    rays = jt.array(rays_towards_box(32))
    np.testing.assert_array_equal(again(rays).rgb.numpy(), model(rays).rgb.numpy())
    assert set(MODELS) == {"TensorVMSplit", "TensorCP", "TensorVM"}


class CoarseBoxSampler(BoxSampler):
    """A sampler written outside the package: the reference's, at twice the step."""

    def fit_grid(self, grid_box, units):
        super().fit_grid(grid_box, np.asarray(units) * 2)


def test_a_sampler_written_outside_the_package_renders_a_field():
    fine = tiny_model(grid=(12, 12, 12), density_shift=-1.0)
    coarse = TensoRFModel(fine.field, CoarseBoxSampler((2.0, 6.0), 0.5), Compositing(25.0, 1e-4))
    assert coarse.sampler.n_samples < fine.sampler.n_samples
    assert coarse.sampler.step_size == pytest.approx(2 * fine.sampler.step_size)
    rays = jt.array(rays_towards_box(64))
    rgb_fine, rgb_coarse = fine(rays).rgb.numpy(), coarse(rays).rgb.numpy()
    assert np.abs(rgb_coarse - rgb_fine).max() < 0.2 and not np.array_equal(rgb_coarse, rgb_fine)
    coarse.upsample([16, 16, 16])  # the sampler follows the grid
    assert coarse.sampler.step_size == pytest.approx(2 * 0.5 * 3.0 / 15, rel=1e-6)
