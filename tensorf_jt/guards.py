"""What keeps a long run safe: the NaN guard's checks, Jittor's failures explained, and signals.

A non-finite loss sends training back to its last good snapshot (``Trainer._recover``), and
repeated failures end it with ``TrainingDiverged``; Jittor's errors become a
``KernelCompileFailed`` (an operator did not compile: which one, and where the full report is)
or an ``OutOfMemory`` naming the flags that need less memory (only for a real allocation
failure); SIGINT / SIGTERM ask the loop to stop after the current step so that it can save.
"""
from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from typing import Callable, Iterator

import numpy as np
import jittor as jt

from tensorf_jt.errors import TensorfError
from tensorf_jt.jittor_errors import compile_failure, out_of_memory_cause

# A non-finite loss this many times in a row (without getting past the iteration that failed)
# stops training.
MAX_NONFINITE_IN_A_ROW = 3
# How often the NaN guard's in-memory snapshot is taken when --save_every is 0.
SNAPSHOT_EVERY_WITHOUT_SAVES = 1000


class TrainingDiverged(TensorfError):
    """The loss stayed non-finite after going back to the last good state with lower learning rates."""


class OutOfMemory(TensorfError):
    """Jittor could not allocate memory; the message names the flags that make it need less."""


class KernelCompileFailed(TensorfError):
    """Jittor could not compile an operator; the message names it and where the full report is."""


def nonfinite_parameters(model) -> list[str]:
    """Names of the model's tensors holding a NaN or an infinity (fetches them; not for every step).

    Checked with numpy on the host, not with ``jt.isfinite``: Jittor generates that operator's
    source through a Python hook (``@python.jittor.auto_parallel``) which its parallel op
    compiler calls from several threads without holding the GIL. Compiling the checks of all
    tensors at once crashed the process in those threads (``Caught segfault ... thread_name:
    'C1'``) at every run's first snapshot on a GPU, and now and then on the CPU. The copy to the
    host costs milliseconds, once per snapshot.
    """
    state = model.state_dict()
    jt.sync(list(state.values()))
    return [name for name, var in state.items() if not np.isfinite(var.numpy()).all()]


def save_error_report(args, text: str) -> str:
    """Keep Jittor's full report of a fatal error next to the runs (else in the temp folder); its path."""
    name = f"{getattr(args, 'expname', None) or 'tensorf'}_jittor_error.log"
    basedir = getattr(args, "basedir", None)
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


def raise_if_compile_failed(err: BaseException, args) -> None:
    """Turn Jittor's report of an operator that did not compile into a ``KernelCompileFailed``."""
    failure = compile_failure(str(err)) if isinstance(err, RuntimeError) else None
    if failure is None:
        return
    path = save_error_report(args, str(err))
    where = f"Jittor's full report, with the compiler command, is in '{path}'" if path else "Jittor's report is above"
    raise KernelCompileFailed(
        f"{failure.summary()} {where}; rerun with --verbose to see every operator Jittor compiles and the "
        "compiler's own output. Nothing is wrong with the data or the flags: check that the compiler "
        f"works ({'nvcc_path' if failure.cuda else 'cc_path'} is the one Jittor runs).") from None


def raise_if_out_of_memory(err: BaseException, args, doing: str) -> None:
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
        f"--batch_size (rays per training step, now {args.batch_size}), --chunk_size (rays rendered at once, "
        f"now {args.chunk_size}) or --N_voxel_final (the final grid, now {args.N_voxel_final}).") from None


def explain_jittor_error(err: BaseException, args, doing: str) -> None:
    """Raise the actionable error for a failure Jittor reported (compile failure first), if there is one."""
    raise_if_compile_failed(err, args)
    raise_if_out_of_memory(err, args, doing)


@contextlib.contextmanager
def stop_requests(on_signal: Callable[[int], None]) -> Iterator[None]:
    """While active, SIGINT and SIGTERM call ``on_signal(signum)`` instead of interrupting;
    ``on_signal`` raises KeyboardInterrupt to stop at once. A no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda signum, _frame: on_signal(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        # Let a signal restart the system call it lands in: Jittor's C++ does not retry, and a
        # SIGTERM arriving while it waits for its compile-cache lock would fail the run there.
        signal.siginterrupt(sig, False)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


@contextlib.contextmanager
def jittor_error_hints(args, doing: str) -> Iterator[None]:
    """Re-raise Jittor's compile failures and out-of-memory errors inside the block as the
    actionable errors above; anything else passes unchanged."""
    try:
        yield
    except (RuntimeError, MemoryError) as err:
        explain_jittor_error(err, args, doing)
        raise
