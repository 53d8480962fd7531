"""SIGINT and SIGTERM during training: ask the loop to stop after the current step, so that it can save."""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable, Iterator


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
