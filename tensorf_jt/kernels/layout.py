"""Axis permutations that stay on the device the model runs on.

Jittor's ``transpose``/``permute`` has a CUDA implementation only through cuTT, a library it
downloads on first use. Without it (an offline install, or ``use_cutt=0``) the op runs on the
CPU, and the tensor is copied to the host and back. The planes and lines of TensorVMSplit and
TensorCP are stored channel-last (``models.grid_layout``) and need no copy; TensorVM's shared
tensors are read channel-last through one each step. ``reindex`` runs on every device, so on
CUDA the permutation is written as one. On the CPU the plain permute stays, so CPU results and
speed are those of Jittor's own operator.
"""
from __future__ import annotations

from typing import Sequence

import jittor as jt


def permute(x: jt.Var, axes: Sequence[int], on_device: bool | None = None) -> jt.Var:
    """``x.permute(*axes)``, as a ``reindex`` when ``on_device`` (default: when Jittor uses CUDA)."""
    axes = [int(a) for a in axes]
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"axes {axes} are not a permutation of {x.ndim} dimensions")
    if on_device is None:
        on_device = bool(jt.flags.use_cuda)
    if not on_device:
        return x.permute(*axes)
    shape = [x.shape[a] for a in axes]
    source_index = [f"i{axes.index(d)}" for d in range(x.ndim)]
    return x.reindex(shape, source_index)
