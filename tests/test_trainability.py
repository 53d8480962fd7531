"""Every parameter keeps training after the no_grad grid events (upsample, alpha mask, shrink).

Jittor lists Vars created under ``no_grad`` as parameters but its Adam skips them silently,
so each check takes a real optimizer step and asserts that every tensor moved.
"""
import numpy as np
import jittor as jt

from model_factory import AABB, rays_towards_box, tiny_model
from tensorf_jt.rendering.alpha_grid import AlphaGridMask
from tensorf_jt.training.optimizer import make_optimizer


def assert_every_parameter_trains(model):
    rays = jt.array(rays_towards_box(256))
    optimizer = make_optimizer(model, 0.02, 0.01)
    state = model.field.state_dict()
    before = {name: var.numpy().copy() for name, var in state.items()}
    loss = jt.sqr(model(rays, white_bg=True, perturb=True).rgb - 0.25).mean()
    grads = jt.grad(loss, list(state.values()))
    for (name, _), grad in zip(state.items(), grads):
        assert np.abs(grad.numpy()).sum() > 0, f"no gradient reaches {name}"
    optimizer.step(jt.sqr(model(rays, white_bg=True, perturb=True).rgb - 0.25).mean())
    for name, var in model.field.state_dict().items():
        assert not var.is_stop_grad(), f"{name} is stop-grad"
        assert not np.array_equal(var.numpy(), before[name]), f"the optimizer did not update {name}"


def test_parameters_train_after_each_grid_event():
    model = tiny_model(grid=(10, 10, 10), density_shift=-1.0)
    assert_every_parameter_trains(model)

    model.upsample([14, 13, 12])
    assert_every_parameter_trains(model)

    new_aabb = model.update_alpha_mask((14, 13, 12))
    assert new_aabb is not None
    assert_every_parameter_trains(model)

    model.shrink(new_aabb)
    assert_every_parameter_trains(model)


def test_forward_and_backward_survive_empty_selections():
    model = tiny_model()
    missing = np.tile(np.array([[0, 0, 10, 1, 0, 0]], np.float32), (8, 1))  # parallel to the box, above it
    output = model(jt.array(missing), white_bg=True, perturb=True)
    np.testing.assert_allclose(output.rgb.numpy(), 1.0)
    assert np.isfinite(output.depth.numpy()).all()

    model.field.alphaMask = AlphaGridMask(jt.array(AABB), jt.zeros((4, 4, 4)))  # masks out every sample
    rgb = model(jt.array(rays_towards_box(16)), white_bg=True, perturb=True).rgb
    np.testing.assert_allclose(rgb.numpy(), 1.0)
    make_optimizer(model, 0.02, 0.01).step(jt.sqr(rgb - 0.5).mean())  # no samples, no crash
