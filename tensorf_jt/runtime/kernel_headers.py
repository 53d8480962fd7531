"""A precompiled header for Jittor's CPU kernels, so that each new kernel compiles faster.

Jittor compiles every new operator kernel with g++ when it first runs. Each kernel source is a
few dozen lines of generated code after ~75,000 lines of Jittor's own headers (``var.h``,
``op.h``, the operator headers), and parsing those headers is most of a kernel's compile time
(docs/BENCHMARKS.md has the figures). g++ can load the parsed headers from a precompiled
header (``.gch``) instead: Jittor's compiler flags gain ``-include <header>``, whose ``.gch`` holds the headers
that generated kernels include. The headers are guarded, so a kernel's own ``#include`` lines
then cost nothing; the machine code is the same (a test compares the disassembly).

The header and its ``.gch`` live in Jittor's cache, named by a digest of everything that must
match for g++ to accept the ``.gch`` (compiler, flags, Jittor's version and headers). Building
one takes a few seconds, once per cache. When g++ is not the compiler, the build fails or the
result would not be used, nothing changes. ``TENSORF_JT_PCH=0`` turns it off.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

SWITCH_ENV = "TENSORF_JT_PCH"
# Jittor writes these two definitions at the top of every CPU kernel before its includes, and
# its headers read them, so the precompiled headers are parsed with them too.
KERNEL_DEFINES = ("JIT", "JIT_cpu")
# The headers Jittor's generated CPU kernels include, most used first.
KERNEL_INCLUDES = (
    "<cmath>", "<algorithm>", "<assert.h>", "<limits>",
    '"var.h"', '"ops/op_register.h"', '"ops/broadcast_to_op.h"', '"ops/binary_op.h"',
    '"ops/array_op.h"', '"ops/unary_op.h"', '"misc/cpu_math.h"', '"fused_op.h"',
    '"ops/ternary_op.h"', '"ops/reindex_op.h"', '"executor.h"', '"ops/reduce_op.h"',
    '"misc/cuda_flags.h"', '"ops/getitem_op.h"', '"ops/code_op.h"', '"ops/setitem_op.h"',
    '"ops/index_op.h"',
)
# Flags of Jittor's kernel command that only concern linking.
_LINK_FLAG = re.compile(r'^(-l|-L|-Wl,|-shared$)')


def header_text() -> str:
    """The header every kernel gets included first."""
    lines = [f"#define {name} 1" for name in KERNEL_DEFINES]
    lines += [f"#include {include}" for include in KERNEL_INCLUDES]
    return "\n".join(lines) + "\n"


def compile_flags(cc_flags: str) -> list[str]:
    """Jittor's kernel flags without the linker's, as the kernel compiles see them.

    On Linux Jittor compiles each kernel to assembly with ``-g`` first (its assembly tuner), and
    g++ only uses a ``.gch`` made with the same debug setting.
    """
    tokens = [token.replace('"', "") for token in _split_flags(cc_flags)]
    return [token for token in tokens if not _LINK_FLAG.match(token)] + ["-g"]


def _split_flags(flags: str) -> list[str]:
    """Split a flag string on spaces outside double quotes (Jittor quotes its paths)."""
    return re.findall(r'(?:"[^"]*"|[^\s"])+', flags)


def _digest(jt, cc_path: str, flags: list[str]) -> str:
    source = Path(jt.flags.jittor_path) / "src"
    stamp = [cc_path, jt.__version__, header_text(), *flags]
    for include in KERNEL_INCLUDES:
        path = source / include.strip('"')
        if include.startswith('"') and path.is_file():
            stamp.append(f"{include}:{path.stat().st_mtime_ns}:{path.stat().st_size}")
    return hashlib.sha1("\n".join(stamp).encode()).hexdigest()[:16]


def _run(command: list[str]) -> bool:
    try:
        return subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=300).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def build(cc_path: str, flags: list[str], header: Path) -> bool:
    """Write ``header`` and its ``.gch`` (atomically: MPI ranks may build at once); check that
    g++ accepts the ``.gch`` for a kernel-like source; return whether it does."""
    header.parent.mkdir(parents=True, exist_ok=True)
    gch = header.with_name(header.name + ".gch")
    with tempfile.TemporaryDirectory(dir=header.parent) as scratch:
        scratch_header = Path(scratch) / header.name
        scratch_header.write_text(header_text())
        scratch_gch = Path(scratch) / gch.name
        if not _run([cc_path, "-x", "c++-header", str(scratch_header), *flags, "-o", str(scratch_gch)]):
            return False
        probe = Path(scratch) / "probe.cc"
        probe.write_text(header_text())
        if not _run([cc_path, str(probe), *flags, "-include", str(scratch_header),
                     "-Winvalid-pch", "-Werror=invalid-pch", "-S", "-o", os.devnull]):
            return False
        os.replace(scratch_header, header)
        os.replace(scratch_gch, gch)
    return True


def enable(jt) -> Path | None:
    """Make Jittor's CPU kernel compiles use the precompiled header; return its path, or None
    when it is switched off or cannot be used with this compiler."""
    if os.environ.get(SWITCH_ENV, "1") in ("", "0"):
        return None
    cc_path = jt.flags.cc_path
    if "g++" not in Path(cc_path).name or "-include" in jt.flags.cc_flags:
        return None
    flags = compile_flags(jt.flags.cc_flags)
    header = Path(jt.flags.cache_path) / "precompiled" / f"kernel_headers_{_digest(jt, cc_path, flags)}.h"
    gch = header.with_name(header.name + ".gch")
    if not (header.is_file() and gch.is_file()) and not build(cc_path, flags, header):
        return None
    jt.flags.cc_flags = f'{jt.flags.cc_flags} -include "{header}"'
    return header
