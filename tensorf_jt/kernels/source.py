"""Loading the C++/CUDA kernel sources that ship in ``csrc/``, and calling them through ``jt.code``.

The kernels are plain C++ (CPU, OpenMP) and CUDA functions operating on raw pointers, kept in
header files so that they can also be compiled outside Jittor (the CUDA test does that with
nvcc). Jittor's ``jt.code`` receives their text as its header, with local includes inlined,
and a few lines of glue that pass the kernel its inputs and outputs.

Glue is written in one style: a ``string.Template`` (``$device`` is ``cpu`` or ``cuda``, other
``$names`` are filled from keyword arguments), in which every input and output is read by its
name -- ``rays_o_p`` for the data of input ``rays_o``, ``rays_o_shape0`` for its first
dimension -- through Jittor's ``@alias`` lines, which ``device_code`` writes.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path
from string import Template
from typing import Mapping, Sequence

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


Output = tuple[str, Sequence[int], str]  # (name, shape, dtype); a negative first size: at most that many rows


def device_code(outputs: Sequence[Output], inputs: Mapping[str, jt.Var], kernel: str, glue: str,
                data: dict | None = None, **values: object) -> list[jt.Var]:
    """``jt.code`` running ``csrc/{kernel}_cpu.h`` or ``csrc/{kernel}_cuda.cuh``; returns the outputs.

    ``glue`` (see the module's docstring) calls into the kernel header; ``values`` fill its
    ``$names`` besides ``$device``; ``data`` reaches the glue as Jittor's ``data["key"]``.
    """
    aliases = [f"@alias({name}, in{index})" for index, name in enumerate(inputs)]
    aliases += [f"@alias({name}, out{index})" for index, (name, _, _) in enumerate(outputs)]
    template = Template("\n".join(aliases) + "\n" + glue)
    return jt.code([shape for _, shape, _ in outputs], [dtype for _, _, dtype in outputs], list(inputs.values()),
                   cpu_header=kernel_source(f"{kernel}_cpu.h"), cpu_src=template.substitute(device="cpu", **values),
                   cuda_header=kernel_source(f"{kernel}_cuda.cuh"),
                   cuda_src=template.substitute(device="cuda", **values), data=data or {})
