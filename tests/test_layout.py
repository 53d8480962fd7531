"""kernels/layout.permute: the device-resident permutation TensorVM's lookups use on CUDA, checked
on the CPU against numpy and against Jittor's own permute, values and gradients; and that the
other models' lookups copy no grid at all."""
import functools

import numpy as np
import pytest
import jittor as jt

from model_factory import tiny_model
from tensorf_jt.kernels import layout
from tensorf_jt.models import tensor_vm_stacked

pytestmark = pytest.mark.floats  # two code paths' floats, or floats against fixtures


@pytest.mark.parametrize("axes", [(1, 0), (1, 2, 0), (2, 1, 0), (0, 2, 1), (2, 0, 3, 1)])
def test_reindexed_permutation_matches_numpy_with_gradients(axes):
    rng = np.random.default_rng(len(axes))
    data = rng.normal(size=(3, 4, 5, 6)[:len(axes)]).astype(np.float32)
    upstream = rng.normal(size=np.transpose(data, axes).shape).astype(np.float32)
    for on_device in (True, False):
        x = jt.array(data)
        y = layout.permute(x, axes, on_device=on_device)
        np.testing.assert_array_equal(y.numpy(), np.transpose(data, axes))
        grad = jt.grad((y * jt.array(upstream)).sum(), x)
        np.testing.assert_array_equal(grad.numpy(), np.transpose(upstream, np.argsort(axes)))


def test_the_device_path_runs_no_transpose_operator():
    """None (the default) is the CPU's plain permute here, where Jittor does not use CUDA."""
    assert not jt.flags.use_cuda
    x = jt.array(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    for on_device, expect_transpose in ((True, False), (False, True), (None, True)):
        with jt.profile_scope() as report:
            layout.permute(x * 1.0, (1, 2, 0), on_device=on_device).sync()
        names = [row[0] for row in report[1:]]
        assert any(name.startswith("transpose") for name in names) == expect_transpose, names


def test_a_bad_permutation_is_refused():
    with pytest.raises(ValueError, match=r"axes \[0, 0\] are not a permutation of 2 dimensions"):
        layout.permute(jt.zeros((2, 3)), (0, 0))


@pytest.mark.parametrize("density_mode", [True, False])
def test_the_stacked_vm_field_is_unchanged_by_the_device_path(monkeypatch, density_mode):
    points = jt.array(np.random.default_rng(3).uniform(-1.3, 1.3, (300, 3)).astype(np.float32))
    model = tiny_model(grid=(11, 11, 11), model_name="TensorVM", density_n_comp=[3], appearance_n_comp=[4]).field
    params = [p for p in model.parameters() if p.requires_grad]

    def field():
        out = model.compute_densityfeature(points) if density_mode else model.compute_appfeature(points)
        return out.numpy(), [g.numpy() for g in jt.grad((out * out).sum(), params)]

    plain = field()
    monkeypatch.setattr(tensor_vm_stacked, "permute", functools.partial(layout.permute, on_device=True))
    reindexed = field()
    monkeypatch.undo()
    np.testing.assert_array_equal(reindexed[0], plain[0])
    for got, expected in zip(reindexed[1], plain[1]):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("model_name", ["TensorVMSplit", "TensorCP"])
def test_the_split_fields_read_their_grids_without_a_layout_operator(model_name):
    """Planes and lines are stored as the lookups read them: a forward and backward pass of the
    field runs no transpose and no reindex."""
    model = tiny_model(grid=(13, 11, 9), model_name=model_name, density_n_comp=[6], appearance_n_comp=[6]).field
    points = jt.array(np.random.default_rng(4).uniform(-1.0, 1.0, (300, 3)).astype(np.float32))
    params = [p for p in model.parameters() if p.requires_grad]
    for fused in (True, False):
        model.fused = fused
        out = (model.compute_densityfeature(points).sum() + model.compute_appfeature(points).sum()
               + model.TV_loss_density() + model.vector_comp_diffs() + model.density_L1())
        jt.sync(jt.grad(out, params))
        with jt.profile_scope() as report:
            out = (model.compute_densityfeature(points).sum() + model.compute_appfeature(points).sum()
                   + model.TV_loss_density() + model.vector_comp_diffs() + model.density_L1())
            jt.sync(jt.grad(out, params))
        names = [row[0] for row in report[1:]]
        assert not [name for name in names if "transpose" in name or "reindex" in name], (fused, names)
