"""``TorchAdam`` steps as ``torch.optim.Adam`` does, checked against torch's own numbers.

``fixtures/torch_adam_steps.npz`` (``tools/make_torch_fixtures.py adam``) holds torch's Adam over
three parameters in TensoRF's two learning-rate groups whose gradients start at steps 1 (A), 4 (B)
and 2 (C), with the learning rates decayed after every step and halved once. Here the same
gradients are given through ``loss = sum(grad * param)`` over the parameters in that step's loss,
so Jittor hands the others an all-zero gradient, as it does for TensoRF's appearance branch
before any sample is shaded.
"""
import os

import numpy as np
import pytest
import jittor as jt

from model_factory import rays_towards_box, tiny_model
from tensorf_jt.errors import CheckpointError
from tensorf_jt.training.optimizer import TorchAdam
from tensorf_jt.training.state import load_optimizer_state, optimizer_state
from tensorf_jt.training.optimizer import make_optimizer

pytestmark = pytest.mark.floats  # two code paths' floats, or floats against fixtures

FIXTURE = np.load(os.path.join(os.path.dirname(__file__), "fixtures", "torch_adam_steps.npz"))
NAMES = ("A", "B", "C")  # groups: (A, B) at lr 0.02, (C) at lr 0.001
FIRST_GRADIENT = dict(zip(NAMES, FIXTURE["first_gradient"]))
N_STEPS = FIXTURE["after_A"].shape[0]
BETAS = tuple(float(b) for b in FIXTURE["betas"])
LR_FACTOR, LR_HALVED_AFTER = 0.9, 5  # as the generator: lr *= 0.9 after every step, and *= 0.5 once


def new_run(cls=TorchAdam, values: dict | None = None, **options):
    values = values or {name: FIXTURE[f"init_{name}"] for name in NAMES}
    params = {name: jt.array(np.array(values[name])) for name in NAMES}
    groups = [dict(params=[params["A"], params["B"]], lr=float(FIXTURE["lr"][0, 0])),
              dict(params=[params["C"]], lr=float(FIXTURE["lr"][0, 1]))]
    return params, cls(groups, lr=0.02, betas=BETAS, **options)


def take_step(params: dict, optimizer, step: int) -> None:
    """Step ``step`` (from 1) of the fixture, then the learning-rate change the generator made."""
    assert [group["lr"] for group in optimizer.param_groups] == FIXTURE["lr"][step - 1].tolist()
    loss = sum((jt.array(FIXTURE[f"grad_{name}"][step - 1]) * params[name]).sum()
               for name in NAMES if step >= FIRST_GRADIENT[name])
    optimizer.step(loss)
    for group in optimizer.param_groups:
        group["lr"] *= LR_FACTOR * (0.5 if step == LR_HALVED_AFTER else 1.0)


def step_counts(optimizer) -> list[int]:
    return [int(count) for group in optimizer.param_groups for count in group["steps"].numpy()]


def assert_matches_torch(params: dict, step: int) -> None:
    for name in NAMES:
        got, want = params[name].numpy(), FIXTURE[f"after_{name}"][step - 1]
        # Within 1 float32 ulp here (relative 9e-8: Jittor's -Ofast kernels may fuse a multiply
        # and an add that torch rounds separately); 4 ulps (relative < 5e-7) leave room for others.
        np.testing.assert_array_max_ulp(got, want, maxulp=4)
        if step < FIRST_GRADIENT[name]:
            assert np.array_equal(got.view(np.uint32), FIXTURE[f"init_{name}"].view(np.uint32)), \
                f"{name} moved at step {step}, before its first gradient"


@pytest.mark.parametrize("fused", [False, True], ids=["jittor", "fused kernel"])
def test_steps_like_torch_adam(fused):
    params, optimizer = new_run(fused=fused)
    for step in range(1, N_STEPS + 1):
        take_step(params, optimizer, step)
        assert_matches_torch(params, step)
        assert step_counts(optimizer) == FIXTURE["steps"][step - 1].tolist()
    assert optimizer.n_step == N_STEPS


def test_the_fused_update_steps_as_the_jittor_expressions_do():
    """200 steps over a plane-, a line- and an MLP-shaped parameter in two groups, gradients
    drawn at random (some steps without one for a parameter), learning rates decaying: the
    fused kernel and the plain-Jittor update stay within float32 rounding of each other."""
    rng = np.random.default_rng(5)
    shapes = {"plane": (17, 13, 6), "line": (19, 6), "weight": (8, 11)}
    initial = {name: rng.normal(size=shape).astype(np.float32) for name, shape in shapes.items()}
    runs = {}
    for fused in (False, True):
        params = {name: jt.array(value) for name, value in initial.items()}
        groups = [dict(params=[params["plane"], params["line"]], lr=0.02), dict(params=[params["weight"]], lr=1e-3)]
        runs[fused] = params, TorchAdam(groups, lr=0.02, betas=(0.9, 0.99), fused=fused)
    for step in range(200):
        gradients = {name: rng.normal(size=shape).astype(np.float32) * 10.0 ** rng.uniform(-4, 1)
                     for name, shape in shapes.items() if not (name == "line" and step % 7 == 3)}
        for params, optimizer in runs.values():
            optimizer.step(sum((jt.array(g) * params[name]).sum() for name, g in gradients.items()))
            for group in optimizer.param_groups:
                group["lr"] *= 0.995
    (plain, plain_adam), (fused, fused_adam) = runs[False], runs[True]
    assert step_counts(fused_adam) == step_counts(plain_adam) == [200, 200 - 29, 200]
    for name in shapes:
        np.testing.assert_array_max_ulp(fused[name].numpy(), plain[name].numpy(), maxulp=64)
        np.testing.assert_allclose(fused[name].numpy(), plain[name].numpy(), rtol=1e-5, atol=1e-6)


def test_jittor_adam_does_not_step_like_torch():
    """The check above can fail: Jittor's own Adam bias-corrects B's and C's first steps with the
    optimizer's count, and adds eps before the bias correction."""
    params, optimizer = new_run(jt.optim.Adam)
    worst = {name: 0.0 for name in NAMES}
    for step in range(1, N_STEPS + 1):
        take_step(params, optimizer, step)
        for name in NAMES:
            want = FIXTURE[f"after_{name}"][step - 1]
            worst[name] = max(worst[name], float(np.max(np.abs(params[name].numpy() - want) / np.abs(want))))
    assert worst["B"] > 1e-2 and worst["C"] > 1e-3, worst
    assert worst["A"] > 1e-6, worst  # eps before the bias correction


def test_resumed_optimizer_continues_identically(tmp_path):
    params, optimizer = new_run()
    for step in range(1, 4):  # B has no step yet, C one fewer than A
        take_step(params, optimizer, step)
    path = str(tmp_path / "optimizer_state.th")
    jt.save({"optimizer": optimizer_state(optimizer), "params": {k: v.numpy() for k, v in params.items()}}, path)
    saved = jt.load(path)
    saved_steps = saved["optimizer"]["groups"][0]["steps"]
    assert isinstance(saved_steps, jt.Var) and saved_steps.numpy().tolist() == [3, 0]

    resumed_params, resumed = new_run(values=saved["params"])
    load_optimizer_state(resumed, saved["optimizer"])
    assert step_counts(resumed) == [3, 0, 2] and resumed.n_step == 3
    for step in range(4, N_STEPS + 1):
        take_step(params, optimizer, step)
        take_step(resumed_params, resumed, step)
        for name in NAMES:
            assert np.array_equal(resumed_params[name].numpy().view(np.uint32), params[name].numpy().view(np.uint32))
        assert_matches_torch(resumed_params, step)
    assert step_counts(resumed) == step_counts(optimizer)


def test_state_without_step_counts_still_loads():
    """A state written by Jittor's Adam has only the optimizer's count, ``n_step``: parameters
    whose moments are zero everywhere never had a gradient and start from 0, the others take it."""
    params, optimizer = new_run()
    for step in range(1, 4):
        take_step(params, optimizer, step)
    state = optimizer_state(optimizer)
    for group in state["groups"]:
        del group["steps"]
    resumed_params, resumed = new_run(values={name: var.numpy() for name, var in params.items()})
    load_optimizer_state(resumed, state)
    assert step_counts(resumed) == [3, 0, 3]  # A and C as Jittor's Adam counted them; B none yet
    take_step(resumed_params, resumed, 4)
    np.testing.assert_array_max_ulp(resumed_params["B"].numpy(), FIXTURE["after_B"][3], maxulp=4)
    assert step_counts(resumed) == [4, 1, 4]


def test_step_counts_for_other_parameters_are_refused():
    params, optimizer = new_run()
    take_step(params, optimizer, 1)
    state = optimizer_state(optimizer)
    state["groups"][1]["steps"] = np.array([1, 1], np.int32)
    with pytest.raises(CheckpointError, match="2 saved step counts for 1 parameters"):
        load_optimizer_state(new_run()[1], state)


def test_a_connected_parameter_with_an_all_zero_gradient_is_skipped():
    """The one deliberate difference from torch (which would take a momentum-only step)."""
    p = jt.array(np.array([1.0, -2.0], np.float32))
    optimizer = TorchAdam([p], lr=0.1)
    optimizer.step((p * jt.array(np.array([1.0, 0.0], np.float32))).sum())
    after_first = p.numpy().copy()
    m_first = optimizer.param_groups[0]["m"][0].numpy().copy()
    optimizer.step((p * 0).sum())
    assert np.array_equal(p.numpy(), after_first)
    assert np.array_equal(optimizer.param_groups[0]["m"][0].numpy(), m_first)
    assert step_counts(optimizer) == [1]


def test_nothing_shaded_leaves_the_appearance_branch_untouched():
    """density_shift -10: no sample passes the weight threshold, so the appearance planes, lines,
    basis matrix and MLP get no gradient. As in the original, they neither move nor count steps.

    On a 24^3 grid a sample's weight starts near 1 - exp(-softplus(-10) * step * 25) = 7e-5, under
    ``rayMarch_weight_thres`` 1e-4 (the default grid here, 8x9x10, has steps long enough to pass it)."""
    model = tiny_model(grid=(24, 24, 24), density_shift=-10.0)
    optimizer = make_optimizer(model, 0.02, 0.001)
    names = {id(var): name for name, var in model.field.named_parameters()}
    before = {name: var.numpy().copy() for name, var in model.field.named_parameters()}
    rays = jt.array(rays_towards_box(128))
    for _ in range(3):
        optimizer.step(jt.sqr(model(rays, white_bg=True, perturb=True).rgb - 0.5).mean())
    counts = {names[id(p)]: int(count) for group in optimizer.param_groups
              for p, count in zip(group["params"], group["steps"].numpy())}
    assert set(counts) == set(before)
    for name, var in model.field.named_parameters():
        if name.startswith("density"):
            assert counts[name] == 3 and not np.array_equal(var.numpy(), before[name]), name
        else:
            assert counts[name] == 0, name
            assert np.array_equal(var.numpy().view(np.uint32), before[name].view(np.uint32)), name
