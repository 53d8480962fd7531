"""``render.py``: render a checkpoint's test/train views (with metrics), the dataset's camera path or a
viewer's camera-path file, or export its mesh.

The model comes from the checkpoint alone; the dataset (for cameras and ground truth) is the
one the checkpoint was trained on unless ``--datadir`` / ``--dataset_name`` say otherwise.
With none of ``--render_train``, ``--render_path``, ``--camera_path`` or ``--export_mesh`` the
test views are rendered.

Outputs go next to the checkpoint: ``imgs_test_all/``, ``imgs_train_all/``, ``imgs_path_all/``,
``imgs_{file name}/`` for ``--camera_path FILE`` and, for ``--export_mesh 1``,
``{checkpoint without .th}.ply``. That is where the training run
that wrote the checkpoint put its own final renders (the reference's ``reconstruction``
layout), so rendering a run's checkpoint again replaces them, and it needs no experiment name
(this command is usually given none). ``train.py --render_only 1`` instead keeps the reference's
``render_test`` layout, which adds an ``{expname}/`` level for test views and the path:

| views | ``render.py --ckpt DIR/x.th`` | ``train.py --render_only 1 --ckpt DIR/x.th`` |
|---|---|---|
| test | ``DIR/imgs_test_all/`` | ``DIR/{expname}/imgs_test_all/`` |
| path | ``DIR/imgs_path_all/`` | ``DIR/{expname}/imgs_path_all/`` |
| train | ``DIR/imgs_train_all/`` | ``DIR/imgs_train_all/`` (no ``{expname}/``, as in the reference) |

``expname`` there is the one the flags or the config file give (the reference knows no other);
without one, the one recorded in the checkpoint's ``train_args``; for a checkpoint that records
none (the PyTorch TensoRF's), the checkpoint's file name without ``.th``, which is the
experiment name in the reference's own layout (``{basedir}/{expname}/{expname}.th``).
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import numpy as np

from tensorf_jt.cli import exit_process, run_cli
from tensorf_jt.config import RunConfig, parse_run_config
from tensorf_jt.config.flags import check_saved_flags
from tensorf_jt.errors import ConfigError
from tensorf_jt.formats.ownership import RENDERS_MARK, claim_folder, ply_is_ours, refuse_foreign_file
from tensorf_jt.runtime import setup

if TYPE_CHECKING:
    from tensorf_jt.models import TensoRFModel

# Flags whose value we take from the checkpoint's training run unless given explicitly.
_INHERITED = ("dataset_name", "datadir", "downsample_train", "downsample_test",
              "demo_image_size", "demo_n_train", "demo_n_test", "chunk_size", "ndc_ray", "white_bkgd")


def render_checkpoint(config: RunConfig, explicit: set[str] = frozenset(), render: bool = True,
                      layout: str = "checkpoint") -> dict:
    """Do what ``config`` asks of its checkpoint (``model.ckpt``): export its mesh, render splits
    and the camera path.

    Returns {split or 'path': summary, 'mesh': {'path', 'vertices', 'faces'}} for what was done.
    Dataset flags not in ``explicit`` (the names the user set) come from the checkpoint's run,
    and so does the kernel choice (the model's own, ``--kernels`` replaces it).
    ``render`` False exports the mesh only, whatever the render flags say. ``layout`` chooses
    the output folders (``render_folders``): 'checkpoint' (render.py) or 'reference'
    (train.py --render_only 1).
    """
    from tensorf_jt.dataLoader import load_split, prepare_dataset
    from tensorf_jt.evaluation.renders import evaluate, evaluate_path
    from tensorf_jt.formats.checkpoint import load_checkpoint

    ckpt_path = config.model.ckpt
    if not ckpt_path:
        raise ConfigError("--ckpt is required: the checkpoint (.th) to render.")
    model, ckpt = load_checkpoint(ckpt_path, config.model.model_name, explicit_ndc(config, explicit))
    if "kernels" in explicit:
        model.kernels = config.runtime.kernels
    renders = render and config.render.renders_anything
    if renders:
        config = training_scene(config, ckpt, explicit)
    folders = render_folders(config, ckpt, layout)
    claim_outputs(config, ckpt, folders, renders)
    results = {}
    if config.render.export_mesh:
        results["mesh"] = export_checkpoint_mesh(model, ckpt_path)
    if not renders:
        return results
    data, chunk = config.data, config.render.chunk_size
    prepare_dataset(data)
    for split, wanted in (("train", config.render.render_train), ("test", config.render.render_test)):
        if not wanted:
            continue
        dataset = load_split(data, split, is_stack=True)
        summary = evaluate(dataset, model, folders[split], white_bg=dataset.white_bg or data.white_bkgd,
                           chunk=chunk, compute_extra_metrics=config.render.compute_extra_metrics)
        results[split] = summary
        print(f"{split}: {len(summary['views'])} views, {metrics_line(summary)} -> {folders[split]}")
    if config.render.render_path:
        dataset = load_split(data, "test", is_stack=True)
        results["path"] = evaluate_path(dataset, model, folders["path"], white_bg=dataset.white_bg or data.white_bkgd,
                                        chunk=chunk)
        print(f"path: {results['path']['frames']} frames, {results['path']['video']}")
    if config.render.camera_path:
        results["camera_path"] = render_camera_path(config, model, config.render.camera_path)
        print(f"camera path: {results['camera_path']['frames']} frames, {results['camera_path']['video']}")
    return results


def claim_outputs(config: RunConfig, ckpt: dict, folders: dict[str, str], renders: bool) -> None:
    """Refuse, before anything is written, outputs that would replace files this project did not
    write: a mesh file without our PLY mark and, next to a PyTorch TensoRF checkpoint (whose
    folder may hold that program's own renders under the same names), render folders that
    are neither new, empty nor marked by an earlier render of ours (``RENDERS_MARK``, written
    here first). Next to a checkpoint of ours the render folders are its run's own outputs."""
    if config.render.export_mesh:
        refuse_foreign_file(mesh_path(config.model.ckpt), ply_is_ours,
                            "Move it away first; the mesh is written next to the checkpoint.")
    own_checkpoint = "format" in ckpt or "train_args" in ckpt  # a PyTorch TensoRF checkpoint has neither
    if not renders or own_checkpoint:
        return
    wanted = [folders[split] for split, flag in (("train", config.render.render_train),
                                                  ("test", config.render.render_test),
                                                  ("path", config.render.render_path)) if flag]
    if config.render.camera_path:
        wanted.append(camera_path_folder(config))
    claim_render_folders(wanted, config.model.ckpt, "the checkpoint")


def claim_render_folders(folders: list[str], source: str, what: str) -> None:
    """Make ``folders`` for renders of ``source``: each must be new, empty or marked by an
    earlier render of ours (``RENDERS_MARK``), which is written into it first."""
    for folder in folders:
        claim_folder(folder, lambda path: os.path.isfile(os.path.join(path, RENDERS_MARK)), "renders",
                     f"Move its files away, or render a copy of {what} in another folder.")
    for folder in folders:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, RENDERS_MARK), "w", encoding="utf-8") as mark:
            mark.write(f"renders of {os.path.abspath(source)}\n")


def render_splat_file(config: RunConfig, explicit: set[str]) -> dict:
    """Render the test views of ``--splats`` through the splat rasteriser and score them as a
    checkpoint's are, into ``imgs_test_{file name}/`` next to the file."""
    from tensorf_jt.dataLoader import load_split, prepare_dataset
    from tensorf_jt.evaluation.renders import score_views
    from tensorf_jt.formats.gaussian_ply import read_splats
    from tensorf_jt.splats.camera import dataset_cameras
    from tensorf_jt.splats.params import SplatParameters
    from tensorf_jt.splats.rasterizer import view_renderer

    path = config.render.splats
    missing = [f"--{name}" for name in ("datadir", "dataset_name") if name not in explicit]
    if missing:
        raise ConfigError(f"--splats renders a scene's test views, and a splat file does not record its scene: pass "
                          f"{' and '.join(missing)} (e.g. --datadir data/nerf_synthetic/lego --dataset_name blender).")
    params = SplatParameters.from_splats(read_splats(path))
    prepare_dataset(config.data)
    dataset = load_split(config.data, "test", is_stack=True)
    white = (dataset.white_bg or config.data.white_bkgd) and not (dataset.unbounded or config.data.unbounded == 1)
    folder = os.path.join(os.path.dirname(os.path.abspath(path)), f"imgs_test_{os.path.splitext(os.path.basename(path))[0]}")
    claim_render_folders([folder], path, "the splat file")
    renderer = view_renderer(params, dataset_cameras(dataset), np.full(3, 1.0 if white else 0.0), config.runtime.kernels)
    summary = score_views(dataset, renderer, folder, compute_extra_metrics=config.render.compute_extra_metrics)
    print(f"test: {len(summary['views'])} views of {params.count:,} splats, {metrics_line(summary)} -> {folder}")
    return {"test": summary, "folder": folder}


def camera_path_folder(config: RunConfig) -> str:
    """Where ``--camera_path FILE`` renders go: ``imgs_{file name}/`` next to the checkpoint."""
    stem = os.path.splitext(os.path.basename(config.render.camera_path))[0]
    return os.path.join(os.path.dirname(os.path.abspath(config.model.ckpt)), f"imgs_{stem}")


def explicit_ndc(config: RunConfig, explicit: set[str]) -> bool | None:
    """``--ndc_ray`` where the user gave it; None: as the checkpoint's run was trained."""
    return config.data.ndc_ray if "ndc_ray" in explicit else None


def training_scene(config: RunConfig, ckpt: dict, explicit: set[str] = frozenset()) -> RunConfig:
    """``config`` with the dataset flags not in ``explicit`` taken from the checkpoint's training run."""
    trained_with = ckpt.get("train_args", {})
    check_saved_flags(trained_with, f"Checkpoint '{config.model.ckpt}'")
    unknown_scene = [f"--{name}" for name in ("datadir", "dataset_name")
                     if "train_args" not in ckpt and name not in explicit]
    if unknown_scene:
        raise ConfigError(
            f"'{config.model.ckpt}' does not record the scene it was trained on (checkpoints of the PyTorch "
            f"TensoRF never do); pass {' and '.join(unknown_scene)} (e.g. --datadir data/nerf_synthetic/lego "
            "--dataset_name blender; add --ndc_ray 1 for llff scenes).")
    return config.with_flags(**{name: trained_with[name] for name in _INHERITED
                                if name not in explicit and name in trained_with})


def render_camera_path(config: RunConfig, model: TensoRFModel, path_file: str) -> dict:
    """Render a viewer camera-path file into ``imgs_{file name}/`` next to the checkpoint: frames,
    RGB+depth frames (``rgbd/``), and the two videos. The training split gives the scene's ray
    conventions (NDC, direction normalisation) and the depth colour map's range."""
    from tensorf_jt.dataLoader import load_split
    from tensorf_jt.evaluation.renders import render_frames
    from tensorf_jt.viewer.keyframes import read_camera_path
    from tensorf_jt.viewer.cameras import scene_cameras

    camera_path = read_camera_path(path_file)
    dataset = load_split(config.data, "train", is_stack=True)
    cameras = scene_cameras(dataset)
    save_dir = camera_path_folder(config)
    width, height = camera_path.width, camera_path.height
    frames = (cameras.rays_for_model_pose(camera.c2w, camera.fov_y, width, height) for camera in camera_path.frames)
    rendered = render_frames(model, frames, (width, height), dataset.near_far, save_dir, "camera-path videos",
                             white_bg=dataset.white_bg or config.data.white_bkgd, chunk=config.render.chunk_size)
    return {**rendered, "folder": save_dir}


def metrics_line(summary: dict) -> str:
    """The evaluation summary in one line: PSNR, and SSIM, LPIPS and depth error where computed."""
    parts = [f"PSNR {summary['psnr']:.2f}"]
    for key, label, digits in (("ssim", "SSIM", 4), ("lpips_alex", "LPIPS-Alex", 4), ("lpips_vgg", "LPIPS-VGG", 4),
                               ("depth_abs_error", "mean |depth error|", 4)):
        if key in summary:
            parts.append(f"{label} {summary[key]:.{digits}f}")
    return ", ".join(parts)


def render_folders(config: RunConfig, ckpt: dict, layout: str = "checkpoint") -> dict[str, str]:
    """Output folder of each of 'train', 'test' and 'path' for the checkpoint ``config.model.ckpt``.

    'checkpoint': ``imgs_{split}_all`` next to the checkpoint. 'reference': as the reference's
    ``train.py --render_only 1``, test views and path one ``{expname}/`` level further down
    (the expname as ``run_name`` finds it), training views next to the checkpoint.
    """
    if layout not in ("checkpoint", "reference"):
        raise ValueError(f"unknown output layout {layout!r}")
    folder = os.path.dirname(os.path.abspath(config.model.ckpt))
    nested = folder if layout == "checkpoint" else os.path.join(folder, run_name(config, ckpt))
    return {"train": os.path.join(folder, "imgs_train_all"), "test": os.path.join(nested, "imgs_test_all"),
            "path": os.path.join(nested, "imgs_path_all")}


def run_name(config: RunConfig, ckpt: dict) -> str:
    """The experiment name: ``--expname`` (flag or config file), else the one the checkpoint's
    run recorded, else the checkpoint's file name without ``.th``."""
    if config.output.expname:
        return config.output.expname
    recorded = ckpt.get("train_args", {}).get("expname")
    if recorded:
        return recorded
    stem, extension = os.path.splitext(os.path.basename(config.model.ckpt))
    return stem if extension == ".th" else os.path.basename(config.model.ckpt)


def mesh_path(ckpt_path: str) -> str:
    """``{checkpoint without .th}.ply``, the reference's place for a checkpoint's mesh."""
    stem, extension = os.path.splitext(ckpt_path)
    return f"{stem if extension == '.th' else ckpt_path}.ply"


def export_checkpoint_mesh(model: TensoRFModel, ckpt_path: str) -> dict:
    """Write the model's mesh next to its checkpoint as ``{ckpt without .th}.ply``."""
    from tensorf_jt.evaluation.mesh import export_mesh

    path = mesh_path(ckpt_path)
    mesh = export_mesh(model, path)
    print(f"mesh: {path} ({len(mesh.vertices)} vertices, {len(mesh.faces)} faces)")
    return {"path": path, "vertices": len(mesh.vertices), "faces": len(mesh.faces)}


def _main(argv: list[str]) -> int:
    config, explicit = parse_run_config(argv)
    setup()
    if config.render.splats:
        render_splat_file(config, explicit)
        return 0
    if not (config.render.render_train or config.render.render_path or config.render.export_mesh
            or config.render.camera_path):
        config = config.with_flags(render_test=1)
    from tensorf_jt.runtime.error_hints import jittor_error_hints
    with jittor_error_hints(config, "rendering"):
        render_checkpoint(config, explicit)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cli(lambda: _main(sys.argv[1:] if argv is None else list(argv)))


def entry_point() -> None:
    """The ``tensorf-render`` command: ``main``, then leave the process (at once after a failure)."""
    exit_process(main)


if __name__ == "__main__":
    entry_point()
