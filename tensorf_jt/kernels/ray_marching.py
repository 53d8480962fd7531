"""Fused ray marching: samples, box and alpha-grid tests and packing in one kernel, for rays
through a box (``march_rays``) and for unbounded rays (``march_unbounded``).

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
    """Kept samples of R rays. xyz [N, 3] model-space positions, z [N] distance along the ray,
    dist [N] gap to the ray's next sample, ray_index [N] int32 (sorted), ray_offsets [R + 1]
    int32: ray r owns entries ray_offsets[r]:ray_offsets[r + 1]."""

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
    aabb = alpha_mask.box
    data = {"has_alpha": 1.0}
    for a in range(3):
        data[f"alpha_min{a}"] = float(aabb[0, a])
        data[f"alpha_inv{a}"] = float(2.0 / (aabb[1, a] - aabb[0, a]))
    return alpha_mask.alpha_volume, data


# The alpha grid from the input ``alpha_volume`` and its box from ``data`` (``_alpha_inputs``).
_ALPHA = """
    using namespace tensorf_kernels;
    AlphaVolume alpha;
    alpha.data = data["has_alpha"] > 0 ? alpha_volume_p : nullptr;
    alpha.depth = alpha_volume_shape0; alpha.height = alpha_volume_shape1; alpha.width = alpha_volume_shape2;
    for (int a = 0; a < 3; ++a) {
        alpha.aabb_min[a] = alpha.data ? (float)data["alpha_min" + std::to_string(a)] : 0.0f;
        alpha.inv_half[a] = alpha.data ? (float)data["alpha_inv" + std::to_string(a)] : 0.0f;
    }
"""
# The rays' fixed-step samples (``jitter_p`` only where there is an input ``jitter``).
_RAY_STEPS = _ALPHA + """
    RaySteps steps;
    steps.origins = rays_o_p; steps.directions = rays_d_p; steps.starts = t_start_p; steps.jitters = $jitter;
    steps.step_size = (float)data["step_size"];
    steps.n_samples = (int)data["n_samples"];
"""
_MARCH_GLUE = _RAY_STEPS + """
    long kept = march_rays_$device(steps, aabb_p, alpha, rays_o_shape0, xyz_p, z_p, dist_p, ray_index_p, ray_offsets_p);
    xyz->set_shape({kept, 3});
    z->set_shape({kept});
    dist->set_shape({kept});
    ray_index->set_shape({kept});
"""
_UNBOUNDED_GLUE = _ALPHA + """
    UnboundedSteps steps;
    steps.origins = rays_o_p; steps.directions = rays_d_p; steps.jitters = jitter_p;
    steps.enters = t_enter_p; steps.exits = t_exit_p;
    for (int a = 0; a < 3; ++a) {
        steps.contraction.center[a] = (float)data["contract_center" + std::to_string(a)];
        steps.contraction.inv_half[a] = (float)data["contract_inv_half" + std::to_string(a)];
    }
    steps.near = (float)data["near"]; steps.step = (float)data["step"];
    steps.inv_background = (float)data["inv_background"];
    steps.n_linear = (int)data["n_linear"]; steps.n_background = (int)data["n_background"];
    long kept = march_unbounded_$device(steps, alpha, rays_o_shape0, xyz_p, z_p, dist_p, ray_index_p, ray_offsets_p);
    xyz->set_shape({kept, 3});
    z->set_shape({kept});
    dist->set_shape({kept});
    ray_index->set_shape({kept});
"""
_HIT_GLUE = _RAY_STEPS + """
    rays_hit_alpha_$device(steps, alpha, rays_o_shape0, hit_p);
"""
_LOOKUP_GLUE = _ALPHA + """
    alpha_lookup_$device(alpha, xyz_p, xyz_shape0, alpha_values_p);
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
        return _empty_pack(n_rays)
    outputs = device_code(
        [("xyz", (-capacity, 3), "float32"), ("z", (-capacity,), "float32"), ("dist", (-capacity,), "float32"),
         ("ray_index", (-capacity,), "int32"), ("ray_offsets", (n_rays + 1,), "int32")],
        {"rays_o": rays_o, "rays_d": rays_d, "t_start": t_start, "jitter": jitter, "aabb": aabb,
         "alpha_volume": volume}, "ray_marching", _MARCH_GLUE, data, jitter="jitter_p")
    for var in outputs:
        var.stop_grad()
    return PackedSamples(*outputs)


def _empty_pack(n_rays: int) -> PackedSamples:
    empty = jt.zeros((0,), dtype="float32")
    return PackedSamples(jt.zeros((0, 3), dtype="float32"), empty, empty, jt.zeros((0,), dtype="int32"),
                         jt.zeros((n_rays + 1,), dtype="int32"))


def march_unbounded(rays_o: jt.Var, rays_d: jt.Var, jitter: jt.Var, t_enter: jt.Var, t_exit: jt.Var, alpha_mask,
                    n_linear: int, n_background: int, data: dict) -> PackedSamples:
    """Packed samples of unbounded rays [R, 3] + [R, 3] (``rendering.samplers.UnboundedSampler``
    describes them; ``data`` holds its settings and contraction; t_enter [R] where the rays
    enter the foreground box, +inf for those that miss it, t_exit [R] where their background
    runs start), kept where the alpha grid, if any, is occupied; positions in model space."""
    n_rays = rays_o.shape[0]
    capacity = n_rays * (n_linear + n_background)
    if capacity == 0:
        return _empty_pack(n_rays)
    volume, alpha = _alpha_inputs(alpha_mask)
    outputs = device_code(
        [("xyz", (-capacity, 3), "float32"), ("z", (-capacity,), "float32"), ("dist", (-capacity,), "float32"),
         ("ray_index", (-capacity,), "int32"), ("ray_offsets", (n_rays + 1,), "int32")],
        {"rays_o": rays_o, "rays_d": rays_d, "jitter": jitter, "t_enter": t_enter, "t_exit": t_exit,
         "alpha_volume": volume},
        "ray_marching", _UNBOUNDED_GLUE, {**alpha, **data})
    for var in outputs:
        var.stop_grad()
    return PackedSamples(*outputs)


def rays_hit_alpha(rays_o: jt.Var, rays_d: jt.Var, t_start: jt.Var, alpha_mask, step_size: float,
                   n_samples: int) -> jt.Var:
    """bool [R]: whether any of a ray's ``n_samples`` evenly spaced samples meets the alpha grid."""
    volume, data = _alpha_inputs(alpha_mask)
    data.update(step_size=float(step_size), n_samples=float(n_samples))
    hit, = device_code([("hit", (rays_o.shape[0],), "bool")],
                       {"rays_o": rays_o, "rays_d": rays_d, "t_start": t_start, "alpha_volume": volume},
                       "ray_marching", _HIT_GLUE, data, jitter="nullptr")
    return hit


def alpha_lookup(alpha_mask, xyz: jt.Var) -> jt.Var:
    """Trilinear alpha-grid value at world points xyz [N, 3] -> [N]."""
    volume, data = _alpha_inputs(alpha_mask)
    if xyz.shape[0] == 0:
        return jt.zeros((0,), dtype="float32")
    values, = device_code([("alpha_values", (xyz.shape[0],), "float32")], {"xyz": xyz, "alpha_volume": volume},
                         "ray_marching", _LOOKUP_GLUE, data)
    return values
