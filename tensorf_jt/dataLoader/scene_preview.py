"""A look at a scene before training: its cameras as frusta, the scene box and the sparse
points, as a PNG (top and side views) and as a PLY of the same lines and points.

A box that cuts the object off, or cameras that look away from it, show at a glance here;
in training they show as a blurred or empty model after an hour. ``tools/preview_scene.py``
is the command line. Matplotlib (Agg backend) draws the PNG.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from tensorf_jt.formats.ownership import png_mark
from tensorf_jt.formats.ply import read_ply_points, write_ply

BOX_COLOUR = (220, 40, 40)
TRAIN_COLOUR = (40, 90, 220)
TEST_COLOUR = (240, 150, 20)
MAX_POINTS = 20000  # points drawn in the PNG (all go into the PLY)
_BOX_EDGES = np.array([[0, 1], [2, 3], [4, 5], [6, 7], [0, 2], [1, 3], [4, 6], [5, 7], [0, 4], [1, 5], [2, 6], [3, 7]])
_FRUSTUM_EDGES = np.array([[0, 1], [0, 2], [0, 3], [0, 4], [1, 2], [2, 3], [3, 4], [4, 1]])


@dataclass(frozen=True)
class SceneGeometry:
    """What the preview draws: segments [m, 2, 3] with colours [m, 3] uint8, and points [n, 3]
    with colours [n, 3] uint8, in the world the loader gives rays in."""

    segments: np.ndarray
    segment_colours: np.ndarray
    points: np.ndarray
    point_colours: np.ndarray


def box_corners(box: np.ndarray) -> np.ndarray:
    """The 8 corners [8, 3] of ``box`` [2, 3]; corner i takes max along axis a where bit (2 - a) of i is set."""
    box = np.asarray(box, dtype=np.float64).reshape(2, 3)
    index = np.array([[(i >> 2) & 1, (i >> 1) & 1, i & 1] for i in range(8)])
    return box[index, np.arange(3)]


def box_edges(box: np.ndarray) -> np.ndarray:
    """The 12 edges [12, 2, 3] of ``box`` [2, 3], as pairs of corners."""
    return box_corners(box)[_BOX_EDGES]


def frustum(c2w_opencv: np.ndarray, intrinsics: np.ndarray, size_wh: tuple[int, int], depth: float) -> np.ndarray:
    """Apex and the image corners at ``depth`` along the optical axis [5, 3], world coordinates."""
    (fx, _, cx), (_, fy, cy) = intrinsics[0], intrinsics[1]
    w, h = size_wh
    corners = np.array([[0, 0], [w, 0], [w, h], [0, h]], dtype=np.float64)
    local = np.stack([(corners[:, 0] - cx) / fx, (corners[:, 1] - cy) / fy, np.ones(4)], axis=-1) * depth
    world = local @ c2w_opencv[:3, :3].T + c2w_opencv[:3, 3]
    return np.concatenate([c2w_opencv[None, :3, 3], world])


def scene_geometry(box: np.ndarray, cameras: list[tuple[np.ndarray, np.ndarray, tuple[int, int], tuple[int, int, int]]],
                   points: np.ndarray | None = None, point_colours: np.ndarray | None = None) -> SceneGeometry:
    """Segments of the box and of each camera's frustum, and the points.

    ``cameras``: (OpenCV camera-to-world [N, 4, 4], intrinsics [3, 3], image size, colour) per
    group (e.g. train and test). Frusta are drawn to a depth of 8 % of the box's diagonal.
    """
    corners = box_corners(box)
    segments = [corners[_BOX_EDGES]]
    colours = [np.tile(BOX_COLOUR, (len(_BOX_EDGES), 1))]
    depth = 0.08 * float(np.linalg.norm(corners[-1] - corners[0]))
    for poses, intrinsics, size_wh, colour in cameras:
        for c2w in np.asarray(poses, dtype=np.float64):
            segments.append(frustum(c2w, np.asarray(intrinsics, dtype=np.float64), size_wh, depth)[_FRUSTUM_EDGES])
            colours.append(np.tile(colour, (len(_FRUSTUM_EDGES), 1)))
    points = np.zeros((0, 3)) if points is None else np.asarray(points, dtype=np.float64)
    point_colours = np.full((len(points), 3), 128, np.uint8) if point_colours is None else point_colours
    return SceneGeometry(np.concatenate(segments), np.concatenate(colours).astype(np.uint8), points,
                         np.asarray(point_colours, dtype=np.uint8))


def write_preview_ply(path: str, geometry: SceneGeometry) -> None:
    """The points, then two vertices per segment joined by an edge."""
    ends = geometry.segments.reshape(-1, 3)
    vertices = np.concatenate([geometry.points, ends])
    colours = np.concatenate([geometry.point_colours, np.repeat(geometry.segment_colours, 2, axis=0)])
    edges = len(geometry.points) + np.arange(len(ends)).reshape(-1, 2)
    write_ply(path, vertices, colours, edges, geometry.segment_colours)


def write_preview_png(path: str, geometry: SceneGeometry, title: str) -> None:
    """Top view (x-y, looking down z) and side view (x-z) side by side, equal axis scales."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    figure, axes = plt.subplots(1, 2, figsize=(12, 6.4))
    shown = geometry.points
    colours = geometry.point_colours
    if len(shown) > MAX_POINTS:
        keep = np.random.default_rng(0).choice(len(shown), MAX_POINTS, replace=False)
        shown, colours = shown[keep], colours[keep]
    for axis, (a, b), name in ((axes[0], (0, 1), "top (x right, y up)"), (axes[1], (0, 2), "side (x right, z up)")):
        if len(shown):
            axis.scatter(shown[:, a], shown[:, b], s=1.5, c=colours / 255.0, linewidths=0)
        axis.add_collection(LineCollection(geometry.segments[:, :, [a, b]], colors=geometry.segment_colours / 255.0,
                                           linewidths=0.8))
        ends = np.concatenate([geometry.segments.reshape(-1, 3), shown])
        low, high = ends.min(0), ends.max(0)
        margin = 0.05 * float((high - low).max())
        axis.set_xlim(low[a] - margin, high[a] + margin)
        axis.set_ylim(low[b] - margin, high[b] + margin)
        axis.set_aspect("equal")
        axis.set_title(name)
        axis.grid(alpha=0.3)
    figure.suptitle(title + "\nred: scene box, blue: training cameras, orange: test cameras, dots: sparse points",
                    fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120, metadata=png_mark())
    plt.close(figure)


def sparse_points(dataset) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The point cloud an own_data transforms file names (``ply_file_path``), or (None, None)."""
    path = getattr(dataset, "transforms_path", None)
    if path is None:
        return None, None
    with open(path, "r", encoding="utf-8") as handle:
        name = json.load(handle).get("ply_file_path")
    if not name:
        return None, None
    return read_ply_points(os.path.join(os.path.dirname(path), name))
