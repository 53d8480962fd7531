"""Fused CP field evaluation: the three line lookups of every component of a point in one kernel.

``cp_features`` replaces the per-axis gathers and products of the reference path
(``TensorCP._line_products``); its backward pass scatters straight into the line gradients.
Coordinates get no gradient, as in the reference.
"""
from __future__ import annotations

import jittor as jt

from tensorf_jt.kernels.source import device_code

_LINES_FROM_INPUTS = """
    using namespace tensorf_kernels;
    CPLines lines;
    lines.line[0] = in1_p; lines.length[0] = in1_shape0;
    lines.line[1] = in2_p; lines.length[1] = in2_shape0;
    lines.line[2] = in3_p; lines.length[2] = in3_shape0;
    lines.channels = in1_shape1;
"""


def _forward_glue(density_mode: bool) -> str:
    flag = "true" if density_mode else "false"
    return _LINES_FROM_INPUTS + f"cp_forward_{{device}}(in0_p, in0_shape0, lines, {flag}, out0_p);"


def _backward_glue(density_mode: bool) -> str:
    flag = "true" if density_mode else "false"
    return _LINES_FROM_INPUTS + f"""
    float* const grad_lines[3] = {{out0_p, out1_p, out2_p}};
    cp_backward_{{device}}(in0_p, in0_shape0, lines, {flag}, in4_p, grad_lines);
    """


class _CPFeatures(jt.Function):
    def __init__(self, density_mode: bool) -> None:
        self.density_mode = density_mode

    def execute(self, xyz, line0, line1, line2):
        self.saved = (xyz, line0, line1, line2)
        n, channels = xyz.shape[0], line0.shape[1]
        shape = (n,) if self.density_mode else (n, channels)
        return device_code(shape, "float32", list(self.saved), "cp_field", _forward_glue(self.density_mode))

    def grad(self, grad_out):
        inputs = list(self.saved)
        grads = device_code([v.shape for v in inputs[1:]], ["float32"] * 3, inputs + [grad_out], "cp_field",
                            _backward_glue(self.density_mode))
        return (None, *grads)


def cp_features(xyz: jt.Var, lines: list[jt.Var], density_mode: bool) -> jt.Var:
    """Evaluate a CP decomposition at normalised points.

    xyz: [N, 3] in [-1, 1]; lines: three channel-last [L_i, C], ordered like the model's
    ``vecMode``. Returns [N] (sum over components, ``density_mode``) or [N, C] (the products).
    """
    channels = lines[0].shape[1]
    if xyz.shape[0] == 0:
        return jt.zeros((0,) if density_mode else (0, channels), dtype="float32")
    return _CPFeatures(density_mode)(xyz.float32(), *lines)
