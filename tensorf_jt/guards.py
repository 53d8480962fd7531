"""What keeps a long run safe: the NaN guard's checks, out-of-memory messages, and signals.

A non-finite loss sends training back to its last good snapshot (``Trainer._recover``), and
repeated failures end it with ``TrainingDiverged``; Jittor's out-of-memory errors become an
``OutOfMemory`` naming the flags that need less memory; SIGINT / SIGTERM ask the loop to stop
after the current step so that it can save.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable, Iterator

import jittor as jt

from tensorf_jt.errors import TensorfError

# A non-finite loss this many times in a row (without getting past the iteration that failed)
# stops training.
MAX_NONFINITE_IN_A_ROW = 3
# How often the NaN guard's in-memory snapshot is taken when --save_every is 0.
SNAPSHOT_EVERY_WITHOUT_SAVES = 1000
# Substrings (lower case) of the errors Jittor, CUDA and the C++ runtime raise when memory runs out.
OUT_OF_MEMORY_MARKERS = ("out of memory", "unable to alloc", "cudaerrormemoryallocation", "alloc_failed",
                         "bad_alloc")


class TrainingDiverged(TensorfError):
    """The loss stayed non-finite after going back to the last good state with lower learning rates."""


class OutOfMemory(TensorfError):
    """Jittor could not allocate memory; the message names the flags that make it need less."""


def nonfinite_parameters(model) -> list[str]:
    """Names of the model's tensors holding a NaN or an infinity (synchronises; not for every step)."""
    finite = {name: jt.isfinite(var).all() for name, var in model.state_dict().items()}
    jt.sync(list(finite.values()))
    return [name for name, flag in finite.items() if not flag.item()]


def raise_if_out_of_memory(err: BaseException, args, doing: str) -> None:
    """Turn Jittor's out-of-memory error into an ``OutOfMemory`` naming the flags that need less memory."""
    if not isinstance(err, (MemoryError, RuntimeError)):
        return
    lines = [line.strip() for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
    cause = next((line for line in lines if any(m in line.lower() for m in OUT_OF_MEMORY_MARKERS)), None)
    if cause is None and not isinstance(err, MemoryError):
        return
    where = "GPU" if jt.flags.use_cuda else "host"
    raise OutOfMemory(
        f"Out of {where} memory while {doing} ({(cause or lines[0])[:200]}). Make it need less: a smaller "
        f"--batch_size (rays per training step, now {args.batch_size}), --chunk_size (rays rendered at once, "
        f"now {args.chunk_size}) or --N_voxel_final (the final grid, now {args.N_voxel_final}).") from None




@contextlib.contextmanager
def stop_requests(on_signal: Callable[[int], None]) -> Iterator[None]:
    """While active, SIGINT and SIGTERM call ``on_signal(signum)`` instead of interrupting;
    ``on_signal`` raises KeyboardInterrupt to stop at once. A no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda signum, _frame: on_signal(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


@contextlib.contextmanager
def out_of_memory_hint(args, doing: str) -> Iterator[None]:
    """Re-raise Jittor's out-of-memory errors inside the block as ``OutOfMemory`` (see above)."""
    try:
        yield
    except (RuntimeError, MemoryError) as err:
        raise_if_out_of_memory(err, args, doing)
        raise
