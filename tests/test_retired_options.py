"""Options that measured worse and were removed: a command line, config file, checkpoint or
training state that still uses one gets a message naming it (or, where the option changes no
render, the checkpoint loads without it)."""
import numpy as np
import pytest
import jittor as jt

from model_factory import rays_towards_box, tiny_model
from tensorf_jt.config import RunConfig, parse_run_config, resumed
from tensorf_jt.config.flags import RETIRED_FLAGS
from tensorf_jt.errors import CheckpointError, ConfigError
from tensorf_jt.formats.checkpoint import load_checkpoint, save_checkpoint


@pytest.mark.parametrize("name, value", [("refine_poses", "1"), ("appearance_dim", "16"), ("contraction", "l2"),
                                         ("shading_roulette", "0.01"), ("distortion_weight", "0.002")])
def test_a_retired_flag_is_named_on_the_command_line_and_in_a_config_file(tmp_path, name, value):
    message = rf"--{name} is no longer an option: .*dB.*docs/BENCHMARKS.md, 'Tried, not kept'"
    with pytest.raises(ConfigError, match=message):
        parse_run_config([f"--{name}", value])
    config = tmp_path / "old.txt"
    config.write_text(f"dataset_name = demo\n{name} = {value}\n")
    with pytest.raises(ConfigError, match=message):
        parse_run_config(["--config", str(config)])


def test_an_unknown_flag_is_still_refused_as_unknown():
    with pytest.raises(ConfigError, match="every key must be one of the flags listed by --help"):
        parse_run_config(["--no_such_flag", "1"])


def test_a_state_trained_with_a_retired_option_is_not_resumed_and_one_at_its_default_is():
    config = RunConfig.from_flags({"expname": "x"})
    saved = config.to_flags()
    legacy = {**saved, "refine_poses": 0, "appearance_dim": 0, "contraction": "inf", "shading_roulette": 0.0,
              "distortion_weight": 0.0}
    assert resumed(config, set(), legacy).to_flags() == saved
    for name, value in (("refine_poses", 1), ("appearance_dim", 16), ("contraction", "l2"),
                        ("shading_roulette", 0.01), ("distortion_weight", 0.002)):
        with pytest.raises(ConfigError, match=rf"trained with --{name} {value}, which is no longer an option"):
            resumed(config, set(), {**legacy, name: value})
    assert set(RETIRED_FLAGS) == {"refine_poses", "appearance_dim", "contraction", "shading_roulette",
                                  "distortion_weight"}


def saved_with(tmp_path, kwargs: dict, tensors: dict, plain: str | None = None) -> str:
    """A copy of ``plain`` (or of a new tiny model's checkpoint) with extra kwargs and tensors."""
    plain = plain or save_checkpoint(tiny_model(density_shift=-1.0), str(tmp_path / "plain.th"))
    path = str(tmp_path / "old.th")
    raw = jt.load(plain)
    raw["kwargs"].update(kwargs)
    raw["state_dict"].update(tensors)
    jt.save(raw, path)
    return path


def test_a_checkpoint_with_pose_corrections_loads_without_them_and_renders_the_same(tmp_path):
    plain = save_checkpoint(tiny_model(density_shift=-1.0), str(tmp_path / "plain.th"))
    corrected = saved_with(tmp_path, {"appearance_dim": 0, "refine_poses": True, "n_views": 3},
                           {"pose_corrections.rotation": jt.ones((3, 3)), "pose_corrections.translation": jt.ones((3, 3))},
                           plain)
    rays = jt.array(rays_towards_box(64))
    expected = load_checkpoint(plain)[0](rays).rgb.numpy()
    model, _ = load_checkpoint(corrected)
    assert not any(name.startswith("pose_corrections") for name in model.field.state_dict())
    assert "refine_poses" not in model.get_kwargs()
    np.testing.assert_array_equal(model(rays).rgb.numpy(), expected)


def test_a_checkpoint_with_appearance_codes_is_refused_by_name(tmp_path):
    path = saved_with(tmp_path, {"appearance_dim": 16, "refine_poses": False, "n_views": 3},
                      {"appearance.codes": jt.zeros((3, 16))})
    with pytest.raises(CheckpointError, match=r"was trained with --appearance_dim 16, which is no longer an option"):
        load_checkpoint(path)
