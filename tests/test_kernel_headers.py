"""The precompiled header for Jittor's kernels: used when g++ accepts it, same machine code."""
import shutil
import subprocess
from pathlib import Path

import jittor as jt
import pytest

from conftest import run_python
from tensorf_jt.runtime import kernel_headers


def test_kernel_flags_drop_the_linker_and_unquote_paths():
    flags = ('-std=c++14 -fPIC -lstdc++ -ldl -shared -I"/a b/src" -L"/lib dir" -Wl,-rpath,"/x" '
             '-l:"core".so -fopenmp -Ofast')
    assert kernel_headers.compile_flags(flags) == ["-std=c++14", "-fPIC", "-I/a b/src", "-fopenmp", "-Ofast", "-g"]


def test_the_header_defines_what_jittor_kernels_define_before_their_includes():
    text = kernel_headers.header_text()
    assert text.index("#define JIT 1") < text.index('#include "var.h"')
    assert "#define JIT_cpu 1" in text


def _kernel_source() -> Path:
    (jt.array([1.0, 2.0]) * 3.0 + 1.0).sync()
    sources = sorted(Path(jt.flags.cache_path, "jit").glob("*_op.cc"), key=lambda p: p.stat().st_size)
    assert sources, "Jittor compiled no kernel"
    return next((s for s in sources if "fused_op.h" in s.read_text()), sources[-1])


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs binutils' objdump")
def test_kernels_compile_with_the_header_to_the_same_machine_code(tmp_path):
    header = next((f for f in kernel_headers._split_flags(jt.flags.cc_flags) if f.endswith('.h"')), None)
    assert "-include" in jt.flags.cc_flags and header is not None, "g++ is the compiler here: the header must be used"
    header = header.strip('"')
    assert Path(header + ".gch").is_file()
    source = _kernel_source()
    flags = kernel_headers.compile_flags(jt.flags.cc_flags.split("-include")[0])
    machine_code = []
    for extra in ([], ["-include", header, "-Winvalid-pch", "-Werror=invalid-pch"]):
        output = tmp_path / f"kernel{len(extra)}.o"
        compiled = subprocess.run([jt.flags.cc_path, "-c", str(source), *flags, *extra, "-o", str(output)],
                                  capture_output=True, text=True)
        assert compiled.returncode == 0, compiled.stderr[-2000:]
        listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(output)], capture_output=True, text=True)
        machine_code.append(listing.stdout.split("\n", 3)[-1])
    assert machine_code[0] == machine_code[1]


def test_a_compiler_that_fails_leaves_nothing_behind(tmp_path):
    header = tmp_path / "precompiled" / "kernel_headers_x.h"
    assert not kernel_headers.build("false", ["-g"], header)
    assert not header.exists() and list(header.parent.iterdir()) == []


def test_the_switch_turns_it_off():
    code = "import tensorf_jt, jittor; print('-include' in jittor.flags.cc_flags)"
    assert run_python(["-c", code], env={kernel_headers.SWITCH_ENV: "0"}).stdout.split()[-1] == "False"
