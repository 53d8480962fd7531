"""Splat files: the reference 3DGS layout, read back by plyfile as other tools read it, and every
malformed file refused with the property and the file named (exit status 2 from the CLIs)."""
from __future__ import annotations

import numpy as np
import pytest

from test_splat_raster import random_splats

from tensorf_jt.cli.render import main as render_main
from tensorf_jt.formats.gaussian_ply import SH_C0, SplatFileError, property_names, read_splats, write_splats
from tensorf_jt.formats.ownership import ply_is_ours


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_the_layout_is_the_reference_one_and_reads_back(tmp_path, degree):
    """Float copies only, so every value comes back bit for bit."""
    from plyfile import PlyData

    splats = random_splats(n=7, degree=degree, seed=degree)
    path = tmp_path / "splats.ply"
    write_splats(str(path), splats)
    vertex = PlyData.read(str(path))["vertex"]
    rest = 3 * ((degree + 1) ** 2 - 1)
    expected = (["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"] + [f"f_rest_{i}" for i in range(rest)]
                + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"])
    assert [p.name for p in vertex.properties] == expected == property_names(degree)
    assert all(vertex[name].dtype == np.dtype("<f4") for name in expected)
    assert vertex.count == 7
    np.testing.assert_array_equal(np.stack([vertex[a] for a in "xyz"], 1), splats.means)
    np.testing.assert_array_equal(np.stack([vertex["nx"], vertex["ny"], vertex["nz"]], 1), 0.0)
    np.testing.assert_array_equal(np.stack([vertex[f"f_dc_{c}"] for c in range(3)], 1), splats.sh[:, 0])
    k = (degree + 1) ** 2
    for channel in range(3):  # channel-major: all of red's coefficients, then green's, then blue's
        for coefficient in range(1, k):
            np.testing.assert_array_equal(vertex[f"f_rest_{channel * (k - 1) + coefficient - 1}"],
                                          splats.sh[:, coefficient, channel])
    np.testing.assert_array_equal(vertex["opacity"], splats.opacity_logits)
    np.testing.assert_array_equal(np.stack([vertex[f"scale_{i}"] for i in range(3)], 1), splats.log_scales)
    np.testing.assert_array_equal(np.stack([vertex[f"rot_{i}"] for i in range(4)], 1), splats.quats)
    back = read_splats(str(path))
    np.testing.assert_allclose(back.quats, splats.quats / np.linalg.norm(splats.quats, axis=1, keepdims=True),
                               rtol=1e-6)  # read normalised: a float32 division, 1 ulp
    for field in ("means", "log_scales", "opacity_logits", "sh"):
        np.testing.assert_array_equal(getattr(back, field), getattr(splats, field))
    assert ply_is_ours(str(path))


def test_colours_follow_the_reference_constant():
    splats = random_splats(n=3, degree=0)
    splats.sh[:, 0] = (np.array([[0.2, 0.5, 0.9]]) - 0.5) / SH_C0
    np.testing.assert_allclose(splats.rgb(), [[0.2, 0.5, 0.9]] * 3, atol=1e-6)


def _written(tmp_path, splats=None) -> bytes:
    path = tmp_path / "good.ply"
    write_splats(str(path), splats if splats is not None else random_splats(n=5, degree=1))
    return path.read_bytes()


def _header_and_body(data: bytes) -> tuple[str, bytes]:
    end = data.index(b"end_header\n") + len(b"end_header\n")
    return data[:end].decode("ascii"), data[end:]


def _without(name: str):
    def edit(data: bytes) -> bytes:
        header, body = _header_and_body(data)
        names = [line.split()[-1] for line in header.splitlines() if line.startswith("property")]
        index = names.index(name)
        rows = np.frombuffer(body, "<f4").reshape(-1, len(names))
        return (header.replace(f"property float {name}\n", "").encode("ascii")
                + np.delete(rows, index, axis=1).astype("<f4").tobytes())
    return edit


def _set(name: str, value: float, splat: int = 2):
    def edit(data: bytes) -> bytes:
        header, body = _header_and_body(data)
        names = [line.split()[-1] for line in header.splitlines() if line.startswith("property")]
        rows = np.frombuffer(body, "<f4").reshape(-1, len(names)).copy()
        if name == "rot":
            rows[splat, names.index("rot_0"):names.index("rot_3") + 1] = 0.0
        else:
            rows[splat, names.index(name)] = value
        return header.encode("ascii") + rows.tobytes()
    return edit


@pytest.mark.parametrize("edit, fragment", [
    (_without("opacity"), "lacks the property 'opacity' of the 3DGS layout"),
    (_without("rot_3"), "lacks the property 'rot_3'"),
    (_without("f_rest_8"), "has 8 f_rest properties; spherical harmonics of degree 0 to 3 have 0, 9, 24 or 45"),
    (_set("x", float("nan")), "property 'x' holds 1 NaN or infinite values (splat 2 first)"),
    (_set("scale_1", float("inf")), "property 'scale_1' holds 1 NaN or infinite values"),
    (_set("rot", 0.0), "properties 'rot_0'..'rot_3' are zero for 1 splats (splat 2 first)"),
    (lambda data: data + b"\x00" * 12, "larger than the"),
    (lambda data: data[:-4], "smaller than the"),
    (lambda data: data.replace(b"element vertex 5", b"element vertex 1000000000000"), "smaller than the"),
    (lambda data: data.replace(b"binary_little_endian", b"ascii"), "in format 'ascii 1.0'"),
    (lambda data: data.replace(b"property float opacity", b"property double opacity"),
     "property line 'property double opacity'"),
    (lambda data: data.replace(b"end_header\n", b"element face 0\nend_header\n"), "element line 'element face 0'"),
    (lambda data: b"PNG" + data, "is not a PLY file"),
], ids=["no opacity", "no rot_3", "f_rest count", "nan", "inf", "zero rotation", "longer", "truncated",
        "huge count", "ascii", "double", "second element", "not ply"])
def test_malformed_files_are_refused_with_the_property_named(tmp_path, capsys, edit, fragment):
    path = tmp_path / "bad.ply"
    path.write_bytes(edit(_written(tmp_path)))
    with pytest.raises(SplatFileError, match=None) as caught:
        read_splats(str(path))
    assert fragment in str(caught.value) and str(path) in str(caught.value), str(caught.value)
    status = render_main(["--splats", str(path), "--datadir", str(tmp_path), "--dataset_name", "blender"])
    error = capsys.readouterr().err
    assert status == 2 and fragment in error and "Traceback" not in error, error


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(SplatFileError, match="Cannot read the splat file .*none.ply"):
        read_splats(str(tmp_path / "none.ply"))
