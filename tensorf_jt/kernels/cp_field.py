"""Fused CP field evaluation: the three line lookups of every component of a point in one kernel.

``cp_features`` replaces the per-axis gathers and products of the reference path
(``TensorCP._line_products``); its backward pass scatters straight into the line gradients.
Coordinates get no gradient, as in the reference.
"""
from __future__ import annotations

import jittor as jt

from tensorf_jt.kernels.source import device_code

_LINES = """
    using namespace tensorf_kernels;
    CPLines lines;
    lines.line[0] = line0_p; lines.length[0] = line0_shape0;
    lines.line[1] = line1_p; lines.length[1] = line1_shape0;
    lines.line[2] = line2_p; lines.length[2] = line2_shape0;
    lines.channels = line0_shape1;
"""
_FORWARD_GLUE = _LINES + """
    cp_forward_$device(xyz_p, xyz_shape0, lines, $density_mode, features_p);
"""
_BACKWARD_GLUE = _LINES + """
    float* const grad_lines[3] = {grad_line0_p, grad_line1_p, grad_line2_p};
    cp_backward_$device(xyz_p, xyz_shape0, lines, $density_mode, grad_features_p, grad_lines);
"""
_LINE_NAMES = ("line0", "line1", "line2")


class _CPFeatures(jt.Function):
    def __init__(self, density_mode: bool) -> None:
        self.density_mode = "true" if density_mode else "false"

    def execute(self, xyz, *lines):
        self.inputs = {"xyz": xyz, **dict(zip(_LINE_NAMES, lines))}
        n, channels = xyz.shape[0], lines[0].shape[1]
        shape = (n,) if self.density_mode == "true" else (n, channels)
        features, = device_code([("features", shape, "float32")], self.inputs, "cp_field", _FORWARD_GLUE,
                                density_mode=self.density_mode)
        return features

    def grad(self, grad_features):
        outputs = [(f"grad_{name}", self.inputs[name].shape, "float32") for name in _LINE_NAMES]
        grads = device_code(outputs, dict(self.inputs, grad_features=grad_features), "cp_field", _BACKWARD_GLUE,
                            density_mode=self.density_mode)
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
