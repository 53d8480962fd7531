"""Unpickling that can only rebuild data, never run code.

A pickle names the callables that rebuild its objects, and ``pickle.load`` calls whatever it
names: a crafted file that names ``os.system`` runs a command the moment it is opened. Every
pickle this package reads -- our checkpoints and training states (``jt.save``'s format), the
``data.pkl`` of PyTorch checkpoints, the LPIPS weight files -- goes through
``AllowlistUnpickler``, which resolves only the globals its reader lists and refuses any other
before looking it up, so nothing outside the list is imported or called.

Memory follows the file's size, not what it asks for: numpy's array rebuilder may only make the
empty array that numpy's own pickles then fill from the file's bytes (``_reconstruct``; one
built from a shape alone would allocate gigabytes from a few bytes), and what was read is
walked once, as its readers would walk it, and refused past ``MAX_ENTRIES`` entries or
``MAX_DEPTH`` levels of nesting: a list holding the same list a thousand times, three levels
deep, is a few kilobytes of pickle and a billion entries to anything that reads it.

``read_jittor_pickle`` reads what ``jt.save`` writes for a ``.th``/``.pkl`` path: a protocol-4
pickle, then the SHA-1 of those bytes and the 8-byte marker ``HCAJSLHD`` (files without the
marker are a bare pickle). The checksum is compared first, in chunks, and the pickle is then
read from the file as it is unpickled: no file is held whole in memory. ``jt.Var``s are
pickled as ``jittor.Var(ndarray)`` and come back as Vars, numpy arrays as numpy arrays
(float64 kept), exactly as ``jt.load`` returns them.
"""
from __future__ import annotations

import hashlib
import io
import os
import pickle
from typing import Any, Mapping

import numpy as np

JITTOR_MARKER = b"HCAJSLHD"
_SHA1_BYTES = 20


class RefusedGlobal(pickle.UnpicklingError):
    """The pickle names a global outside the reader's allow-list (``qualified``: module.name)."""

    def __init__(self, module: str, name: str) -> None:
        self.qualified = f"{module}.{name}"
        super().__init__(f"the file asks for '{self.qualified}', which is not allowed here")


def numeric_dtype(spec, align: bool = False, copy: bool = True) -> np.dtype:
    """``numpy.dtype`` for plain numbers and booleans only: an object or record dtype would let
    the pickle rebuild arbitrary objects inside an array."""
    dtype = np.dtype(spec, align=align, copy=copy)  # a copy: the pickle then sets its byte order
    if dtype.kind not in "biufc":
        raise pickle.UnpicklingError(f"the file holds a numpy array of dtype '{spec}'; only numeric arrays "
                                     "are expected")
    return dtype


_RECONSTRUCT = np.empty(0).__reduce__()[0]
_SCALAR = np.float64(0).__reduce__()[0]
MAX_ENTRIES = 1 << 22  # list, tuple and dict entries in all, shared ones counted each time
MAX_DEPTH = 64  # containers within containers


class _NdarrayType:
    """What the name ``numpy.ndarray`` stands for in a pickle: the type that ``_reconstruct``
    is told to build, and nothing that can be called (``ndarray(shape)`` allocates)."""


_NDARRAY = _NdarrayType()


def _reconstruct(subtype, shape, dtype) -> np.ndarray:
    """numpy's array rebuilder, for the empty array its pickles write (shape (0,)), which the
    file's bytes then fill; any other shape would be allocated before a byte of it is read."""
    if subtype is not _NDARRAY or not isinstance(shape, tuple) or shape != (0,):
        raise pickle.UnpicklingError(f"the file builds a numpy array of shape {str(shape)[:40]} from its shape alone; "
                                     "numpy's own files build it from their bytes")
    return _RECONSTRUCT(np.ndarray, shape, dtype)


def check_bounded(value: Any) -> None:
    """Refuse ``value`` when walking its containers (shared ones each time they appear) would
    visit more than ``MAX_ENTRIES`` entries or go deeper than ``MAX_DEPTH``."""
    pending = [(value, 0)]
    entries = 0
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children = [*item.keys(), *item.values()]
        elif isinstance(item, (list, tuple, set, frozenset)):
            children = list(item)
        else:
            continue
        if depth >= MAX_DEPTH:
            raise pickle.UnpicklingError(f"the file nests containers more than {MAX_DEPTH} deep; none of ours do")
        entries += len(children)
        if entries > MAX_ENTRIES:
            raise pickle.UnpicklingError(f"the file's lists and dicts hold more than {MAX_ENTRIES:,} entries when "
                                         "shared ones are counted where they appear; none of ours do")
        pending.extend((child, depth + 1) for child in children)


# numpy's array and scalar rebuilders, under both module spellings (numpy 2 writes numpy._core).
NUMPY_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): numeric_dtype,
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.multiarray", "scalar"): _SCALAR,
    ("numpy._core.multiarray", "scalar"): _SCALAR,
}


class AllowlistUnpickler(pickle.Unpickler):
    """An unpickler that resolves the globals in ``allowed`` ({(module, name): object}) and
    raises ``RefusedGlobal`` for any other."""

    def __init__(self, file, allowed: Mapping[tuple[str, str], Any], **kwargs) -> None:
        super().__init__(file, **kwargs)
        self._allowed = allowed

    def find_class(self, module: str, name: str):
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise RefusedGlobal(module, name) from None

    def load(self) -> Any:
        """The pickled object, refused when it is larger than its file (``check_bounded``)."""
        value = super().load()
        check_bounded(value)
        return value


def _jittor_var(data) -> Any:
    """What ``jittor.Var(ndarray)`` rebuilds, for numeric arrays only."""
    import jittor as jt

    if not isinstance(data, np.ndarray) or data.dtype.kind not in "biuf":
        raise pickle.UnpicklingError(f"a jittor.Var is rebuilt from a numeric numpy array, not {type(data).__name__}")
    return jt.Var(data)


# jt.save names Var by its module and qualified name as Jittor sets them.
JITTOR_GLOBALS: dict[tuple[str, str], Any] = {
    **NUMPY_GLOBALS,
    ("jittor", "jittor_core.Var"): _jittor_var,
    ("jittor", "Var"): _jittor_var,
    ("jittor_core", "Var"): _jittor_var,
}


def read_jittor_pickle(path: str) -> Any:
    """The object ``jt.save`` wrote to ``path``, rebuilt from numbers, strings, containers,
    numpy arrays and ``jt.Var``s only.

    Raises ``RefusedGlobal`` for a file that names anything else, ``ValueError`` when the
    checksum does not match (a damaged file), and what ``pickle`` raises for a truncated one.
    """
    with open(path, "rb") as handle:
        if _checksum_fails(handle):
            raise ValueError("its checksum does not match its contents")
        handle.seek(0)
        return AllowlistUnpickler(handle, JITTOR_GLOBALS).load()


def _checksum_fails(handle: io.BufferedReader) -> bool:
    """Whether the file ends as ``jt.save`` ends its files and the SHA-1 there is not that of
    the bytes before it (hashed in chunks: a file is never held whole in memory)."""
    size = os.fstat(handle.fileno()).st_size
    trailer = _SHA1_BYTES + len(JITTOR_MARKER)
    if size < trailer:
        return False
    handle.seek(size - trailer)
    expected, marker = handle.read(_SHA1_BYTES), handle.read(len(JITTOR_MARKER))
    if marker != JITTOR_MARKER:
        return False
    handle.seek(0)
    digest, remaining = hashlib.sha1(), size - trailer
    while remaining > 0:
        chunk = handle.read(min(1 << 22, remaining))
        if not chunk:
            break
        digest.update(chunk)
        remaining -= len(chunk)
    return digest.digest() != expected
