"""Fused distortion loss over packed samples, with a hand-written backward pass (``csrc/distortion_*``).

One pass per ray in each direction instead of the reference path's cumulative sums over the
dense [R, S] grid (``rendering.distortion.dense_distortion``, the specification).
"""
from __future__ import annotations

import jittor as jt

from tensorf_jt.kernels.source import device_code

_FORWARD_GLUE = """
    tensorf_kernels::distortion_forward_$device(weights_p, ordinal_p, ray_offsets_p, ray_offsets_shape0 - 1,
                                                $n_samples, loss_p);
"""
_BACKWARD_GLUE = """
    tensorf_kernels::distortion_backward_$device(weights_p, ordinal_p, ray_offsets_p, ray_offsets_shape0 - 1,
                                                 $n_samples, grad_loss_p, grad_weights_p);
"""


class _Distortion(jt.Function):
    def __init__(self, n_samples: int) -> None:
        self.n_samples = str(int(n_samples))

    def execute(self, weights, ordinal, ray_offsets):
        self.inputs = {"weights": weights, "ordinal": ordinal, "ray_offsets": ray_offsets}
        loss, = device_code([("loss", (ray_offsets.shape[0] - 1,), "float32")], self.inputs, "distortion",
                            _FORWARD_GLUE, n_samples=self.n_samples)
        return loss

    def grad(self, grad_loss):
        grad_weights, = device_code([("grad_weights", self.inputs["weights"].shape, "float32")],
                                    dict(self.inputs, grad_loss=grad_loss), "distortion", _BACKWARD_GLUE,
                                    n_samples=self.n_samples)
        return grad_weights, None, None


def packed_distortion_per_ray(weights: jt.Var, ordinal: jt.Var, ray_offsets: jt.Var, n_samples: int) -> jt.Var:
    """Distortion loss [R] of each ray's packed samples: weights [N], ordinal [N] int32 (their
    places in the ray, ``n_samples`` places at most), ray_offsets [R + 1] int32."""
    if weights.shape[0] == 0:
        return jt.zeros((ray_offsets.shape[0] - 1,), dtype="float32")
    return _Distortion(n_samples)(weights, ordinal, ray_offsets)
