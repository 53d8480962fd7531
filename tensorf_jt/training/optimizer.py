"""Adam that steps like ``torch.optim.Adam``: per-parameter step counts, no step without a gradient.

Jittor's ``jt.optim.Adam`` keeps one step count for the whole optimizer and updates every
parameter at every step; a parameter the loss does not reach gets an all-zero gradient. The
reference's ``torch.optim.Adam`` skips a parameter whose gradient is ``None`` and counts steps
per parameter, so bias correction starts at step 1 whenever that parameter first gets a
gradient. In TensoRF this matters: with ``density_shift`` -10 no sample is shaded during the
first iterations, so the appearance planes, lines, basis matrix and MLP get no gradient; in the
original their first real update is a bias-corrected step 1, with Jittor's Adam it would be
step ``n``. Every upsample (and shrink) starts a new optimizer, so this recurs.

``TorchAdam`` decides "no gradient" on the device, without a host sync: a gradient that is
zero everywhere. Such a parameter keeps its value, moments and step count.

Note:
    One deliberate difference: a parameter that *is* connected to the loss but whose gradient
    is exactly zero everywhere is skipped here, where torch would take a momentum-only step
    (m decays and the parameter moves by the old momentum). TensoRF never produces such a
    gradient for a whole tensor while it trains; its all-zero gradients come from tensors the
    loss does not reach. Jittor's CPU kernels are built with ``-Ofast``, under which NaN
    compares equal to 0: there a gradient of only NaNs and zeros counts as none, yet the
    parameter and its moments still become NaN, as in torch (only the step count stays).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
import jittor as jt

from tensorf_jt.kernels.adam import adam_update

if TYPE_CHECKING:
    from tensorf_jt.models import TensoRFModel

__all__ = ["TorchAdam"]


def _float64(value: float) -> jt.Var:
    """``value`` as a float64 Var [1]: a Python float in Jittor arithmetic becomes float32."""
    return jt.array(np.array([value], dtype=np.float64), dtype="float64")


class TorchAdam(jt.optim.Adam):
    """``torch.optim.Adam`` (no weight decay, no amsgrad; the default single-tensor path) in Jittor.

    Per parameter, at every step where its gradient ``g`` is not zero everywhere::

        step += 1
        m = m + (1 - b1) * (g - m)                  # torch: exp_avg.lerp_(g, 1 - b1)
        v = b2 * v + ((1 - b2) * g) * g             # torch: exp_avg_sq.mul_(b2).addcmul_(g, g, 1 - b2)
        step_size = lr / (1 - b1 ** step)           # in float64, then float32, as torch's Python floats
        denom = sqrt(v) / (1 - b2 ** step) ** 0.5 + eps
        p = p + (-step_size * m) / denom            # torch: p.addcdiv_(m, denom, value=-step_size)

    ``group["steps"]`` holds a group's step counts, one per parameter, as an int32 Var
    [len(group["params"])] on the device; Jittor's moment lists ``group["m"]`` and
    ``group["values"]`` (v) stay as they are. ``lr``, ``betas`` and ``eps`` may be set per group.
    Gradients come from Jittor's ``Optimizer.backward`` (MPI averaging included);
    ``n_step`` still counts the optimizer's steps.

    How a step stays as cheap as Jittor's Adam:

    - The scalar work (which parameters have a gradient, the bias corrections) is done on a
      group's vector of counts, in a few small kernels: Jittor does not fuse elementwise ops
      on single-element Vars, so scalars per parameter cost ~10 kernel launches per parameter.
      Each parameter's update reads its entries through a ``reindex``.
    - A parameter without gradient is not held back by a select in the update kernel
      (``jt.ternary`` there made the fused kernel slower than Jittor's Adam): its
      coefficients are chosen per group instead (1 - b1 and 1 - b2 become 0, b2 becomes 1,
      the step size 0), which leaves p, m and v exactly as they were (only a zero can change:
      -0.0 + 0.0 is 0.0).
    - With ``fused`` (the model's ``--kernels fused``), each parameter's update is one kernel
      (``kernels.adam``) that reads p, g, m and v once and writes the three new tensors; without,
      the same arithmetic runs as the Jittor expressions in ``step``, the specification.
    """

    COEFFICIENTS = ("neg_step_size", "bias_correction2_sqrt", "weight1", "decay2", "weight2")

    def __init__(self, params: Sequence, lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, fused: bool = False) -> None:
        super().__init__(params, lr, eps=eps, betas=betas)
        self.fused = bool(fused)
        if any(group.get("weight_decay", 0) for group in self.param_groups):
            raise ValueError("TorchAdam has no weight decay (TensoRF uses none).")
        self._positions: list[jt.Var] = []
        for group in self.param_groups:
            self._add_steps(group)

    def add_param_group(self, group: dict) -> None:
        super().add_param_group(group)
        self._add_steps(group)

    def _add_steps(self, group: dict) -> None:
        """Zero step counts for ``group``, and its parameters' positions as int32 Vars [1].

        The positions are computed once: a constant position would become part of the
        update kernel's key and compile one kernel per parameter.
        """
        n = len(group["params"])
        group["steps"] = jt.zeros((n,), dtype="int32").stop_grad()
        if len(self._positions) < n:
            self._positions += [jt.array(np.array([index], dtype=np.int32)) for index in range(len(self._positions), n)]
            jt.sync(self._positions)

    def _coefficients(self, group: dict, trained: list[bool]) -> tuple[jt.Var, dict[str, jt.Var]]:
        """The group's new step counts and, per parameter, this step's coefficients (float32 [n]).

        A parameter has a gradient if any of its values is non-zero. Where it has none, the
        coefficients make the update the identity and its count stays.
        """
        b1, b2 = group.get("betas", self.betas)
        nonzero = jt.concat([(g != 0).sum() if live else jt.zeros((1,), dtype="int32")
                             for g, live in zip(group["grads"], trained)])
        has_grad = nonzero > 0
        steps = group["steps"] + has_grad.int32()
        count = steps.float64()
        step_size = _float64(group.get("lr", self.lr)) / (1.0 - jt.pow(_float64(b1), count))
        bias_correction2_sqrt = jt.sqrt(1.0 - jt.pow(_float64(b2), count))
        stepped = has_grad.float32()
        coefficients = {
            "neg_step_size": jt.ternary(has_grad, -step_size.float32(), stepped * 0),
            "bias_correction2_sqrt": jt.ternary(has_grad, bias_correction2_sqrt.float32(), stepped * 0 + 1),
            "weight1": stepped * (1 - b1),
            "decay2": jt.ternary(has_grad, stepped * 0 + b2, stepped * 0 + 1),
            "weight2": stepped * (1 - b2),
        }
        return steps, coefficients

    def step(self, loss: jt.Var | None = None, retain_graph: bool = False) -> None:
        self.pre_step(loss, retain_graph)
        for group in self.param_groups:
            trained = [not p.is_stop_grad() for p in group["params"]]
            if not any(trained):
                continue
            eps = group.get("eps", self.eps)
            steps, coefficients = self._coefficients(group, trained)
            table = jt.stack([coefficients[name] for name in self.COEFFICIENTS]) if self.fused else None
            for index, (p, g, m, v) in enumerate(zip(group["params"], group["grads"], group["m"], group["values"])):
                if not trained[index]:
                    continue
                if self.fused:
                    new_p, new_m, new_v = adam_update(p, g, m, v, table, self._positions[index], eps)
                else:
                    # This parameter's coefficients, broadcast to its shape inside the update kernel.
                    c = {name: vector.reindex(p.shape, ["@e0(0)"], extras=[self._positions[index]])
                         for name, vector in coefficients.items()}
                    new_m = m + c["weight1"] * (g - m)
                    new_v = v * c["decay2"] + (c["weight2"] * g) * g
                    denom = jt.sqrt(new_v) / c["bias_correction2_sqrt"] + eps
                    new_p = p + (c["neg_step_size"] * new_m) / denom
                p.update(new_p)
                m.update(new_m)
                v.update(new_v)
            group["steps"].update(steps)
        self.post_step()


def make_optimizer(model: TensoRFModel, lr_grid: float, lr_network: float) -> TorchAdam:
    """Adam over the field's two parameter groups (grids at ``lr_grid``, basis matrix and MLP at
    ``lr_network``) with the reference's betas, fused where the model's kernels are. Jittor's optimizers need a default lr even with
    per-group lrs. Groups without parameters (the SH and RGB shaders have none) are left out."""
    groups = model.field.get_optparam_groups(lr_grid, lr_network)
    groups = [group for group in groups if list(group["params"])]
    return TorchAdam(groups, lr=lr_grid, betas=(0.9, 0.99), fused=model.kernels == "fused")
