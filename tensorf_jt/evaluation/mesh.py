"""Mesh export: marching cubes on the model's opacity grid, coloured by its appearance field.

As in the reference (``export_mesh``): the dense alpha on the model's grid, the iso-surface at
alpha 0.005, triangles wound counter-clockwise seen from outside. Two differences: vertices are
placed at the grid's true spacing (the reference divides the box by N instead of N - 1 voxels,
which shrinks the mesh towards the box's minimum corner by one voxel across its width), and
every vertex gets a colour. An unbounded model's mesh is its foreground's (the box it was
trained with): the background shell holds the room, not an object. Written as binary
little-endian PLY without extra dependencies.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import jittor as jt
from skimage import measure

from tensorf_jt.errors import CheckpointError
from tensorf_jt.formats.ownership import PLY_COMMENT
from tensorf_jt.models import TensoRFModel

LEVEL = 0.005  # the reference's iso-level on alpha


@dataclass
class Mesh:
    """vertices [V, 3] float32 (world), faces [F, 3] int32, normals [V, 3] (unit, outward), colors [V, 3] uint8."""
    vertices: np.ndarray
    faces: np.ndarray
    normals: np.ndarray
    colors: np.ndarray


def extract_surface(model: TensoRFModel, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Iso-surface of the model's opacity on its own grid -> vertices (world), faces, outward normals.

    The grid's points span the foreground box (``Sampler.foreground``: the grid's box, or an
    unbounded scene's foreground) corner to corner, so the voxel size is extent / (N - 1).
    scikit-image's normals are gradients in index space; dividing by the voxel size, and by
    the scale from model space to the world, turns them into world-space normals.
    """
    box, scale, offset = model.sampler.foreground()
    alpha = model.dense_alpha(box).numpy()
    peak = float(alpha.max())
    if not float(alpha.min()) < level < peak:
        raise CheckpointError(
            f"No surface to export: the model's opacity on its {list(alpha.shape)} grid lies in "
            f"[{float(alpha.min()):.3g}, {peak:.3g}], which never crosses the level {level}. "
            "Export a trained checkpoint.")
    voxel = (box[1] - box[0]) / (np.asarray(alpha.shape, dtype=np.float32) - 1)
    verts, faces, normals, _ = measure.marching_cubes(alpha, level=level, spacing=tuple(float(v) for v in voxel))
    normals = normals / voxel / scale
    verts = np.asarray(verts + box[0], dtype=np.float64) * scale + offset
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
    vertices = verts.astype(np.float32)
    # scikit-image winds triangles clockwise seen from the low-opacity side (outside here).
    return vertices, np.ascontiguousarray(faces[:, ::-1], dtype=np.int32), normals.astype(np.float32)


def vertex_colors(model: TensoRFModel, vertices: np.ndarray, normals: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """Appearance colour [V, 3] uint8 at world points, seen looking into the surface.

    The shading MLP is view-dependent and was only ever trained with the directions of
    camera rays reaching a visible surface from outside, i.e. pointing into it; the most
    direct such view is along the inward normal, so each vertex is shaded with viewdir = -normal.
    """
    colors = []
    with jt.no_grad():
        for start in range(0, vertices.shape[0], chunk):
            points = model.field.normalize_coord(model.sampler.to_model(jt.array(vertices[start:start + chunk])))
            viewdirs = jt.array(-normals[start:start + chunk])
            rgb = model.field.shade(points, viewdirs)
            colors.append(rgb.numpy())
    rgb = np.concatenate(colors) if colors else np.zeros((0, 3), np.float32)
    return np.round(np.clip(rgb, 0.0, 1.0) * 255).astype(np.uint8)


def extract_mesh(model: TensoRFModel, level: float = LEVEL) -> Mesh:
    """The model's coloured iso-surface (see ``extract_surface`` and ``vertex_colors``)."""
    vertices, faces, normals = extract_surface(model, level)
    return Mesh(vertices, faces, normals, vertex_colors(model, vertices, normals))


def write_ply(path: str, vertices: np.ndarray, faces: np.ndarray, colors: np.ndarray) -> None:
    """Binary little-endian PLY: vertices (float x, y, z, uchar red, green, blue) and
    triangles (uchar count, int vertex_indices)."""
    vertex_rows = np.empty(len(vertices), dtype=[("xyz", "<f4", (3,)), ("rgb", "u1", (3,))])
    vertex_rows["xyz"], vertex_rows["rgb"] = vertices, colors
    face_rows = np.empty(len(faces), dtype=[("count", "u1"), ("indices", "<i4", (3,))])
    face_rows["count"], face_rows["indices"] = 3, faces
    header = "\n".join([
        "ply",
        "format binary_little_endian 1.0",
        PLY_COMMENT,
        f"element vertex {len(vertices)}",
        "property float x",
        "property float y",
        "property float z",
        "property uchar red",
        "property uchar green",
        "property uchar blue",
        f"element face {len(faces)}",
        "property list uchar int vertex_indices",
        "end_header",
    ]) + "\n"
    with open(path, "wb") as handle:
        handle.write(header.encode("ascii"))
        handle.write(vertex_rows.tobytes())
        handle.write(face_rows.tobytes())


def export_mesh(model: TensoRFModel, path: str, level: float = LEVEL) -> Mesh:
    """Extract the model's coloured mesh and write it to ``path`` (PLY); returns the mesh."""
    mesh = extract_mesh(model, level)
    write_ply(path, mesh.vertices, mesh.faces, mesh.colors)
    return mesh
