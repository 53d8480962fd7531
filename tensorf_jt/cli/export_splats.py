"""``python -m tensorf_jt.cli.export_splats --ckpt CKPT --out FILE.ply``: a checkpoint as 3D Gaussian
splats in the reference 3DGS ``.ply`` layout, which splat viewers draw in real time.

The splats are placed where the model's surfaces are, seen from its training cameras, then
optimised to render what the checkpoint renders (``tensorf_jt.splats.export``). They are in the
dataset's world; a renderer composites them over the scene's background. ``--out`` defaults to
``{checkpoint without .th}_splats.ply`` next to the checkpoint; a file there that this command
did not write is refused unless ``--overwrite``.
"""
from __future__ import annotations

import argparse
import os
import sys

from tensorf_jt.cli import exit_process, run_cli
from tensorf_jt.errors import ConfigError


def default_out(ckpt_path: str) -> str:
    stem, extension = os.path.splitext(ckpt_path)
    return f"{stem if extension == '.th' else ckpt_path}_splats.ply"


def _parser() -> argparse.ArgumentParser:
    from tensorf_jt.splats.export import ExportOptions

    defaults = ExportOptions()
    parser = argparse.ArgumentParser(prog="python -m tensorf_jt.cli.export_splats",
                                     description=__doc__.splitlines()[0].strip("`"))
    parser.add_argument("--ckpt", required=True, help="the checkpoint to export (ours or the PyTorch TensoRF's)")
    parser.add_argument("--out", default=None, help="the splat file (.ply); default: CKPT_splats.ply beside it")
    parser.add_argument("--sh_degree", type=int, default=defaults.sh_degree,
                        help="spherical-harmonic degree of the colours, 0 to 3")
    parser.add_argument("--max_splats", type=int, default=defaults.max_splats, help="the most splats placed")
    parser.add_argument("--iterations", type=int, default=defaults.iterations,
                        help="refinement steps against the checkpoint's renders (0: the placed splats as they are)")
    parser.add_argument("--datadir", default=None, help="the scene, where the checkpoint does not record it")
    parser.add_argument("--dataset_name", default=None, help="its format, where the checkpoint does not record it")
    parser.add_argument("--kernels", default="fused", choices=("fused", "reference"),
                        help="the rasteriser: fused kernels or the plain-Jittor reference")
    parser.add_argument("--seed", type=int, default=0, help="seeds the order of the refinement's cameras")
    parser.add_argument("--overwrite", action="store_true", help="replace a file at --out that this command did not write")
    return parser


def _main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if not 0 <= args.sh_degree <= 3:
        raise ConfigError(f"--sh_degree must be 0 to 3, got {args.sh_degree}.")
    if args.max_splats < 1:
        raise ConfigError(f"--max_splats must be positive, got {args.max_splats}.")
    if args.iterations < 0:
        raise ConfigError(f"--iterations must be 0 or more, got {args.iterations}.")
    out = args.out if args.out is not None else default_out(args.ckpt)
    if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        raise ConfigError(f"The folder of --out '{out}' does not exist; create it first.")

    from tensorf_jt.cli.render import training_scene
    from tensorf_jt.config import parse_run_config
    from tensorf_jt.dataLoader import load_split, prepare_dataset
    from tensorf_jt.formats.checkpoint import load_checkpoint
    from tensorf_jt.formats.ownership import ply_is_ours, refuse_foreign_file, same_file
    from tensorf_jt.runtime import setup
    from tensorf_jt.splats.export import ExportOptions, export_splats

    if same_file(args.ckpt, out):
        raise ConfigError("--out must differ from --ckpt: the export would replace the checkpoint it reads.")
    if not args.overwrite:
        refuse_foreign_file(out, ply_is_ours, "Give --out a new path, or pass --overwrite to replace it.")
    flags = ["--ckpt", args.ckpt] + [item for name in ("datadir", "dataset_name") if getattr(args, name)
                                     for item in (f"--{name}", getattr(args, name))]
    config, explicit = parse_run_config(flags)
    setup()
    model, ckpt = load_checkpoint(args.ckpt)
    config = training_scene(config, ckpt, explicit)
    prepare_dataset(config.data)
    dataset = load_split(config.data, "train", is_stack=True)
    white_bg = (dataset.white_bg or config.data.white_bkgd) and model.sampler.takes_background
    options = ExportOptions(args.sh_degree, args.max_splats, args.iterations, args.seed, args.kernels)
    report = export_splats(model, dataset, white_bg, out, options)
    refined = (f"refined {report.refinement.iterations} steps in {report.refinement.seconds:.0f} s, "
               f"{report.refinement.pruned:,} faint ones pruned" if report.refinement else "not refined")
    print(f"wrote {out}: {report.splats:,} splats ({report.file_bytes / 1e6:.1f} MB), placed {report.placed:,} from "
          f"{report.views} views in {report.place_seconds:.0f} s, {refined}; background "
          f"{'white' if white_bg else 'black'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cli(lambda: _main(sys.argv[1:] if argv is None else list(argv)))


def entry_point() -> None:
    """The ``tensorf-export-splats`` command: ``main``, then leave the process."""
    exit_process(main)


if __name__ == "__main__":
    entry_point()
