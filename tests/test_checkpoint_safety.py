"""Opening a file never runs code it asks for, and a malformed checkpoint is refused with a
message naming what is wrong, before anything large is allocated."""
import os
import pickle
import sys

import numpy as np
import pytest
import jittor as jt

from conftest import run_python
from model_factory import tiny_model
from tensorf_jt.errors import CheckpointError
from tensorf_jt.formats.checkpoint import checkpoint_dict, load_checkpoint, read_checkpoint, save_checkpoint
from tensorf_jt.formats.safe_pickle import read_jittor_pickle
from tensorf_jt.training.state import read_state


class RunsCommand:
    """Pickles as a call to os.system: unpickling it with plain ``pickle`` runs the command."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def crafted(path, marker, where: str):
    """A checkpoint-shaped file whose ``where`` entry runs ``touch marker`` when unpickled."""
    ckpt = checkpoint_dict(tiny_model(grid=(6, 6, 6)), train_args={"expname": "crafted"})
    payload = RunsCommand(f"touch {marker}")
    if where == "top":
        ckpt["extra"] = payload
    elif where == "state_dict":
        ckpt["state_dict"]["density_plane.0"] = payload
    else:
        ckpt = {"format": "tensorf_jt-state/1", "iteration": 3, "model": dict(ckpt, kwargs=payload)}
    jt.save(ckpt, str(path))
    return str(path)


def test_plain_pickle_would_run_the_crafted_file(tmp_path):
    """The fixture is a real attack: Jittor's own loader runs the command."""
    marker = tmp_path / "owned"
    jt.load(crafted(tmp_path / "x.th", marker, "top"))
    assert marker.exists()


@pytest.mark.parametrize("where", ["top", "state_dict", "state"])
def test_readers_refuse_the_crafted_file_naming_the_global(tmp_path, where):
    marker = tmp_path / "owned"
    path = crafted(tmp_path / "x.th", marker, where)
    for read in (read_checkpoint, read_state):
        with pytest.raises(CheckpointError, match=r"asks to load '(posix|os)\.system'.*could run code"):
            read(path)
    assert not marker.exists()


@pytest.mark.parametrize("command", [
    ["render.py", "--ckpt", "{file}"],
    ["view.py", "--ckpt", "{file}", "--viewer_port", "8799"],
    ["train.py", "--config", "configs/lego.txt", "--datadir", "{scene}", "--ckpt", "{file}", "--basedir", "{tmp}"],
    ["train.py", "--resume", "{file}", "--datadir", "{scene}"],
], ids=["render", "view", "train --ckpt", "train --resume"])
def test_no_entry_point_runs_a_crafted_file(tmp_path, tiny_scene, command):
    marker = tmp_path / "owned"
    path = crafted(tmp_path / "crafted_state.th", marker, "state" if "--resume" in command else "top")
    argv = [a.format(file=path, scene=tiny_scene, tmp=tmp_path) for a in command]
    result = run_python(argv, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "asks to load" in result.stderr and "system'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not marker.exists()


def test_checkpoints_and_states_round_trip_through_the_safe_reader(tmp_path):
    model = tiny_model(grid=(8, 8, 8))
    path = save_checkpoint(model, str(tmp_path / "m.th"), train_args={"seed": 1})
    raw = read_jittor_pickle(path)
    assert isinstance(raw["state_dict"]["density_plane.0"], jt.Var)
    big_endian = np.array([[-1.5, -1.0, -0.5], [1.5, 1.0, 0.5]], dtype=">f8")
    jt.save({"array": np.arange(3, dtype=np.float64), "scalar": np.float32(2.5), "big": big_endian},
            str(tmp_path / "np.th"))
    back = read_jittor_pickle(str(tmp_path / "np.th"))
    assert back["array"].dtype == np.float64 and back["scalar"] == np.float32(2.5)
    np.testing.assert_array_equal(back["big"], big_endian)  # the byte order the pickle sets is kept
    assert np.dtype("f8").byteorder == "="
    data = bytearray((tmp_path / "m.th").read_bytes())
    data[100] ^= 0xFF
    (tmp_path / "flipped.th").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupted.*checksum"):
        read_checkpoint(str(tmp_path / "flipped.th"))


def written(tmp_path, ckpt) -> str:
    path = str(tmp_path / "edited.th")
    jt.save(ckpt, path)
    return path


@pytest.fixture
def good():
    model = tiny_model(grid=(8, 8, 8), density_shift=-1.0)
    model.update_alpha_mask((8, 8, 8))
    return checkpoint_dict(model)


@pytest.mark.parametrize("edit, message", [
    (lambda c: dict(c, kwargs=0), r"'kwargs' should be a dict of the model's settings, found int"),
    (lambda c: dict(c, kwargs={}, state_dict={}), "'kwargs' lacks aabb, gridSize"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], gridSize=[100000] * 3)),
     r"gridSize \[100000, 100000, 100000\] has 1,000,000,000,000,000 voxels"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], gridSize=[8, 8])), r"gridSize should be 3 whole numbers"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], gridSize="big")), r"gridSize should be 3 whole numbers"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], density_n_comp=[4, 4, 10 ** 6])), "density_n_comp should be"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], aabb=[[0, 0, 0], [0, 1, 1]])), r"aabb should be a box"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], featureC=-3)), r"featureC should be a whole number from 1 to 65536, found -3"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], near_far=[6.0, 2.0])), "near_far should be two finite numbers"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], step_ratio=float("nan"))), "step_ratio should be a finite number"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], shadingMode=3)), "shadingMode should be text"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], shadingMode="SH", app_dim=5)), "SH needs data_dim_color = 27"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], colour="red")), "kwargs has 'colour', which no TensoRF model takes"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], alphaMask=5)), "kwargs has 'alphaMask', which no TensoRF model"),
    (lambda c: dict(c, state_dict=[1, 2]), "'state_dict' should be a dict of tensors, found list"),
    (lambda c: dict(c, state_dict=dict(c["state_dict"], basis_mat=7)), "state_dict entry 'basis_mat' should be"),
    (lambda c: dict(c, **{"alphaMask.shape": (1, 1, 100000, 100000, 100000)}), "alphaMask.shape"),
    (lambda c: {k: v for k, v in c.items() if k != "alphaMask.mask"}, "incomplete alpha mask: alphaMask.mask"),
    (lambda c: dict(c, **{"alphaMask.mask": np.zeros(3, np.uint8)}), "alphaMask.mask should hold 64 packed bytes"),
    (lambda c: dict(c, model_name=["TensorVMSplit"]), r"'model_name' should be text, found \['TensorVMSplit'\]"),
    (lambda c: dict(c, model_name="TensorXY"), r"holds a 'TensorXY' model; this build supports"),
    (lambda c: dict(c, kernels=np.array([1, 2])), r"'kernels' should be text, found \[1, 2\]"),
    (lambda c: dict(c, kernels="fast"), r"'kernels' is 'fast', not one of fused, reference"),
    (lambda c: dict(c, format=1), r"'format' should be text, found 1"),
    (lambda c: dict(c, train_args=[("n_iters", 5)]), r"'train_args' should be a dict of the run's flags"),
    (lambda c: dict(c, kwargs=dict(c["kwargs"], scene_contraction=np.array([1, 2]), foreground_aabb=[[0] * 3, [1] * 3])),
     r"scene_contraction should be 'inf', found \[1, 2\]"),
], ids=["kwargs not a dict", "empty", "huge grid", "two axes", "text grid", "huge components", "flat box",
        "negative width", "near after far", "nan step", "numeric shading", "SH width", "unknown kwarg",
        "constructor-only kwarg", "state_dict list", "number tensor", "huge alpha mask", "alpha mask half missing",
        "short alpha bits", "model name list", "unknown model", "kernels array", "unknown kernels", "format number",
        "train_args list", "contraction array"])
def test_malformed_checkpoints_are_refused_with_the_key_named(tmp_path, good, edit, message):
    path = written(tmp_path, edit(good))
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path)


def test_an_entry_tensorf_jt_does_not_read_is_named_in_a_warning(tmp_path, good):
    path = written(tmp_path, dict(good, optimizer={"lr": 0.02}))
    with pytest.warns(UserWarning, match=r"holds 'optimizer', which tensorf_jt does not read; it is ignored"):
        model, _ = load_checkpoint(path)
    assert model.model_name == good["model_name"]


def test_a_grid_the_file_does_not_hold_is_refused_before_it_is_allocated(tmp_path, good):
    """kwargs asking for 20000 x 20000 planes (tens of GB) with the small tensors of the real model:
    the shapes disagree and the model's lazily built tensors are never filled."""
    path = written(tmp_path, dict(good, kwargs=dict(good["kwargs"], gridSize=[20000, 20000, 2])))
    with pytest.raises(CheckpointError, match=r"'density_plane.0' has shape \(1, \d+, 8, 8\), the model expects "
                                              r"\(1, \d+, 20000, 20000\)"):
        load_checkpoint(path)


def test_render_refuses_a_malformed_checkpoint_without_a_traceback(tmp_path):
    path = written(tmp_path, {"kwargs": 0, "state_dict": {}})
    result = run_python(["render.py", "--ckpt", path], timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "'kwargs' should be a dict" in result.stderr


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_weights_that_are_not_finite_are_refused_with_the_tensor_named(tmp_path, good, bad):
    """A diverged run's NaN or infinite weights would render garbage without a word."""
    planes = np.array(good["state_dict"]["density_plane.0"].numpy())
    planes[0, 0, 2, 3] = bad
    path = written(tmp_path, dict(good, state_dict={**good["state_dict"], "density_plane.0": jt.array(planes)}))
    message = r"'density_plane.0' holds 1 NaN or infinite values of [\d,]+; its renders would be garbage"
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path)
    if np.isnan(bad):
        result = run_python(["render.py", "--ckpt", path], timeout=300)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert "holds 1 NaN or infinite values" in result.stderr


def with_group(state: dict, **changes) -> dict:
    """``state`` with its first optimizer group's ``changes``."""
    groups = state["optimizer"]["groups"]
    return dict(state, optimizer=dict(state["optimizer"], groups=[dict(groups[0], **changes), *groups[1:]]))


def negated(moments: list) -> list:
    """Second moments made negative where they are positive (Adam takes their square root)."""
    return [jt.array(-np.abs(np.asarray(m.numpy() if isinstance(m, jt.Var) else m)) - 1.0) for m in moments]


def poisoned(moments: list) -> list:
    """The first moment tensor with one NaN."""
    first = np.array(moments[0].numpy() if isinstance(moments[0], jt.Var) else moments[0], dtype=np.float32)
    first.reshape(-1)[0] = np.nan
    return [jt.array(first), *moments[1:]]


def test_damaged_training_states_are_refused_with_the_part_named(tmp_path):
    state = read_state("tests/fixtures/legacy_run_state.th")
    for edit, message in [
        (lambda s: dict(s, iteration="ten"), r"'iteration' has the wrong type \(str\)"),
        (lambda s: dict(s, optimizer={"n_step": 3}), r"\(optimizer\) lacks 'groups'"),
        (lambda s: dict(s, optimizer=dict(s["optimizer"], groups=[dict(s["optimizer"]["groups"][0], m=[1, 2])])),
         "optimizer group 0 holds moments that are not tensors"),
        (lambda s: dict(s, rays=dict(s["rays"], kept=np.zeros(1, np.uint8))), "training-ray mask holds 1 bytes"),
        (lambda s: {k: v for k, v in s.items() if k != "log"}, "lacks 'log'"),
        (lambda s: dict(s, schedule=dict(s["schedule"], reso_cur=["a", "b", "c"])),
         r"\(schedule\): 'reso_cur' should be 3 whole numbers from 1 up, .* found \['a', 'b', 'c'\]"),
        (lambda s: dict(s, schedule=dict(s["schedule"], reso_mask=[10 ** 6] * 3)), r"'reso_mask' should be 3 whole"),
        (lambda s: dict(s, log=dict(s["log"], rows=[[1, 2, 3]])), r"\(log\): 'rows' should be a list of dicts"),
        (lambda s: dict(s, log=dict(s["log"], events=[(1, 2, 3)])), r"'events' should be \(iteration, text\) pairs"),
        (lambda s: dict(s, log=dict(s["log"], elapsed_s=float("nan"))), r"\(log\): 'elapsed_s' is nan, where a finite"),
        (lambda s: dict(s, log=dict(s["log"], logged_events=7)), r"'logged_events' is 7, where a count from 0 to"),
        (lambda s: dict(s, schedule=dict(s["schedule"], TV_weight_density=-1.0)),
         r"\(schedule\): 'TV_weight_density' is -1.0, where a finite weight of 0 or more belongs"),
        (lambda s: dict(s, schedule=dict(s["schedule"], lr_scale=float("inf"))), r"'lr_scale' is inf"),
        (lambda s: with_group(s, lr=float("nan")), r"\(optimizer group 0\): 'lr' is nan, where a finite learning"),
        (lambda s: with_group(s, lr=-0.02), r"'lr' is -0.02"),
        (lambda s: with_group(s, values=negated(s["optimizer"]["groups"][0]["values"])),
         r"\(optimizer group 0\): 'values' holds [\d,]+ values that are not finite or are negative"),
        (lambda s: with_group(s, m=poisoned(s["optimizer"]["groups"][0]["m"])), r"'m' holds 1 values that are not"),
        (lambda s: dict(s, optimizer=dict(s["optimizer"], n_step=-4)), r"'n_step' is -4, where a step count"),
        (lambda s: dict(s, sampler=dict(s["sampler"], position=10 ** 9)), r"\(sampler\): 'position' is 1000000000, "
         r"where a batch number from 0 to [\d,]+ belongs"),
        (lambda s: dict(s, sampler=dict(s["sampler"], rays_per_batch=0)), r"'rays_per_batch' is 0, where a batch size"),
    ]:
        path = written(tmp_path, edit(state))
        with pytest.raises(CheckpointError, match=message):
            read_state(path)


def test_a_state_asking_for_more_samples_than_its_grid_is_refused_on_resume(tmp_path):
    """10^12 samples a ray (Jittor: "CPU memory is overflow") against the 69 its 20^3 grid gives."""
    state = read_state("tests/fixtures/legacy_run_state.th")
    run = tmp_path / "legacy_run"
    run.mkdir()
    jt.save(dict(state, schedule=dict(state["schedule"], nSamples=10 ** 12)), str(run / "legacy_run_state.th"))
    result = run_python(["train.py", "--resume", str(run / "legacy_run_state.th"), "--datadir", str(tmp_path / "s")],
                        timeout=600)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "schedule has 1,000,000,000,000 samples a ray where its grid [20, 20, 20] gives 69" in result.stderr


class _ArrayFromShapeAlone:
    """Pickles as numpy's rebuilder asked for a billion-element array, no bytes behind it."""

    def __reduce__(self):
        return np.core.multiarray._reconstruct, (np.ndarray, (10 ** 9,), b"b")


def bare_pickle(tmp_path, obj, name: str = "crafted.th") -> str:
    """A bare protocol-4 pickle (the reader takes files without jt.save's checksum too)."""
    path = tmp_path / name
    path.write_bytes(pickle.dumps(obj, protocol=4))
    return str(path)


def test_an_array_built_from_its_shape_alone_is_refused(tmp_path, good):
    path = bare_pickle(tmp_path, dict(good, state_dict={"density_plane.0": _ArrayFromShapeAlone()}))
    assert os.path.getsize(path) < 10_000
    with pytest.raises(CheckpointError, match=r"builds a numpy array of shape \(1000000000,\) from its shape alone"):
        load_checkpoint(path)


def test_shared_lists_that_expand_to_a_billion_entries_are_refused_in_memory_of_the_file(tmp_path):
    """1000 references to 1000 references to a 1000-entry list: ~6 KB of pickle, 10^9 entries
    (8 GB as an array) to whatever reads it."""
    inner = [2] * 1000
    middle = [inner] * 1000
    crafted = {"kwargs": {"aabb": [[-1, -1, -1], [1, 1, 1]], "gridSize": [middle] * 1000}, "state_dict": {}}
    path = bare_pickle(tmp_path, crafted)
    assert os.path.getsize(path) < 10_000
    probe = ("import resource, sys, tensorf_jt\n"
             "from tensorf_jt.formats.checkpoint import load_checkpoint\n"
             "from tensorf_jt.errors import CheckpointError\n"
             "try:\n    load_checkpoint(sys.argv[1])\nexcept CheckpointError as err:\n    print(err)\n"
             "print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
    result = run_python(["-c", probe, path], timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "hold more than 4,194,304 entries when shared ones are counted" in result.stdout
    peak_kib = int(result.stdout.split("peak")[-1])
    assert peak_kib < 1_500_000, f"{peak_kib} KiB to refuse a {os.path.getsize(path)}-byte file"


def test_deeply_nested_lists_are_refused_with_a_short_message(tmp_path, good):
    deep = [1]
    for _ in range(5000):
        deep = [deep]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(50_000)
    try:
        path = bare_pickle(tmp_path, dict(good, kwargs=dict(good["kwargs"], gridSize=deep)))
    finally:
        sys.setrecursionlimit(limit)
    with pytest.raises(CheckpointError, match="nests containers more than 64 deep") as refused:
        load_checkpoint(path)
    assert len(str(refused.value)) < 400


def test_a_bad_value_is_shown_as_a_short_excerpt():
    from tensorf_jt.formats.checkpoint_checks import check_model_kwargs

    nested = [[[[[[1] * 100] * 100] * 2] * 2] * 2]
    for value, shown in ((nested, r"found \[\[\[\[\.\.\.\], \[\.\.\.\]\], \[\[\.\.\.\], \[\.\.\.\]\]\]\]\.$"),
                         (np.zeros((300, 300)), r"found an array of shape \(300, 300\) and dtype float64\.$"),
                         ("x" * 10_000, r"found 'x{17}\.\.\.x{18}'\.$")):
        with pytest.raises(CheckpointError, match=shown) as refused:
            check_model_kwargs({"aabb": [[0, 0, 0], [1, 1, 1]], "gridSize": value}, "f.th")
        assert len(str(refused.value)) < 200


def test_a_torch_tensor_larger_than_its_storage_is_refused_before_it_is_allocated():
    from tensorf_jt.formats.torch_format import _rebuild_tensor

    with pytest.raises(CheckpointError, match=r"size \(100000, 100000\) has more elements than its storage \(1\)"):
        _rebuild_tensor(np.zeros(1, np.float32), 0, (100_000, 100_000), (0, 0))


def test_a_large_file_is_not_held_in_memory_to_be_checked(tmp_path):
    """64 MB of jt.save-shaped garbage (a bad opcode first, checksum and marker last): refused
    having hashed it in chunks and read only its first bytes, not after reading it whole."""
    path = tmp_path / "large.th"
    with open(path, "wb") as handle:
        handle.write(b"\xff" + bytes(64 << 20) + bytes(20) + b"HCAJSLHD")
    probe = ("import resource, sys, tensorf_jt\n"
             "from tensorf_jt.formats.checkpoint import load_checkpoint\n"
             "from tensorf_jt.errors import CheckpointError\n"
             "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
             "try:\n    load_checkpoint(sys.argv[1])\nexcept CheckpointError as err:\n    print(err)\n"
             "print('grew', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n")
    result = run_python(["-c", probe, str(path)], timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "checksum does not match" in result.stdout
    assert int(result.stdout.split("grew")[-1]) < 24 * 1024, "KiB of peak memory to refuse a 64 MB file"
