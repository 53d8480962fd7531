"""Reading Jittor's error reports: did an operator fail to compile, or did memory run out?

Jittor raises one ``RuntimeError`` for everything that goes wrong while it compiles or runs
operators, with its own log lines inside. Two causes need different advice, and their texts
overlap: when a compiler command fails with (almost) no output, Jittor adds "This might be an
overcommit issue or out of memory", although nothing was allocated. So a compile failure is
recognised first, by the compiler command Jittor reports, and only an error that is not one
counts as out of memory.

The report names the failing operator in one of two forms: the parallel compiler's
"Compile operator(i/n)failed:Op(...,name->...)" with "source file location:", or the serial
executor's "[OP TYPE]: name" with "[JIT Source]:". One failure is not the compiler's: Jittor
checks, while it writes a fused kernel, that no operator has more variables in its source than
in the graph ("member.size() <= var_num"), which fails when operators lost their inputs, a graph
corrupted, most likely by a race between Jittor's kernel tuners (tools/patch_jittor.py). Plain
text in, plain data out: this module imports neither Jittor nor the package, so a tool can read
a log with it alone.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_COMMAND = re.compile(r"log\.cc:\d+\][^\n]*?Run cmd failed:\s*([^\n\x1b]+)")
_RETURN = re.compile(r"\nreturn (-?\d+)\. This might be|Check failed ret\((-?\d+)\) == 0")
_OPERATOR_PARALLEL = re.compile(r"Compile (?:fused )?operator\(\d+/\d+\)\s*failed:\s*(.+?)\n\nReason", re.DOTALL)
_OPERATOR_SERIAL = re.compile(r"\[OP TYPE\]:\s*([^\n]+)")
_OP_NAME = re.compile(r"Op\([^,()]*,([\w.]+)->")
_SOURCE = re.compile(r"(?:source file location:|\[JIT Source\]:)\s*(\S+)")
_GRAPH_CORRUPTED = "member.size() <= var_num"
_COMPILE_MARKERS = ("Run cmd failed", "Error happend during compilation", "Compile operator(",
                    "Compile fused operator(")
# Substrings (lower case) of what Jittor, CUDA and the C++ runtime say when an allocation fails.
OUT_OF_MEMORY_MARKERS = ("unable to alloc", "cudaerrormemoryallocation", "out of memory", "alloc_failed",
                         "bad_alloc")


@dataclass(frozen=True)
class CompileFailure:
    """What Jittor's report says about an operator it could not compile."""

    operator: str  # operator name(s), e.g. "random" or "array, binary.multiply"
    source: str  # the generated source file Jittor compiled ('' if the report has none)
    command: str  # the compiler command that failed ('' if the report has none)
    exit_status: int | None  # the command's status as Jittor saw it (-1: failed with no output)
    cuda: bool
    graph_corrupted: bool = False  # operators lost their inputs: Jittor's tuner race, not the compiler

    def summary(self) -> str:
        if self.graph_corrupted:
            return (f"Jittor could not write the kernel of the operators '{self.operator}': some of them had "
                    "lost their inputs, a graph corrupted while kernels compiled in parallel.")
        compiler = "the CUDA compiler (nvcc)" if self.cuda else "the C++ compiler"
        status = self.exit_status
        if status == -1:
            how = f"{compiler} failed and printed nothing"
        elif status is not None and status > 255:
            how = f"{compiler} exited with status {status >> 8}"
        elif status is not None and status > 0:
            how = f"{compiler} was killed by signal {status & 0x7F}"
        else:
            how = f"{compiler} failed"
        where = f" (generated source: {self.source})" if self.source else ""
        return f"Jittor could not compile the operator '{self.operator}': {how}{where}."


def _operator_names(text: str) -> str:
    serial = _OPERATOR_SERIAL.search(text)
    if serial:
        return serial.group(1).strip()
    parallel = _OPERATOR_PARALLEL.search(text)
    if not parallel:
        return "unknown"
    names = list(dict.fromkeys(_OP_NAME.findall(parallel.group(1))))
    return ", ".join(names) if names else " ".join(parallel.group(1).split())[:120]


def compile_failure(text: str) -> CompileFailure | None:
    """The compile failure Jittor's error text reports, or None when it reports something else."""
    if not any(marker in text for marker in _COMPILE_MARKERS):
        return None
    command = _COMMAND.search(text)
    status = _RETURN.search(text)
    source = _SOURCE.search(text)
    command_text = command.group(1).strip() if command else ""
    source_text = source.group(1) if source else ""
    return CompileFailure(
        operator=_operator_names(text),
        source=source_text,
        command=command_text,
        exit_status=int(next(g for g in status.groups() if g is not None)) if status else None,
        cuda="nvcc" in command_text or "JIT_cuda" in source_text or source_text.endswith(".cu"),
        graph_corrupted=_GRAPH_CORRUPTED in text,
    )


def out_of_memory_cause(text: str) -> str | None:
    """The line of Jittor's error text that reports a failed allocation, or None.

    A compile failure is never an out-of-memory error, whatever its text suggests.
    """
    if compile_failure(text) is not None:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return next((line for line in lines if any(marker in line.lower() for marker in OUT_OF_MEMORY_MARKERS)), None)
