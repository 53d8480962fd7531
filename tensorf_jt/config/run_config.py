"""The run configuration: the reference's flags, typed and grouped by what they control.

``RunConfig.from_flags`` turns the parsed flags (``tensorf_jt.config.flags``) into frozen
sections, once, and validates every value here; each part of the package then receives the
section it needs. Field names are the reference's flag names (``opt.py``), so a reader moves
between the two code bases and between a config file and the code without a lookup table.
``to_flags`` gives the flat ``{flag: value}`` dict back, exactly as the parser produces it:
that is what checkpoints and training states store as ``train_args``, as before.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from tensorf_jt.config.limits import (MAX_COMPONENTS, MAX_ENCODING_FREQUENCIES, MAX_IMPORTANCE_SAMPLES, MAX_VOXELS,
                                      MAX_WIDTH)
from tensorf_jt.errors import ConfigError
from tensorf_jt.kernels import check_kernels

# Flags the reference parses and never reads. Rather than accept a value that would silently
# do nothing, a non-default value is refused with the reason.
IGNORED_BY_REFERENCE = {
    "lindisp": (False, "rays are marched with a fixed step inside the scene box (uniformly in NDC for "
                       "forward-facing scenes), so disparity-spaced sampling does not apply"),
    "with_depth": (False, "TensoRF has no depth supervision; the reference never reads this flag"),
    "idx_view": (0, "the reference never reads this flag"),
    "accumulate_decay": (0.998, "the reference never reads this flag"),
}

# The names model_name and dataset_name accept: the keys of ``models.MODELS`` and
# ``dataLoader.dataset_dict`` (a test keeps them equal; the config layer imports neither).
MODEL_NAMES = ("TensorVMSplit", "TensorVM", "TensorCP")
DATASET_NAMES = ("blender", "llff", "nsvf", "tankstemple", "own_data", "demo", "demo_room")
# The values pose_format accepts: ``dataLoader.conventions.POSE_FORMATS`` (a test keeps them equal).
POSE_FORMATS = ("c2w_opengl", "c2w_opencv", "w2c_opengl", "w2c_opencv")

# Flags that may differ between a saved run and the command that resumes it: they change
# where files go, what is shown or rendered, or how often things are saved, not the training.
MAY_CHANGE_ON_RESUME = frozenset({
    "config", "resume", "ckpt", "basedir", "add_timestamp", "datadir", "save_every", "progress_refresh_rate",
    "verbose", "gc_every", "gc_growth", "chunk_size", "kernels", "N_vis", "vis_every", "render_test", "render_train",
    "render_path", "render_only", "export_mesh", "compute_extra_metrics", "tensorboard", "tensorboard_every", "viewer",
    "viewer_port",
    "viewer_host", "camera_path", "splats",
})

# Flags a resumed run takes from its own command (line, config file or default), never from the
# saved run: whether and where the viewer listens is the resuming user's decision.
FROM_THIS_COMMAND = frozenset({"viewer", "viewer_host", "viewer_port"})


@dataclass(frozen=True)
class DataConfig:
    """Which scene, and how its images are read."""

    dataset_name: str  # blender, llff, nsvf, tankstemple, own_data, demo or demo_room
    datadir: str
    downsample_train: float  # image size divisor of the training split
    downsample_test: Optional[float]  # of the other splits; None: downsample_train
    white_bkgd: bool  # composite on white even where the dataset's default is black
    ndc_ray: bool  # forward-facing scenes: rays in normalised device coordinates
    demo_image_size: int  # the built-in scene (dataset_name = demo): width and height in pixels
    demo_n_train: int
    demo_n_test: int
    scene_bbox: Optional[Tuple[float, ...]]  # xmin ymin zmin xmax ymax zmax instead of the dataset's box
    near_far: Optional[Tuple[float, float]]  # instead of the dataset's near/far
    pose_format: str  # own_data: how its transform_matrix is written
    holdout_sector: float  # own_data, demo_room: test views from an azimuth sector this wide (degrees; 0: off)
    holdout_center: Optional[float]  # the sector's centre azimuth (degrees); None: the cameras' mean
    unbounded: int  # 1: contracted beyond the box, 0: bounded, -1: as the dataset says

    def downsample(self, split: str) -> float:
        """The image size divisor of ``split``."""
        if split != "train" and self.downsample_test is not None:
            return self.downsample_test
        return self.downsample_train


@dataclass(frozen=True)
class ModelConfig:
    """The radiance field: decomposition, shading and ray marching (the model's constructor arguments)."""

    model_name: str  # TensorVMSplit, TensorCP or TensorVM
    n_lamb_sigma: Optional[Tuple[int, ...]]  # density components per plane/line (density_n_comp)
    n_lamb_sh: Optional[Tuple[int, ...]]  # appearance components (appearance_n_comp)
    data_dim_color: int  # appearance feature width (app_dim)
    shadingMode: str
    pos_pe: int
    view_pe: int
    fea_pe: int
    featureC: int
    fea2denseAct: str
    density_shift: float
    distance_scale: float
    rm_weight_mask_thre: float  # rayMarch_weight_thres
    alpha_mask_thre: float  # alphaMask_thres
    step_ratio: float
    nSamples: int  # upper bound on samples per ray (1e6: set by the grid alone)
    importance_samples: int  # unbounded scenes: samples per ray placed by a density-only first pass (0: off)
    ckpt: Optional[str]  # model to start training from, or to render


@dataclass(frozen=True)
class ScheduleConfig:
    """Schedule and optimisation: iterations, batches, learning rates, loss weights, grid events."""

    n_iters: int
    batch_size: int
    seed: int
    perturb: float  # 1: jitter the samples along each training ray, 0: do not
    lr_init: float  # grids
    lr_basis: float  # basis matrices and MLP
    lr_decay_iters: int  # -1: n_iters
    lr_decay_target_ratio: float
    lr_upsample_reset: bool
    L1_weight_inital: float  # the reference's spelling
    L1_weight_rest: float
    Ortho_weight: float
    TV_weight_density: float
    TV_weight_app: float
    sparse_depth_weight: float  # the loss that ends rays at the capture's sparse points (0: off)
    N_voxel_init: int
    N_voxel_final: int
    upsamp_list: Tuple[int, ...]
    update_AlphaMask_list: Tuple[int, ...]

    @property
    def decay_iters(self) -> int:
        """Iterations over which the learning rates fall to ``lr_decay_target_ratio``."""
        return self.lr_decay_iters if self.lr_decay_iters > 0 else self.n_iters


@dataclass(frozen=True)
class RenderConfig:
    """What is rendered during and after training (or from ``--ckpt``), and in what chunks."""

    render_only: bool
    compute_extra_metrics: bool  # SSIM and LPIPS besides PSNR for the final renders
    render_test: bool
    render_train: bool
    render_path: bool
    export_mesh: bool
    N_vis: int  # test views rendered every vis_every iterations (-1: all, 0: none)
    vis_every: int
    chunk_size: int  # rays rendered at once
    camera_path: Optional[str]  # render.py: a camera-path file from the viewer
    splats: Optional[str]  # render.py, view.py: a splat file instead of a checkpoint

    @property
    def renders_anything(self) -> bool:
        return self.render_test or self.render_train or self.render_path or self.camera_path is not None


@dataclass(frozen=True)
class RuntimeConfig:
    """How the process runs: kernel path, memory cleanups, logging."""

    kernels: str  # fused or reference
    gc_every: int  # full cleanup of Jittor's graph and cache every N iterations (0: never)
    gc_growth: float  # hand the allocator cache back when it grows by this factor (0: never)
    verbose: bool  # show Jittor's own log


@dataclass(frozen=True)
class OutputConfig:
    """Where a run writes, how it reports progress, and how it is saved and resumed."""

    expname: Optional[str]
    basedir: str
    add_timestamp: bool
    progress_refresh_rate: int
    save_every: int  # training state every N iterations (0: only at the end)
    resume: Optional[str]  # a training state file, or 'auto'
    tensorboard: bool  # TensorBoard event file in the run's folder
    tensorboard_every: int  # per-iteration scalars every N iterations

    def run_folder(self, timestamp: str = "") -> str:
        return os.path.join(self.basedir, f"{self.expname}{timestamp}")


@dataclass(frozen=True)
class ViewerConfig:
    """The browser viewer (``tensorf_jt.viewer``): whether training serves it, and where."""

    viewer: bool  # train.py serves the viewer while training
    viewer_port: int
    viewer_host: str  # 127.0.0.1: this machine only


_SECTIONS = {"data": DataConfig, "model": ModelConfig, "schedule": ScheduleConfig, "render": RenderConfig,
             "runtime": RuntimeConfig, "output": OutputConfig, "viewer": ViewerConfig}
# Flags stored as the reference's 0/1 integers, typed here as booleans.
_INT_BOOLEANS = frozenset({"ndc_ray", "lr_upsample_reset", "render_only", "render_test", "render_train",
                           "render_path", "export_mesh", "add_timestamp", "compute_extra_metrics",
                           "tensorboard", "viewer"})
_OPTIONAL_LISTS = frozenset({"n_lamb_sigma", "n_lamb_sh"})
_LISTS = frozenset({"upsamp_list", "update_AlphaMask_list"})
_OPTIONAL_FLOAT_LISTS = frozenset({"scene_bbox", "near_far"})


@dataclass(frozen=True)
class RunConfig:
    """Every setting of one run, in sections; ``config`` is the config file it was read from."""

    data: DataConfig
    model: ModelConfig
    schedule: ScheduleConfig
    render: RenderConfig
    runtime: RuntimeConfig
    output: OutputConfig
    viewer: ViewerConfig
    config: Optional[str] = None

    def __post_init__(self) -> None:
        _validate(self)

    @classmethod
    def from_flags(cls, flags: Mapping[str, Any]) -> "RunConfig":
        """The configuration the flat ``{flag: value}`` dict describes; a flag it lacks (the
        ``train_args`` of a file written before that flag existed) takes its default."""
        flags = {**_flag_defaults(), **flags}
        for name, (default, reason) in IGNORED_BY_REFERENCE.items():
            if flags.get(name, default) != default:
                raise ConfigError(f"{name} = {flags[name]} has no effect: {reason}. "
                                  "Remove it from the command line or config file.")
        sections = {}
        for section, kind in _SECTIONS.items():
            values = {}
            for field in dataclasses.fields(kind):
                values[field.name] = _typed(field.name, flags[field.name])
            sections[section] = kind(**values)
        return cls(config=flags.get("config"), **sections)

    def to_flags(self) -> dict:
        """The flat ``{flag: value}`` dict, as the parser gives it (the ``train_args`` of saved files)."""
        values = {"config": self.config}
        values.update({name: default for name, (default, _) in IGNORED_BY_REFERENCE.items()})
        for section in _SECTIONS:
            for field in dataclasses.fields(getattr(self, section)):
                values[field.name] = _flag_value(field.name, getattr(getattr(self, section), field.name))
        return {name: values[name] for name in _flag_defaults() if name in values}

    def with_flags(self, **updates: Any) -> "RunConfig":
        """A copy with some flags changed (validated again)."""
        unknown = sorted(set(updates) - set(self.to_flags()))
        if unknown:
            raise ConfigError(f"Unknown setting(s): {', '.join(unknown)}.")
        return RunConfig.from_flags({**self.to_flags(), **updates})


@functools.lru_cache(maxsize=1)
def _flag_defaults() -> dict:
    from tensorf_jt.config.flags import flag_defaults
    return flag_defaults()


def _typed(name: str, value: Any) -> Any:
    if name in _INT_BOOLEANS:
        return bool(value)
    if name in _OPTIONAL_LISTS:
        return None if value is None else tuple(int(v) for v in value)
    if name in _LISTS:
        return tuple(int(v) for v in value or ())
    if name in _OPTIONAL_FLOAT_LISTS:
        return None if value is None else tuple(float(v) for v in value)
    if name == "nSamples":
        return int(value)
    return value


def _flag_value(name: str, value: Any) -> Any:
    if name in _INT_BOOLEANS:
        return int(value)
    if name in _OPTIONAL_LISTS:
        return None if value is None else list(value)
    if name in _LISTS:
        return list(value) if value else None
    if name in _OPTIONAL_FLOAT_LISTS:
        return None if value is None else list(value)
    return value


def _validate(config: RunConfig) -> None:
    """Refuse values that cannot work, naming the setting and what it accepts."""
    data, model, schedule, render = config.data, config.model, config.schedule, config.render
    runtime, output = config.runtime, config.output
    _require_finite(config)
    positive = {"batch_size": schedule.batch_size, "n_iters": schedule.n_iters,
                "N_voxel_init": schedule.N_voxel_init, "N_voxel_final": schedule.N_voxel_final,
                "chunk_size": render.chunk_size, "featureC": model.featureC,
                "progress_refresh_rate": output.progress_refresh_rate, "tensorboard_every": output.tensorboard_every}
    for name, value in positive.items():
        if value <= 0:
            raise ConfigError(f"{name} must be positive, got {value}.")
    if output.save_every < 0:
        raise ConfigError(f"save_every must be 0 (save only at the end) or positive, got {output.save_every}.")
    if runtime.gc_every < 0:
        raise ConfigError(f"gc_every must be 0 (never) or positive, got {runtime.gc_every}.")
    if runtime.gc_growth != 0 and runtime.gc_growth <= 1:
        raise ConfigError(f"gc_growth must be 0 (off) or above 1, got {runtime.gc_growth}.")
    if not 0 < config.viewer.viewer_port < 65536:
        raise ConfigError(f"viewer_port must be a port number (1-65535), got {config.viewer.viewer_port}.")
    check_kernels(runtime.kernels)
    if data.unbounded not in (-1, 0, 1):
        raise ConfigError(f"unbounded must be 1 (contract the space beyond the box), 0 (bounded) or -1 (as the "
                          f"dataset says), got {data.unbounded}.")
    if data.unbounded == 1 and data.ndc_ray:
        raise ConfigError("unbounded = 1 contracts the space around a foreground box, but ndc_ray = 1 maps a "
                          "forward-facing scene into NDC: use one or the other (a capture around its object: "
                          "ndc_ray = 0, unbounded = 1).")
    if schedule.sparse_depth_weight < 0:
        raise ConfigError(f"sparse_depth_weight must be 0 (off) or positive, got {schedule.sparse_depth_weight}.")
    if model.importance_samples < 0:
        raise ConfigError(f"importance_samples must be 0 (off) or positive, got {model.importance_samples}.")
    if model.importance_samples and data.ndc_ray:
        raise ConfigError("importance_samples places the samples of unbounded scenes, but ndc_ray = 1 trains a "
                          "forward-facing NDC scene: set importance_samples = 0 (or ndc_ray = 0, unbounded = 1).")
    if render.N_vis != 0 and render.vis_every <= 0:
        raise ConfigError(f"vis_every must be positive when N_vis is not 0, got {render.vis_every}.")
    if data.downsample_train <= 0 or (data.downsample_test is not None and data.downsample_test <= 0):
        raise ConfigError("downsample_train and downsample_test must be positive.")
    if schedule.perturb not in (0.0, 1.0):
        raise ConfigError(f"perturb must be 0 (no jitter) or 1 (jitter), got {schedule.perturb}.")
    if schedule.N_voxel_final < schedule.N_voxel_init:
        raise ConfigError(f"N_voxel_final ({schedule.N_voxel_final}) must not be smaller than "
                          f"N_voxel_init ({schedule.N_voxel_init}).")
    if model.step_ratio <= 0:
        raise ConfigError(f"step_ratio must be positive, got {model.step_ratio}.")
    if model.model_name not in MODEL_NAMES:
        raise ConfigError(f"model_name '{model.model_name}' is not supported; choose one of {', '.join(MODEL_NAMES)}.")
    if data.dataset_name not in DATASET_NAMES:
        raise ConfigError(f"dataset_name '{data.dataset_name}' is not supported; "
                          f"choose one of {', '.join(DATASET_NAMES)}.")
    _validate_scene_bounds(data)
    _check_reader_limits(model, schedule)
    if config.config is not None and not os.path.isfile(config.config):
        raise ConfigError(f"Config file '{config.config}' does not exist.")


def _check_reader_limits(model: ModelConfig, schedule: ScheduleConfig) -> None:
    """Refuse sizes above what the checkpoint readers accept (``config.limits``), so that every
    run train.py starts writes files that render.py, view.py and --resume read back."""
    bounds = [("importance_samples", model.importance_samples, 0, MAX_IMPORTANCE_SAMPLES),
              ("data_dim_color", model.data_dim_color, 1, MAX_WIDTH),
              ("featureC", model.featureC, 1, MAX_WIDTH),
              ("N_voxel_final", schedule.N_voxel_final, 1, MAX_VOXELS)]
    bounds += [(name, getattr(model, name), 0, MAX_ENCODING_FREQUENCIES)
               for name in ("pos_pe", "view_pe", "fea_pe")]
    for name in ("n_lamb_sigma", "n_lamb_sh"):
        bounds += [(name, count, 1, MAX_COMPONENTS) for count in getattr(model, name) or ()]
    for name, value, low, high in bounds:
        if not low <= value <= high:
            raise ConfigError(f"{name} must be between {low} and {high:,} (the most a checkpoint can hold), "
                              f"got {value:,}.")


def _require_finite(config: RunConfig) -> None:
    """Every float setting (and each number of a float list) must be finite: NaN passes every
    comparison the other checks make (a NaN weight is not negative) and then silently breaks
    training."""
    for section in _SECTIONS:
        for field in dataclasses.fields(getattr(config, section)):
            value = getattr(getattr(config, section), field.name)
            numbers = value if isinstance(value, tuple) else (value,)
            if any(isinstance(v, float) and not math.isfinite(v) for v in numbers):
                raise ConfigError(f"{field.name} must be a finite number, got {_flag_value(field.name, value)}.")


def _validate_scene_bounds(data: DataConfig) -> None:
    """scene_bbox: six finite numbers, each minimum below its maximum; near_far: 0 <= near < far."""
    if data.scene_bbox is not None:
        box = data.scene_bbox
        if len(box) != 6 or not all(math.isfinite(v) for v in box) or any(box[i] >= box[i + 3] for i in range(3)):
            raise ConfigError(f"scene_bbox must be six numbers xmin ymin zmin xmax ymax zmax with each minimum "
                              f"below its maximum, got {list(box)}.")
    if data.near_far is not None:
        near_far = data.near_far
        if len(near_far) != 2 or not all(math.isfinite(v) for v in near_far) or not 0 <= near_far[0] < near_far[1]:
            raise ConfigError(f"near_far must be two numbers near far with 0 <= near < far, got {list(near_far)}.")
    if data.pose_format not in POSE_FORMATS:
        raise ConfigError(f"pose_format '{data.pose_format}' is not supported; "
                          f"choose one of {', '.join(POSE_FORMATS)}.")
    if data.pose_format != POSE_FORMATS[0] and data.dataset_name != "own_data":
        raise ConfigError(f"pose_format applies to dataset_name = own_data only (this run reads {data.dataset_name}); "
                          "remove it.")
    if not 0 <= data.holdout_sector < 360:
        raise ConfigError(f"holdout_sector must be a width in degrees from 0 (off) to below 360, "
                          f"got {data.holdout_sector}.")
    if (data.holdout_sector > 0 or data.holdout_center is not None) and data.dataset_name not in ("own_data",
                                                                                                  "demo_room"):
        raise ConfigError(f"holdout_sector and holdout_center apply to dataset_name = own_data or demo_room "
                          f"(this run reads {data.dataset_name}); remove them.")


def require_for_training(config: RunConfig) -> None:
    """What a training run needs beyond valid values: a name, and the model's size unless it starts from ``--ckpt``."""
    if not config.output.expname:
        raise ConfigError("expname is not set: give --expname NAME or an 'expname = NAME' line in the config.")
    if config.model.ckpt is None and (not config.model.n_lamb_sigma or not config.model.n_lamb_sh):
        raise ConfigError("n_lamb_sigma and n_lamb_sh must be set, e.g. 'n_lamb_sigma = [16,16,16]' "
                          "and 'n_lamb_sh = [48,48,48]' as in configs/lego.txt.")


def require_for_rendering(config: RunConfig) -> None:
    """``train.py --render_only 1`` / ``--export_mesh 1``: a checkpoint, and something to render."""
    if config.render.export_mesh and not config.model.ckpt:
        raise ConfigError("export_mesh = 1 exports the mesh of a trained model: give --ckpt PATH.th.")
    if config.render.render_only and not config.render.renders_anything:
        raise ConfigError("render_only = 1 renders nothing without --render_test 1, --render_train 1 "
                          "or --render_path 1.")


def resumed(config: RunConfig, explicit: set[str], saved: Mapping[str, Any]) -> RunConfig:
    """The saved run's settings (``saved``: its ``train_args``), with the ones set explicitly now
    that may change (``MAY_CHANGE_ON_RESUME``).

    Any other explicitly set flag must equal the saved value: a resumed run is the same run.
    Flags newer than the state file, and ``FROM_THIS_COMMAND``, keep their value from ``config``.
    """
    from tensorf_jt.config.flags import RETIRED_FLAGS, RETIRED_DEFAULTS

    used = [name for name in RETIRED_FLAGS if name in saved and saved[name] != RETIRED_DEFAULTS[name]]
    if used:
        raise ConfigError(f"The saved run was trained with --{used[0]} {saved[used[0]]}, which is no longer an "
                          f"option ({RETIRED_FLAGS[used[0]]}); it cannot go on the same way. Start a new run "
                          "without --resume (its checkpoint still renders).")
    current = config.to_flags()
    merged = {**current, **{name: value for name, value in saved.items()
                            if name in current and name not in FROM_THIS_COMMAND}}
    conflicts = []
    for name in sorted(explicit & set(current)):
        if name in MAY_CHANGE_ON_RESUME:
            merged[name] = current[name]
        elif name in saved and saved[name] != current[name]:
            conflicts.append(f"{name} = {current[name]!r} (the saved run has {saved[name]!r})")
    if conflicts:
        raise ConfigError("A resumed run must keep the settings it was started with; these differ: "
                          + "; ".join(conflicts) + ". Drop them from the command line or config file, "
                          "or start a new run without --resume.")
    merged["resume"] = current["resume"]
    return RunConfig.from_flags(merged)
