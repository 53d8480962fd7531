"""``render.py``: render test (and optionally train) views of a checkpoint, with metrics.

The model comes from the checkpoint alone; the dataset (for cameras and ground truth) is the
one the checkpoint was trained on unless ``--datadir`` / ``--dataset_name`` say otherwise.
Outputs go next to the checkpoint: ``imgs_test_all/`` and ``imgs_train_all/``.
"""
from __future__ import annotations

import os
import sys

from tensorf_jt.cli import run_cli
from tensorf_jt.config import parse_args_and_sources
from tensorf_jt.errors import ConfigError

# Flags whose value we take from the checkpoint's training run unless given explicitly.
_INHERITED = ("dataset_name", "datadir", "downsample_train", "downsample_test",
              "demo_image_size", "demo_n_train", "demo_n_test", "chunk_size")


def render_checkpoint(args, explicit: set[str] = frozenset()) -> dict:
    """Render the splits ``args`` asks for from ``args.ckpt``; returns {split: metrics summary}.

    Dataset flags not in ``explicit`` (the names the user set) come from the checkpoint's run.
    """
    from tensorf_jt import kernels
    from tensorf_jt.checkpoint import load_checkpoint
    from tensorf_jt.dataLoader import load_split, prepare_dataset
    from tensorf_jt.evaluation import evaluate

    if not args.ckpt:
        raise ConfigError("--ckpt is required: the checkpoint (.th) to render.")
    kernels.set_kernels(args.kernels)
    model, ckpt = load_checkpoint(args.ckpt, args.model_name)
    trained_with = ckpt.get("train_args", {})
    for name in _INHERITED:
        if name not in explicit and name in trained_with:
            setattr(args, name, trained_with[name])
    prepare_dataset(args)
    folder = os.path.dirname(os.path.abspath(args.ckpt))
    results = {}
    splits = [("train", args.render_train), ("test", args.render_test)]
    for split, wanted in splits:
        if not wanted:
            continue
        dataset = load_split(args, split, is_stack=True)
        summary = evaluate(dataset, model, os.path.join(folder, f"imgs_{split}_all"),
                           white_bg=dataset.white_bg, chunk=args.chunk_size)
        results[split] = summary
        line = f"{split}: {len(summary['views'])} views, PSNR {summary['psnr']:.2f}, SSIM {summary['ssim']:.4f}"
        if "depth_abs_error" in summary:
            line += f", mean |depth error| {summary['depth_abs_error']:.4f}"
        print(line)
    return results


def _main(argv: list[str]) -> int:
    args, explicit = parse_args_and_sources(argv)
    if not args.render_train:
        args.render_test = 1
    render_checkpoint(args, explicit)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cli(lambda: _main(sys.argv[1:] if argv is None else list(argv)))


if __name__ == "__main__":
    sys.exit(main())
