"""Fused VM field evaluation: all three plane x line lookups of a point in one kernel.

``vm_features`` replaces the per-axis gather / multiply / concatenate chain of the reference
path (``TensorVMSplit._plane_line_products``) with one pass over the points, and its backward
scatters straight into the plane and line gradients. Coordinates get no gradient: the
reference detaches them too.
"""
from __future__ import annotations

import jittor as jt

from tensorf_jt.kernels.source import device_code

_GRIDS = """
    using namespace tensorf_kernels;
    VMGrids grids;
    grids.plane[0] = plane0_p; grids.height[0] = plane0_shape0; grids.width[0] = plane0_shape1;
    grids.plane[1] = plane1_p; grids.height[1] = plane1_shape0; grids.width[1] = plane1_shape1;
    grids.plane[2] = plane2_p; grids.height[2] = plane2_shape0; grids.width[2] = plane2_shape1;
    grids.channels[0] = plane0_shape2; grids.channels[1] = plane1_shape2; grids.channels[2] = plane2_shape2;
    grids.line[0] = line0_p; grids.length[0] = line0_shape0;
    grids.line[1] = line1_p; grids.length[1] = line1_shape0;
    grids.line[2] = line2_p; grids.length[2] = line2_shape0;
"""
_FORWARD_GLUE = _GRIDS + """
    vm_forward_$device(xyz_p, xyz_shape0, grids, $density_mode, features_p);
"""
_BACKWARD_GLUE = _GRIDS + """
    float* const grad_planes[3] = {grad_plane0_p, grad_plane1_p, grad_plane2_p};
    float* const grad_lines[3] = {grad_line0_p, grad_line1_p, grad_line2_p};
    vm_backward_$device(xyz_p, xyz_shape0, grids, $density_mode, grad_features_p, grad_planes, grad_lines);
"""
_GRID_NAMES = ("plane0", "plane1", "plane2", "line0", "line1", "line2")


class _VMFeatures(jt.Function):
    def __init__(self, density_mode: bool) -> None:
        self.density_mode = "true" if density_mode else "false"

    def execute(self, xyz, *grids):
        self.inputs = {"xyz": xyz, **dict(zip(_GRID_NAMES, grids))}
        n = xyz.shape[0]
        shape = (n,) if self.density_mode == "true" else (n, sum(plane.shape[2] for plane in grids[:3]))
        features, = device_code([("features", shape, "float32")], self.inputs, "vm_field", _FORWARD_GLUE,
                                density_mode=self.density_mode)
        return features

    def grad(self, grad_features):
        outputs = [(f"grad_{name}", self.inputs[name].shape, "float32") for name in _GRID_NAMES]
        grads = device_code(outputs, dict(self.inputs, grad_features=grad_features), "vm_field", _BACKWARD_GLUE,
                            density_mode=self.density_mode)
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
