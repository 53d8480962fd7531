"""Point sampling along rays inside the scene's axis-aligned bounding box (AABB).

TensoRF marches every ray with a fixed step from the point where it enters the box: the step
is ``step_ratio`` times the mean voxel size, so the number of samples grows with the grid.
"""
from __future__ import annotations

import jittor as jt

from tensorf_jt.rendering.torch_numerics import linspace_f32


def ray_box_intersection(rays_o: jt.Var, rays_d: jt.Var, aabb: jt.Var) -> tuple[jt.Var, jt.Var]:
    """Distances at which rays enter and leave the box (slab method).

    rays_o, rays_d: [R, 3]; aabb: [2, 3] (min corner, max corner). Returns t_enter, t_exit, [R].
    A ray misses the box when t_exit <= t_enter. Zero direction components are replaced by
    1e-6, as in the reference, so the division stays finite.
    """
    safe_d = jt.ternary(rays_d == 0, jt.full_like(rays_d, 1e-6), rays_d)
    to_max = (aabb[1] - rays_o) / safe_d
    to_min = (aabb[0] - rays_o) / safe_d
    t_enter = jt.minimum(to_max, to_min).max(-1)
    t_exit = jt.maximum(to_max, to_min).min(-1)
    return t_enter, t_exit


def sample_along_rays(
    rays_o: jt.Var,
    rays_d: jt.Var,
    aabb: jt.Var,
    near_far: tuple[float, float],
    step_size: float,
    n_samples: int,
    jitter: jt.Var | None,
) -> tuple[jt.Var, jt.Var, jt.Var]:
    """Evenly spaced samples from the box entry point (reference: ``TensorBase.sample_ray``).

    Returns xyz [R, S, 3], z_vals [R, S] (distance along the ray) and inside [R, S] (bool: the
    sample lies in the box). The entry distance is clamped to ``near_far``; ``jitter`` [R]
    (training: random fractions in [0, 1)) shifts each ray's samples together by that
    fraction of a step.
    """
    near, far = near_far
    t_enter, _ = ray_box_intersection(rays_o, rays_d, aabb)
    t_start = t_enter.clamp(min_v=near, max_v=far)
    steps = jt.arange(n_samples).float32().unsqueeze(0)
    if jitter is not None:
        steps = steps + jitter.unsqueeze(1)
    # Jittor fuses element-wise chains into one kernel compiled with -Ofast, turning a*b + c
    # into a fused multiply-add. Rounding each product separately, as torch does, keeps samples
    # on the same side of the box faces as in the reference.
    z_vals = t_start.unsqueeze(1) + (step_size * steps).stop_fuse()
    offsets = (rays_d.unsqueeze(1) * z_vals.unsqueeze(2)).stop_fuse()
    xyz = rays_o.unsqueeze(1) + offsets
    outside = ((xyz < aabb[0]) | (xyz > aabb[1])).any(-1)
    return xyz, z_vals, jt.logical_not(outside)  # the reference's ~mask_outbbox


def sample_distances(z_vals: jt.Var) -> jt.Var:
    """Gap from each sample to the next; the last sample of a ray gets 0 (reference convention)."""
    gaps = z_vals[:, 1:] - z_vals[:, :-1]
    return jt.concat([gaps, jt.zeros((z_vals.shape[0], 1), dtype=z_vals.dtype)], dim=1)


def sample_along_rays_ndc(
    rays_o: jt.Var,
    rays_d: jt.Var,
    aabb: jt.Var,
    near_far: tuple[float, float],
    n_samples: int,
    jitter: jt.Var | None,
) -> tuple[jt.Var, jt.Var, jt.Var]:
    """Evenly spaced samples between near and far in NDC space (reference ``sample_ray_ndc``).

    Forward-facing scenes are marched in normalised device coordinates, where the scene spans
    t in [0, 1] along every ray, so all rays share one set of distances. ``jitter`` [1, S]
    (training: uniform in [0, 1)) moves each sample by that fraction of the spacing; as in the
    reference, the offsets are drawn once per batch, not per ray. Returns xyz [R, S, 3],
    z_vals [R, S], inside [R, S].
    """
    near, far = near_far
    z_vals = jt.array(linspace_f32(near, far, n_samples)).unsqueeze(0)
    if jitter is not None:
        z_vals = z_vals + jitter * ((far - near) / n_samples)
    z_vals = z_vals.broadcast((rays_o.shape[0], n_samples))
    offsets = (rays_d.unsqueeze(1) * z_vals.unsqueeze(2)).stop_fuse()
    xyz = rays_o.unsqueeze(1) + offsets
    outside = ((xyz < aabb[0]) | (xyz > aabb[1])).any(-1)
    return xyz, z_vals, jt.logical_not(outside)  # the reference's ~mask_outbbox
