#!/usr/bin/env python3
"""Make the installed Jittor 1.3.11 run its kernel tuners one compile thread at a time.

Jittor compiles a batch of new kernels on several worker threads. For a fused kernel that
computes a matrix product (``jt.matmul``, ``nn.Linear``) or a convolution, its matmul and conv
tuners swap in an MKL / cuBLAS / cuDNN operator: they create the operator and rewire graph
edges (``VarRelayManager::add_relay_group``), with no lock. A training step's first compile
holds several such products that share a variable (a layer's forward product and its input
gradient both read the weight), so two workers can edit one variable's edge list at once.
That race, read from Jittor's source and not reproduced, fits a failure seen once at random
on a cold kernel cache, where a fused product's operators had lost their inputs: ``Compile
fused operator ... [broadcast_to (no inputs), broadcast_to (no inputs), multiply, sum] ...
Check failed: member.size() <= var_num``, after which every sync fails the same way.

This is an opt-in edit of the installed Jittor; nothing runs it by default. Jittor's own switch
``use_parallel_op_compiler=0`` (an environment variable) also runs the tuners one at a time,
but compiles every kernel serially: 1.56x the time of a cold first training step on 2 cores
(docs/BENCHMARKS.md). The patch holds one mutex around the tuners in ``TunerManager::tune``
only; the compilers still run in parallel, and every kernel comes out as before. Jittor
rebuilds that one file into its core at its next import (seconds); a reinstall of Jittor drops
the edit. It changes nothing when the mutex is already there, and refuses a Jittor whose source
does not read as 1.3.11's.

    python tools/patch_jittor.py [--check | --revert]
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

MARKER = "tensorf_jt: tuners one thread at a time"
TUNER_SOURCE = Path("src", "opt", "tuner_manager.cc")
INCLUDE_ANCHOR = '#include "opt/tuner/conv_tuner.h"\n'
TUNERS = ("    run_tuner<ReorderTuner>(&pm);\n"
          "    run_tuner<BroadcastTuner>(&pm);\n"
          "    run_tuner<ReduceTuner>(&pm);\n"
          "    run_tuner<MatmulTuner>(&pm);\n"
          "    run_tuner<ConvTuner>(&pm);\n")
LOCKED_TUNERS = ("    {\n"
                 f"        // {MARKER}: the matmul and conv tuners create operators and\n"
                 "        // rewire graph edges, and the parallel op compiler calls tune() from\n"
                 "        // several threads.\n"
                 "        static std::mutex tuner_mutex;\n"
                 "        std::lock_guard<std::mutex> tuner_lock(tuner_mutex);\n"
                 + "".join("    " + line + "\n" for line in TUNERS.splitlines())
                 + "    }\n")


class PatchError(Exception):
    """The installed Jittor cannot be patched; the message says why and what to do."""


def jittor_source(site: Path | None = None) -> Path:
    """``tuner_manager.cc`` of the Jittor installed for this interpreter (not imported), or under
    ``site`` (a site-packages folder)."""
    if site is None:
        spec = importlib.util.find_spec("jittor")
        if spec is None or spec.origin is None:
            raise PatchError("Jittor is not installed for this Python; install it first (make install does).")
        package = Path(spec.origin).parent
    else:
        package = site / "jittor"
    source = package / TUNER_SOURCE
    if not source.is_file():
        raise PatchError(f"'{source}' does not exist: this Jittor was not installed from its source archive, "
                         "which is how pip installs Jittor 1.3.11.")
    return source


def is_patched(text: str) -> bool:
    return MARKER in text


def patched_text(text: str) -> str:
    """``text`` of ``tuner_manager.cc`` with the tuners under one mutex."""
    if is_patched(text):
        return text
    if text.count(TUNERS) != 1 or text.count(INCLUDE_ANCHOR) != 1:
        raise PatchError("tuner_manager.cc does not read as Jittor 1.3.11's; the patch is written for that "
                         "version (pyproject.toml pins it). Install jittor==1.3.11, or leave the file as it is.")
    text = text.replace(INCLUDE_ANCHOR, INCLUDE_ANCHOR + "#include <mutex>\n")
    return text.replace(TUNERS, LOCKED_TUNERS)


def original_text(text: str) -> str:
    """``text`` of a patched ``tuner_manager.cc`` as Jittor ships it."""
    if not is_patched(text):
        return text
    if text.count(LOCKED_TUNERS) != 1:
        raise PatchError("tuner_manager.cc holds the patch's marker but not its code; reinstall jittor==1.3.11.")
    return text.replace(LOCKED_TUNERS, TUNERS).replace(INCLUDE_ANCHOR + "#include <mutex>\n", INCLUDE_ANCHOR)


def apply(site: Path | None = None, revert: bool = False) -> tuple[Path, bool]:
    """Patch the installed Jittor (or, with ``revert``, restore its source); return the file and
    whether it changed. Jittor rebuilds the changed file into its core at its next import."""
    source = jittor_source(site)
    text = source.read_text(encoding="utf-8")
    new_text = original_text(text) if revert else patched_text(text)
    if new_text == text:
        return source, False
    scratch = source.with_suffix(".cc.tensorf_jt_tmp")
    scratch.write_text(new_text, encoding="utf-8")
    scratch.replace(source)
    return source, True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true", help="only say whether the installed Jittor is patched")
    action.add_argument("--revert", action="store_true", help="restore the source as Jittor ships it")
    parser.add_argument("--site", type=Path, default=None, help="site-packages folder holding jittor/")
    args = parser.parse_args(argv)
    try:
        if args.check:
            source = jittor_source(args.site)
            patched = is_patched(source.read_text(encoding="utf-8"))
            print(f"{source}: {'patched' if patched else 'not patched'}")
            return 0 if patched else 1
        source, changed = apply(args.site, args.revert)
    except (PatchError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    done, unchanged = ("reverted", "not patched") if args.revert else ("patched", "already patched")
    print(f"{source}: {done if changed else unchanged}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
