"""PyTorch TensoRF checkpoints: read without torch, rendered as the original renders them, exported back.

The fixtures (``tests/fixtures/README.md``) were written by the original PyTorch code: two
trained checkpoints, its renders of 256 test rays and its field features at fixed points,
and tensors in every layout torch writes. No torch is needed here.
"""
import os
import pickle
import pickletools
import shutil
import struct
import zipfile

import numpy as np
import pytest
import jittor as jt

from conftest import REPO_ROOT, run_python
from model_factory import AABB, rays_towards_box, tiny_model
from tensorf_jt.formats.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint
from tensorf_jt.errors import CheckpointError
from tensorf_jt.cli.export_torch import export_reference_checkpoint
from tensorf_jt.models import compose
from tensorf_jt.formats.reference_checkpoint import to_reference
from tensorf_jt.formats.torch_format import LEGACY_MAGIC, load_torch_checkpoint, save_torch_checkpoint

pytestmark = pytest.mark.floats  # two code paths' floats, or floats against fixtures

FIXTURES = REPO_ROOT / "tests" / "fixtures"
REFERENCE_MODELS = {"vm": "TensorVMSplit", "cp": "TensorCP"}


def fixture(name: str) -> str:
    return str(FIXTURES / name)


def render(model, rays: np.ndarray, white_bg: bool = True) -> tuple[np.ndarray, np.ndarray]:
    with jt.no_grad():
        output = model(jt.array(rays), white_bg=white_bg)
    return output.rgb.numpy(), output.depth.numpy()


def assert_same_model(model, other) -> None:
    assert type(model.field) is type(other.field) and type(model.sampler) is type(other.sampler)
    assert model.get_kwargs().keys() == other.get_kwargs().keys()
    for key, value in model.get_kwargs().items():
        value = value.numpy() if isinstance(value, jt.Var) else value
        other_value = other.get_kwargs()[key]
        np.testing.assert_array_equal(value, other_value.numpy() if isinstance(other_value, jt.Var) else other_value)
    state, other_state = model.field.state_dict(), other.field.state_dict()
    assert state.keys() == other_state.keys()
    for name, var in state.items():
        np.testing.assert_array_equal(var.numpy(), other_state[name].numpy(), err_msg=name)
    assert (model.alphaMask is None) == (other.alphaMask is None)
    if model.alphaMask is not None:
        np.testing.assert_array_equal(model.alphaMask.alpha_volume.numpy(), other.alphaMask.alpha_volume.numpy())
        np.testing.assert_array_equal(model.alphaMask.aabb.numpy(), other.alphaMask.aabb.numpy())


# ----------------------------------------------------------- the original's outputs
@pytest.mark.parametrize("kernel_path", ["fused", "reference"])
@pytest.mark.parametrize("name", sorted(REFERENCE_MODELS))
def test_reference_checkpoint_renders_as_the_original(name, kernel_path):
    model, ckpt = load_checkpoint(fixture(f"reference_{name}_tiny.th"))
    assert model.model_name == REFERENCE_MODELS[name] and "train_args" not in ckpt
    assert model.alphaMask is not None and model.alphaMask.grid_size == list(ckpt["alphaMask.shape"][::-1][:3])
    expected = np.load(fixture(f"reference_{name}_tiny_outputs.npz"))
    assert (expected["rgb_map"].max(axis=1) < 0.9).sum() > 50, "too few fixture rays hit the scene"
    model.kernels = kernel_path
    rgb, depth = render(model, expected["rays"], bool(expected["white_bg"]))
    assert np.abs(rgb - expected["rgb_map"]).max() <= 1e-4
    assert np.abs(depth - expected["depth_map"]).max() <= 1e-3
    psnr = -10 * np.log10(np.mean((rgb - expected["rgb_map"]) ** 2))
    assert psnr >= 45, psnr


@pytest.mark.parametrize("kernel_path", ["fused", "reference"])
@pytest.mark.parametrize("name", sorted(REFERENCE_MODELS))
def test_reference_checkpoint_features_match_the_original(name, kernel_path):
    model, _ = load_checkpoint(fixture(f"reference_{name}_tiny.th"))
    expected = np.load(fixture(f"reference_{name}_tiny_features.npz"))
    points = jt.array(expected["points"])
    model.kernels = kernel_path
    with jt.no_grad():
        density = model.field.compute_densityfeature(points).numpy()
        appearance = model.field.compute_appfeature(points).numpy()
    np.testing.assert_allclose(density, expected["density_feature"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(appearance, expected["app_feature"], rtol=0, atol=1e-5)
    assert np.abs(expected["density_feature"]).max() > 1.0, "the fixture's density field is empty"


# --------------------------------------------------------------------- the reader
def test_every_torch_tensor_layout_reads_exactly():
    loaded = load_torch_checkpoint(fixture("torch_layouts.th"))
    expected = np.load(fixture("torch_layouts_expected.npz"))
    for key in expected.files:
        value = loaded["state_dict"][key.split(".", 1)[1]] if key.startswith("state_dict.") else loaded[key]
        assert isinstance(value, np.ndarray) and value.flags["C_CONTIGUOUS"], key
        assert value.dtype == expected[key].dtype and value.shape == expected[key].shape, key
        np.testing.assert_array_equal(value, expected[key], err_msg=key)
    assert loaded["set"] == {1, 2} and loaded["tuple"] == (1, 2.5, "x", None, True)
    assert loaded["state_dict"]._metadata[""] == {"version": 1}


@pytest.mark.parametrize("suffix", [".pkl", ".bin", ".pth", ""])
def test_format_is_detected_by_content_not_suffix(tmp_path, suffix):
    renamed = str(tmp_path / f"checkpoint{suffix}")
    shutil.copy(fixture("reference_vm_tiny.th"), renamed)
    model, _ = load_checkpoint(renamed)
    original, _ = load_checkpoint(fixture("reference_vm_tiny.th"))
    assert_same_model(model, original)


# --------------------------------------------------------------------- the writer
def test_export_import_round_trip_is_bit_exact(tmp_path):
    original_path = fixture("reference_vm_tiny.th")
    exported = str(tmp_path / "theirs.th")
    assert export_reference_checkpoint(original_path, exported) == "TensorVMSplit"
    original, _ = load_checkpoint(original_path)
    reloaded, _ = load_checkpoint(exported)
    assert_same_model(reloaded, original)
    rays = np.load(fixture("reference_vm_tiny_outputs.npz"))["rays"]
    for a, b in zip(render(reloaded, rays), render(original, rays)):
        np.testing.assert_array_equal(a, b)
    # The exported file holds exactly what the original's torch.save wrote.
    theirs, ours = load_torch_checkpoint(original_path), load_torch_checkpoint(exported)
    assert theirs.keys() == ours.keys() and theirs["kwargs"].keys() == ours["kwargs"].keys()
    assert list(theirs["state_dict"]) == list(ours["state_dict"])
    for key in ("alphaMask.shape", "alphaMask.mask", "alphaMask.aabb"):
        np.testing.assert_array_equal(ours[key], theirs[key])
    assert type(ours["alphaMask.mask"]) is type(theirs["alphaMask.mask"]) and ours["alphaMask.mask"].dtype == np.uint8
    for key, value in theirs["kwargs"].items():
        np.testing.assert_array_equal(ours["kwargs"][key], value, err_msg=key)
    for key, value in theirs["state_dict"].items():
        assert ours["state_dict"][key].dtype == value.dtype
        np.testing.assert_array_equal(ours["state_dict"][key], value, err_msg=key)


@pytest.mark.parametrize("make", [
    lambda: tiny_model(density_shift=-1.0),
    lambda: compose("TensorCP", dict(aabb=AABB, gridSize=[8, 9, 10], density_n_comp=[5], appearance_n_comp=[6],
                                     app_dim=6, shadingMode="MLP", view_pe=2, featureC=8, density_shift=-1.0)),
    lambda: compose("TensorVM", dict(aabb=AABB, gridSize=[9, 9, 9], density_n_comp=[2], appearance_n_comp=[3],
                                     app_dim=27, shadingMode="SH", density_shift=-1.0)),
], ids=["TensorVMSplit", "TensorCP", "TensorVM"])
def test_our_models_survive_export_and_import(tmp_path, make):
    model = make()
    box = model.update_alpha_mask(tuple(model.gridSize))
    if model.can_shrink:
        model.shrink(box)
    ours = save_checkpoint(model, str(tmp_path / "ours.th"))
    export_reference_checkpoint(ours, str(tmp_path / "theirs.th"))
    raw = load_torch_checkpoint(str(tmp_path / "theirs.th"))
    assert "device" not in raw["kwargs"] and "model_name" not in raw  # as the reference writes it
    reloaded, _ = load_checkpoint(str(tmp_path / "theirs.th"))
    assert_same_model(reloaded, model)
    rays = rays_towards_box(64)
    for a, b in zip(render(reloaded, rays), render(model, rays)):
        np.testing.assert_array_equal(a, b)


def _globals_and_opcodes(path: str) -> tuple[set, set]:
    with zipfile.ZipFile(path) as archive:
        data = archive.read(next(name for name in archive.namelist() if name.endswith("/data.pkl")))
    names, opcodes = set(), set()
    for opcode, argument, _ in pickletools.genops(data):
        opcodes.add(opcode.name)
        if opcode.name == "GLOBAL":
            names.add(argument.replace("numpy._core.", "numpy.core."))
    return names, opcodes


def test_writer_emits_only_what_torch_save_emits(tmp_path):
    exported = str(tmp_path / "theirs.th")
    export_reference_checkpoint(fixture("reference_vm_tiny.th"), exported)
    our_globals, our_opcodes = _globals_and_opcodes(exported)
    torch_globals, torch_opcodes = _globals_and_opcodes(fixture("reference_vm_tiny.th"))
    assert our_globals == torch_globals
    assert our_opcodes <= torch_opcodes | {"BININT2"}, our_opcodes - torch_opcodes
    raw = open(exported, "rb").read()
    with zipfile.ZipFile(exported) as archive:
        assert archive.read("archive/version") == b"3\n" and archive.read("archive/byteorder") == b"little"
        for info in archive.infolist():
            name_length, extra_length = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
            assert (info.header_offset + 30 + name_length + extra_length) % 64 == 0, info.filename
            assert info.compress_type == zipfile.ZIP_STORED


# ------------------------------------------------------------ malformed input
def reference_dict(path: str = fixture("reference_vm_tiny.th")) -> dict:
    """The fixture's contents, with its tensors as Vars again so that the writer writes tensors."""
    raw = load_torch_checkpoint(path)
    raw["state_dict"] = {key: jt.array(value) for key, value in raw["state_dict"].items()}
    raw["kwargs"]["aabb"] = jt.array(raw["kwargs"]["aabb"])
    raw["alphaMask.aabb"] = jt.array(raw["alphaMask.aabb"])
    return raw


def written(tmp_path, obj, name: str = "bad.th") -> str:
    path = str(tmp_path / name)
    save_torch_checkpoint(obj, path)
    return path


class _RunsACommand:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def zip_with(tmp_path, entries: dict[str, bytes], name: str = "bad.th") -> str:
    path = str(tmp_path / name)
    with zipfile.ZipFile(path, "w") as archive:
        for entry, data in entries.items():
            archive.writestr(entry, data)
    return path


def test_unsafe_pickle_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "it-ran"
    path = zip_with(tmp_path, {"archive/data.pkl": pickle.dumps(_RunsACommand(str(marker)), protocol=2),
                               "archive/version": b"3\n"})
    with pytest.raises(CheckpointError, match=r"asks for 'posix\.system'.*can run arbitrary code"):
        load_checkpoint(path)
    assert not marker.exists()


def test_unreadable_files_get_clear_errors(tmp_path):
    data = open(fixture("reference_vm_tiny.th"), "rb").read()
    (tmp_path / "truncated.th").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or not a valid zip archive"):
        load_checkpoint(str(tmp_path / "truncated.th"))
    with pytest.raises(CheckpointError, match=r"no '<name>/data.pkl' entries"):
        load_checkpoint(zip_with(tmp_path, {"notes/readme.txt": b"hello"}, "plain.zip"))
    (tmp_path / "random.th").write_bytes(np.random.default_rng(0).bytes(256))
    with pytest.raises(CheckpointError, match="corrupted or not a Jittor checkpoint"):
        load_checkpoint(str(tmp_path / "random.th"))
    (tmp_path / "legacy.th").write_bytes(LEGACY_MAGIC + b"\x00" * 64)
    with pytest.raises(CheckpointError, match=r"format of torch < 1\.6"):
        load_checkpoint(str(tmp_path / "legacy.th"))
    with pytest.raises(CheckpointError, match="not a TensoRF checkpoint: it lacks 'kwargs' and 'state_dict'"):
        load_checkpoint(written(tmp_path, [1, 2, 3]))


def test_storage_shorter_than_declared_is_refused(tmp_path):
    path = written(tmp_path, reference_dict(), "full.th")
    with zipfile.ZipFile(path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    entries["archive/data/0"] = entries["archive/data/0"][:-4]
    with pytest.raises(CheckpointError, match=r"the storage 'archive/data/0' holds \d+ bytes"):
        load_checkpoint(zip_with(tmp_path, entries, "short.th"))


def _without(mapping: dict, key: str) -> dict:
    return {k: v for k, v in mapping.items() if k != key}


@pytest.mark.parametrize("edit, message", [
    (lambda c: dict(c, state_dict=_without(c["state_dict"], "app_line.1")), r"missing \['app_line.1'\]"),
    (lambda c: dict(c, state_dict=dict(c["state_dict"], **{"density_plane.0": jt.zeros((1, 8, 3, 3))})),
     r"'density_plane.0' has shape \(1, 8, 3, 3\), the model expects \(1, 8, 34, 34\)"),
    (lambda c: dict(c, state_dict={"encoder.weight": jt.zeros((2, 2))}), r"not a TensoRF model.*\['encoder'\]"),
    (lambda c: dict(c, state_dict=dict(c["state_dict"], plane_coef=jt.zeros((3, 2, 4, 4)))),
     "mixes the parameters of TensorVMSplit and TensorVM"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], colour="red")), r"unknown \['colour'\]"),
    (lambda c: dict(c, kwargs=_without(c["kwargs"], "gridSize")), r"missing \['gridSize'\]"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], shadingMode="Phong")), "shadingMode 'Phong' is not one of"),
    (lambda c: dict(c, **{"alphaMask.mask": c["alphaMask.mask"][:10]}), "alphaMask.mask should hold"),
    (lambda c: dict(c, **{"alphaMask.shape": (1, 1, -4, 2, 2)}), r"alphaMask.shape should be \(1, 1, Z, Y, X\)"),
    (lambda c: dict(c, **{"alphaMask.shape": (1,) + tuple(c["alphaMask.shape"][2:])}),
     r"alphaMask.shape should be \(1, 1, Z, Y, X\), found \(1, \d+, \d+, \d+\)"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], aabb=jt.zeros((3,)))), r"'kwargs.aabb' has shape \(3,\)"),
], ids=["missing key", "wrong shape", "unknown model", "ambiguous model", "unknown kwarg", "missing kwarg",
        "unknown shading", "short alpha mask", "bad alpha shape", "four-entry alpha shape", "bad aabb"])
def test_malformed_reference_checkpoints_are_refused(tmp_path, edit, message):
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(written(tmp_path, edit(reference_dict())))


def test_reference_mlp_pe_is_refused_with_the_reason(tmp_path):
    ckpt = reference_dict()
    kwargs = ckpt["kwargs"]
    kwargs.update(shadingMode="MLP_PE", pos_pe=6)
    # The reference's MLPRender_PE first layer: (3 + 2*view_pe*3) + (3 + 2*pos_pe*3) + app_dim inputs.
    inputs = (3 + 2 * kwargs["view_pe"] * 3) + (3 + 2 * 6 * 3) + kwargs["app_dim"]
    ckpt["state_dict"]["renderModule.mlp.0.weight"] = jt.zeros((kwargs["featureC"], inputs))
    with pytest.raises(CheckpointError, match=r"MLP_PE model whose first layer takes \d+ inputs.*never trained"):
        load_checkpoint(written(tmp_path, ckpt))
    with pytest.raises(CheckpointError, match="MLP_PE model cannot be exported"):
        to_reference(tiny_model(shadingMode="MLP_PE", pos_pe=2))


def test_read_checkpoint_gives_our_layout():
    ckpt = read_checkpoint(fixture("reference_cp_tiny.th"))
    assert ckpt["model_name"] == "TensorCP" and "device" not in ckpt["kwargs"]
    assert ckpt["kwargs"]["aabb"].dtype == np.float32 and ckpt["alphaMask.mask"].dtype == np.uint8


# ------------------------------------------------------------------------ CLIs
def test_render_cli_renders_a_reference_checkpoint(tiny_scene, tmp_path):
    ckpt = str(tmp_path / "reference_vm_tiny.th")
    shutil.copy(fixture("reference_vm_tiny.th"), ckpt)
    refused = run_python(["render.py", "--ckpt", ckpt])
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    assert "does not record the scene" in refused.stderr and "--datadir and --dataset_name" in refused.stderr
    result = run_python(["render.py", "--ckpt", ckpt, "--datadir", tiny_scene, "--dataset_name", "blender"])
    assert result.returncode == 0, result.stderr[-3000:]
    psnr = float(result.stdout.split("test: 2 views, PSNR ")[1].split(",")[0])
    assert psnr > 20, result.stdout
    assert (tmp_path / "imgs_test_all" / "000.png").is_file()


def test_export_cli(tmp_path):
    ours = save_checkpoint(tiny_model(density_shift=-1.0), str(tmp_path / "ours.th"))
    result = run_python(["-m", "tensorf_jt.cli.export_torch", "--ckpt", ours, "--out", str(tmp_path / "theirs.th")])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "--model_name TensorVMSplit" in result.stdout
    assert load_torch_checkpoint(str(tmp_path / "theirs.th"))["kwargs"]["gridSize"] == [8, 9, 10]
    same = run_python(["-m", "tensorf_jt.cli.export_torch", "--ckpt", ours, "--out", ours])
    assert same.returncode == 2 and "--out must differ from --ckpt" in same.stderr
