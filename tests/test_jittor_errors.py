"""Reading Jittor's error texts: a failed operator compile is never reported as running out of memory.

The texts below are Jittor 1.3.11's own (captured on this machine with a compiler that fails,
paths shortened); the CUDA ones follow the same formats with Jittor's nvcc command.
"""
import pytest

from tensorf_jt.config import load_run_config
from tensorf_jt.runtime.error_hints import (KernelCompileFailed, OutOfMemory, explain_jittor_error, jittor_error_hints,
                                            save_error_report)
from tensorf_jt.runtime.jittor_errors import compile_failure, out_of_memory_cause

RED, RESET = "\x1b[38;5;1m", "\x1b[m"
CACHE = "/root/.cache/jittor/jt1.3.11/g++12.2.0/py3.11.7/Linux-6.18.44-xe2/AMDEPYC/7b6b/main"
RANDOM_SRC = f"{CACHE}/jit/random__T_float32__R_uniform__JIT_1__JIT_cpu_1__index_t_int32_hash_413105476f2e050a_op.cc"
FUSED_SRC = (f"{CACHE}/jit/__opkey0_array__T_float32__o_40000000__opkey1_broadcast_to__Tx_float32__DIM_2__BCAST_3"
             "__op___hash_4bd15495a56db995_op.cc")


def gcc_command(source: str) -> str:
    return (f'/venv/bin/python /venv/lib/python3.11/site-packages/jittor/utils/asm_tuner.py --cc_path="/usr/bin/g++" '
            f'"{source}"  -Wall -Wno-unknown-pragmas -std=c++14 -fPIC  -march=native  -fdiagnostics-color=always  '
            f'-lstdc++ -ldl -shared  -I"/venv/lib/python3.11/site-packages/jittor/src" -L"{CACHE}"  -fopenmp  -Ofast   '
            f'-o "{source[:-3]}.so"')


def executor_report(source: str, op_type: str, reason: str) -> str:
    """The serial executor's wrapper around the reason an operator failed (executor.cc)."""
    return (f"{RED}[f 1130 17:57:18.172248 44 executor.cc:686] \nExecute fused operator(0/2) failed. \n"
            f"[JIT Source]: {source} \n[OP TYPE]: {op_type} \n[Input]: \n[Output]: float32[8,8,], \n"
            "[Async Backtrace]: not found, please set env JT_SYNC=1, trace_py_var=3 \n"
            f"[Reason]: {reason}{RESET}{RESET}\n**********\n"
            "Async error was detected. To locate the async backtrace and get better error report, please rerun "
            "your code with two enviroment variables set:\n>>> export JT_SYNC=1\n>>> export trace_py_var=3")


SERIAL = executor_report(RANDOM_SRC, "random",
                         f"{RED}[f 1130 17:57:18.171389 44 log.cc:608] Check failed ret(256) == 0(0) "
                         f"Run cmd failed: {gcc_command(RANDOM_SRC)}")

FUSED_OPS = ("[Op(3:0:1:1:i0:o1:s0:g1,array->4),Op(7:0:1:1:i1:o1:s0:g1,broadcast_to->8),"
             "Op(9:1:1:1:i2:o1:s0:g1,binary.multiply->10),Op(11:1:1:1:i1:o1:s0:g1,reduce.add->12),]")


def parallel_report(source: str, failed: str, command: str) -> str:
    """The parallel compiler's report (parallel_compiler.cc), inside the error of ``Var.numpy()``."""
    return ("Wrong inputs arguments, Please refer to examples(help(jt.numpy)).\n\nTypes of your inputs are:\n"
            " self\t= Var,\n args\t= (),\n\nThe function declarations are:\n ArrayArgs fetch_sync()\n\n"
            f"Failed reason:{RED}[f 1130 17:57:19.111919 24 parallel_compiler.cc:331] Error happend during "
            f"compilation:\n [Error] source file location:{source}\n{failed}\n\n"
            f"Reason: {RED}[f 1130 17:57:19.071960 04:C0 log.cc:608] Check failed ret(256) == 0(0) Run cmd failed: "
            f"{command}{RESET}\n{RESET}")


PARALLEL_FUSED = parallel_report(FUSED_SRC, f"Compile fused operator(1/2)failed:{FUSED_OPS}", gcc_command(FUSED_SRC))
PARALLEL_SINGLE = parallel_report(RANDOM_SRC, "Compile operator(0/2)failed:Op(1:0:1:1:i0:o1:s0:g1,random->2)",
                                  gcc_command(RANDOM_SRC))

# The parallel compiler's report when a fused kernel's operators lost their inputs (Jittor's
# check in op_compiler.cc; the broadcasts show i0), from a cold-cache test run.
CORRUPTED_OPS = ("[Op(2526231:0:1:1:i0:o1:s0:g1,broadcast_to->2526232),Op(2526233:0:1:1:i0:o1:s0:g1,broadcast_to->"
                 "2526234),Op(2526235:0:1:1:i2:o1:s0:g1,binary.multiply->2526236),Op(2526237:0:1:1:i1:o1:s0:g1,"
                 "reduce.add->2526238),]")
GRAPH_CORRUPTED = ("Wrong inputs arguments, Please refer to examples(help(jt.sync_all)).\n\n"
                   f"Failed reason:{RED}[f 1205 03:38:36.148215 04 parallel_compiler.cc:331] Error happend during "
                   f"compilation:\n [Error] source file location:{FUSED_SRC}\n"
                   f"Compile fused operator(2/23)failed:{CORRUPTED_OPS}\n\n"
                   f"Reason: {RED}[f 1205 03:38:36.141119 44:C3 op_compiler.cc:832] Check failed: member.size() <= "
                   f"var_num  Something wrong... Could you please report this issue?\n{RESET}\n{RESET}")

# A compiler command that failed with (almost) no output: Jittor says "return -1" and suggests
# overcommit or memory, although nothing was allocated (log.cc:605).
OVERCOMMIT = executor_report(RANDOM_SRC, "random",
                             f"{RED}[f 1130 17:57:35.053138 80 log.cc:605] Check failed: ret>=0 && ret<=256  "
                             f"Run cmd failed: {gcc_command(RANDOM_SRC)}\nreturn -1. This might be an overcommit "
                             "issue or out of memory. Try : sudo sysctl vm.overcommit_memory=1, or set enviroment "
                             "variable `export DISABLE_MULTIPROCESSING=1`")

CUDA_SRC = f"{CACHE}/jit/cuda/random__T_float32__R_uniform__JIT_1__JIT_cuda_1__index_t_int32_hash_9f0e_op.cc"
NVCC_COMMAND = (f'"/usr/local/cuda/bin/nvcc" "{CUDA_SRC}" -std=c++17 -Xcompiler -fPIC -Xcompiler -march=native '
                f'-lstdc++ -ldl -shared -x cu --cudart=shared -ccbin="/usr/bin/g++" -arch=compute_90 '
                f'-code=sm_90 -o "{CUDA_SRC[:-3]}.so"')
CUDA_OVERCOMMIT = executor_report(CUDA_SRC, "random",
                                  f"{RED}[f 1130 12:00:00.000000 80 log.cc:605] Check failed: ret>=0 && ret<=256  "
                                  f"Run cmd failed: {NVCC_COMMAND}\nreturn -1. This might be an overcommit issue or "
                                  "out of memory. Try : sudo sysctl vm.overcommit_memory=1")

# A real allocation failure while an operator runs: the same executor wrapper, no compiler.
CUDA_OOM_LINE = ("[f 1130 12:00:00.000000 80 cuda_device_allocator.cc:31] "
                 "Unable to alloc cuda device memory for size 17179869184")
CUDA_OOM = executor_report(
    CUDA_SRC.replace("random", "__opkey0_broadcast_to"), "fused_op:( broadcast_to, binary.multiply,)",
    f"{RED}{CUDA_OOM_LINE}")

UNRELATED = ("Wrong inputs arguments, Please refer to examples(help(jt.ops.reshape)).\n\n"
             "Failed reason:[f 1130 12:00:00.000000 80 reshape_op.cc:51] Check failed x_items(12) == y_items(10) "
             "reshape shape is invalid for input of size 12")


def args_for(tmp_path, expname="scene"):
    return load_run_config(["--basedir", str(tmp_path / "log"), "--expname", expname, "--batch_size", "4096",
                            "--chunk_size", "8192", "--N_voxel_final", "27000000"])


# ------------------------------------------------------------------------ compile_failure
def test_serial_executor_report_names_operator_source_command_and_status():
    failure = compile_failure(SERIAL)
    assert failure is not None
    assert failure.operator == "random"
    assert failure.source == RANDOM_SRC
    assert failure.command == gcc_command(RANDOM_SRC)  # whole command, without the colour codes after it
    assert failure.exit_status == 256 and not failure.cuda
    summary = failure.summary()
    assert summary.startswith("Jittor could not compile the operator 'random': the C++ compiler exited with status 1")
    assert RANDOM_SRC in summary
    assert out_of_memory_cause(SERIAL) is None


@pytest.mark.parametrize("text, operator", [
    (PARALLEL_FUSED, "array, broadcast_to, binary.multiply, reduce.add"),
    (PARALLEL_SINGLE, "random"),
])
def test_parallel_compiler_report_names_every_operator_of_the_fused_list(text, operator):
    failure = compile_failure(text)
    assert failure is not None
    assert failure.operator == operator
    assert failure.source == (FUSED_SRC if text is PARALLEL_FUSED else RANDOM_SRC)
    assert failure.command.startswith("/venv/bin/python ") and failure.command.endswith('_op.so"')
    assert failure.exit_status == 256 and not failure.cuda
    assert f"the operator '{operator}'" in failure.summary()
    assert out_of_memory_cause(text) is None


def test_two_operator_fused_list_in_the_briefs_form():
    text = parallel_report(FUSED_SRC, "Compile fused operator(0/3)failed:[Op(1:0:1:1:i0:o1:s0:g1,array->3),"
                                      "Op(4:1:1:1:i2:o1:s0:g1,binary.multiply->5)]", gcc_command(FUSED_SRC))
    assert compile_failure(text).operator == "array, binary.multiply"


def test_command_that_failed_without_output_is_a_compile_failure_not_out_of_memory():
    assert "out of memory" in OVERCOMMIT  # the text suggests it ...
    failure = compile_failure(OVERCOMMIT)
    assert failure is not None  # ... but it is the compiler that failed
    assert failure.operator == "random" and failure.exit_status == -1 and not failure.cuda
    assert failure.command == gcc_command(RANDOM_SRC)  # ends at the line break before "return -1"
    assert "the C++ compiler failed and printed nothing" in failure.summary()
    assert out_of_memory_cause(OVERCOMMIT) is None


def test_bare_overcommit_message_without_the_executor_wrapper():
    text = (f"[f 1130 12:00:00.000000 80 log.cc:605] Check failed: ret>=0 && ret<=256  Run cmd failed:"
            f"{gcc_command(RANDOM_SRC)}\nreturn -1. This might be an overcommit issue or out of memory.")
    failure = compile_failure(text)
    assert failure is not None and failure.exit_status == -1
    assert failure.command == gcc_command(RANDOM_SRC) and failure.operator == "unknown"
    assert "failed and printed nothing" in failure.summary()
    assert out_of_memory_cause(text) is None


def test_cuda_compile_failure_names_nvcc():
    failure = compile_failure(CUDA_OVERCOMMIT)
    assert failure is not None and failure.cuda
    assert failure.command == NVCC_COMMAND and failure.exit_status == -1
    assert "nvcc" in failure.summary() and "the CUDA compiler (nvcc) failed and printed nothing" in failure.summary()
    assert out_of_memory_cause(CUDA_OVERCOMMIT) is None


def test_cuda_allocation_failure_is_out_of_memory_not_a_compile_failure():
    assert compile_failure(CUDA_OOM) is None
    cause = out_of_memory_cause(CUDA_OOM)
    assert cause is not None and "Unable to alloc cuda device memory for size 17179869184" in cause


def test_unrelated_error_is_neither():
    assert compile_failure(UNRELATED) is None
    assert out_of_memory_cause(UNRELATED) is None
    assert compile_failure("") is None and out_of_memory_cause("") is None


# ------------------------------------------------------------------------ the actionable errors
def test_explain_raises_kernel_compile_failed_for_the_overcommit_text_and_keeps_the_report(tmp_path):
    args = args_for(tmp_path)
    with pytest.raises(KernelCompileFailed) as raised:
        explain_jittor_error(RuntimeError(OVERCOMMIT), args, "training (iteration 0)")
    assert not isinstance(raised.value, OutOfMemory)
    message = str(raised.value)
    report = tmp_path / "log" / "scene_jittor_error.log"
    assert message.startswith("Jittor could not compile the operator 'random': the C++ compiler failed and printed "
                              "nothing")
    assert str(report) in message and "--verbose" in message and "cc_path" in message
    assert "Out of" not in message and "memory" not in message
    assert report.read_text(encoding="utf-8") == OVERCOMMIT  # the full text, colour codes and all
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_explain_names_nvcc_path_for_a_cuda_compile_failure(tmp_path):
    with pytest.raises(KernelCompileFailed, match="nvcc_path"):
        explain_jittor_error(RuntimeError(CUDA_OVERCOMMIT), args_for(tmp_path), "rendering")


def test_explain_raises_out_of_memory_for_an_allocation_failure(tmp_path):
    args = args_for(tmp_path)
    with pytest.raises(OutOfMemory) as raised:
        explain_jittor_error(RuntimeError(CUDA_OOM), args, "training (iteration 3)")
    message = str(raised.value)
    assert "memory while training (iteration 3)" in message and "Unable to alloc cuda device memory" in message
    assert "--batch_size (rays per training step, now 4096)" in message
    assert not (tmp_path / "log" / "scene_jittor_error.log").exists()


def test_explain_leaves_other_errors_alone(tmp_path):
    args = args_for(tmp_path)
    explain_jittor_error(RuntimeError(UNRELATED), args, "training")  # returns: nothing to explain
    explain_jittor_error(ValueError(SERIAL), args, "training")  # only Jittor's RuntimeError is read
    assert not (tmp_path / "log").exists()
    with pytest.raises(RuntimeError, match="reshape shape is invalid"):
        with jittor_error_hints(args, "training"):
            raise RuntimeError(UNRELATED)
    with pytest.raises(KernelCompileFailed):
        with jittor_error_hints(args, "training"):
            raise RuntimeError(PARALLEL_FUSED)


def test_a_corrupted_graph_is_told_apart_from_a_compiler_failure(tmp_path):
    failure = compile_failure(GRAPH_CORRUPTED)
    assert failure is not None and failure.graph_corrupted and failure.command == ""
    assert failure.operator == "broadcast_to, binary.multiply, reduce.add"
    assert not compile_failure(PARALLEL_FUSED).graph_corrupted
    assert out_of_memory_cause(GRAPH_CORRUPTED) is None
    with pytest.raises(KernelCompileFailed) as raised:
        explain_jittor_error(RuntimeError(GRAPH_CORRUPTED), args_for(tmp_path), "training (iteration 0)")
    message = str(raised.value)
    assert message.startswith("Jittor could not write the kernel of the operators 'broadcast_to, binary.multiply, "
                              "reduce.add': some of them had lost their inputs")
    assert "python tools/patch_jittor.py" in message and "not a problem with the data, the flags or the compiler" in message
    assert "use_parallel_op_compiler=0" in message
    assert "cc_path" not in message
    assert str(tmp_path / "log" / "scene_jittor_error.log") in message


def test_report_falls_back_to_the_temp_folder(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    blocker = tmp_path / "file"
    blocker.write_text("")
    config = load_run_config(["--basedir", str(blocker / "log"), "--expname", "x"])
    assert save_error_report(config, SERIAL) == str(tmp_path / "tmp" / "x_jittor_error.log")
    assert (tmp_path / "tmp" / "x_jittor_error.log").read_text(encoding="utf-8") == SERIAL
    assert save_error_report(None, "text") == str(tmp_path / "tmp" / "tensorf_jittor_error.log")
