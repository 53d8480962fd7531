"""Loading the C++/CUDA kernel sources that ship in ``csrc/``.

The kernels are plain C++ (CPU, OpenMP) and CUDA functions operating on raw pointers, kept in
header files so that they can also be compiled outside Jittor (the CUDA test does that with
nvcc). Jittor's ``jt.code`` receives their text as its header, with local includes inlined,
and a few lines of glue that pass it the Var pointers and shapes.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import jittor as jt

CSRC = Path(__file__).resolve().parent / "csrc"
_LOCAL_INCLUDE = re.compile(r'^#include "([^"]+)"\s*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^#pragma once\s*$", re.MULTILINE)


@functools.lru_cache(maxsize=None)
def kernel_source(name: str) -> str:
    """Text of ``csrc/name`` with its local ``#include "..."`` lines replaced by the files."""
    seen: set[str] = set()

    def expand(file_name: str) -> str:
        if file_name in seen:
            return ""
        seen.add(file_name)
        text = _PRAGMA_ONCE.sub("", (CSRC / file_name).read_text())
        return _LOCAL_INCLUDE.sub(lambda match: expand(match.group(1)), text)

    return expand(name)


def device_code(shapes, dtypes, inputs: list, kernel: str, glue: str, data: dict | None = None):
    """``jt.code`` running ``csrc/{kernel}_cpu.h`` or ``csrc/{kernel}_cuda.cuh``.

    ``glue`` is the C++ that calls into the kernel header, written once with ``{device}``
    where the function names differ (``..._cpu`` / ``..._cuda``).
    """
    return jt.code(shapes, dtypes, inputs,
                   cpu_header=kernel_source(f"{kernel}_cpu.h"), cpu_src=glue.replace("{device}", "cpu"),
                   cuda_header=kernel_source(f"{kernel}_cuda.cuh"), cuda_src=glue.replace("{device}", "cuda"),
                   data=data or {})
