"""Command-line entry points: thin wrappers that parse flags and call the package."""
from __future__ import annotations

import os
import sys
import traceback
from typing import Callable, NoReturn

from tensorf_jt.errors import TensorfError


def run_cli(main: Callable[[], int | None]) -> int:
    """Run ``main``; turn our errors into a one-line message and exit status 2, no traceback."""
    try:
        return main() or 0
    except TensorfError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def exit_process(main: Callable[[], int]) -> NoReturn:
    """Run a CLI's ``main`` as the whole process and exit with its status.

    After a failure the process ends at once: Jittor's exit handlers (which wait for its
    compiler threads and the GPU) are skipped, since a fatal error may have left either
    stuck. What is on disk stays readable: checkpoints and states are written atomically, and
    the training log's CSV is flushed row by row (its JSON copy and plot are written only by
    a run that ends normally).
    An unexpected exception prints its traceback and exits with status 1.
    """
    try:
        status = main()
    except SystemExit as stop:
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
        status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # a bug: show where, then leave like any other failure
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    if status:
        os._exit(status)
    sys.exit(0)
