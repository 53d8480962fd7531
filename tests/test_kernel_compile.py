"""The direct kernel build: only unmarked CPU kernels skip Jittor's assembly tuner; the compiled code is
the same (with gold, the same kernel functions in another layout)."""
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import jittor as jt
import pytest

from conftest import run_python
from tensorf_jt.runtime import kernel_compile

TUNER = "/opt/jittor/utils/asm_tuner.py"


def _recorder(path: Path, name: str) -> Path:
    """A stand-in program that writes its name and arguments to ``calls.txt`` beside it."""
    path.write_text(f'#!/bin/sh\nprintf "%s\\n" "{name} $*" >> "{path.parent}/calls.txt"\n')
    path.chmod(0o755)
    return path


@pytest.fixture()
def launcher(tmp_path):
    python = _recorder(tmp_path / "python's stand-in", "python")
    compiler = _recorder(tmp_path / "cc", "cc")
    script = kernel_compile.write_script(tmp_path / "precompiled", str(python))

    def call(*args: str) -> str:
        subprocess.run([str(script), *args], check=True)
        return (tmp_path / "calls.txt").read_text().splitlines()[-1]

    call.compiler = str(compiler)
    return call


def test_a_kernel_is_linked_with_gold_and_without_it_when_that_fails(tmp_path):
    calls = tmp_path / "calls.txt"
    compiler = tmp_path / "cc"
    compiler.write_text(f'''#!/bin/sh
printf "%s\\n" "cc $*" >> "{calls}"
case "$*" in *-fuse-ld=gold*) echo "gold: cannot link" >&2; exit 1 ;; esac
''')
    compiler.chmod(0o755)
    script = kernel_compile.write_script(tmp_path / "precompiled", "/usr/bin/python3", kernel_compile.GOLD)
    source = tmp_path / "mul_hash_3_op.cc"
    source.write_text("int kernel();\n")
    built = subprocess.run([str(script), TUNER, f"--cc_path={compiler}", str(source), "-O2", "-o",
                            str(tmp_path / "mul_hash_3_op.so")], capture_output=True, text=True)
    assert built.returncode == 0 and "gold" not in built.stderr
    first, second = calls.read_text().splitlines()
    assert first.endswith(f"mul_hash_3_op.so {kernel_compile.GOLD}") and second.endswith("mul_hash_3_op.so")


def test_an_unmarked_kernel_goes_straight_to_the_compiler(launcher, tmp_path):
    source = tmp_path / "add__T_float32_hash_1_op.cc"
    source.write_text("int kernel() { return 1; }\n")
    called = launcher(TUNER, f"--cc_path={launcher.compiler}", str(source), "-O2", "-shared", "-o",
                      str(tmp_path / "add__T_float32_hash_1_op.so"))
    assert called == f"cc {source} -O2 -shared -o {tmp_path / 'add__T_float32_hash_1_op.so'}"


def test_everything_else_goes_to_python_unchanged(launcher, tmp_path):
    marked = tmp_path / "copy_hash_2_op.cc"
    marked.write_text('//@begin replace "vmova(.*)" "vmovnt\\g<1>"\nint kernel();\n')
    to_shared = ["-o", str(tmp_path / "copy_hash_2_op.so")]
    assert launcher(TUNER, f"--cc_path={launcher.compiler}", str(marked), *to_shared) == \
        f"python {TUNER} --cc_path={launcher.compiler} {marked} {' '.join(to_shared)}"
    plain = tmp_path / "plain_op.cc"
    plain.write_text("int kernel();\n")
    assembly_only = launcher(TUNER, f"--cc_path={launcher.compiler}", str(plain), "-S", "-o", str(tmp_path / "plain_op.s"))
    assert assembly_only.startswith("python ")
    linker = launcher("/opt/jittor/utils/dlink_compiler.py", "nvcc", "a.cu", "-o", "a.so")
    assert linker == "python /opt/jittor/utils/dlink_compiler.py nvcc a.cu -o a.so"


def test_the_script_is_written_once_and_named_by_its_text(tmp_path):
    first = kernel_compile.write_script(tmp_path, "/usr/bin/python3")
    assert kernel_compile.write_script(tmp_path, "/usr/bin/python3") == first
    assert kernel_compile.write_script(tmp_path, "/opt/python it's") != first
    assert "'/opt/python it'\\''s'" in kernel_compile.script_text("/opt/python it's")


def test_every_name_of_one_interpreter_gives_one_launcher(tmp_path):
    """A virtual environment's python, python3 and python3.11 are one interpreter (Jittor names the
    last when started as python3): one launcher, so one build command per kernel."""
    (tmp_path / "python3").write_text("")
    for name in ("python", "python3.11"):
        (tmp_path / name).symlink_to("python3")
    named = {kernel_compile.plain_python(str(tmp_path / name)) for name in ("python", "python3", "python3.11")}
    assert named == {str(tmp_path / "python")}
    other = tmp_path / "other"
    other.mkdir()
    (other / "python").write_text("")  # another interpreter of that name
    (other / "python3.11").write_text("")
    assert kernel_compile.plain_python(str(other / "python3.11")) == str(other / "python3.11")
    assert kernel_compile.plain_python("/nowhere/python3.11") == "/nowhere/python3.11"


def test_jittor_uses_it_and_it_is_not_wrapped_twice():
    assert Path(jt.flags.python_path).name.startswith("kernel_compile_")
    assert (f"link='{kernel_compile.GOLD}'" in Path(jt.flags.python_path).read_text()) == bool(shutil.which("ld.gold"))
    assert kernel_compile.enable(jt) is None


def test_the_switch_turns_it_off():
    code = "import tensorf_jt, jittor; print(jittor.flags.python_path)"
    printed = run_python(["-c", code], env={kernel_compile.SWITCH_ENV: "0"}).stdout.split()[-1]
    assert Path(printed).resolve() == Path(sys.executable).resolve()


def _kernel_symbols(shared_object: Path) -> list[str]:
    """The functions a kernel library defines (not the linker's own section markers)."""
    listing = subprocess.run(["nm", "-D", "--defined-only", str(shared_object)], capture_output=True, text=True)
    return sorted(name for name in (line.split()[-1] for line in listing.stdout.splitlines()) if "jittor" in name)


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs binutils' objdump")
def test_the_direct_build_gives_jittors_machine_code(tmp_path):
    (jt.array([1.0, 2.0]) * 3.0 + 1.0).sync()
    source = max((s for s in Path(jt.flags.cache_path, "jit").glob("*_op.cc") if "fused_op.h" in s.read_text()),
                 key=lambda s: s.stat().st_mtime)
    tuner = str(Path(jt.flags.jittor_path) / "utils" / "asm_tuner.py")
    flags = shlex.split(jt.compiler.fix_cl_flags(jt.flags.cc_flags))  # as Jittor's kernel command has them
    routes = {"tuner": sys.executable,  # Jittor's own route
              "direct": str(kernel_compile.write_script(tmp_path / "launchers", sys.executable)),
              "gold": str(kernel_compile.write_script(tmp_path / "launchers", sys.executable, kernel_compile.GOLD))}
    machine_code = {}
    for route, program in routes.items():
        (tmp_path / route).mkdir()  # one file name: g++ names static initialisers after it
        copy = tmp_path / route / "kernel_op.cc"
        shutil.copy(source, copy)
        output = tmp_path / route / "kernel_op.so"
        built = subprocess.run([program, tuner, f"--cc_path={jt.flags.cc_path}", str(copy), *flags, "-o", str(output)],
                               capture_output=True, text=True)
        assert built.returncode == 0, built.stderr[-2000:]
        listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(output)], capture_output=True, text=True)
        machine_code[route] = listing.stdout.split("\n", 3)[-1]
    assert (tmp_path / "tuner" / "kernel_op.s").is_file() and not (tmp_path / "direct" / "kernel_op.s").exists()
    assert machine_code["tuner"] == machine_code["direct"]
    gold_symbols, tuner_symbols = (_kernel_symbols(tmp_path / route / "kernel_op.so") for route in ("gold", "tuner"))
    assert gold_symbols and gold_symbols == tuner_symbols
