#!/usr/bin/env python3
"""Render the built-in procedural scene into a folder, in parallel processes, without Jittor.

    python tools/make_scene.py data/scene_800 --size 800 --n_train 100 --n_test 4 --workers 16

The output is the blender layout ``train.py --dataset_name blender --datadir FOLDER`` reads
(and the original TensoRF too), the same files ``--dataset_name demo`` generates, into a new or
empty folder or one holding a scene it generated (any other folder is refused). This script
never imports Jittor, so it can run beside Jittor's first compile: the scene modules are
numpy-only and are loaded without ``tensorf_jt/__init__`` (which configures and imports Jittor).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _scene_module():
    """``tensorf_jt.dataLoader.demo_scene`` with its packages' ``__init__`` files skipped."""
    packages = (("tensorf_jt", ROOT / "tensorf_jt"), ("tensorf_jt.dataLoader", ROOT / "tensorf_jt" / "dataLoader"))
    for name, folder in packages:
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [str(folder)]
            sys.modules[name] = package
    from tensorf_jt.dataLoader import demo_scene
    return demo_scene


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="folder to write the scene into")
    parser.add_argument("--size", type=int, default=100, help="image width and height in pixels")
    parser.add_argument("--n_train", type=int, default=60)
    parser.add_argument("--n_val", type=int, default=4)
    parser.add_argument("--n_test", type=int, default=8)
    parser.add_argument("--supersampling", type=int, default=3, help="anti-aliasing: s x s rays per pixel")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="rendering processes")
    args = parser.parse_args(argv)
    if min(args.size, args.n_train, args.n_test, args.supersampling, args.workers) <= 0 or args.n_val < 0:
        parser.error("sizes, view counts (n_val may be 0), supersampling and workers must be positive")

    demo_scene = _scene_module()
    spec = demo_scene.DemoSceneSpec(image_size=args.size, n_train=args.n_train, n_val=args.n_val,
                                    n_test=args.n_test, supersampling=args.supersampling)
    if demo_scene.is_generated(args.out, spec):
        print(f"{args.out}: already generated with these settings")
        return 0
    from tensorf_jt.errors import TensorfError

    started = time.time()
    try:
        demo_scene.generate(args.out, spec, workers=args.workers)
    except TensorfError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    views = args.n_train + args.n_val + args.n_test
    print(f"{args.out}: {views} views of {args.size}x{args.size} in {time.time() - started:.1f} s "
          f"({args.workers} processes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
