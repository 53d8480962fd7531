"""A checkpoint's contents as SHA-256 digests, tensor by tensor, for bit-identity tests.

Used by the tests and by the generators of the fixtures they compare with
(``tests/fixtures/make_refactor_fixtures.py``), so both sides digest the same way.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np


def _array_digest(value) -> str:
    array = np.ascontiguousarray(value.numpy() if hasattr(value, "numpy") else np.asarray(value))
    header = f"{array.dtype.str}{array.shape}".encode()
    return hashlib.sha256(header + array.tobytes()).hexdigest()


def checkpoint_digest(ckpt: dict) -> dict:
    """{'kwargs': JSON text of the constructor arguments, 'tensors': {name: digest}} of a
    checkpoint dict (as ``jt.load`` returns it): the model's tensors and its alpha mask."""
    kwargs = {key: np.asarray(value).tolist() if hasattr(value, "shape") else value
              for key, value in ckpt["kwargs"].items()}
    tensors = {f"state_dict.{name}": _array_digest(value) for name, value in ckpt["state_dict"].items()}
    for key in ("alphaMask.shape", "alphaMask.mask", "alphaMask.aabb"):
        if key in ckpt:
            tensors[key] = _array_digest(ckpt[key])
    return {"kwargs": json.dumps(kwargs, sort_keys=True), "tensors": tensors}
