"""Fused importance resampling of packed samples (``csrc/resampling_*``): the bin edges of
``rendering.resampling``, found in one pass per ray over its kept samples instead of the
reference path's comparisons against the dense [R, S] grid's cumulative weights."""
from __future__ import annotations

import jittor as jt

from tensorf_jt.kernels.source import device_code

_GLUE = """
    tensorf_kernels::importance_edges_$device(z_p, dist_p, weights_p, ray_offsets_p, jitter_p,
                                              ray_offsets_shape0 - 1, $n_bins, $padding, edges_p);
"""


def packed_importance_edges(z: jt.Var, dist: jt.Var, weights: jt.Var, ray_offsets: jt.Var, jitter: jt.Var,
                            n_bins: int, padding: float) -> jt.Var:
    """Edges [R, n_bins + 1] of each ray's bins from its packed samples' distances z [N], gaps
    dist [N] (world units) and weights [N]; ray_offsets [R + 1] int32, jitter [R] in [0, 1)."""
    n_rays = ray_offsets.shape[0] - 1
    if z.shape[0] == 0:
        return jt.zeros((n_rays, n_bins + 1), dtype="float32")
    inputs = {"z": z.float32(), "dist": dist.float32(), "weights": weights.float32(), "ray_offsets": ray_offsets,
              "jitter": jitter.float32()}
    edges, = device_code([("edges", (n_rays, n_bins + 1), "float32")], inputs, "resampling", _GLUE,
                         n_bins=str(int(n_bins)), padding=f"{float(padding)!r}f")
    return edges.stop_grad()
