"""A hidden layer's bias and ReLU in one pass, forward and backward (``csrc/bias_relu_*``).

As ``nn.Linear`` then ``nn.ReLU``, Jittor adds the bias and clamps in one elementwise
kernel, but its backward pass is two more passes over the [rows, C] activations (the ReLU's
mask, then the bias gradient's column sums), and Jittor's CPU kernels run on one core. Here
the backward pass is one kernel that writes the gradient of the product and sums the bias
gradient as it goes, on every core. The arithmetic is the reference's (``z + b``, then
``max(., 0)``; the gradient passes where the output is positive); only the bias gradient's
summation order differs.
"""
from __future__ import annotations

import jittor as jt
from jittor import nn

from tensorf_jt.kernels.source import device_code

_FORWARD_GLUE = """
    tensorf_kernels::bias_relu_forward_$device(z_p, bias_p, z_shape0, (int)z_shape1, h_p);
"""
_BACKWARD_GLUE = """
    tensorf_kernels::bias_relu_backward_$device(h_p, grad_h_p, h_shape0, (int)h_shape1, grad_z_p, grad_bias_p);
"""


class _BiasReLU(jt.Function):
    def execute(self, z: jt.Var, bias: jt.Var) -> jt.Var:
        h, = device_code([("h", z.shape, "float32")], {"z": z, "bias": bias}, "bias_relu", _FORWARD_GLUE)
        self.h = h
        return h

    def grad(self, grad_h: jt.Var) -> tuple[jt.Var, jt.Var]:
        h, self.h = self.h, None  # let the activations go with the backward pass
        outputs = [("grad_z", h.shape, "float32"), ("grad_bias", (h.shape[1],), "float32")]
        grad_z, grad_bias = device_code(outputs, {"h": h, "grad_h": grad_h}, "bias_relu", _BACKWARD_GLUE)
        return grad_z, grad_bias


def bias_relu(z: jt.Var, bias: jt.Var) -> jt.Var:
    """max(z + bias, 0) for a matrix product z [rows, C] and a bias [C]."""
    if z.shape[0] == 0:
        return nn.relu(z + bias)
    return _BiasReLU()(z, bias)
