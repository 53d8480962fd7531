#!/usr/bin/env python3
"""Find the first Jittor operator a training step cannot compile or run, one probe at a time.

    python tools/gpu_bisect.py                    # every probe, serial compiles, full Jittor logs
    python tools/gpu_bisect.py --only where_nonzero,model_fused --keep-going
    TENSORF_JT_CPU=1 python tools/gpu_bisect.py   # the same probes on the CPU (self-check)

Each probe runs in its own process (a crash cannot take the bisect down) with Jittor's serial
op compiler (``use_parallel_op_compiler=0``) and verbose logs (``log_v``), and exercises one
kind of operator a training step uses, forward and backward, on both kernel paths where the
paths differ: elementwise maths and reductions, ``where``, gathers and scatters, cumulative
products, ``grid_sample``, matrix products, Adam, each fused kernel, a model step per path, the
grid events, a few trainer iterations per path, and one step of ``configs/lego.txt``'s model.
Probes build on each other's compiled operators (Jittor's cache), so the first probe that
fails names the first operator kind that breaks. For a failure the bisect prints the failing
compiler command and runs it again on its own (does it fail outside the process too?); for a
crash, the Python stacks of every thread and, where gdb or cuda-gdb exists, the native
backtrace of every thread. Logs and the report go to ``--out``.

A crash that only Jittor's parallel compiler causes needs ``--parallel --under-debugger``
(the operators it compiled before dying are cached, so a rerun would not crash again). That
is how the crash of every GPU training run at iteration 0 was found on an H200: under
cuda-gdb, two compiler threads inside Python's allocator, called from the Python hook through
which Jittor writes ``jt.isfinite``'s source (probe ``python_hook_ops``; docs/GPU.md).

``--inject-failing-compiler`` replaces the compiler inside each probe by one that exits 1
without output (Jittor reports that as "return -1 ... overcommit issue or out of memory");
the test suite uses it to check that the bisect reports such a failure with its command.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
PROBES: dict[str, tuple[str, Callable[[], None]]] = {}
PASSED_MARKER = "BISECT_PROBE_PASSED"
FAILING_COMPILER = "#!/bin/sh\nexit 1\n"


def probe(description: str):
    """Register a probe; probes run in the order they are defined here."""
    def register(function: Callable[[], None]) -> Callable[[], None]:
        PROBES[function.__name__] = (description, function)
        return function
    return register


# ---------------------------------------------------------------- the probes
# Each runs in a fresh process with tensorf_jt imported; it must synchronise what it computes
# (a lazy Var that is never fetched compiles nothing).

def _fetch(*values) -> None:
    import jittor as jt
    jt.sync(list(values))
    for value in values:
        value.numpy()


@probe("import, jt.rand, a sum, a 64x64 matrix product")
def import_and_basics() -> None:
    import jittor as jt
    on_cpu = os.environ.get("TENSORF_JT_CPU", "0") not in ("", "0")
    if not on_cpu and not jt.flags.use_cuda:
        raise SystemExit("Jittor did not switch to CUDA: is the GPU visible (nvidia-smi) and nvcc_path set?")
    a = jt.rand(64, 64)
    _fetch(a.sum(), jt.matmul(a, a))


@probe("elementwise maths, casts, softplus, reductions, isfinite().all(), with gradients")
def elementwise_and_reductions() -> None:
    import jittor as jt
    from tensorf_jt.models.tensor_base import softplus
    x = jt.rand(5000) * 40.0 - 20.0
    x.start_grad()
    y = softplus(x - 10.0) + jt.sqr(x).clamp(min_v=0.0, max_v=50.0) + jt.ternary(x > 0, jt.exp(-x), jt.log(1.0 + x * x))
    z = (y.float32() * (x > 1.0).float32()).sum() + y.mean() + y.max()
    finite = jt.isfinite(y).all()
    grad = jt.grad(z, x)
    _fetch(z, finite, grad, x.int32(), x.int64(), (x > 0).any())


@probe("Jittor's Python-hook operators (isfinite, isnan, isinf) compiled in one batch; with --parallel "
       "this is Jittor 1.3.11's compile-thread race (tensorf_jt's training uses none of these operators)")
def python_hook_ops() -> None:
    import jittor as jt
    tensors = [jt.rand(*shape) for shape in ((64,), (8, 9), (4, 5, 6), (2, 3, 4, 5))]
    tensors += [t.float64() for t in tensors]
    _fetch(*[check(t).all() for t in tensors for check in (jt.isfinite, jt.isnan, jt.isinf)])


@probe("jt.where on small (plain) and large (CUB) boolean masks, 1-D and 2-D")
def where_nonzero() -> None:
    import jittor as jt
    small = jt.where(jt.rand(100) > 0.5)[0]
    large = jt.where(jt.rand(20000) > 0.5)[0]
    rows, cols = jt.where(jt.rand(300, 40) > 0.5)
    empty = jt.where(jt.rand(20000) > 2.0)[0]
    _fetch(small, large, rows, cols, empty)


@probe("gathers, scatters, reindex_reduce, concat/stack/meshgrid, with gradients")
def gather_scatter() -> None:
    import jittor as jt
    values = jt.rand(4096, 3)
    values.start_grad()
    index = (jt.rand(1000) * 4096).int32()
    gathered = values[index]
    scattered = jt.zeros((4096, 3), dtype="float32")
    scattered[index] = gathered * 2.0
    summed = gathered.reindex_reduce("add", [64, 3], ["@e0(i0)", "i1"], extras=[index % 64])
    grid = jt.stack(jt.meshgrid(jt.linspace(0.0, 1.0, 5), jt.linspace(0.0, 1.0, 6)), dim=-1)
    joined = jt.concat([gathered, gathered * 0.5], dim=1)
    loss = scattered.sum() + summed.sum() + joined.sum()
    _fetch(loss, grid, jt.grad(loss, values))


@probe("cumsum and cumprod, with gradients")
def cumulative() -> None:
    import jittor as jt
    x = jt.rand(64, 300) * 0.5 + 0.5
    x.start_grad()
    product = jt.cumprod(x, dim=1)
    total = jt.cumsum(x, dim=1)
    _fetch(product, total, jt.grad((product + total).sum(), x))


@probe("nn.grid_sample on planes and lines (reference field path), with gradients")
def grid_sample() -> None:
    import jittor as jt
    from jittor import nn
    plane = jt.rand(1, 16, 32, 32)
    line = jt.rand(1, 16, 32, 1)
    plane.start_grad()
    line.start_grad()
    coords = jt.rand(1, 4096, 1, 2) * 2.0 - 1.0
    out = (nn.grid_sample(plane, coords, align_corners=True) * nn.grid_sample(line, coords, align_corners=True)).sum()
    _fetch(out, *jt.grad(out, [plane, line]))


@probe("an MLP (matrix products, ReLU, sigmoid), with gradients")
def mlp() -> None:
    import jittor as jt
    from jittor import nn
    net = nn.Sequential(nn.Linear(150, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 3))
    out = jt.sigmoid(net(jt.rand(4096, 150))).sum()
    _fetch(out, *jt.grad(out, net.parameters()))


@probe("Adam steps over two parameter groups, learning-rate decay")
def adam() -> None:
    import jittor as jt
    a, b = jt.rand(128, 16), jt.rand(16, 3)
    optimizer = jt.optim.Adam([{"params": [a], "lr": 0.02}, {"params": [b], "lr": 0.001}], lr=0.02, betas=(0.9, 0.99))
    for _ in range(3):
        optimizer.step(jt.sqr(jt.matmul(a, b)).mean())
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * 0.99
    _fetch(a, b)


@probe("the fused kernels: ray marching, VM and CP fields, compositing, MLP encoding, alpha grid")
def fused_kernels() -> None:
    import numpy as np
    import jittor as jt
    sys.path.insert(0, str(ROOT / "tests"))
    from model_factory import AABB, rays_towards_box, tiny_model
    from tensorf_jt.rendering.alpha_grid import AlphaGridMask
    from tensorf_jt.kernels.packed_compositing import composite_weights, segment_sum
    from tensorf_jt.kernels.cp_field import cp_features
    from tensorf_jt.kernels.encoding import encode_row
    from tensorf_jt.kernels.ray_marching import alpha_lookup, march_rays, rays_hit_alpha
    from tensorf_jt.kernels.vm_field import vm_features

    model = tiny_model(grid=(14, 13, 12), density_shift=-2.0).field
    rays = jt.array(rays_towards_box(512, seed=3))
    rays_o, rays_d = rays[:, :3], rays[:, 3:6]
    t_start = jt.full((512,), 2.0, dtype="float32")
    volume = (jt.rand(12, 13, 14) > 0.3).float32()
    mask = AlphaGridMask(jt.array(AABB), volume)
    samples = march_rays(rays_o, rays_d, t_start, jt.rand(512), jt.array(AABB), mask, 0.05, 96)
    hit = rays_hit_alpha(rays_o, rays_d, t_start, mask, 0.05, 96)
    looked_up = alpha_lookup(mask, samples.xyz)
    points = jt.array(np.random.default_rng(0).uniform(-1.2, 1.2, (2048, 3)).astype(np.float32))
    density = vm_features(points, list(model.density_plane), list(model.density_line), density_mode=True)
    appearance = vm_features(points, list(model.app_plane), list(model.app_line), density_mode=False)
    cp_lines = [jt.rand(14, 6), jt.rand(13, 6), jt.rand(12, 6)]
    for line in cp_lines:
        line.start_grad()
    cp = (cp_features(points, cp_lines, density_mode=False).sum()
          + cp_features(points, cp_lines, density_mode=True).sum())
    sigma = jt.rand(samples.count) * 5.0
    sigma.start_grad()
    weights = composite_weights(sigma, samples.dist * 25.0, samples.ray_offsets)
    per_ray = segment_sum(weights.unsqueeze(1) * jt.rand(samples.count, 3), samples.ray_index, 512)
    encoded = encode_row([appearance, jt.rand(2048, 3)], [(0, 0), (0, 2), (1, 0), (1, 2)])
    loss = density.sum() + appearance.sum() + cp + per_ray.sum() + encoded.sum()
    params = list(model.density_plane) + list(model.density_line) + list(model.app_plane) + list(model.app_line)
    grads = jt.grad(loss, params + cp_lines + [sigma])
    _fetch(hit, looked_up, loss, *grads)


def _model_step(kernels_name: str) -> None:
    import jittor as jt
    sys.path.insert(0, str(ROOT / "tests"))
    from model_factory import rays_towards_box, tiny_model
    from tensorf_jt.training.optimizer import make_optimizer

    rays = jt.array(rays_towards_box(1024, seed=4))
    for shift in (-10.0, -2.0):  # -10: nothing reaches the shading threshold (lego's first steps)
        model = tiny_model(grid=(16, 15, 14), density_shift=shift, kernels=kernels_name)
        optimizer = make_optimizer(model, 0.02, 0.001)
        output = model(rays, white_bg=True, perturb=True)
        loss = jt.sqr(output.rgb - 0.5).mean() + 1e-4 * model.field.density_L1() + model.field.TV_loss_density() * 0.1
        optimizer.zero_grad()
        optimizer.backward(loss)
        optimizer.step()
        _fetch(output.rgb, output.depth, loss)


@probe("a model's forward, backward and Adam step, --kernels reference")
def model_reference() -> None:
    _model_step("reference")


@probe("a model's forward, backward and Adam step, --kernels fused")
def model_fused() -> None:
    _model_step("fused")


@probe("grid events on both paths: alpha mask, shrink, ray filtering, upsampling, finiteness check")
def grid_events() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from model_factory import rays_towards_box, tiny_model
    import numpy as np
    from tensorf_jt.dataLoader.ray_batches import ArrayRays
    from tensorf_jt.kernels import KERNELS
    from tensorf_jt.training.nan_guard import nonfinite_parameters
    from tensorf_jt.training.ray_filtering import filtering_ray_ids

    rays = ArrayRays(rays_towards_box(2048, seed=5), np.zeros((2048, 3), np.float32))
    for name in KERNELS:
        model = tiny_model(grid=(16, 15, 14), density_shift=-2.0, kernels=name)
        model.shrink(model.update_alpha_mask((16, 15, 14)))
        filtering_ray_ids(model, rays, bbox_only=True)
        filtering_ray_ids(model, rays, bbox_only=False)
        model.upsample([20, 19, 18])
        if nonfinite_parameters(model):
            raise SystemExit("parameters turned non-finite")


def _trainer(kernels_name: str, extra: list[str]) -> None:
    from tensorf_jt.config import load_run_config
    from tensorf_jt.dataLoader.demo_scene import DemoSceneSpec, ensure_generated
    from tensorf_jt.training.trainer import Trainer

    scene = Path(tempfile.gettempdir()) / "tensorf_jt_bisect_scene"
    ensure_generated(str(scene), DemoSceneSpec(image_size=48, n_train=6, n_val=1, n_test=1, supersampling=1))
    basedir = tempfile.mkdtemp(prefix="tensorf_jt_bisect_")
    args = load_run_config(["--config", str(ROOT / "configs" / "demo.txt"), "--dataset_name", "blender",
                       "--datadir", str(scene), "--basedir", basedir, "--expname", f"bisect_{kernels_name}",
                       "--kernels", kernels_name, "--N_vis", "0", "--render_test", "0", *extra])
    result = Trainer(args).run()
    print(f"trained {result.iterations} iterations, events: {result.events}")
    shutil.rmtree(basedir, ignore_errors=True)


_SMALL_RUN = ["--n_iters", "8", "--batch_size", "1024", "--N_voxel_init", "4096", "--N_voxel_final", "32768",
              "--upsamp_list", "3", "--upsamp_list", "6", "--update_AlphaMask_list", "2",
              "--update_AlphaMask_list", "5", "--density_shift", "-2"]


@probe("trainer: 8 iterations with every grid event, --kernels reference")
def trainer_reference() -> None:
    _trainer("reference", _SMALL_RUN)


@probe("trainer: 8 iterations with every grid event, --kernels fused")
def trainer_fused() -> None:
    _trainer("fused", _SMALL_RUN)


@probe("configs/lego.txt's model (batch 4096, 128^3 grid): 2 training steps, fused kernels")
def lego_step() -> None:
    _trainer("fused", ["--config", str(ROOT / "configs" / "lego.txt"), "--n_iters", "2"])


# -------------------------------------------------------------- running one
def run_probe(name: str, inject_failing_compiler: bool) -> int:
    """Run probe ``name`` in this process; 0 when it passed."""
    import faulthandler

    sys.path.insert(0, str(ROOT))
    import tensorf_jt.runtime  # configures Jittor, then imports it
    import jittor as jt

    tensorf_jt.runtime.setup()  # as the CLIs run: CUDA, the kernel build route

    # After Jittor's own handlers: on a crash, print every thread's Python stack, then let
    # Jittor's handler report the native side.
    faulthandler.enable(all_threads=True)
    if inject_failing_compiler:
        fake = Path(tempfile.mkdtemp(prefix="tensorf_jt_cc_")) / "failing_compiler.sh"
        fake.write_text(FAILING_COMPILER)
        fake.chmod(0o755)
        # A flag no cached operator was built with, so that every operator compiles again.
        jt.flags.cc_flags = jt.flags.cc_flags + f" -DTENSORF_JT_BISECT_NONCE={time.time_ns()} "
        jt.flags.cc_path = str(fake)
        if jt.flags.use_cuda:
            jt.flags.nvcc_flags = jt.flags.nvcc_flags + f" -DTENSORF_JT_BISECT_NONCE={time.time_ns()} "
            jt.flags.nvcc_path = str(fake)
    description, function = PROBES[name]
    print(f"probe {name}: {description}; use_cuda={jt.flags.use_cuda}", flush=True)
    function()
    jt.sync_all(True)
    print(PASSED_MARKER, flush=True)
    return 0


# ---------------------------------------------------------- reading the logs
def _load_jittor_errors():
    """``tensorf_jt.runtime.jittor_errors`` without importing the package (which imports Jittor): the
    driver must keep working when Jittor itself does not."""
    spec = importlib.util.spec_from_file_location("tensorf_jt_jittor_errors",
                                                  ROOT / "tensorf_jt" / "runtime" / "jittor_errors.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


jittor_errors = _load_jittor_errors()
CRASH = re.compile(r"Caught segfault at address (\S+), thread_name: '([^']*)'")
COMPILING = re.compile(r"Compile op (\S+)")
COMPILED = re.compile(r"Cache key of \S+ (?:not found|changed)")  # an operator compiled, not loaded from the cache


ANSI = re.compile(r"\x1b\[[0-9;]*m")
GDB_SIGNAL = re.compile(r"Thread [^\n]* received signal (SIG\w+)")


def read_failure(log: str) -> dict:
    """What a probe's log says about its failure: operator, command, crash address and thread."""
    log = ANSI.sub("", log)
    found: dict = {}
    failure = jittor_errors.compile_failure(log)
    if failure is not None:
        found.update(summary=failure.summary(), operator=failure.operator, command=failure.command,
                     source=failure.source, return_code=failure.exit_status)
    crash = CRASH.search(log)
    if crash:
        found["crash_address"], found["crash_thread"] = crash.group(1), crash.group(2)
    compiling = COMPILING.findall(log)
    if compiling:
        found["last_compiled"] = compiling[-1][:300]
    signal = GDB_SIGNAL.search(log)
    if signal:
        found["debugger_signal"] = signal.group(0)
    if "Caught SIGCHLD" in log:
        found["sigchld"] = next(line for line in log.splitlines() if "Caught SIGCHLD" in line)[:300]
    return {key: value for key, value in found.items() if value not in ("", None)}


def rerun_command(command: str, timeout: float) -> dict:
    """Run a failing compiler command again on its own, to tell a broken command from a broken process."""
    started = time.time()
    try:
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "seconds": timeout}
    return {"status": done.returncode, "seconds": round(time.time() - started, 1),
            "output": (done.stdout + done.stderr)[-3000:]}


def debugger() -> str | None:
    """gdb, else CUDA's cuda-gdb (the GPU machines have only the latter), or None."""
    for name in ("gdb", "cuda-gdb"):
        toolkit = f"/usr/local/cuda/bin/{name}"
        path = shutil.which(name) or (toolkit if os.path.exists(toolkit) else None)
        if path:
            return path
    return None


# ------------------------------------------------------------ the environment
def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as err:
        return f"({err.strerror})"


def _command(args: list[str], timeout: float = 30) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        return (done.stdout + done.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"({err})"


def environment_report() -> str:
    """Machine facts that decide whether compiles and forks can work: memory, limits, toolchain."""
    import resource

    meminfo = {line.split(":")[0]: line.split(":")[1].strip() for line in _read("/proc/meminfo").splitlines()
               if ":" in line}
    limits = {name: resource.getrlimit(getattr(resource, name))
              for name in ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_STACK")}
    lines = [
        f"python {sys.version.split()[0]} at {sys.executable}; {platform.platform()}; {os.cpu_count()} CPUs",
        "memory: " + ", ".join(f"{key} {meminfo.get(key, '?')}" for key in
                                ("MemTotal", "MemAvailable", "SwapTotal", "CommitLimit", "Committed_AS")),
        f"vm.overcommit_memory={_read('/proc/sys/vm/overcommit_memory').strip()} "
        f"overcommit_ratio={_read('/proc/sys/vm/overcommit_ratio').strip()} "
        f"max_map_count={_read('/proc/sys/vm/max_map_count').strip()}",
        "limits (soft, hard): " + ", ".join(f"{k[7:]} {v}" for k, v in limits.items()),
        "nvcc: " + (_command(["nvcc", "--version"]).splitlines() or ["not found"])[-1],
        "nvidia-smi: " + _command(["nvidia-smi", "--query-gpu=name,memory.total,memory.used,driver_version",
                                   "--format=csv,noheader"]),
        "environment: " + " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                                   if k in ("nvcc_path", "cc_path", "LD_LIBRARY_PATH", "use_cuda", "log_silent",
                                            "use_parallel_op_compiler", "TENSORF_JT_CPU", "PYTHONPATH")),
        f"debugger: {debugger() or 'none'}",
    ]
    return "\n".join(lines)


# -------------------------------------------------------------- the driver
def probe_environment(args) -> dict[str, str]:
    env = dict(os.environ)
    env.update(TENSORF_JT_VERBOSE="1", PYTHONUNBUFFERED="1", log_v=str(args.log_v))
    env.pop("log_silent", None)
    if not args.parallel:
        env["use_parallel_op_compiler"] = "0"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def debugger_command(python_command: list[str]) -> list[str]:
    """``python_command`` under gdb / cuda-gdb: stop at a crash, then print every thread's backtrace."""
    return [debugger(), "-q", "-batch", "-ex", "set pagination off", "-ex", "set print thread-events off",
            "-ex", "handle SIGCHLD nostop noprint pass", "-ex", "handle SIGPIPE nostop noprint pass",
            "-ex", "handle SIGUSR1 nostop noprint pass", "-ex", "run",
            "-ex", "info threads", "-ex", "thread apply all bt 30", "--args", *python_command]


def run_one(name: str, args, out: Path, index: int) -> dict:
    log_path = out / f"probe_{index:02d}_{name}.log"
    command = [sys.executable, str(Path(__file__).resolve()), "--probe", name]
    if args.inject_failing_compiler:
        command.append("--inject-failing-compiler")
    under_debugger = bool(args.under_debugger and debugger())
    if under_debugger:
        command = debugger_command(command)
    started = time.time()
    with open(log_path, "w") as log_file:
        try:
            done = subprocess.run(command, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT,
                                  env=probe_environment(args), timeout=args.probe_timeout)
            status = done.returncode
        except subprocess.TimeoutExpired:
            status = "timeout"
    log = log_path.read_text(errors="replace")
    passed = PASSED_MARKER in log and (status == 0 or under_debugger) and not GDB_SIGNAL.search(log)
    result = {"probe": name, "seconds": round(time.time() - started, 1), "log": str(log_path),
              "passed": passed, "status": status, "compiles": len(COMPILED.findall(log))}
    if not passed:
        result.update(read_failure(log))
        result["log_tail"] = "\n".join(ANSI.sub("", log).splitlines()[-40:])
        if "command" in result:
            result["standalone_rerun"] = rerun_command(result["command"], args.probe_timeout)
        crashed = "crash_address" in result or (isinstance(status, int) and status < 0)
        if args.debugger and not under_debugger and debugger() and crashed:
            result["backtrace_log"] = str(run_under_debugger(name, args, out, index))
    return result


def run_under_debugger(name: str, args, out: Path, index: int) -> Path:
    """Run a crashing probe again under the debugger and keep every thread's native backtrace."""
    path = out / f"probe_{index:02d}_{name}.backtrace.log"
    command = debugger_command([sys.executable, str(Path(__file__).resolve()), "--probe", name])
    with open(path, "w") as log_file:
        try:
            subprocess.run(command, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT,
                           env=probe_environment(args), timeout=args.probe_timeout * 2)
        except subprocess.TimeoutExpired:
            log_file.write("\n(the debugger run timed out)\n")
    return path


def describe(result: dict) -> str:
    lines = [f"FIRST FAILURE: probe '{result['probe']}' ({PROBES[result['probe']][0]}), exit status {result['status']}"]
    for key, label in (("summary", "what Jittor reports"), ("last_compiled", "last operator compiled"),
                       ("command", "failing command"), ("return_code", "Jittor's return code"),
                       ("crash_address", "crash at address"), ("crash_thread", "crash in thread"),
                       ("debugger_signal", "the debugger saw"),
                       ("sigchld", "child process")):
        if key in result:
            lines.append(f"  {label}: {result[key]}")
    if "standalone_rerun" in result:
        rerun = result["standalone_rerun"]
        verdict = ("it succeeds on its own: the command breaks only inside the process"
                   if rerun["status"] == 0 else "it fails on its own too")
        lines.append(f"  the command run again on its own: exit {rerun['status']} ({verdict})")
        if rerun.get("output"):
            lines.append("    " + rerun["output"].strip().replace("\n", "\n    ")[-1500:])
    if "backtrace_log" in result:
        lines.append(f"  native backtraces of every thread: {result['backtrace_log']}")
    if result.get("debugger_signal"):
        lines.append("  native backtraces of every thread: in the log, after the signal")
    lines.append(f"  full log: {result['log']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "gpu_bisect"), help="folder for logs and report")
    parser.add_argument("--only", default="", help="comma-separated probe names (default: all, in order)")
    parser.add_argument("--keep-going", action="store_true", help="run the remaining probes after a failure")
    parser.add_argument("--parallel", action="store_true", help="keep Jittor's parallel op compiler")
    parser.add_argument("--log-v", type=int, default=10,
                        help="Jittor's log_v in the probes (10: every operator compiled; 100: every command too)")
    parser.add_argument("--probe-timeout", type=float, default=600.0, help="seconds per probe")
    parser.add_argument("--budget", type=float, default=0.0, help="stop starting probes after this many seconds")
    parser.add_argument("--debugger", action="store_true", help="rerun a crashing probe under gdb / cuda-gdb")
    parser.add_argument("--under-debugger", action="store_true",
                        help="run every probe under gdb / cuda-gdb from the start (a crash in a one-off "
                             "compile may not happen again once the compiled operators are cached)")
    parser.add_argument("--list", action="store_true", help="list the probes and exit")
    parser.add_argument("--inject-failing-compiler", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.probe:
        return run_probe(args.probe, args.inject_failing_compiler)
    if args.list:
        for name, (description, _) in PROBES.items():
            print(f"{name:28s} {description}")
        return 0
    names = [n for n in args.only.split(",") if n] or list(PROBES)
    unknown = [n for n in names if n not in PROBES]
    if unknown:
        parser.error(f"unknown probe(s) {', '.join(unknown)}; --list shows them")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = environment_report()
    print(report, flush=True)
    (out / "environment.txt").write_text(report + "\n")

    started, results, first_failure = time.time(), [], None
    for index, name in enumerate(names, 1):
        if args.budget and time.time() - started > args.budget:
            print(f"budget of {args.budget:.0f} s spent: not running {', '.join(names[index - 1:])}", flush=True)
            break
        result = run_one(name, args, out, index)
        results.append(result)
        print(f"[{time.time() - started:6.0f} s] {name:28s} {'ok' if result['passed'] else 'FAILED'} "
              f"({result['seconds']:.0f} s, {result['compiles']} operators compiled)", flush=True)
        if not result["passed"]:
            first_failure = first_failure or result
            if not args.keep_going:
                break
    (out / "bisect_report.json").write_text(json.dumps(results, indent=2))
    summary = describe(first_failure) if first_failure else f"ALL {len(results)} PROBES PASSED"
    (out / "bisect_report.txt").write_text(report + "\n\n" + summary + "\n")
    print(summary)
    return 1 if first_failure else 0


if __name__ == "__main__":
    sys.exit(main())
