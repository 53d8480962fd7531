"""The typed run configuration: the reference's flags in, the same flags out, validated once."""
import dataclasses
from pathlib import Path

import pytest

from tensorf_jt.config import (RunConfig, config_parser, load_run_config, parse_flags, parse_run_config,
                               require_for_rendering, require_for_training, resumed)
from tensorf_jt.config.run_config import IGNORED_BY_REFERENCE
from tensorf_jt.errors import ConfigError

CONFIGS = sorted(str(path) for path in (Path(__file__).resolve().parent.parent / "configs").glob("*.txt"))


@pytest.mark.parametrize("config_file", CONFIGS, ids=lambda path: Path(path).name)
def test_every_shipped_config_round_trips_to_the_flags_the_parser_gives(config_file):
    flags, _ = parse_flags(["--config", config_file])
    config = RunConfig.from_flags(flags)
    assert config.to_flags() == flags
    assert list(config.to_flags()) == list(flags), "saved train_args keep the parser's order"
    assert RunConfig.from_flags(config.to_flags()) == config


def test_sections_are_typed_and_frozen():
    config = load_run_config(["--config", "configs/lego.txt", "--ndc_ray", "1"])
    assert config.data.ndc_ray is True and config.to_flags()["ndc_ray"] == 1
    assert config.model.n_lamb_sigma == (16, 16, 16) and config.to_flags()["n_lamb_sigma"] == [16, 16, 16]
    assert config.schedule.upsamp_list == (2000, 3000, 4000, 5500, 7000)
    assert config.schedule.decay_iters == 30000 and config.data.downsample("test") == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.schedule.n_iters = 5
    without_lists = load_run_config([])
    assert without_lists.schedule.upsamp_list == () and without_lists.to_flags()["upsamp_list"] is None
    assert without_lists.model.n_lamb_sigma is None


def test_with_flags_changes_and_validates_again():
    config = load_run_config(["--config", "configs/lego.txt"])
    changed = config.with_flags(n_iters=10, downsample_test=2.0)
    assert changed.schedule.n_iters == 10 and changed.data.downsample("test") == 2.0
    assert config.schedule.n_iters == 30000
    with pytest.raises(ConfigError, match="batch_size must be positive, got 0"):
        config.with_flags(batch_size=0)
    with pytest.raises(ConfigError, match="Unknown setting"):
        config.with_flags(no_such_flag=1)


@pytest.mark.parametrize("flags, message", [
    ({"gc_growth": 1.0}, "gc_growth must be 0 (off) or above 1, got 1.0"),
    ({"gc_every": -1}, "gc_every must be 0 (never) or positive"),
    ({"save_every": -2}, "save_every must be 0"),
    ({"perturb": 0.5}, "perturb must be 0 (no jitter) or 1 (jitter), got 0.5"),
    ({"step_ratio": 0.0}, "step_ratio must be positive"),
    ({"downsample_test": -1.0}, "downsample_train and downsample_test must be positive"),
    ({"N_vis": 2, "vis_every": 0}, "vis_every must be positive when N_vis is not 0"),
    ({"kernels": "fast"}, "kernels 'fast' is not supported; choose one of fused, reference"),
    ({"model_name": "TensorXY"}, "model_name 'TensorXY' is not supported"),
    ({"dataset_name": "colmap"}, "dataset_name 'colmap' is not supported"),
    ({"accumulate_decay": 0.5}, "accumulate_decay = 0.5 has no effect"),
    ({"chunk_size": 0}, "chunk_size must be positive"),
])
def test_bad_values_are_refused_with_the_setting_named(flags, message):
    base = load_run_config(["--config", "configs/lego.txt"]).to_flags()
    with pytest.raises(ConfigError) as raised:
        RunConfig.from_flags({**base, **flags})
    assert message in str(raised.value)


def test_a_setting_missing_from_saved_flags_takes_its_default():
    flags = load_run_config(["--lr_init", "0.5", "--compute_extra_metrics", "0"]).to_flags()
    del flags["compute_extra_metrics"]
    config = RunConfig.from_flags(flags)
    assert config.render.compute_extra_metrics is True and config.schedule.lr_init == 0.5


def test_command_requirements():
    with pytest.raises(ConfigError, match="expname is not set"):
        require_for_training(load_run_config(["--n_lamb_sigma", "4", "--n_lamb_sh", "4"]))
    with pytest.raises(ConfigError, match="n_lamb_sigma and n_lamb_sh must be set"):
        require_for_training(load_run_config(["--expname", "x"]))
    require_for_training(load_run_config(["--expname", "x", "--ckpt", "model.th"]))
    with pytest.raises(ConfigError, match="export_mesh = 1 exports the mesh of a trained model"):
        require_for_rendering(load_run_config(["--export_mesh", "1"]))
    with pytest.raises(ConfigError, match="render_only = 1 renders nothing"):
        require_for_rendering(load_run_config(["--render_only", "1", "--ckpt", "x.th"]))


def test_resumed_takes_the_saved_settings_and_refuses_changed_ones():
    saved = load_run_config(["--config", "configs/lego.txt", "--n_iters", "100"]).to_flags()
    config, explicit = parse_run_config(["--resume", "auto", "--basedir", "elsewhere", "--expname", "tensorf_lego_VM"])
    merged = resumed(config, explicit, saved)
    assert merged.schedule.n_iters == 100 and merged.model.n_lamb_sh == (48, 48, 48)
    assert merged.output.basedir == "elsewhere" and merged.output.resume == "auto"
    config, explicit = parse_run_config(["--resume", "auto", "--expname", "tensorf_lego_VM", "--n_iters", "50"])
    with pytest.raises(ConfigError, match=r"n_iters = 50 \(the saved run has 100\)"):
        resumed(config, explicit, saved)


def test_a_resumed_run_listens_where_its_own_command_says():
    """A state file asking for the viewer on every interface does not open one on resume."""
    saved = load_run_config(["--config", "configs/lego.txt", "--viewer", "1", "--viewer_host", "0.0.0.0",
                             "--viewer_port", "9000"]).to_flags()
    config, explicit = parse_run_config(["--resume", "auto", "--expname", "tensorf_lego_VM"])
    merged = resumed(config, explicit, saved)
    assert (merged.viewer.viewer, merged.viewer.viewer_host, merged.viewer.viewer_port) == (0, "127.0.0.1", 8080)
    config, explicit = parse_run_config(["--resume", "auto", "--expname", "tensorf_lego_VM", "--viewer", "1",
                                         "--viewer_port", "9001"])
    merged = resumed(config, explicit, saved)
    assert (merged.viewer.viewer, merged.viewer.viewer_host, merged.viewer.viewer_port) == (1, "127.0.0.1", 9001)


def test_every_flag_belongs_to_exactly_one_place():
    """Each parser flag is a field of one section, the config file path, or a reference flag
    that is refused when set; nothing is parsed and then dropped."""
    from tensorf_jt.config.run_config import _SECTIONS, IGNORED_BY_REFERENCE

    fields = [field.name for kind in _SECTIONS.values() for field in dataclasses.fields(kind)]
    assert len(fields) == len(set(fields))
    flags = [action.dest for action in config_parser()._actions if action.dest != "help"]
    assert sorted(flags) == sorted(fields + ["config"] + list(IGNORED_BY_REFERENCE))


def test_the_accepted_names_are_the_registries_keys():
    from tensorf_jt.config.run_config import DATASET_NAMES, MODEL_NAMES
    from tensorf_jt.dataLoader import dataset_dict
    from tensorf_jt.models import MODELS

    assert list(MODEL_NAMES) == list(MODELS)
    assert list(DATASET_NAMES) == list(dataset_dict)


# Flags the reference never reads are refused whatever their value (test_cli.py).
FLOAT_FLAGS = sorted(action.dest for action in config_parser()._actions
                     if action.type is float and action.dest not in IGNORED_BY_REFERENCE)


@pytest.mark.parametrize("flag", FLOAT_FLAGS)
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_every_float_flag_must_be_finite(flag, value):
    # NaN passes the range checks (a NaN weight is not negative), so each is refused by name.
    count = next(action.nargs for action in config_parser()._actions if action.dest == flag)
    values = [value] if count is None else ["1"] * (count - 1) + [value]
    with pytest.raises(ConfigError, match=rf"^{flag} must be a finite number, got .*{value}"):
        load_run_config(["--config", "configs/your_own_360.txt", f"--{flag}", *values])


def test_a_nan_flag_stops_train_py_with_its_name(capsys):
    from tensorf_jt.cli.train import main

    assert main(["--config", "configs/lego.txt", "--TV_weight_density", "nan"]) == 2
    error = capsys.readouterr().err
    assert "TV_weight_density must be a finite number, got nan." in error and "Traceback" not in error


@pytest.mark.parametrize("flag, highest", [
    ("importance_samples", 4096), ("data_dim_color", 65536), ("featureC", 65536), ("view_pe", 64),
    ("fea_pe", 64), ("pos_pe", 64), ("n_lamb_sigma", 4096), ("n_lamb_sh", 4096), ("N_voxel_final", 2 ** 31 - 1),
])
def test_sizes_stop_where_the_checkpoint_readers_stop(flag, highest):
    """Whatever train.py accepts, render.py reads back: sizes above the readers' limits are refused."""
    def flags(value):
        repeats = 3 if flag.startswith("n_lamb") else 1  # a list flag is given once per entry
        return ["--config", "configs/your_own_360.txt", *[f"--{flag}", str(value)] * repeats]

    assert load_run_config(flags(highest)) is not None
    with pytest.raises(ConfigError, match=rf"^{flag} must be between \d+ and {highest:,} \(the most a checkpoint "
                                          rf"can hold\), got {highest + 1:,}\.$"):
        load_run_config(flags(highest + 1))


def test_an_unreadable_size_stops_train_py_before_training(capsys):
    from tensorf_jt.cli.train import main

    assert main(["--config", "configs/your_own_360.txt", "--importance_samples", "1000000000"]) == 2
    error = capsys.readouterr().err
    assert "importance_samples must be between 0 and 4,096" in error and "Traceback" not in error


def test_saved_flags_are_held_to_the_parsers_types():
    """A file's train_args are checked against the parser's declaration of every flag."""
    from tensorf_jt.config.flags import check_saved_flags

    saved = parse_run_config(["--config", "configs/your_own_360.txt", "--near_far", "0.5", "6"])[0].to_flags()
    check_saved_flags({**saved, "nSamples": 1e6}, "f.th")  # the reference's default, a float
    for name, value, expected in [("chunk_size", "abc", "a whole number"), ("nSamples", 2.5, "a whole number"), ("lr_init", "fast", "a number"),
                                  ("expname", 3, "text"), ("upsamp_list", 5, "a list of whole numbers"),
                                  ("near_far", [1.0, "x"], "a list of numbers"), ("n_lamb_sh", [1.5], "a list")]:
        with pytest.raises(ConfigError, match=rf"^f.th: train_args.{name} should be {expected}.*, found "):
            check_saved_flags({**saved, name: value}, "f.th")
    with pytest.raises(ConfigError, match="train_args should be a dict of the run's flags, found list"):
        check_saved_flags([1, 2], "f.th")


def test_render_refuses_a_checkpoint_whose_flags_have_the_wrong_type(tmp_path, capsys):
    from model_factory import tiny_model
    from tensorf_jt.cli.render import main
    from tensorf_jt.formats.checkpoint import save_checkpoint

    flags = parse_run_config(["--config", "configs/demo.txt"])[0].to_flags()
    path = save_checkpoint(tiny_model(), str(tmp_path / "m.th"), train_args={**flags, "chunk_size": "abc"})
    assert main(["--ckpt", path]) == 2
    error = capsys.readouterr().err
    assert "train_args.chunk_size should be a whole number, found 'abc'" in error and "Traceback" not in error
