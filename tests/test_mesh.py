"""Mesh export: PLY layout, surface position on a field of known shape, vertex colours, CLIs."""
import numpy as np
import pytest
import jittor as jt

from conftest import run_python
from model_factory import AABB, tiny_model
from tensorf_jt.formats.checkpoint import save_checkpoint
from tensorf_jt.cli.render import main as render_main
from tensorf_jt.cli.train import main as train_main
from tensorf_jt.errors import CheckpointError
from tensorf_jt.evaluation.mesh import LEVEL, export_mesh, extract_mesh, extract_surface, write_ply

PLY_TYPES = {"float": "<f4", "uchar": "u1", "int": "<i4"}

GRID = (20, 22, 24)  # unequal, so that axis mix-ups and per-axis voxel sizes show
BOX = ((5, 13), (4, 15), (6, 18))  # first and last grid index inside the box, per axis
UNITS = (AABB[1] - AABB[0]) / (np.array(GRID) - 1)


def read_ply(path):
    """Minimal binary little-endian PLY reader: {element: structured array}; lists must be triangles."""
    data = open(path, "rb").read()
    end = data.index(b"end_header\n") + len(b"end_header\n")
    lines = data[:end].decode("ascii").splitlines()
    assert lines[:2] == ["ply", "format binary_little_endian 1.0"], lines[:2]
    elements = []
    for line in lines[2:]:
        words = line.split()
        if words[0] == "element":
            elements.append((words[1], int(words[2]), []))
        elif words[0] == "property" and words[1] == "list":
            elements[-1][2].append((f"{words[4]}_count", PLY_TYPES[words[2]]))
            elements[-1][2].append((words[4], PLY_TYPES[words[3]], (3,)))
        elif words[0] == "property":
            elements[-1][2].append((words[2], PLY_TYPES[words[1]]))
    arrays, offset = {}, end
    for name, count, fields in elements:
        dtype = np.dtype(fields)
        arrays[name] = np.frombuffer(data, dtype, count, offset)
        offset += dtype.itemsize * count
    assert offset == len(data), "no bytes left over"
    return arrays


def test_ply_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    vertices = rng.normal(size=(7, 3)).astype(np.float32)
    faces = rng.integers(0, 7, size=(5, 3)).astype(np.int32)
    colors = rng.integers(0, 256, size=(7, 3)).astype(np.uint8)
    write_ply(str(tmp_path / "m.ply"), vertices, faces, colors)
    ply = read_ply(tmp_path / "m.ply")
    assert ply["vertex"].dtype.names == ("x", "y", "z", "red", "green", "blue")
    np.testing.assert_array_equal(np.stack([ply["vertex"][k] for k in "xyz"], 1), vertices)
    np.testing.assert_array_equal(np.stack([ply["vertex"][k] for k in ("red", "green", "blue")], 1), colors)
    assert np.all(ply["face"]["vertex_indices_count"] == 3)
    np.testing.assert_array_equal(ply["face"]["vertex_indices"], faces)


def box_model():
    """A tiny model whose density is high exactly on the grid points of BOX and ~0 elsewhere,
    and whose colour is sigmoid(8 * viewdir): red, green, blue tell the view direction."""
    model = tiny_model(GRID)  # MLP_Fea shading
    field = model.field
    inside = [np.zeros(n, np.float32) for n in GRID]
    for axis, (lo, hi) in enumerate(BOX):
        inside[axis][lo:hi + 1] = 1.0
    for tensor in [*field.density_plane, *field.density_line]:
        tensor.update(jt.zeros(tensor.shape))
    saved = field.reference_state_dict()  # written in the reference's layout, as a checkpoint holds it
    plane = np.zeros(saved["density_plane.0"].shape, np.float32)
    plane[0, 0] = inside[1][:, None] * inside[0][None, :]  # plane 0 spans (x, y): rows y, columns x
    line = np.zeros(saved["density_line.0"].shape, np.float32)
    line[0, 0, :, 0] = 200.0 * inside[2]  # its line runs along z
    field.density_plane[0].update(field.from_reference("density_plane.0", jt.array(plane)))
    field.density_line[0].update(field.from_reference("density_line.0", jt.array(line)))

    mlp = field.renderModule.mlp
    n_in, viewdir_column = mlp[0].weight.shape[1], field.app_dim  # input row: features, viewdirs, ...
    first, middle, last = np.zeros((8, n_in)), np.eye(8), np.zeros((3, 8))
    for k in range(3):
        first[2 * k, viewdir_column + k], first[2 * k + 1, viewdir_column + k] = 1.0, -1.0
        last[k, 2 * k], last[k, 2 * k + 1] = 8.0, -8.0
    for layer, weight in ((mlp[0], first), (mlp[2], middle), (mlp[4], last)):
        layer.weight.update(jt.array(weight.astype(np.float32)))
        layer.bias.update(jt.zeros(layer.bias.shape))
    return model


def test_mesh_of_a_box_sits_on_the_box_and_faces_outward():
    mesh = extract_mesh(box_model())
    # Opacity ~1 inside, ~0 outside: the level-0.005 crossing lies 0.005 voxels inside the
    # first grid point outside the box.
    outer_lo = AABB[0] + (np.array([lo for lo, _ in BOX]) - 1) * UNITS
    outer_hi = AABB[0] + (np.array([hi for _, hi in BOX]) + 1) * UNITS
    np.testing.assert_allclose(mesh.vertices.min(0), outer_lo + LEVEL * UNITS, atol=0.02 * UNITS.min())
    np.testing.assert_allclose(mesh.vertices.max(0), outer_hi - LEVEL * UNITS, atol=0.02 * UNITS.min())

    v0, v1, v2 = (mesh.vertices[mesh.faces[:, k]].astype(np.float64) for k in range(3))
    volume = np.einsum("ij,ij->i", v0, np.cross(v1, v2)).sum() / 6
    inner = np.prod((np.array([hi - lo for lo, hi in BOX])) * UNITS)
    assert inner < volume < np.prod(outer_hi - outer_lo), "closed, and positive: triangles face outward"
    centres = (v0 + v1 + v2) / 3 - (outer_lo + outer_hi) / 2
    assert np.all(np.einsum("ij,ij->i", mesh.normals, mesh.vertices - (outer_lo + outer_hi) / 2) > 0)
    assert np.einsum("ij,ij->i", np.cross(v1 - v0, v2 - v0), centres).min() > 0


def test_sphere_on_unequal_voxels_has_world_space_normals():
    """A field 1.2 - |p| (level set: a sphere of radius 1.195) on voxels of three sizes; not
    clipped at 0 like a real opacity, so that linear interpolation finds the crossing."""
    model = tiny_model((20, 30, 40))
    axes = [np.linspace(AABB[0, a], AABB[1, a], n) for a, n in enumerate((20, 30, 40))]
    points = np.stack(np.meshgrid(*axes, indexing="ij"), -1)
    alpha = (1.2 - np.linalg.norm(points, axis=-1)).astype(np.float32)
    model.dense_alpha = lambda box: jt.array(alpha)
    vertices, _, normals = extract_surface(model)
    radius = np.linalg.norm(vertices, axis=1)
    np.testing.assert_allclose(radius, 1.2 - LEVEL, atol=0.01)
    assert np.einsum("ij,ij->i", normals, vertices / radius[:, None]).min() > 0.99


def test_vertex_colours_look_into_the_surface():
    mesh = extract_mesh(box_model())
    lo = AABB[0] + np.array([b[0] for b in BOX]) * UNITS
    hi = AABB[0] + np.array([b[1] for b in BOX]) * UNITS
    for axis in range(3):
        others = [a for a in range(3) if a != axis]
        away_from_edges = np.all((mesh.vertices[:, others] > lo[others] + UNITS[others])
                                 & (mesh.vertices[:, others] < hi[others] - UNITS[others]), axis=1)
        for side, expected in ((mesh.vertices[:, axis] > hi[axis], 0), (mesh.vertices[:, axis] < lo[axis], 255)):
            colors = mesh.colors[side & away_from_edges].astype(int)
            assert len(colors) > 4
            # Looking into the +axis face means viewdir = -axis: sigmoid(-8) -> 0; the others 0.5 -> ~128.
            assert np.all(np.abs(colors[:, axis] - expected) <= 1), (axis, expected, colors[:3])
            assert np.all(np.abs(colors[:, others] - 128) <= 1)


def test_empty_field_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="never crosses the level"):
        export_mesh(tiny_model(density_shift=-30.0), str(tmp_path / "m.ply"))


def test_render_cli_exports_the_mesh(tmp_path):
    model = box_model()
    save_checkpoint(model, str(tmp_path / "box.th"))
    assert render_main(["--ckpt", str(tmp_path / "box.th"), "--export_mesh", "1"]) == 0
    ply = read_ply(tmp_path / "box.ply")
    expected = extract_mesh(model)
    np.testing.assert_allclose(np.stack([ply["vertex"][k] for k in "xyz"], 1), expected.vertices)
    np.testing.assert_array_equal(ply["face"]["vertex_indices"], expected.faces)
    assert not (tmp_path / "imgs_test_all").exists(), "exporting alone renders nothing"


def test_train_cli_exports_without_training(tmp_path):
    save_checkpoint(box_model(), str(tmp_path / "box.th"))
    result = run_python(["train.py", "--config", "configs/demo.txt", "--ckpt", str(tmp_path / "box.th"),
                         "--export_mesh", "1", "--basedir", str(tmp_path / "log")], timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "box.ply").is_file()
    assert len(read_ply(tmp_path / "box.ply")["face"]) > 0
    assert not (tmp_path / "log").exists(), "no training run was started"


def test_train_cli_export_needs_a_checkpoint(capsys):
    assert train_main(["--config", "configs/demo.txt", "--export_mesh", "1"]) == 2
    assert "export_mesh = 1 exports the mesh of a trained model: give --ckpt" in capsys.readouterr().err
