"""Scene contraction: all of space mapped into a bounded cube, so one grid covers an unbounded scene.

mip-NeRF 360's contraction (Barron et al. 2022, eq. 10), applied to coordinates normalised to
the foreground box -- u = (x - centre) / half-size, so the box is |u| <= 1:

    contract(u) = u                          if |u| <= 1
                  (2 - 1 / |u|) u / |u|      otherwise

with |u| the largest |u_a| (the L-infinity norm): the shell is a cube around the box, which
suits an axis-aligned grid, as DVGO v2 and K-Planes found. The foreground keeps its shape;
everything beyond it, out to infinity, lands in the shell 1 < |contract(u)| < 2, where equal
steps of the contracted coordinate are equal steps of disparity 1 / |u|. The model's grid then
spans the cube [-2, 2]^3 of contracted coordinates ("model space"); in the bounded mode model
space is the world.

The arithmetic is written one rounding at a time (``stop_fuse``), as the fused kernels
(``csrc/unbounded_common.h``) compute it. The kernels round every division correctly; Jittor
compiles its element-wise kernels with ``-Ofast``, whose vectorised divisions may differ from
that in the last place, so contracted positions of the two paths agree to within a unit in the
last place (tests/test_unbounded.py).
"""
from __future__ import annotations

import numpy as np
import jittor as jt

MODEL_BOX = np.array([[-2.0, -2.0, -2.0], [2.0, 2.0, 2.0]], dtype=np.float32)  # contracted space


def contraction_norm(u: jt.Var) -> jt.Var:
    """|u| [N] of points u [N, 3]: the largest |u_a|."""
    return u.abs().max(-1)


def contract(u: jt.Var) -> jt.Var:
    """Contracted coordinates [N, 3] (model space) of box-normalised points u [N, 3]."""
    length = contraction_norm(u).stop_fuse()
    inverse = (1.0 / length).stop_fuse()
    scale = ((2.0 - inverse).stop_fuse() / length).stop_fuse()
    outside = (u * scale.unsqueeze(-1)).stop_fuse()
    return jt.ternary((length <= 1.0).unsqueeze(-1), u, outside)


def uncontract(y: np.ndarray) -> np.ndarray:
    """Inverse of ``contract`` on numpy points y [N, 3] with |y| < 2 (box-normalised coordinates)."""
    y = np.asarray(y, dtype=np.float64)
    length = np.max(np.abs(y), axis=-1)
    length = np.minimum(length, 2.0 - 1e-9)[..., None]
    safe = np.maximum(length, 1e-12)
    return np.where(length <= 1.0, y, y / safe / (2.0 - length))


class SceneContraction:
    """World points to model space for a scene whose foreground is the box ``foreground`` [2, 3]."""

    def __init__(self, foreground) -> None:
        box = np.asarray(foreground, dtype=np.float32).reshape(2, 3)
        self.foreground = box
        self.center = ((box[0] + box[1]) * np.float32(0.5)).astype(np.float32)
        self.half_size = ((box[1] - box[0]) * np.float32(0.5)).astype(np.float32)
        self.inv_half_size = (np.float32(1.0) / self.half_size).astype(np.float32)
        self._center = jt.array(self.center).stop_grad()
        self._inv_half = jt.array(self.inv_half_size).stop_grad()

    def normalised(self, xyz: jt.Var) -> jt.Var:
        """World points [N, 3] in foreground-box coordinates (the box is [-1, 1]^3)."""
        return ((xyz - self._center).stop_fuse() * self._inv_half).stop_fuse()

    def __call__(self, xyz: jt.Var) -> jt.Var:
        """World points [N, 3] -> model-space points [N, 3] in (-2, 2)^3."""
        return contract(self.normalised(xyz))

    def to_world(self, y: np.ndarray) -> np.ndarray:
        """Model-space points [N, 3] (numpy) back in the world (float64)."""
        return uncontract(y) * self.half_size + self.center

    def kernel_data(self) -> dict[str, float]:
        """The contraction as ``jt.code`` data: the box's centre and inverse half-sizes."""
        data = {}
        for axis in range(3):
            data[f"contract_center{axis}"] = float(self.center[axis])
            data[f"contract_inv_half{axis}"] = float(self.inv_half_size[axis])
        return data
