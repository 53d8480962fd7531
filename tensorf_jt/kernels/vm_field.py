"""Fused VM field evaluation: all three plane x line lookups of a point in one kernel.

``vm_features`` replaces the per-axis gather / multiply / concatenate chain of the reference
path (``TensorVMSplit._plane_line_products``) with one pass over the points, and its backward
scatters straight into the plane and line gradients. Coordinates get no gradient: the
reference detaches them too.
"""
from __future__ import annotations

import jittor as jt

from tensorf_jt.kernels.source import device_code

_GRIDS_FROM_INPUTS = """
    using namespace tensorf_kernels;
    VMGrids grids;
    grids.plane[0] = in1_p; grids.height[0] = in1_shape0; grids.width[0] = in1_shape1; grids.channels[0] = in1_shape2;
    grids.plane[1] = in2_p; grids.height[1] = in2_shape0; grids.width[1] = in2_shape1; grids.channels[1] = in2_shape2;
    grids.plane[2] = in3_p; grids.height[2] = in3_shape0; grids.width[2] = in3_shape1; grids.channels[2] = in3_shape2;
    grids.line[0] = in4_p; grids.length[0] = in4_shape0;
    grids.line[1] = in5_p; grids.length[1] = in5_shape0;
    grids.line[2] = in6_p; grids.length[2] = in6_shape0;
"""


def _forward_glue(density_mode: bool) -> str:
    flag = "true" if density_mode else "false"
    return _GRIDS_FROM_INPUTS + f"vm_forward_{{device}}(in0_p, in0_shape0, grids, {flag}, out0_p);"


def _backward_glue(density_mode: bool) -> str:
    flag = "true" if density_mode else "false"
    return _GRIDS_FROM_INPUTS + f"""
    float* const grad_planes[3] = {{out0_p, out1_p, out2_p}};
    float* const grad_lines[3] = {{out3_p, out4_p, out5_p}};
    vm_backward_{{device}}(in0_p, in0_shape0, grids, {flag}, in7_p, grad_planes, grad_lines);
    """


class _VMFeatures(jt.Function):
    def __init__(self, density_mode: bool) -> None:
        self.density_mode = density_mode

    def execute(self, xyz, plane0, plane1, plane2, line0, line1, line2):
        self.saved = (xyz, plane0, plane1, plane2, line0, line1, line2)
        n = xyz.shape[0]
        total = plane0.shape[2] + plane1.shape[2] + plane2.shape[2]
        shape = (n,) if self.density_mode else (n, total)
        return device_code(shape, "float32", list(self.saved), "vm_field", _forward_glue(self.density_mode))

    def grad(self, grad_out):
        inputs = list(self.saved)
        grads = device_code([v.shape for v in inputs[1:]], ["float32"] * 6, inputs + [grad_out], "vm_field",
                            _backward_glue(self.density_mode))
        return (None, *grads)


def vm_features(xyz: jt.Var, planes: list[jt.Var], lines: list[jt.Var], density_mode: bool) -> jt.Var:
    """Evaluate a VM decomposition at normalised points.

    xyz: [N, 3] in [-1, 1]; planes: three channel-last [H, W, C_i]; lines: three [L, C_i],
    ordered like the model's ``matMode`` / ``vecMode``. Returns [N] (sum of all products,
    ``density_mode``) or [N, C0 + C1 + C2] (the products, axis by axis).
    """
    if xyz.shape[0] == 0:
        total = sum(plane.shape[2] for plane in planes)
        return jt.zeros((0,) if density_mode else (0, total), dtype="float32")
    return _VMFeatures(density_mode)(xyz.float32(), *planes, *lines)
