"""Which implementation evaluates the hot path: fused custom kernels or the reference path.

``fused`` (the default) runs the field lookups, ray marching and compositing in hand-written
``jt.code`` kernels (C++/OpenMP on the CPU, CUDA on the GPU). ``reference`` runs the same math
as readable Jittor operations, as the reference TensoRF writes it; it is kept as the
specification the kernels are tested against. Both produce the same numbers.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from tensorf_jt.errors import ConfigError

KERNELS = ("fused", "reference")
_active = "fused"


def set_kernels(name: str) -> None:
    """Select the implementation for everything rendered from now on."""
    global _active
    if name not in KERNELS:
        raise ConfigError(f"kernels '{name}' is not supported; choose one of {', '.join(KERNELS)}.")
    _active = name


def active_kernels() -> str:
    return _active


def fused_enabled() -> bool:
    return _active == "fused"


@contextlib.contextmanager
def use_kernels(name: str) -> Iterator[None]:
    """Temporarily select an implementation (tests compare the two this way)."""
    previous = _active
    set_kernels(name)
    try:
        yield
    finally:
        set_kernels(previous)
