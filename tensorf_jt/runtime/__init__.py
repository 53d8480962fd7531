"""How the process runs: MPI ranks, Jittor's memory, seeding, signals, Jittor's errors made
actionable, the per-stage profiler, and ``setup()``: the process settings the command-line tools
train and render with.

``import tensorf_jt`` changes only what Jittor needs to import on the machine
(``tensorf_jt.bootstrap``). ``setup()`` goes further, for the whole process: it switches Jittor
to the GPU when a CUDA driver answers, and routes the compiles of new CPU kernels through a
precompiled header (``kernel_headers``) and a direct build (``kernel_compile``), which make a
new kernel compile several times faster with the same machine code. A script of your own
gets the same with one line after its imports::

    import tensorf_jt.runtime
    tensorf_jt.runtime.setup()

Jittor's cache holds one build of each kernel and builds it again whenever the build command
differs, so a script without ``setup()`` and the command-line tools rebuild each other's kernels
every time they take turns.

``TENSORF_JT_CPU=1`` keeps Jittor on the CPU; ``TENSORF_JT_PCH=0`` and
``TENSORF_JT_DIRECT_COMPILE=0`` leave Jittor's own kernel build in place.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RuntimeSetup:
    """What ``setup()`` switched on: CUDA, and the files it routes kernel builds through (None: off)."""

    cuda: bool
    precompiled_header: Path | None
    kernel_launcher: Path | None


_DONE: RuntimeSetup | None = None


def setup() -> RuntimeSetup:
    """Set the process up as the CLIs run (see the module's docstring); calling it again does nothing."""
    global _DONE
    if _DONE is None:
        import jittor as jt

        from tensorf_jt.bootstrap import enable_cuda_if_available
        from tensorf_jt.runtime import kernel_compile, kernel_headers

        _DONE = RuntimeSetup(cuda=enable_cuda_if_available(jt), precompiled_header=kernel_headers.enable(jt),
                             kernel_launcher=kernel_compile.enable(jt))
    return _DONE
