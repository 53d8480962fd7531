"""Splats where a trained field puts its surfaces: one per training pixel that the model renders
opaque, at the depth its ray ends, merged where they crowd (NeRFGS's placement, arXiv
2405.09717, with sizes from the pixels' footprints).

For each training camera (every ``stride``-th pixel) the checkpoint renders colour, depth and
opacity; a pixel at least ``min_opacity`` opaque gives a point at its mean depth (the depth
of the opaque part: (depth - (1 - acc) d_z) / acc, undoing the reference's background depth),
kept where the field is dense (a pixel across two surfaces averages their depths into the
empty space between them).
Points are merged per cell of a grid whose cells are as wide as the points' footprints there
(one grid per power of two of footprint, so a far wall gets wide cells and a near object
fine ones), the cells widened until at most ``max_splats`` remain. Each splat is then:

- a flat disc across the field's density gradient where the density changes across it (a
  surface), round where it does not (volume); standard deviations ``scale_factor`` times the
  cell width in its plane and a tenth of that across it;
- as opaque as the pixels that made it were (clamped to [0.05, 0.95]);
- coloured by spherical harmonics fitted to the field's colour seen from the training cameras
  that see it (its depth agrees with their rendered depth there), or from all of them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import jittor as jt

from tensorf_jt.errors import CheckpointError
from tensorf_jt.formats.gaussian_ply import Splats
from tensorf_jt.rendering.rays import ndc_rays_blender
from tensorf_jt.splats.camera import PinholeCamera
from tensorf_jt.splats.field_probe import FieldProbe
from tensorf_jt.splats.sh import fit_coefficients

RENDER_CHUNK = 8192


@dataclass(frozen=True)
class PlacementOptions:
    """``stride``: every how many pixels a ray is cast; ``max_splats``: the most kept;
    ``min_opacity``: the least rendered opacity that places a point; ``min_density``: the least
    density there, as a share of the median over the points; ``scale_factor``: a disc's
    standard deviation in cell widths; ``sh_degree``: the colour's; ``views_per_splat``: how many
    of the cameras that see a splat its colour is fitted to."""

    stride: int = 1
    max_splats: int = 200_000
    min_opacity: float = 0.5
    min_density: float = 0.1
    scale_factor: float = 0.3
    sh_degree: int = 3
    views_per_splat: int = 16


@dataclass
class ViewRenders:
    """The checkpoint's renders of the cameras (at ``stride``): colour [V, h, w, 3], distance
    along each pixel's unit ray to its opaque part [V, h, w] (inf where transparent) and opacity."""

    rgb: np.ndarray
    distance: np.ndarray
    opacity: np.ndarray


def model_rays(origins: np.ndarray, directions: np.ndarray, dataset) -> np.ndarray:
    """[M, 6] float32 rays as the model takes them: world rays, or NDC rays for an NDC dataset."""
    if dataset.ndc_parameters is not None:
        width, height = dataset.img_wh
        origins, directions = ndc_rays_blender(height, width, *dataset.ndc_parameters, origins, directions)
    return np.concatenate([origins, directions], axis=1).astype(np.float32)


def render_views(model, dataset, cameras: list[PinholeCamera], stride: int, white_bg: bool) -> ViewRenders:
    """Render every camera's pixels (every ``stride``-th) with the checkpoint."""
    rgbs, distances, opacities = [], [], []
    for camera in cameras:
        origins, directions, _ = camera.pixel_rays(stride)
        rays = model_rays(origins, directions, dataset)
        parts = []
        with jt.no_grad():
            for start in range(0, len(rays), RENDER_CHUNK):
                out = model(jt.array(rays[start:start + RENDER_CHUNK]), white_bg=white_bg)
                parts.append((out.rgb.numpy(), out.depth.numpy(), out.opacity.numpy()))
        rgb, depth, acc = (np.concatenate(values) for values in zip(*parts))
        opaque_depth = (depth - (1.0 - acc) * rays[:, 5]) / np.maximum(acc, 1e-6)
        distance = ray_distance(origins, directions, rays, opaque_depth, dataset)
        h, w = -(-camera.height // stride), -(-camera.width // stride)
        rgbs.append(rgb.reshape(h, w, 3))
        distances.append(np.where(acc > 1e-3, distance, np.inf).reshape(h, w))
        opacities.append(acc.reshape(h, w))
    return ViewRenders(np.stack(rgbs), np.stack(distances), np.stack(opacities))


def ray_distance(origins: np.ndarray, directions: np.ndarray, rays: np.ndarray, t: np.ndarray, dataset) -> np.ndarray:
    """World distance along unit rays of the points at ray parameter ``t`` of the model's rays."""
    if dataset.ndc_parameters is None:
        return t.astype(np.float64)
    focal, near = dataset.ndc_parameters
    width, height = dataset.img_wh
    z_ndc = rays[:, 2].astype(np.float64) + t * rays[:, 5]
    z_world = 2.0 * near / np.minimum(z_ndc - 1.0, -1e-9)
    return (z_world - origins[:, 2]) / np.where(np.abs(directions[:, 2]) < 1e-12, -1e-12, directions[:, 2])


def candidate_points(cameras: list[PinholeCamera], renders: ViewRenders, stride: int,
                     min_opacity: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(points [M, 3], footprints [M] (pixel width there, world units), opacities [M]) of the
    pixels at least ``min_opacity`` opaque."""
    points, footprints, opacities = [], [], []
    for view, camera in enumerate(cameras):
        origins, directions, _ = camera.pixel_rays(stride)
        distance = renders.distance[view].reshape(-1)
        acc = renders.opacity[view].reshape(-1)
        keep = (acc >= min_opacity) & np.isfinite(distance) & (distance > 0)
        points.append(origins[keep] + directions[keep] * distance[keep, None])
        footprints.append(distance[keep] * stride / np.sqrt(camera.fx * camera.fy))
        opacities.append(acc[keep])
    return np.concatenate(points), np.concatenate(footprints), np.concatenate(opacities)


def merge_cells(points: np.ndarray, footprints: np.ndarray, opacities: np.ndarray, cell_factor: float):
    """Points averaged per cell: (means [C, 3], cell widths [C], opacities [C]). A point's cell is
    ``cell_factor`` times its footprint rounded to a power of two wide."""
    level = np.round(np.log2(np.maximum(footprints, 1e-12))).astype(np.int64)
    width = cell_factor * np.exp2(level.astype(np.float64))
    cells = np.floor(points / width[:, None]).astype(np.int64)
    keys = np.concatenate([level[:, None], cells], axis=1)
    _, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)

    def mean(values: np.ndarray) -> np.ndarray:
        sums = np.zeros((len(counts),) + values.shape[1:])
        np.add.at(sums, inverse, values)
        return sums / counts.reshape((-1,) + (1,) * (values.ndim - 1))

    return mean(points), mean(width), mean(opacities)


def surface_frames(probe: FieldProbe, means: np.ndarray, widths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(quaternions [N, 4] whose third axis is the density gradient's direction, and whether a
    splat is a surface [N]: the density changes across it by more than a quarter of its value)."""
    offsets = np.concatenate([np.eye(3), -np.eye(3)])
    probes = means[:, None, :] + 0.5 * widths[:, None, None] * offsets[None]
    sigma = probe.density(probes.reshape(-1, 3)).reshape(len(means), 6).astype(np.float64)
    gradient = sigma[:, :3] - sigma[:, 3:]
    size = np.linalg.norm(gradient, axis=1)
    surface = size > 0.25 * np.maximum(sigma.mean(1), 1e-6)
    normal = np.where(surface[:, None], gradient / np.maximum(size, 1e-12)[:, None], [0.0, 0.0, 1.0])
    return quaternions_from_normals(normal), surface


def quaternions_from_normals(normals: np.ndarray) -> np.ndarray:
    """[N, 4] (w, x, y, z) of rotations taking +z onto unit ``normals`` [N, 3]."""
    z = np.array([0.0, 0.0, 1.0])
    axis = np.cross(np.broadcast_to(z, normals.shape), normals)
    cos = np.clip(normals[:, 2], -1.0, 1.0)
    half = np.sqrt(np.maximum(0.5 * (1.0 + cos), 0.0))
    sin_half = np.sqrt(np.maximum(0.5 * (1.0 - cos), 0.0))
    length = np.linalg.norm(axis, axis=1, keepdims=True)
    axis = np.where(length > 1e-9, axis / np.maximum(length, 1e-12), [1.0, 0.0, 0.0])
    return np.concatenate([half[:, None], axis * sin_half[:, None]], axis=1)


def seeing_cameras(means: np.ndarray, cameras: list[PinholeCamera], renders: ViewRenders, stride: int,
                   tolerance: np.ndarray) -> np.ndarray:
    """[N, V] bool: camera v sees splat n (in its image, in front, its rendered distance there
    within ``tolerance`` [N] of the splat's)."""
    seen = np.zeros((len(means), len(cameras)), bool)
    for view, camera in enumerate(cameras):
        rotation, translation = camera.world_to_camera()
        local = means @ rotation.T + translation
        z = local[:, 2]
        front = z > 1e-6
        u = camera.fx * local[:, 0] / np.where(front, z, 1.0) + camera.cx
        v = camera.fy * local[:, 1] / np.where(front, z, 1.0) + camera.cy
        inside = front & (u >= 0) & (v >= 0) & (u < camera.width) & (v < camera.height)
        rows = np.clip((v // stride).astype(np.int64), 0, renders.distance.shape[1] - 1)
        cols = np.clip((u // stride).astype(np.int64), 0, renders.distance.shape[2] - 1)
        rendered = renders.distance[view][rows, cols]
        distance = np.linalg.norm(means - camera.centre, axis=1)
        seen[:, view] = inside & (np.abs(rendered - distance) <= tolerance)
    return seen


def fit_colours(probe: FieldProbe, means: np.ndarray, cameras: list[PinholeCamera], seen: np.ndarray, degree: int,
                views_per_splat: int) -> np.ndarray:
    """[N, K, 3] coefficients fitted to the field's colour from up to ``views_per_splat`` of the
    cameras that see each splat (all cameras where none does), spread over them evenly."""
    centres = np.stack([camera.centre for camera in cameras])
    n = len(means)
    usable = seen | ~seen.any(axis=1, keepdims=True)
    ordered = np.argsort(~usable, axis=1, kind="stable")  # each row's usable cameras first, in order
    counts = usable.sum(axis=1)
    ranks = np.round(np.linspace(0.0, 1.0, views_per_splat)[None, :] * (counts[:, None] - 1)).astype(np.int64)
    picks = np.take_along_axis(ordered, ranks, axis=1)
    chosen = centres[picks]  # [N, M, 3]
    colours = probe.colours(np.repeat(means, views_per_splat, axis=0), chosen.reshape(-1, 3))
    directions = np.repeat(means, views_per_splat, axis=0).reshape(n, views_per_splat, 3) - chosen
    directions /= np.linalg.norm(directions, axis=2, keepdims=True)
    return fit_coefficients(colours.reshape(n, views_per_splat, 3), directions, degree)


def place_splats(model, dataset, cameras: list[PinholeCamera], renders: ViewRenders,
                 options: PlacementOptions) -> Splats:
    """Splats seeded from ``model``'s renders ``renders`` of ``cameras`` (``render_views``)."""
    points, footprints, opacities = candidate_points(cameras, renders, options.stride, options.min_opacity)
    if len(points) == 0:
        raise CheckpointError(f"The checkpoint renders no pixel of the {len(cameras)} training views at least "
                              f"{options.min_opacity:g} opaque: there is no surface to place splats on. Export a "
                              "trained checkpoint.")
    probe = FieldProbe(model, dataset)
    density = probe.density(points)
    dense = density >= options.min_density * float(np.median(density))
    points, footprints, opacities = points[dense], footprints[dense], opacities[dense]
    cell_factor = 1.0
    means, widths, alphas = merge_cells(points, footprints, opacities, cell_factor)
    while len(means) > options.max_splats:
        cell_factor *= 1.25
        means, widths, alphas = merge_cells(points, footprints, opacities, cell_factor)
    quats, surface = surface_frames(probe, means, widths)
    sigma = options.scale_factor * widths
    scales = np.stack([sigma, sigma, np.where(surface, 0.1 * sigma, sigma)], axis=1)
    seen = seeing_cameras(means, cameras, renders, options.stride, tolerance=2.0 * widths + 0.02 * np.linalg.norm(
        means - np.mean([c.centre for c in cameras], axis=0), axis=1))
    sh = fit_colours(probe, means, cameras, seen, options.sh_degree, options.views_per_splat)
    alphas = np.clip(alphas, 0.05, 0.95)
    return Splats(means.astype(np.float32), np.log(scales).astype(np.float32), quats.astype(np.float32),
                  np.log(alphas / (1.0 - alphas)).astype(np.float32), sh)
