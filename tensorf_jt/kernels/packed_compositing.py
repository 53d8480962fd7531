"""Fused volume compositing over packed samples, with a hand-written backward pass.

Computes the reference's per-sample weights (``raw2alpha``) ray by ray on packed samples, so
the work scales with kept samples instead of R x S, and returns dL/dsigma directly instead of
differentiating through cumprod = exp(cumsum(log)).
"""
from __future__ import annotations

import jittor as jt

from tensorf_jt.kernels.source import device_code

_FORWARD_GLUE = """
    tensorf_kernels::composite_forward_$device(sigma_p, dist_p, ray_offsets_p, ray_offsets_shape0 - 1,
                                               weights_p, transmittance_p);
"""
_BACKWARD_GLUE = """
    tensorf_kernels::composite_backward_$device(sigma_p, dist_p, ray_offsets_p, ray_offsets_shape0 - 1, weights_p,
                                                transmittance_p, grad_weights_p, grad_sigma_p);
"""


class _CompositeWeights(jt.Function):
    def execute(self, sigma, dist, ray_offsets):
        inputs = {"sigma": sigma, "dist": dist, "ray_offsets": ray_offsets}
        weights, transmittance = device_code([("weights", sigma.shape, "float32"),
                                              ("transmittance", sigma.shape, "float32")],
                                             inputs, "compositing", _FORWARD_GLUE)
        self.saved = dict(inputs, weights=weights, transmittance=transmittance)
        return weights

    def grad(self, grad_weights):
        grad_sigma, = device_code([("grad_sigma", self.saved["sigma"].shape, "float32")],
                                  dict(self.saved, grad_weights=grad_weights), "compositing", _BACKWARD_GLUE)
        return grad_sigma, None, None


def composite_weights(sigma: jt.Var, dist: jt.Var, ray_offsets: jt.Var) -> jt.Var:
    """Compositing weights [N] of packed samples: sigma [N] densities, dist [N] scaled gaps,
    ray_offsets [R + 1] int32 segment bounds (see ``PackedSamples``)."""
    if sigma.shape[0] == 0:
        return jt.zeros((0,), dtype="float32")
    return _CompositeWeights()(sigma, dist, ray_offsets)


def segment_sum(values: jt.Var, ray_index: jt.Var, n_rays: int) -> jt.Var:
    """Sum packed per-sample values [N] or [N, K] into per-ray totals [R] or [R, K] (differentiable)."""
    if values.ndim == 1:
        return values.reindex_reduce("add", [n_rays], ["@e0(i0)"], extras=[ray_index])
    return values.reindex_reduce("add", [n_rays, values.shape[1]], ["@e0(i0)", "i1"], extras=[ray_index])
