"""Command-line flags and config files, key for key the reference's ``opt.py``.

A reference config file (``key = value`` lines, lists as ``[a,b,c]``) parses unchanged. Flags
the reference lacks are grouped at the end and documented in docs/TRAINING.md. An unknown key in a
config file is an error, as in the reference. The parsed flags are turned into a typed
``RunConfig`` (``tensorf_jt.config.run_config``) at once; nothing below the command line reads
them as flags.
"""
from __future__ import annotations

import argparse
import re
import reprlib
from pathlib import Path
from typing import Any

import configargparse
import numpy as np

from tensorf_jt.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_CONFIG = REPO_ROOT / "configs" / "demo.txt"

# Options that measured worse on held-out views and were removed (docs/BENCHMARKS.md, "Tried,
# not kept"): a command line or config file that still sets one is told so by name.
RETIRED_FLAGS = {
    "refine_poses": "learned per-view pose corrections lost 0.6 dB (built-in room) and 2.8 dB (phone capture) "
                    "on held-out views",
    "appearance_dim": "per-view appearance codes lost 0.2 dB on held-out views of the built-in room and a phone "
                      "capture",
    "contraction": "the L2 (sphere) contraction lost 3.7 dB to the cube on a phone capture; the cube is the only "
                   "contraction",
    "shading_roulette": "shading faint samples at random lost up to 2 dB on the built-in room; "
                        "--importance_samples makes unbounded steps cheaper at equal quality",
    "distortion_weight": "mip-NeRF 360's distortion loss lost 3.1 dB (built-in room) and 2.4 dB (views between "
                         "the photos of a phone capture) on held-out views",
}


# Their values that did nothing: a saved run's ``train_args`` with another value was trained with one.
RETIRED_DEFAULTS = {"refine_poses": 0, "appearance_dim": 0, "contraction": "inf", "shading_roulette": 0.0,
                    "distortion_weight": 0.0}


class _Parser(configargparse.ArgumentParser):
    """The parser, naming a retired option (``RETIRED_FLAGS``) instead of calling it unknown."""

    def error(self, message: str):
        for name, reason in RETIRED_FLAGS.items():
            if re.search(rf"--{name}\b", message):
                raise ConfigError(f"--{name} is no longer an option: {reason} (docs/BENCHMARKS.md, "
                                  f"'Tried, not kept'). Remove it from the command line or config file.")
        super().error(message)


def config_parser() -> configargparse.ArgumentParser:
    parser = _Parser(description="TensoRF in Jittor")
    add = parser.add_argument
    add("--config", is_config_file=True, help="config file path")
    add("--expname", type=str, help="experiment name")
    add("--basedir", type=str, default="./log", help="where to store ckpts and logs")
    add("--add_timestamp", type=int, default=0, help="add timestamp to dir")
    add("--datadir", type=str, default="./data/llff/fern", help="input data directory")
    add("--progress_refresh_rate", type=int, default=10, help="how many iterations to show psnrs or iters")

    add("--with_depth", action="store_true")
    add("--downsample_train", type=float, default=1.0)
    add("--downsample_test", type=float, default=None,
        help="image downsampling of the test split (default: downsample_train, as the reference uses)")
    add("--model_name", type=str, default="TensorVMSplit")

    # loader options
    add("--batch_size", type=int, default=4096)
    add("--n_iters", type=int, default=30000)
    add("--dataset_name", type=str, default="blender")

    # learning rate
    add("--lr_init", type=float, default=0.02, help="learning rate of the grids")
    add("--lr_basis", type=float, default=1e-3, help="learning rate of the basis matrix and MLP")
    add("--lr_decay_iters", type=int, default=-1,
        help="iterations over which the lr decays to the target ratio; -1 means n_iters")
    add("--lr_decay_target_ratio", type=float, default=0.1,
        help="after lr_decay_iters the lr is lr_init * this ratio")
    add("--lr_upsample_reset", type=int, default=1, help="reset lr to initial after upsampling")

    # loss
    add("--L1_weight_inital", type=float, default=0.0, help="density L1 weight before the first mask update")
    add("--L1_weight_rest", type=float, default=0, help="density L1 weight after it")
    add("--Ortho_weight", type=float, default=0.0, help="loss weight")
    add("--TV_weight_density", type=float, default=0.0, help="loss weight")
    add("--TV_weight_app", type=float, default=0.0, help="loss weight")
    add("--sparse_depth_weight", type=float, default=0.0,
        help="weight of the loss that ends each ray from a training camera to a COLMAP point its photo observes "
             "at that point (own_data written by tools/colmap_to_transforms.py; docs/CAPTURES.md); 0: off")

    # model
    add("--n_lamb_sigma", type=int, action="append")
    add("--n_lamb_sh", type=int, action="append")
    add("--data_dim_color", type=int, default=27)
    add("--rm_weight_mask_thre", type=float, default=0.0001, help="mask points in ray marching")
    add("--alpha_mask_thre", type=float, default=0.0001, help="threshold for creating alpha mask volume")
    add("--distance_scale", type=float, default=25, help="scaling sampling distance for computation")
    add("--density_shift", type=float, default=-10,
        help="shift density in softplus; making density = 0 when feature == 0")

    # network decoder
    add("--shadingMode", type=str, default="MLP_PE", help="which shading mode to use")
    add("--pos_pe", type=int, default=6, help="number of pe for pos")
    add("--view_pe", type=int, default=6, help="number of pe for view")
    add("--fea_pe", type=int, default=6, help="number of pe for features")
    add("--featureC", type=int, default=128, help="hidden feature channel in MLP")

    add("--ckpt", type=str, default=None, help="checkpoint to start from or render")
    add("--render_only", type=int, default=0)
    add("--render_test", type=int, default=0)
    add("--render_train", type=int, default=0)
    add("--render_path", type=int, default=0)
    add("--export_mesh", type=int, default=0)

    # rendering options
    add("--lindisp", default=False, action="store_true", help="use disparity depth sampling")
    add("--perturb", type=float, default=1.0, help="set to 0. for no jitter, 1. for jitter")
    add("--accumulate_decay", type=float, default=0.998)
    add("--fea2denseAct", type=str, default="softplus")
    add("--ndc_ray", type=int, default=0)
    add("--nSamples", type=int, default=1e6, help="sample point each ray, pass 1e6 if automatic adjust")
    add("--step_ratio", type=float, default=0.5)
    add("--white_bkgd", action="store_true",
        help="composite on a white background even where the dataset's default is black (e.g. llff)")

    add("--N_voxel_init", type=int, default=100 ** 3)
    add("--N_voxel_final", type=int, default=300 ** 3)
    add("--upsamp_list", type=int, action="append")
    add("--update_AlphaMask_list", type=int, action="append")
    add("--idx_view", type=int, default=0)

    # logging/saving options
    add("--N_vis", type=int, default=5, help="N images to vis")
    add("--vis_every", type=int, default=10000, help="frequency of visualize the image")

    # --- flags the reference lacks -------------------------------------------------
    add("--kernels", type=str, default="fused",
        help="fused: custom C++/CUDA kernels on the hot path; reference: the same math in plain Jittor ops")
    add("--seed", type=int, default=20211202, help="seed of Python, numpy and Jittor RNGs")
    add("--gc_every", type=int, default=500,
        help="free Jittor's graph and cached memory every N iterations (0: never)")
    add("--gc_growth", type=float, default=1.25,
        help="between those, free Jittor's cached memory whenever it holds this many times what it held "
             "after the last cleanup (0: never)")
    add("--chunk_size", type=int, default=4096, help="rays per chunk when rendering images")
    add("--compute_extra_metrics", type=int, default=1,
        help="score rendered test/train views with SSIM, LPIPS-Alex and LPIPS-VGG besides PSNR "
             "(the reference's compute_extra_metrics); 0: PSNR only")
    add("--save_every", type=int, default=1000,
        help="write the training state (basedir/expname/expname_state.th) every N iterations; 0: only at the end")
    add("--resume", type=str, default=None,
        help="continue the run saved in this training state file; 'auto': the newest one of this run's folder")
    add("--verbose", action="store_true", help="show Jittor's own log messages")
    add("--tensorboard", type=int, default=1,
        help="write TensorBoard scalars (the reference's tags) into the run's folder; 0: do not")
    add("--tensorboard_every", type=int, default=10,
        help="write the per-iteration TensorBoard scalars every N iterations (1: every one, as the reference)")
    add("--viewer", type=int, default=0,
        help="serve the browser viewer while training (view.py serves it for a checkpoint); 0: do not")
    add("--viewer_port", type=int, default=8080, help="the viewer's port")
    add("--viewer_host", type=str, default="127.0.0.1",
        help="the address the viewer listens on; 0.0.0.0 exposes it to the network")
    add("--camera_path", type=str, default=None,
        help="render.py: render this camera-path file (saved by the viewer) to frames and a video")
    add("--splats", type=str, default=None,
        help="render.py, view.py: a 3D Gaussian splat file (.ply, e.g. from tensorf-export-splats) instead of --ckpt")
    add("--scene_bbox", type=float, nargs=6, default=None, metavar="V",
        help="own scene box, xmin ymin zmin xmax ymax zmax, instead of the dataset's (own_data: its 'aabb' key)")
    add("--near_far", type=float, nargs=2, default=None, metavar="D",
        help="near and far ray distances instead of the dataset's (own_data: its 'near_far' key)")
    add("--pose_format", type=str, default="c2w_opengl",
        help="own_data: how transform_matrix is written: c2w_opengl (instant-ngp, the default), c2w_opencv, "
             "w2c_opengl or w2c_opencv")
    add("--holdout_sector", type=float, default=0.0,
        help="own_data, demo_room: evaluate on the views inside an azimuth sector this many degrees wide, "
             "training on all the others (no training photo lies in it); 0: off, the usual split")
    add("--holdout_center", type=float, default=None,
        help="the held-out sector's centre azimuth in degrees (default: the cameras' mean azimuth)")
    add("--unbounded", type=int, default=-1,
        help="1: the scene goes on beyond its box (a capture with its room or sky): the box is the foreground "
             "and the rest of space is contracted around it; 0: bounded, as the reference; -1: as the dataset "
             "says (own_data: transforms.json's 'unbounded'; llff without NDC: cameras around the object)")
    add("--importance_samples", type=int, default=0,
        help="unbounded scenes: render each ray from this many samples, placed where a first, density-only pass "
             "over the usual samples finds the ray's weight (faster steps where the model spreads its weight; "
             "0: off, the default: every sample above the weight threshold is shaded)")
    add("--demo_image_size", type=int, default=100, help="demo scene: image width and height in pixels")
    add("--demo_n_train", type=int, default=60, help="demo scene: number of training views")
    add("--demo_n_test", type=int, default=8, help="demo scene: number of test views")
    return parser


_KINDS = {int: "a whole number", float: "a number", str: "text"}


def _fits(value: Any, kind: type) -> bool:
    """Whether a saved flag's value is of the parser's type (booleans are saved as whole numbers,
    and the reference's default nSamples as 1e6, a float)."""
    if kind is str:
        return isinstance(value, str)
    if kind is int:
        return isinstance(value, (int, np.integer)) or (isinstance(value, (float, np.floating))
                                                        and bool(np.isfinite(value)) and float(value).is_integer())
    return isinstance(value, (int, float, np.integer, np.floating))


def check_saved_flags(saved: Any, where: str) -> None:
    """Refuse a saved run's ``train_args`` (``where`` names the file) unless it is a dict whose
    flags have the types the parser gives them: the parser is the one declaration of what a
    flag holds, whether it comes from a command line or from a file."""
    if not isinstance(saved, dict):
        raise ConfigError(f"{where}: train_args should be a dict of the run's flags, found {type(saved).__name__}.")
    for action in config_parser()._actions:
        name = action.dest
        if name not in saved or saved[name] is None or action.type not in _KINDS:
            continue
        value, kind = saved[name], action.type
        listed = action.nargs not in (None, "?") or isinstance(action, argparse._AppendAction)
        values = value if listed and isinstance(value, (list, tuple)) else [value]
        if (listed and not isinstance(value, (list, tuple))) or not all(_fits(v, kind) for v in values):
            expected = f"a list of {_KINDS[kind].replace('a ', '', 1)}s" if listed else _KINDS[kind]
            raise ConfigError(f"{where}: train_args.{name} should be {expected}, found {reprlib.repr(value)}. "
                              "The file was not written by train.py, or was changed since; train again or use an "
                              "intact copy.")


def flag_defaults() -> dict:
    """Every flag's default, in the order the parser declares them (the order of saved ``train_args``)."""
    return {action.dest: action.default for action in config_parser()._actions if action.dest != "help"}


def parse_flags(argv: list[str] | None = None) -> tuple[dict, set[str]]:
    """The flags as a dict (name: value, defaults filled in) and the names set explicitly, on
    the command line or in the config file. Nothing is validated here (``RunConfig`` does)."""
    parser = config_parser()
    try:
        namespace = parser.parse_args(argv)
    except SystemExit as exit_:
        if exit_.code == 0:  # --help
            raise
        raise ConfigError("Invalid command line or config file (see the message above); "
                          "every key must be one of the flags listed by --help.") from None
    return dict(vars(namespace)), _explicit_names(parser)


def _explicit_names(parser: configargparse.ArgumentParser) -> set[str]:
    names = set()
    for source, settings in parser.get_source_to_settings_dict().items():
        if source == "command_line":
            for _, tokens in settings.values():
                names.update(t[2:].split("=")[0] for t in tokens if t.startswith("--"))
        elif source.startswith("config_file"):
            names.update(key.replace("-", "_") for key in settings)
    return names
