"""Fused ray marching: samples, box and alpha-grid tests and packing in one kernel.

Replaces the reference path's dense [R, S] sample grid plus boolean-mask gathers: only the
samples that can hold density leave the kernel, grouped by ray with per-ray offsets, so all
later work scales with kept samples. Forward only (sample positions carry no gradient).
"""
from __future__ import annotations

from dataclasses import dataclass

import jittor as jt

from tensorf_jt.kernels.source import device_code


@dataclass
class PackedSamples:
    """Kept samples of R rays. xyz [N, 3] world positions, z [N] distance along the ray,
    dist [N] gap to the ray's next sample (0 after its last), ray_index [N] int32 (sorted),
    ray_offsets [R + 1] int32: ray r owns entries ray_offsets[r]:ray_offsets[r + 1]."""

    xyz: jt.Var
    z: jt.Var
    dist: jt.Var
    ray_index: jt.Var
    ray_offsets: jt.Var

    @property
    def count(self) -> int:
        return self.xyz.shape[0]


def _alpha_inputs(alpha_mask) -> tuple[jt.Var, dict]:
    """The alpha volume (a 1-voxel stand-in when there is none) and its box as kernel data."""
    if alpha_mask is None:
        return jt.ones((1, 1, 1), dtype="float32"), {"has_alpha": 0.0}
    aabb = alpha_mask.aabb.numpy()
    data = {"has_alpha": 1.0}
    for a in range(3):
        data[f"alpha_min{a}"] = float(aabb[0, a])
        data[f"alpha_inv{a}"] = float(2.0 / (aabb[1, a] - aabb[0, a]))
    return alpha_mask.alpha_volume, data


_ALPHA_FROM_INPUT = """
    AlphaVolume alpha;
    alpha.data = data["has_alpha"] > 0 ? {volume}_p : nullptr;
    alpha.depth = {volume}_shape0; alpha.height = {volume}_shape1; alpha.width = {volume}_shape2;
    for (int a = 0; a < 3; ++a) {{
        alpha.aabb_min[a] = alpha.data ? (float)data["alpha_min" + std::to_string(a)] : 0.0f;
        alpha.inv_half[a] = alpha.data ? (float)data["alpha_inv" + std::to_string(a)] : 0.0f;
    }}
"""

_MARCH_PARAMS = """
    using namespace tensorf_kernels;
    MarchParams m;
    m.rays_o = in0_p; m.rays_d = in1_p; m.t_start = in2_p; m.jitter = in3_p; m.aabb = in4_p;
""" + _ALPHA_FROM_INPUT.format(volume="in5") + """
    m.alpha = alpha;
    m.step_size = (float)data["step_size"];
    m.n_samples = (int)data["n_samples"];
"""

_MARCH_GLUE = _MARCH_PARAMS + """
    long kept = march_rays_{device}(m, in0_shape0, out0_p, out1_p, out2_p, out3_p, out4_p);
    out0->set_shape({kept, 3});
    out1->set_shape({kept});
    out2->set_shape({kept});
    out3->set_shape({kept});
"""

_HIT_GLUE = _MARCH_PARAMS + """
    rays_hit_alpha_{device}(m, in0_shape0, out0_p);
"""

_LOOKUP_GLUE = """
    using namespace tensorf_kernels;
""" + _ALPHA_FROM_INPUT.format(volume="in1") + """
    alpha_lookup_{device}(alpha, in0_p, in0_shape0, out0_p);
"""


def march_rays(rays_o: jt.Var, rays_d: jt.Var, t_start: jt.Var, jitter: jt.Var, aabb: jt.Var,
               alpha_mask, step_size: float, n_samples: int) -> PackedSamples:
    """Packed samples of rays [R, 3] + [R, 3] (see ``PackedSamples``).

    Sample k of ray r sits at t_start[r] + step_size * (k + jitter[r]); it is kept when inside
    ``aabb`` [2, 3] and, given an ``AlphaGridMask``, where the grid is occupied.
    """
    n_rays = rays_o.shape[0]
    capacity = n_rays * n_samples
    volume, data = _alpha_inputs(alpha_mask)
    data.update(step_size=float(step_size), n_samples=float(n_samples))
    if capacity == 0:
        empty = jt.zeros((0,), dtype="float32")
        return PackedSamples(jt.zeros((0, 3), dtype="float32"), empty, empty, jt.zeros((0,), dtype="int32"),
                             jt.zeros((n_rays + 1,), dtype="int32"))
    outputs = device_code(
        [(-capacity, 3), (-capacity,), (-capacity,), (-capacity,), (n_rays + 1,)],
        ["float32", "float32", "float32", "int32", "int32"],
        [rays_o, rays_d, t_start, jitter, aabb, volume], "ray_marching", _MARCH_GLUE, data)
    for var in outputs:
        var.stop_grad()
    return PackedSamples(*outputs)


def rays_hit_alpha(rays_o: jt.Var, rays_d: jt.Var, t_start: jt.Var, alpha_mask, step_size: float,
                   n_samples: int) -> jt.Var:
    """bool [R]: whether any of a ray's ``n_samples`` evenly spaced samples meets the alpha grid."""
    volume, data = _alpha_inputs(alpha_mask)
    data.update(step_size=float(step_size), n_samples=float(n_samples))
    zeros = jt.zeros((rays_o.shape[0],), dtype="float32")
    aabb = jt.zeros((2, 3), dtype="float32")
    return device_code((rays_o.shape[0],), "bool", [rays_o, rays_d, t_start, zeros, aabb, volume],
                       "ray_marching", _HIT_GLUE, data)


def alpha_lookup(alpha_mask, xyz: jt.Var) -> jt.Var:
    """Trilinear alpha-grid value at world points xyz [N, 3] -> [N]."""
    volume, data = _alpha_inputs(alpha_mask)
    if xyz.shape[0] == 0:
        return jt.zeros((0,), dtype="float32")
    return device_code((xyz.shape[0],), "float32", [xyz, volume], "ray_marching", _LOOKUP_GLUE, data)
