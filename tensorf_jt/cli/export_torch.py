"""``python -m tensorf_jt.cli.export_torch --ckpt ours.th --out theirs.th``: a checkpoint the PyTorch TensoRF loads.

Writes what the reference's ``TensorBase.save`` writes (``torch.save`` format, no torch
needed): ``kwargs``, ``state_dict`` and the packed alpha mask. The reference's ``train.py``
loads it with ``--ckpt theirs.th --model_name <the class printed here>``; like its own
checkpoints, on torch >= 2.6 that needs ``torch.load(..., weights_only=False)`` or numpy's
array rebuilders allow-listed (``torch.serialization.add_safe_globals``), since the alpha
mask is a numpy array.
"""
from __future__ import annotations

import argparse
import os
import sys

from tensorf_jt.cli import exit_process, run_cli
from tensorf_jt.errors import ConfigError
from tensorf_jt.formats.ownership import refuse_foreign_file, same_file


def export_reference_checkpoint(ckpt_path: str, out_path: str, overwrite: bool = False) -> str:
    """Convert the checkpoint at ``ckpt_path`` (ours, or the reference's) to the reference's
    format at ``out_path``; returns the model class the reference must be told to build.

    An earlier export is replaced; another file at ``out_path`` only with ``overwrite``, and
    never the checkpoint read."""
    from tensorf_jt.formats.checkpoint import load_checkpoint
    from tensorf_jt.formats.reference_checkpoint import to_reference
    from tensorf_jt.formats.torch_format import save_torch_checkpoint, written_by_us

    if same_file(ckpt_path, out_path):
        raise ConfigError("--out must differ from --ckpt: the export would replace the checkpoint it reads.")
    if not os.path.isdir(os.path.dirname(os.path.abspath(out_path))):
        raise ConfigError(f"The folder of --out '{out_path}' does not exist; create it first.")
    if not overwrite:
        refuse_foreign_file(out_path, written_by_us, "Give --out a new path, or pass --overwrite to replace it.")
    model, _ = load_checkpoint(ckpt_path)
    save_torch_checkpoint(to_reference(model), out_path)
    return model.model_name


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tensorf_jt.cli.export_torch", description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", required=True, help="checkpoint to convert (written by train.py)")
    parser.add_argument("--out", required=True, help="where to write the PyTorch TensoRF checkpoint")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a file at --out that this command did not write (its own exports are "
                             "replaced without it)")
    args = parser.parse_args(argv)
    model_name = export_reference_checkpoint(args.ckpt, args.out, args.overwrite)
    print(f"wrote {args.out}; the reference loads it with --ckpt {args.out} --model_name {model_name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cli(lambda: _main(sys.argv[1:] if argv is None else list(argv)))


def entry_point() -> None:
    """The ``tensorf-export-torch`` command: ``main``, then leave the process."""
    exit_process(main)


if __name__ == "__main__":
    entry_point()
