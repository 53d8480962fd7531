#!/usr/bin/env python3
"""Draw a scene's cameras, box and sparse points before training on it.

    python tools/preview_scene.py DATADIR                     # own_data (e.g. from colmap_to_transforms.py)
    python tools/preview_scene.py DATADIR --dataset_name nsvf

Writes DATADIR/preview.png (top and side views) and DATADIR/preview.ply (the same points and
lines, for MeshLab, CloudCompare or Blender), and prints the one-line summary training
prints (with the image size as loaded here: --downsample). Files of those names that this tool
did not write are refused unless --overwrite is given. The box should enclose the
object with little room to spare, and every frustum should open towards it. The loader
reads the scene as training would, so its errors (missing images, cameras in another
convention) show here first.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("datadir", help="the scene folder, as --datadir for train.py")
    parser.add_argument("--dataset_name", default="own_data", help="its format, as for train.py (default own_data)")
    parser.add_argument("--downsample", type=float, default=4.0,
                        help="image size divisor while loading (only the cameras are drawn; default 4)")
    parser.add_argument("--scene_bbox", type=float, nargs=6, default=None, metavar="V",
                        help="draw this box instead of the scene's, as train.py's --scene_bbox")
    parser.add_argument("--pose_format", default="c2w_opengl", help="own_data only, as train.py's --pose_format")
    parser.add_argument("--out", default=None, help="output path without extension (default DATADIR/preview)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a preview.png or preview.ply that this tool did not write")
    args = parser.parse_args(argv)

    import numpy as np

    from tensorf_jt.dataLoader import dataset_dict
    from tensorf_jt.dataLoader.scene_fit import scene_summary
    from tensorf_jt.dataLoader.scene_preview import (TEST_COLOUR, TRAIN_COLOUR, scene_geometry, sparse_points,
                                                     write_preview_ply, write_preview_png)
    from tensorf_jt.errors import TensorfError
    from tensorf_jt.formats.ownership import ply_is_ours, png_is_ours, refuse_foreign_file

    if args.dataset_name not in dataset_dict:
        parser.error(f"--dataset_name must be one of {', '.join(dataset_dict)}")
    options = {"pose_format": args.pose_format} if args.dataset_name == "own_data" else {}
    if args.scene_bbox is not None and args.dataset_name == "own_data":
        options["scene_bbox"] = args.scene_bbox
    out = args.out if args.out is not None else os.path.join(args.datadir, "preview")
    try:
        if not args.overwrite:
            for path, is_ours in ((out + ".png", png_is_ours), (out + ".ply", ply_is_ours)):
                refuse_foreign_file(path, is_ours, "Give another --out, or pass --overwrite to replace it.")
        train = dataset_dict[args.dataset_name](args.datadir, "train", downsample=args.downsample, **options)
        test = dataset_dict[args.dataset_name](args.datadir, "test", downsample=args.downsample, **options)
        points, colours = sparse_points(train)
    except TensorfError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.scene_bbox is not None and args.dataset_name != "own_data":
        train.scene_bbox = [args.scene_bbox[:3], args.scene_bbox[3:]]
    summary = scene_summary(train)
    if args.downsample != 1:
        summary += f"; images read at 1/{args.downsample:g} of their size"
    # llff keeps OpenGL poses (and an NDC box); the frusta are drawn from OpenCV poses
    flip = np.diag([1.0, -1.0, -1.0, 1.0]) if args.dataset_name == "llff" else np.eye(4)
    groups = [(np.asarray(split.poses) @ flip, split.intrinsics, split.img_wh, colour)
              for split, colour in ((train, TRAIN_COLOUR), (test, TEST_COLOUR))]
    geometry = scene_geometry(train.scene_bbox, groups, points, colours)
    write_preview_png(out + ".png", geometry, f"{args.datadir}: {summary}")
    write_preview_ply(out + ".ply", geometry)
    print(summary)
    print(f"wrote {out}.png and {out}.ply")
    return 0


if __name__ == "__main__":
    sys.exit(main())
