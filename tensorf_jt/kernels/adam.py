"""Adam's update of one parameter in one pass (``csrc/adam_*``).

The plain-Jittor update of ``training.optimizer.TorchAdam`` is a handful of elementwise
expressions whose three results (parameter, first and second moment) Jittor may evaluate in
separate kernels, each reading the gradient and moments again. Here one kernel reads the
parameter, its gradient and both moments once and writes the three new tensors, with torch's
arithmetic order and rounding.
"""
from __future__ import annotations

import jittor as jt

from tensorf_jt.kernels.source import device_code

_GLUE = """
    tensorf_kernels::adam_update_$device(param_p, grad_p, m_p, v_p, param_shape0, coefficients_p, position_p,
                                         coefficients_shape1, $eps, new_param_p, new_m_p, new_v_p);
"""


def adam_update(param: jt.Var, grad: jt.Var, m: jt.Var, v: jt.Var, coefficients: jt.Var, position: jt.Var,
                eps: float) -> tuple[jt.Var, jt.Var, jt.Var]:
    """The new parameter, first and second moment (each of ``param``'s shape) of one Adam step.

    ``coefficients``: float32 [5, n] of the parameter's group (negative step size, sqrt of the
    second bias correction, 1 - beta1, beta2, 1 - beta2; ``TorchAdam``), ``position``: int32 [1],
    this parameter's column.
    """
    shape = param.shape
    flat = {"param": param.reshape(-1), "grad": grad.reshape(-1), "m": m.reshape(-1), "v": v.reshape(-1),
            "coefficients": coefficients, "position": position}
    n = flat["param"].shape[0]
    outputs = [(name, (n,), "float32") for name in ("new_param", "new_m", "new_v")]
    new_param, new_m, new_v = device_code(outputs, flat, "adam", _GLUE, eps=f"{float(eps)!r}f")
    return new_param.reshape(shape), new_m.reshape(shape), new_v.reshape(shape)
