"""3D Gaussian splats in the reference 3DGS ``.ply`` layout (graphdeco-inria's ``save_ply``).

One binary little-endian ``vertex`` element, every property a float32, in this order:
``x y z nx ny nz f_dc_0..2 f_rest_0..(3 * ((d + 1)^2 - 1) - 1) opacity scale_0..2 rot_0..3``:
position, an unused normal (zeros), the colour's spherical-harmonic coefficients (degree ``d``
from 0 to 3; ``f_dc`` the constant term per channel, ``f_rest`` the others channel-major: all
of red's, then green's, then blue's), opacity as a logit, per-axis scale as a natural log and
the rotation as a quaternion (w, x, y, z). A colour is ``0.5 + sum_k c_k Y_k(direction)``,
clamped at 0, with ``f_dc = (rgb - 0.5) / SH_C0``. SuperSplat, antimatter15/splat, gsplat,
nerfstudio and viser read these files.

``read_splats`` checks a file before trusting it: the header's layout, a size exactly what the
header says, and finite values with non-zero rotations; every refusal is a ``SplatFileError``
naming the file and the property. It reads no more than the file holds.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from tensorf_jt.errors import TensorfError
from tensorf_jt.formats.ownership import PLY_COMMENT

SH_C0 = 0.28209479177387814  # Y_0^0, the constant spherical harmonic
MAX_SH_DEGREE = 3
_HEADER_LIMIT = 1 << 16  # bytes: a header longer than this is not a splat file's
_FLOAT_TYPES = ("float", "float32")


class SplatFileError(TensorfError):
    """A splat file that does not hold the reference layout, or holds values no splat can have."""


def sh_coefficients(degree: int) -> int:
    """Coefficients per colour channel of spherical harmonics up to ``degree``: (degree + 1)^2."""
    return (degree + 1) ** 2


@dataclass
class Splats:
    """Gaussians as the file stores them (float32 numpy arrays, N splats).

    ``means`` [N, 3] world positions; ``log_scales`` [N, 3]; ``quats`` [N, 4] (w, x, y, z);
    ``opacity_logits`` [N]; ``sh`` [N, K, 3] colour coefficients, K = (degree + 1)^2, the
    constant term first.
    """

    means: np.ndarray
    log_scales: np.ndarray
    quats: np.ndarray
    opacity_logits: np.ndarray
    sh: np.ndarray

    @property
    def count(self) -> int:
        return int(self.means.shape[0])

    @property
    def sh_degree(self) -> int:
        return int(round(np.sqrt(self.sh.shape[1]))) - 1

    def rgb(self) -> np.ndarray:
        """[N, 3] the view-independent colour (the constant term alone), clamped to [0, 1]."""
        return np.clip(0.5 + SH_C0 * self.sh[:, 0, :], 0.0, 1.0)

    def opacities(self) -> np.ndarray:
        """[N] opacities in (0, 1)."""
        return 1.0 / (1.0 + np.exp(-self.opacity_logits.astype(np.float64)))

    def covariances(self) -> np.ndarray:
        """[N, 3, 3] world covariances R S S^T R^T."""
        rotation = quaternion_matrices(self.quats)
        scaled = rotation * np.exp(self.log_scales.astype(np.float64))[:, None, :]
        return scaled @ np.swapaxes(scaled, 1, 2)


def quaternion_matrices(quats: np.ndarray) -> np.ndarray:
    """[N, 3, 3] rotations of quaternions [N, 4] (w, x, y, z), normalised first."""
    q = np.asarray(quats, np.float64)
    w, x, y, z = (q / np.linalg.norm(q, axis=1, keepdims=True)).T
    return np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
                     2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                     2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=1).reshape(-1, 3, 3)


def property_names(degree: int) -> list[str]:
    """The layout's properties, in order, for colour coefficients up to ``degree``."""
    rest = 3 * (sh_coefficients(degree) - 1)
    return (["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
            + [f"f_rest_{i}" for i in range(rest)]
            + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"])


def _table(splats: Splats) -> np.ndarray:
    """[N, P] float32 rows in the layout's order."""
    count, k = splats.count, splats.sh.shape[1]
    rest = np.transpose(splats.sh[:, 1:, :], (0, 2, 1)).reshape(count, 3 * (k - 1))  # channel-major
    columns = [splats.means, np.zeros((count, 3)), splats.sh[:, 0, :], rest, splats.opacity_logits[:, None],
               splats.log_scales, splats.quats]
    return np.concatenate([np.asarray(c, np.float32).reshape(count, -1) for c in columns], axis=1)


def write_splats(path: str, splats: Splats) -> None:
    """Write ``splats`` to ``path`` in the reference layout."""
    if not 0 <= splats.sh_degree <= MAX_SH_DEGREE or splats.sh.shape[1] != sh_coefficients(splats.sh_degree):
        raise ValueError(f"colour coefficients of shape {splats.sh.shape[1:]} are not spherical harmonics of degree "
                         f"0 to {MAX_SH_DEGREE}")
    names = property_names(splats.sh_degree)
    header = ["ply", "format binary_little_endian 1.0", PLY_COMMENT, f"element vertex {splats.count}"]
    header += [f"property float {name}" for name in names] + ["end_header"]
    with open(path, "wb") as handle:
        handle.write(("\n".join(header) + "\n").encode("ascii"))
        handle.write(np.ascontiguousarray(_table(splats), dtype="<f4").tobytes())


def _read_header(handle, path: str) -> tuple[int, list[str], int]:
    """(vertex count, property names, header length in bytes) of a splat file's header."""
    head = handle.read(_HEADER_LIMIT)
    end = head.find(b"end_header\n")
    if not head.startswith(b"ply\n") or end < 0:
        raise SplatFileError(f"'{path}' is not a PLY file with a header of at most {_HEADER_LIMIT} bytes ending "
                             "in 'end_header'.")
    lines = [line.strip() for line in head[:end].decode("ascii", "replace").split("\n")[1:]]
    count, names, element = None, [], None
    for line in lines:
        tokens = line.split()
        if not tokens or tokens[0] in ("comment", "obj_info"):
            continue
        if tokens[0] == "format":
            if tokens[1:] != ["binary_little_endian", "1.0"]:
                raise SplatFileError(f"'{path}' is a PLY file in format '{' '.join(tokens[1:])}'; splat files are "
                                     "binary_little_endian 1.0.")
        elif tokens[0] == "element":
            if element is not None or tokens[1:2] != ["vertex"] or len(tokens) != 3 or not tokens[2].isdigit():
                raise SplatFileError(f"'{path}' has the element line '{line}'; a splat file holds one element, "
                                     "'element vertex N'.")
            element, count = "vertex", int(tokens[2])
        elif tokens[0] == "property":
            if element is None or len(tokens) != 3 or tokens[1] not in _FLOAT_TYPES:
                raise SplatFileError(f"'{path}' has the property line '{line}'; every property of a splat file is "
                                     "a float of the vertex element.")
            names.append(tokens[2])
        else:
            raise SplatFileError(f"'{path}' has the header line '{line}', which PLY does not define.")
    if count is None:
        raise SplatFileError(f"'{path}' has no 'element vertex N' line.")
    return count, names, end + len(b"end_header\n")


def _sh_degree_of(names: list[str], path: str) -> int:
    rest = sum(1 for name in names if name.startswith("f_rest_"))
    for degree in range(MAX_SH_DEGREE + 1):
        if rest == 3 * (sh_coefficients(degree) - 1):
            return degree
    raise SplatFileError(f"'{path}' has {rest} f_rest properties; spherical harmonics of degree 0 to "
                         f"{MAX_SH_DEGREE} have 0, 9, 24 or 45.")


def read_splats(path: str) -> Splats:
    """The splats in ``path`` (the reference layout; other float properties are ignored)."""
    try:
        size = os.path.getsize(path)
        handle = open(path, "rb")
    except OSError as err:
        raise SplatFileError(f"Cannot read the splat file '{path}' ({err.strerror}).") from None
    with handle:
        count, names, header_bytes = _read_header(handle, path)
        degree = _sh_degree_of(names, path)
        required = [name for name in property_names(degree) if name not in ("nx", "ny", "nz")]
        missing = [name for name in required if name not in names]
        if missing:
            raise SplatFileError(f"'{path}' lacks the property '{missing[0]}' of the 3DGS layout"
                                 f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}.")
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise SplatFileError(f"'{path}' names the property '{duplicated[0]}' twice.")
        stride = 4 * len(names)
        expected = header_bytes + count * stride
        if size != expected:
            relation = "larger" if size > expected else "smaller"
            raise SplatFileError(f"'{path}' is {size:,} bytes, {relation} than the {expected:,} its header says "
                                 f"({count:,} splats of {len(names)} floats); the file is damaged.")
        handle.seek(header_bytes)
        table = np.fromfile(handle, dtype="<f4", count=count * len(names)).reshape(count, len(names))
    column = {name: index for index, name in enumerate(names)}
    for name in required:
        bad = ~np.isfinite(table[:, column[name]])
        if bad.any():
            raise SplatFileError(f"'{path}': property '{name}' holds {int(bad.sum()):,} NaN or infinite values "
                                 f"(splat {int(np.argmax(bad))} first).")

    def take(names_wanted: list[str]) -> np.ndarray:
        return np.ascontiguousarray(table[:, [column[name] for name in names_wanted]], dtype=np.float32)

    quats = take([f"rot_{i}" for i in range(4)])
    norms = np.linalg.norm(quats.astype(np.float64), axis=1)
    if np.any(norms < 1e-12):
        raise SplatFileError(f"'{path}': properties 'rot_0'..'rot_3' are zero for {int((norms < 1e-12).sum()):,} "
                             f"splats (splat {int(np.argmax(norms < 1e-12))} first); a rotation needs a non-zero "
                             "quaternion.")
    k = sh_coefficients(degree)
    rest = take([f"f_rest_{i}" for i in range(3 * (k - 1))]).reshape(count, 3, k - 1)
    sh = np.concatenate([take(["f_dc_0", "f_dc_1", "f_dc_2"])[:, None, :], np.transpose(rest, (0, 2, 1))], axis=1)
    return Splats(take(["x", "y", "z"]), take(["scale_0", "scale_1", "scale_2"]),
                  (quats / norms[:, None]).astype(np.float32), take(["opacity"])[:, 0], sh.astype(np.float32))
