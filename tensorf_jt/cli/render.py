"""``render.py``: render a checkpoint's test/train views (with metrics) or camera path, or export its mesh.

The model comes from the checkpoint alone; the dataset (for cameras and ground truth) is the
one the checkpoint was trained on unless ``--datadir`` / ``--dataset_name`` say otherwise.
Outputs go next to the checkpoint: ``imgs_test_all/``, ``imgs_train_all/``, ``imgs_path_all/``
and, for ``--export_mesh 1``, ``{checkpoint without .th}.ply``. With none of ``--render_train``,
``--render_path`` or ``--export_mesh`` the test views are rendered.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from tensorf_jt.cli import exit_process, run_cli
from tensorf_jt.config import parse_args_and_sources
from tensorf_jt.errors import ConfigError

if TYPE_CHECKING:
    from tensorf_jt.models import TensorBase

# Flags whose value we take from the checkpoint's training run unless given explicitly.
_INHERITED = ("dataset_name", "datadir", "downsample_train", "downsample_test",
              "demo_image_size", "demo_n_train", "demo_n_test", "chunk_size", "ndc_ray", "white_bkgd")


def render_checkpoint(args, explicit: set[str] = frozenset(), render: bool = True) -> dict:
    """Do what ``args`` asks of ``args.ckpt``: export its mesh, render splits and the camera path.

    Returns {split or 'path': summary, 'mesh': {'path', 'vertices', 'faces'}} for what was done.
    Dataset flags not in ``explicit`` (the names the user set) come from the checkpoint's run.
    ``render`` False exports the mesh only, whatever the render flags say.
    """
    from tensorf_jt import kernels
    from tensorf_jt.checkpoint import load_checkpoint
    from tensorf_jt.dataLoader import load_split, prepare_dataset
    from tensorf_jt.evaluation import evaluate, evaluate_path

    if not args.ckpt:
        raise ConfigError("--ckpt is required: the checkpoint (.th) to render.")
    kernels.set_kernels(args.kernels)
    model, ckpt = load_checkpoint(args.ckpt, args.model_name)
    results = {}
    if args.export_mesh:
        results["mesh"] = export_checkpoint_mesh(model, args.ckpt)
    if not render:
        return results
    trained_with = ckpt.get("train_args", {})
    unknown_scene = [f"--{name}" for name in ("datadir", "dataset_name")
                     if "train_args" not in ckpt and name not in explicit]
    if unknown_scene and (args.render_train or args.render_test or args.render_path):
        raise ConfigError(
            f"'{args.ckpt}' does not record the scene it was trained on (checkpoints of the PyTorch TensoRF "
            f"never do); pass {' and '.join(unknown_scene)} (e.g. --datadir data/nerf_synthetic/lego "
            "--dataset_name blender; add --ndc_ray 1 for llff scenes).")
    for name in _INHERITED:
        if name not in explicit and name in trained_with:
            setattr(args, name, trained_with[name])
    if args.render_train or args.render_test or args.render_path:
        prepare_dataset(args)
    folder = os.path.dirname(os.path.abspath(args.ckpt))
    splits = [("train", args.render_train), ("test", args.render_test)]
    for split, wanted in splits:
        if not wanted:
            continue
        dataset = load_split(args, split, is_stack=True)
        summary = evaluate(dataset, model, os.path.join(folder, f"imgs_{split}_all"),
                           white_bg=dataset.white_bg or args.white_bkgd, chunk=args.chunk_size,
                           ndc_ray=bool(args.ndc_ray))
        results[split] = summary
        line = f"{split}: {len(summary['views'])} views, PSNR {summary['psnr']:.2f}, SSIM {summary['ssim']:.4f}"
        if "depth_abs_error" in summary:
            line += f", mean |depth error| {summary['depth_abs_error']:.4f}"
        print(line)
    if args.render_path:
        dataset = load_split(args, "test", is_stack=True)
        results["path"] = evaluate_path(dataset, model, os.path.join(folder, "imgs_path_all"),
                                        white_bg=dataset.white_bg or args.white_bkgd, ndc_ray=bool(args.ndc_ray),
                                        chunk=args.chunk_size)
        print(f"path: {results['path']['frames']} frames, {results['path']['video']}")
    return results


def export_checkpoint_mesh(model: TensorBase, ckpt_path: str) -> dict:
    """Write the model's mesh next to its checkpoint as ``{ckpt without .th}.ply``."""
    from tensorf_jt.mesh import export_mesh

    stem, extension = os.path.splitext(ckpt_path)
    path = f"{stem if extension == '.th' else ckpt_path}.ply"
    mesh = export_mesh(model, path)
    print(f"mesh: {path} ({len(mesh.vertices)} vertices, {len(mesh.faces)} faces)")
    return {"path": path, "vertices": len(mesh.vertices), "faces": len(mesh.faces)}


def _main(argv: list[str]) -> int:
    args, explicit = parse_args_and_sources(argv)
    if not (args.render_train or args.render_path or args.export_mesh):
        args.render_test = 1
    from tensorf_jt.guards import jittor_error_hints
    with jittor_error_hints(args, "rendering"):
        render_checkpoint(args, explicit)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cli(lambda: _main(sys.argv[1:] if argv is None else list(argv)))


def entry_point() -> None:
    """The ``tensorf-render`` command: ``main``, then leave the process (at once after a failure)."""
    exit_process(main)


if __name__ == "__main__":
    entry_point()
