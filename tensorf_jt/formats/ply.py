"""Small PLY files of coloured points and line segments: the sparse points a conversion keeps,
and the preview's cameras and box. Binary little-endian, readable by MeshLab, CloudCompare
and Blender; ``read_ply_points`` reads the vertices back (also from ASCII files).
Only numpy is imported here.
"""
from __future__ import annotations

import numpy as np

from tensorf_jt.errors import DatasetError
from tensorf_jt.formats.ownership import PLY_COMMENT

_VERTEX = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("red", "u1"), ("green", "u1"), ("blue", "u1")])
_EDGE = np.dtype([("vertex1", "<i4"), ("vertex2", "<i4"), ("red", "u1"), ("green", "u1"), ("blue", "u1")])
_PLY_TYPES = {"char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1", "short": "i2", "int16": "i2",
              "ushort": "u2", "uint16": "u2", "int": "i4", "int32": "i4", "uint": "u4", "uint32": "u4",
              "float": "f4", "float32": "f4", "double": "f8", "float64": "f8"}


def write_ply(path: str, points: np.ndarray, colors: np.ndarray, edges: np.ndarray | None = None,
              edge_colors: np.ndarray | None = None) -> None:
    """Vertices ``points`` [n, 3] with ``colors`` [n, 3] uint8, and optional line segments
    ``edges`` [m, 2] (vertex indices) with ``edge_colors`` [m, 3] uint8."""
    vertices = np.zeros(len(points), dtype=_VERTEX)
    for axis, name in enumerate("xyz"):
        vertices[name] = np.asarray(points, dtype=np.float64)[:, axis]
    for axis, name in enumerate(("red", "green", "blue")):
        vertices[name] = np.asarray(colors)[:, axis]
    header = ["ply", "format binary_little_endian 1.0", PLY_COMMENT, f"element vertex {len(vertices)}",
              "property float x", "property float y", "property float z",
              "property uchar red", "property uchar green", "property uchar blue"]
    lines = None
    if edges is not None and len(edges):
        lines = np.zeros(len(edges), dtype=_EDGE)
        lines["vertex1"], lines["vertex2"] = np.asarray(edges)[:, 0], np.asarray(edges)[:, 1]
        for axis, name in enumerate(("red", "green", "blue")):
            lines[name] = np.asarray(edge_colors)[:, axis]
        header += [f"element edge {len(lines)}", "property int vertex1", "property int vertex2",
                   "property uchar red", "property uchar green", "property uchar blue"]
    header.append("end_header")
    with open(path, "wb") as handle:
        handle.write(("\n".join(header) + "\n").encode("ascii"))
        handle.write(vertices.tobytes())
        if lines is not None:
            handle.write(lines.tobytes())


def read_ply_points(path: str) -> tuple[np.ndarray, np.ndarray]:
    """The vertices of a PLY file: positions [n, 3] float64 and colours [n, 3] uint8 (grey
    where the file has none). ASCII and binary little-endian files with scalar vertex properties."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        raise DatasetError(f"Cannot read the point cloud '{path}': {err.strerror}.") from None
    end = data.find(b"end_header\n")
    if not data.startswith(b"ply") or end < 0:
        raise DatasetError(f"'{path}' is not a PLY file (no 'ply' ... 'end_header' header).")
    fmt, count, properties, in_vertex, before_vertex = None, 0, [], False, True
    for line in data[:end].decode("ascii", "replace").splitlines()[1:]:
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0] == "format":
            fmt = tokens[1]
        elif tokens[0] == "element":
            in_vertex = tokens[1] == "vertex"
            if in_vertex:
                count, before_vertex = int(tokens[2]), False
            elif before_vertex:
                raise DatasetError(f"'{path}': elements before 'vertex' are not supported.")
        elif tokens[0] == "property" and in_vertex:
            if tokens[1] == "list" or tokens[1] not in _PLY_TYPES:
                raise DatasetError(f"'{path}': vertex property '{line}' is not supported.")
            properties.append((tokens[2], _PLY_TYPES[tokens[1]]))
    names = [name for name, _ in properties]
    if not all(axis in names for axis in "xyz"):
        raise DatasetError(f"'{path}' has no x, y, z vertex properties.")
    body = data[end + len(b"end_header\n"):]
    if fmt == "binary_little_endian":
        table = np.frombuffer(body, dtype=np.dtype([(name, "<" + kind) for name, kind in properties]), count=count)
        columns = {name: table[name] for name in names}
    elif fmt == "ascii":
        rows = np.array(body.decode("ascii").split(), dtype=np.float64)[:count * len(names)]
        rows = rows.reshape(count, len(names))
        columns = {name: rows[:, i] for i, name in enumerate(names)}
    else:
        raise DatasetError(f"'{path}': PLY format '{fmt}' is not supported (ascii or binary_little_endian).")
    xyz = np.stack([columns[axis] for axis in "xyz"], axis=-1).astype(np.float64)
    if all(name in columns for name in ("red", "green", "blue")):
        rgb = np.stack([columns[name] for name in ("red", "green", "blue")], axis=-1).astype(np.uint8)
    else:
        rgb = np.full((count, 3), 128, dtype=np.uint8)
    return xyz, rgb
