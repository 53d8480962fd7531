#!/usr/bin/env python3
"""Turn a COLMAP reconstruction into a scene that ``own_data`` trains with no other setting.

    python tools/colmap_to_transforms.py DIR      # DIR holds images/ and sparse/0/ (binary or text model)
    python tools/preview_scene.py DIR             # look at cameras, box and points
    python train.py --dataset_name own_data --datadir DIR

Writes DIR/transforms.json: one pinhole camera, the frames (camera-to-world, OpenGL axes), the
scene box (``aabb``) and ``near_far`` fitted to the sparse points, and DIR/sparse_points.ply.
Images with lens distortion, or with several calibrations, are resampled once into
DIR/images_undistorted/. The world is rotated so that the cameras' mean up direction is +z
and moved and scaled so that the box is centred at the origin with its largest side 3.
A later run replaces these outputs of its own; a file of the same name that this tool did not
write (nerfstudio's transforms.json, say) is refused unless --overwrite is given.
``tensorf_jt/dataLoader/colmap_scene.py`` does the work; docs/CAPTURES.md walks through it.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("scene", nargs="?", default=None,
                        help="scene folder holding images/ and the COLMAP model (sparse/0/, sparse/ or itself)")
    parser.add_argument("--model", default=None, help="folder of the COLMAP model (cameras, images, points3D "
                                                      "as .bin or .txt); default: found in the scene folder")
    parser.add_argument("--images", default=None, help="folder of the images the model names; default: SCENE/images")
    parser.add_argument("--out", default=None, help="output file; default: SCENE/transforms.json")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a transforms.json, sparse_points.ply or images_undistorted/ that this tool "
                             "did not write (its own earlier outputs are replaced without it)")
    parser.add_argument("--no_normalize", action="store_true",
                        help="keep COLMAP's world frame (the box and near/far are still fitted)")
    parser.add_argument("--min_track", type=int, default=3,
                        help="sparse points seen by fewer images are ignored when fitting the box (default 3)")
    args = parser.parse_args(argv)

    from tensorf_jt.dataLoader.colmap_scene import convert
    from tensorf_jt.errors import TensorfError

    try:
        if args.scene is None and (args.model is None or args.images is None):
            parser.error("give the scene folder, or both --model and --images")
        if args.min_track < 1:
            parser.error(f"--min_track must be at least 1, got {args.min_track}")
        result = convert(args.scene, args.model, args.images, args.out, normalize=not args.no_normalize,
                         min_track=args.min_track, overwrite=args.overwrite)
    except TensorfError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for note in result.notes:
        print(f"note: {note}")
    size = " x ".join(f"{v:.3g}" for v in result.aabb[1] - result.aabb[0])
    print(f"wrote {result.transforms_path}: {result.n_frames} frames, {result.camera.width}x{result.camera.height} "
          f"pixels, box {size} (from {result.n_points} sparse points), near/far {result.near_far[0]:.3g} / "
          f"{result.near_far[1]:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
