"""The fused kernels of the hot path, and the names of the two implementations a model can use.

``fused`` (the default) runs the field lookups, ray marching and compositing in hand-written
``jt.code`` kernels (C++/OpenMP on the CPU, CUDA on the GPU). ``reference`` runs the same math
as readable Jittor operations, as the reference TensoRF writes it; it is kept as the
specification the kernels are tested against. Both produce the same numbers. The choice is a
model's own setting (``TensoRFModel.kernels``, which picks the field's lookups and the
render route), saved in its checkpoint.
"""
from __future__ import annotations

from tensorf_jt.errors import ConfigError

KERNELS = ("fused", "reference")


def check_kernels(name: str) -> str:
    """``name`` if it names an implementation; the one place the choice is validated."""
    if name not in KERNELS:
        raise ConfigError(f"kernels '{name}' is not supported; choose one of {', '.join(KERNELS)}.")
    return name
