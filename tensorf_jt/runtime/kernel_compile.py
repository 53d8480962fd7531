"""Build Jittor's CPU kernels with one compiler call when its assembly pass has nothing to do.

On Linux Jittor builds every new CPU kernel through its assembly tuner
(``jittor/utils/asm_tuner.py``, launched with the interpreter named by ``jt.flags.python_path``):
a Python process that compiles the kernel to assembly with ``-g``, rewrites the instructions that
``//@begin replace`` markers in the kernel source ask for, and assembles the result. Most kernels
carry no marker, and for them the detour only costs time: a Python start and debug information
that makes the assembly many times larger than the code. ``enable`` points ``python_path`` (which Jittor
uses for nothing but launching its build helpers) at a small shell script that compiles such a
kernel source straight to its shared object with the same flags, and hands every other command to
the real interpreter unchanged. The compiled code is the same (a test compares the disassembly).
Where binutils' gold linker is installed the launcher links with it (faster than the default
linker, which a kernel whose gold link fails still gets); only the layout of the
shared object differs, and the pinned training results stay bit for bit.

The script lives in Jittor's cache, named by a digest of its text. ``TENSORF_JT_DIRECT_COMPILE=0``
leaves Jittor's own route in place.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

SWITCH_ENV = "TENSORF_JT_DIRECT_COMPILE"
# The marker Jittor's optimisation passes write into a kernel source for the assembly tuner.
TUNER_MARKER = "@begin"
GOLD = "-fuse-ld=gold"

_SCRIPT = """#!/bin/sh
# Jittor's python_path, written by tensorf_jt/runtime/kernel_compile.py: a CPU kernel whose
# source has no assembly-tuner marker is compiled straight to its shared object; any other
# command goes to the Python interpreter below.
python={python}
case "$1" in
*/utils/asm_tuner.py) ;;
*) exec "$python" "$@" ;;
esac
case "$2" in
--cc_path=*) compiler="${{2#--cc_path=}}" ;;
*) exec "$python" "$@" ;;
esac
eval "output=\\${{$#}}"
case "$3:$output" in
*_op.cc:*_op.so) ;;
*) exec "$python" "$@" ;;
esac
if grep -q -F '{marker}' "$3"; then
    exec "$python" "$@"
fi
shift 2
link={link}
if [ -n "$link" ] && "$compiler" "$@" "$link" 2>/dev/null; then
    exit 0
fi
exec "$compiler" "$@"
"""


def _quoted(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


def script_text(python: str, link_flag: str = "") -> str:
    """The launcher's text, falling back to ``python`` for everything it does not compile; a
    kernel is linked with ``link_flag`` first when one is given."""
    return _SCRIPT.format(python=_quoted(python), marker=TUNER_MARKER, link=_quoted(link_flag))


def write_script(folder: Path, python: str, link_flag: str = "") -> Path:
    """Write the launcher into ``folder`` (atomically: MPI ranks may write at once); return it."""
    text = script_text(python, link_flag)
    script = folder / f"kernel_compile_{hashlib.sha1(text.encode()).hexdigest()[:16]}.sh"
    if script.is_file() and script.read_text() == text and os.access(script, os.X_OK):
        return script
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp") as scratch:
        scratch.write(text)
    os.chmod(scratch.name, 0o755)
    os.replace(scratch.name, script)
    return script


def plain_python(python: str) -> str:
    """``python`` spelled ``python`` when that name in its folder is the same interpreter.

    Jittor names the interpreter as the process was started (``python3`` becomes ``python3.11``),
    and that name goes into the launcher's text, so into its path and every kernel's build
    command. Jittor keeps one build per kernel, rebuilt whenever the command differs: ``pytest``
    (``python3``) and ``python train.py`` would rebuild each other's kernels at every switch.
    """
    plain = Path(python).with_name("python")
    try:
        return str(plain) if plain.samefile(python) else python
    except OSError:
        return python


def enable(jt) -> Path | None:
    """Route Jittor's CPU kernel builds through the launcher; return its path, or None when it
    is switched off or Jittor would not use its assembly tuner here."""
    if os.environ.get(SWITCH_ENV, "1") in ("", "0") or not sys.platform.startswith("linux"):
        return None
    python = jt.flags.python_path
    if not python or Path(python).name.startswith("kernel_compile_"):
        return None
    link_flag = GOLD if shutil.which("ld.gold") else ""
    script = write_script(Path(jt.flags.cache_path) / "precompiled", plain_python(python), link_flag)
    jt.flags.python_path = str(script)
    return script
