"""Jittor's failures turned into errors a user can act on.

A ``RuntimeError`` from Jittor that reports an operator compile failure becomes a
``KernelCompileFailed`` (which operator, where Jittor's full report is kept); one that reports
a failed allocation becomes an ``OutOfMemory`` naming the flags that make a run need less.
Anything else passes unchanged (``jittor_errors`` reads the reports).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from typing import TYPE_CHECKING, Iterator

import jittor as jt

from tensorf_jt.errors import TensorfError
from tensorf_jt.runtime.jittor_errors import compile_failure, out_of_memory_cause

if TYPE_CHECKING:
    from tensorf_jt.config import RunConfig


class OutOfMemory(TensorfError):
    """Jittor could not allocate memory; the message names the flags that make it need less."""


class KernelCompileFailed(TensorfError):
    """Jittor could not compile an operator; the message names it and where the full report is."""


def save_error_report(config: RunConfig | None, text: str) -> str:
    """Keep Jittor's full report of a fatal error next to the runs (else in the temp folder); its path."""
    name = f"{(config and config.output.expname) or 'tensorf'}_jittor_error.log"
    basedir = config.output.basedir if config else None
    for folder in ([basedir] if basedir else []) + [tempfile.gettempdir()]:
        try:
            os.makedirs(folder, exist_ok=True)
            path = os.path.abspath(os.path.join(folder, name))
            with open(path, "w", encoding="utf-8") as report:
                report.write(text)
            return path
        except OSError:
            continue
    return ""


def raise_if_compile_failed(err: BaseException, config: RunConfig | None) -> None:
    """Turn Jittor's report of an operator that did not compile into a ``KernelCompileFailed``."""
    failure = compile_failure(str(err)) if isinstance(err, RuntimeError) else None
    if failure is None:
        return
    path = save_error_report(config, str(err))
    report = "Jittor's full report" + ("" if failure.graph_corrupted else ", with the compiler command,")
    where = f"{report} is in '{path}'" if path else "Jittor's report is above"
    if failure.graph_corrupted:
        raise KernelCompileFailed(
            f"{failure.summary()} {where}. This is most likely a race between the kernel tuners of Jittor 1.3.11, "
            "not a problem with the data, the flags or the compiler: start again (the kernels compiled so far are "
            "kept), with use_parallel_op_compiler=0 in the environment to compile one kernel at a time, or run "
            "`python tools/patch_jittor.py` once in this checkout to keep the tuners apart for good.") from None
    raise KernelCompileFailed(
        f"{failure.summary()} {where}; rerun with --verbose to see every operator Jittor compiles and the "
        "compiler's own output. Nothing is wrong with the data or the flags: check that the compiler "
        f"works ({'nvcc_path' if failure.cuda else 'cc_path'} is the one Jittor runs).") from None


def raise_if_out_of_memory(err: BaseException, config: RunConfig, doing: str) -> None:
    """Turn Jittor's out-of-memory error into an ``OutOfMemory`` naming the flags that need less memory."""
    if not isinstance(err, (MemoryError, RuntimeError)):
        return
    cause = out_of_memory_cause(str(err)) if isinstance(err, RuntimeError) else None
    if cause is None and not isinstance(err, MemoryError):
        return
    where = "GPU" if jt.flags.use_cuda else "host"
    lines = [line.strip() for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
    raise OutOfMemory(
        f"Out of {where} memory while {doing} ({(cause or lines[0])[:200]}). Make it need less: a smaller "
        f"--batch_size (rays per training step, now {config.schedule.batch_size}), --chunk_size (rays rendered at "
        f"once, now {config.render.chunk_size}) or --N_voxel_final (the final grid, now "
        f"{config.schedule.N_voxel_final}).") from None


def explain_jittor_error(err: BaseException, config: RunConfig, doing: str) -> None:
    """Raise the actionable error for a failure Jittor reported (compile failure first), if there is one."""
    raise_if_compile_failed(err, config)
    raise_if_out_of_memory(err, config, doing)


@contextlib.contextmanager
def jittor_error_hints(config: RunConfig, doing: str) -> Iterator[None]:
    """Re-raise Jittor's compile failures and out-of-memory errors inside the block as the
    actionable errors above; anything else passes unchanged."""
    try:
        yield
    except (RuntimeError, MemoryError) as err:
        explain_jittor_error(err, config, doing)
        raise
