"""Command-line entry points: thin wrappers that parse flags and call the package."""
from __future__ import annotations

import sys
from typing import Callable

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
