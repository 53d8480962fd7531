#!/usr/bin/env python3
"""Test views of finished runs next to their photos: one row per run, the photos on top.

Each run is a ``train.py`` output folder (``basedir/expname``) whose ``imgs_test_all`` holds the
test renders; the photos are the same own_data test split read again with the flags the runs
used (``--holdout_sector`` and ``--holdout_center`` pick the held-out sector's views). Every
row is labelled with its run's name and, per view, its PSNR from ``metrics.json``.

    python bench/side_by_side.py --datadir COPY_OF_CUP --holdout_sector 30 --downsample 8 --views 2 5 9 17 \\
        --out docs/views_between_photos.png "no sparse depth=log/cup_no_depth" "as configured=log/cup_sector30"

(the runs of docs/BENCHMARKS.md's views between the photos: ``log/cup_sector30`` as configured,
``log/cup_no_depth`` with ``--sparse_depth_weight 0``.)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LABEL_HEIGHT = 14


def label(text: str, width: int) -> np.ndarray:
    """A white strip of ``width`` pixels with ``text`` drawn in black."""
    from PIL import Image, ImageDraw

    strip = Image.new("RGB", (width, LABEL_HEIGHT), "white")
    ImageDraw.Draw(strip).text((2, 1), text, fill="black")
    return np.asarray(strip)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datadir", required=True, help="the own_data scene the runs trained on")
    parser.add_argument("--holdout_sector", type=float, default=0.0)
    parser.add_argument("--holdout_center", type=float, default=None)
    parser.add_argument("--downsample", type=float, default=1.0, help="the runs' --downsample_test")
    parser.add_argument("--views", type=int, nargs="+", required=True, help="test view indices to show")
    parser.add_argument("--scale", type=int, default=2, help="pixel repetition of the picture")
    parser.add_argument("--out", required=True, help="the PNG to write")
    parser.add_argument("runs", nargs="+", metavar="NAME=FOLDER", help="runs in row order")
    args = parser.parse_args()

    import imageio.v3 as iio
    from tensorf_jt.dataLoader.own_data import OwnDataDataset

    test = OwnDataDataset(args.datadir, split="test", downsample=args.downsample, is_stack=True,
                          holdout_sector=args.holdout_sector, holdout_center=args.holdout_center)
    width, height = test.img_wh
    photos = [np.round(test.view_rgbs(v).reshape(height, width, 3) * 255).astype(np.uint8) for v in args.views]
    rows = [label("photos", width * len(args.views)), np.concatenate(photos, 1)]
    for run in args.runs:
        name, folder = run.split("=", 1)
        renders = Path(folder) / "imgs_test_all"
        psnr = json.loads((renders / "metrics.json").read_text())["views"]
        images = [iio.imread(renders / f"{v:03d}.png")[..., :3] for v in args.views]
        title = f"{name}: " + ", ".join(f"{psnr[v]['psnr']:.1f} dB" for v in args.views)
        rows += [label(title, width * len(args.views)), np.concatenate(images, 1)]
    picture = np.concatenate(rows, 0)
    picture = np.kron(picture, np.ones((args.scale, args.scale, 1), dtype=np.uint8))
    iio.imwrite(args.out, picture)
    print(f"{args.out}: {picture.shape[1]}x{picture.shape[0]}")


if __name__ == "__main__":
    main()
