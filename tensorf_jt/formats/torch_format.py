"""PyTorch's checkpoint file format, read and written without torch.

Since torch 1.6, ``torch.save`` writes a zip archive (entries stored, not compressed):
``<name>/data.pkl`` is a protocol-2 pickle of the saved object in which every tensor is a call
``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)`` and
every storage a persistent id ``('storage', torch.<Type>Storage, key, location, numel)`` whose
bytes are the entry ``<name>/data/<key>``; ``<name>/byteorder`` says how they are ordered
(absent in files of older torch versions: little-endian). Numpy arrays inside the object are
pickled as numpy pickles them.

Reading is strict: the unpickler resolves only the globals such checkpoints contain (tensor
and storage rebuilders, ``OrderedDict``, numpy's array, dtype and scalar rebuilders,
``_codecs.encode`` for latin-1 and ``set``) and refuses any other with ``CheckpointError``, so
a crafted file cannot run code. Tensors come back as numpy arrays with their dtype and shape.

Jittor ships a reader (``jittor_utils/load_pytorch.py``, what ``jt.load`` calls for ``.pth``,
``.pt`` and ``.bin``), not used here: ``jt.load`` picks it by file suffix, so the reference's
``.th`` files go to Jittor's own pickle reader and fail; its unpickler resolves every global
a file names, so a crafted file runs arbitrary code when loaded; it returns ``jt.Var``s
(float64 becomes float32, 0-d tensors become shape [1]) and keeps its state in module globals.

Writing mirrors what ``torch.save`` writes, so that ``torch.load`` (torch >= 1.6) reads it:
jittor Vars become tensors, numpy arrays stay numpy arrays.
"""
from __future__ import annotations

import collections
import io
import math
import os
import pickle
import struct
import tempfile
import zipfile

import numpy as np
import jittor as jt

from tensorf_jt.errors import CheckpointError
from tensorf_jt.formats.file_modes import share_like_open
from tensorf_jt.formats.safe_pickle import NUMPY_GLOBALS, AllowlistUnpickler, RefusedGlobal

ZIP_MAGIC = b"PK\x03\x04"
# The first bytes of a checkpoint written by torch < 1.6 (a pickled magic number).
LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"

# torch storage class name -> numpy dtype (little-endian; byte order fixed at read time).
STORAGE_DTYPES = {
    "DoubleStorage": np.dtype("<f8"),
    "FloatStorage": np.dtype("<f4"),
    "HalfStorage": np.dtype("<f2"),
    "LongStorage": np.dtype("<i8"),
    "IntStorage": np.dtype("<i4"),
    "ShortStorage": np.dtype("<i2"),
    "CharStorage": np.dtype("i1"),
    "ByteStorage": np.dtype("u1"),
    "BoolStorage": np.dtype("?"),
}
_STORAGE_NAMES = {dtype: name for name, dtype in STORAGE_DTYPES.items()}

# What torch.save writes: entries aligned to 64 bytes, format version 3 (torch >= 1.6).
_ALIGNMENT = 64
_ARCHIVE_NAME = "archive"
ARCHIVE_COMMENT = b"written by tensorf_jt"


def is_torch_checkpoint(path: str) -> bool:
    """Whether the file at ``path`` starts like a zip archive (every checkpoint of torch >= 1.6)
    or like a checkpoint of torch < 1.6. Jittor's own files are plain pickles and do neither."""
    with open(path, "rb") as handle:
        head = handle.read(len(LEGACY_MAGIC))
    return head.startswith(ZIP_MAGIC) or head == LEGACY_MAGIC


def written_by_us(path: str) -> bool:
    """Whether ``path`` is a zip archive that ``save_torch_checkpoint`` wrote (its comment,
    which ``torch.load`` ignores, carries ``ARCHIVE_COMMENT``)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.comment == ARCHIVE_COMMENT
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


# --------------------------------------------------------------------- reading
class _StorageType:
    """What a ``torch.<Type>Storage`` global resolves to: just its element type."""

    def __init__(self, name: str, dtype: np.dtype) -> None:
        self.name, self.dtype = name, dtype


def _rebuild_tensor(storage: np.ndarray, storage_offset: int, size, stride, requires_grad=False,
                    backward_hooks=None, metadata=None) -> np.ndarray:
    """``torch._utils._rebuild_tensor_v2``: the strided view of ``storage``, copied to a contiguous array."""
    size, stride, offset = tuple(int(s) for s in size), tuple(int(s) for s in stride), int(storage_offset)
    if len(size) != len(stride) or min(size + stride + (offset,), default=0) < 0:
        raise CheckpointError(f"a tensor has inconsistent size {size}, stride {stride} or offset {offset}.")
    if backward_hooks:
        raise CheckpointError("a tensor carries backward hooks, which a checkpoint of weights never has.")
    if 0 in size:
        return np.zeros(size, dtype=storage.dtype)
    if math.prod(size) > storage.size:
        raise CheckpointError(f"a tensor of size {size} has more elements than its storage ({storage.size}); "
                              "a checkpoint's weights never repeat their storage.")
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= storage.size:
        raise CheckpointError(f"a tensor of size {size} (stride {stride}, offset {offset}) reads past the end of "
                              f"its storage of {storage.size} elements.")
    itemsize = storage.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(storage[offset:], shape=size, strides=tuple(s * itemsize for s in stride),
                                           writeable=False)
    return np.array(view, order="C")


def _rebuild_parameter(data: np.ndarray, requires_grad=True, backward_hooks=None) -> np.ndarray:
    """``torch._utils._rebuild_parameter``: a parameter is its data here."""
    return data


def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it for bytes (always latin-1); nothing else."""
    if encoding != "latin1" or not isinstance(text, str):
        raise CheckpointError(f"the pickle calls _codecs.encode with encoding '{encoding}'; only latin1 is expected.")
    return text.encode("latin1")


# (module, name) -> what it resolves to; numpy's rebuilders come from ``safe_pickle``.
_ALLOWED_GLOBALS = {
    **NUMPY_GLOBALS,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("__builtin__", "set"): set,  # protocol 2 spells builtins the Python 2 way
    ("__builtin__", "frozenset"): frozenset,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("_codecs", "encode"): _latin1_encode,
}
_ALLOWED_GLOBALS.update({("torch", name): _StorageType(name, dtype) for name, dtype in STORAGE_DTYPES.items()})


class _TorchUnpickler(AllowlistUnpickler):
    """Unpickles ``data.pkl``, resolving only ``_ALLOWED_GLOBALS`` and storages read from ``archive``."""

    def __init__(self, data: bytes, archive: zipfile.ZipFile, prefix: str, byteorder: str) -> None:
        super().__init__(io.BytesIO(data), _ALLOWED_GLOBALS, encoding="utf-8")
        self.archive, self.prefix, self.byteorder = archive, prefix, byteorder
        self.storages: dict[str, np.ndarray] = {}

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str)):
            raise CheckpointError(f"unexpected persistent id {pid!r}; torch writes "
                                  "('storage', type, key, location, numel).")
        _, storage_type, key, _location, numel = pid
        if key not in self.storages:
            entry = f"{self.prefix}/data/{key}"
            try:
                raw = self.archive.read(entry)
            except KeyError:
                raise CheckpointError(f"the storage '{entry}' is missing from the archive.") from None
            dtype = storage_type.dtype.newbyteorder(">" if self.byteorder == "big" else "<")
            if len(raw) != int(numel) * dtype.itemsize:
                raise CheckpointError(f"the storage '{entry}' holds {len(raw)} bytes, its header says "
                                      f"{numel} x {dtype.itemsize}.")
            self.storages[key] = np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="))
        return self.storages[key]


def _data_pkl_prefix(archive: zipfile.ZipFile) -> str:
    """The archive's top-level folder, the one holding ``data.pkl``."""
    prefixes = [name[: -len("/data.pkl")] for name in archive.namelist()
                if name.endswith("/data.pkl") and name.count("/") == 1]
    if len(prefixes) != 1:
        found = "no" if not prefixes else f"{len(prefixes)}"
        raise CheckpointError(f"the zip archive has {found} '<name>/data.pkl' entries; a PyTorch checkpoint has one.")
    return prefixes[0]


def load_torch_checkpoint(path: str):
    """The object ``torch.save`` wrote to ``path``, with every tensor as a numpy array.

    Raises ``CheckpointError`` for a file that is truncated, not a torch zip checkpoint, or
    that names anything but the classes listed in ``_ALLOWED_GLOBALS``.
    """
    where = f"PyTorch checkpoint '{path}'"
    with open(path, "rb") as handle:
        head = handle.read(len(LEGACY_MAGIC))
    if head == LEGACY_MAGIC:
        raise CheckpointError(f"{where} uses the format of torch < 1.6; load it with torch and save it again "
                              "with torch >= 1.6 (torch.save(torch.load(path), path)).")
    try:
        with zipfile.ZipFile(path) as archive:
            prefix = _data_pkl_prefix(archive)
            names = set(archive.namelist())
            byteorder = "little"
            if f"{prefix}/byteorder" in names:
                byteorder = archive.read(f"{prefix}/byteorder").decode("ascii", "replace").strip()
            if byteorder not in ("little", "big"):
                raise CheckpointError(f"unknown byte order '{byteorder}'.")
            return _TorchUnpickler(archive.read(f"{prefix}/data.pkl"), archive, prefix, byteorder).load()
    except RefusedGlobal as err:
        module, _, name = err.qualified.rpartition(".")
        hint = (" (bfloat16 and complex tensors have no numpy type here: convert them to float32 "
                "with torch before saving)" if module == "torch" and name.endswith("Storage") else "")
        raise CheckpointError(
            f"{where} asks for '{err.qualified}', which a TensoRF checkpoint never contains{hint}; refusing to "
            "load it, since unpickling arbitrary objects can run arbitrary code.") from None
    except CheckpointError as err:
        raise CheckpointError(f"{where}: {err}") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as err:
        raise CheckpointError(f"{where} is truncated or not a valid zip archive ({err}); "
                              "copy or download it again.") from None
    except (pickle.UnpicklingError, ValueError, TypeError, IndexError, AttributeError, KeyError,
            struct.error, UnicodeDecodeError) as err:
        raise CheckpointError(f"{where} has a malformed data.pkl ({type(err).__name__}: {err}).") from None


# --------------------------------------------------------------------- writing
class _Pickler:
    """A protocol-2 pickle writer for the few types a TensoRF checkpoint holds.

    Written by hand because tensors must be pickled as calls to torch's global functions,
    which the standard pickler cannot name without torch installed. Uses only the opcodes
    ``torch.save`` itself emits; no memo (storages are shared through their keys instead).
    """

    def __init__(self) -> None:
        self.out = io.BytesIO()
        self.storages: list[np.ndarray] = []

    def dumps(self, obj) -> bytes:
        self.out.write(pickle.PROTO + b"\x02")
        self.save(obj)
        self.out.write(pickle.STOP)
        return self.out.getvalue()

    def write_global(self, module: str, name: str) -> None:
        self.out.write(pickle.GLOBAL + f"{module}\n{name}\n".encode("ascii"))

    def save(self, obj) -> None:
        write = self.out.write
        if obj is None:
            write(pickle.NONE)
        elif obj is True or obj is False:
            write(pickle.NEWTRUE if obj else pickle.NEWFALSE)
        elif isinstance(obj, int):
            self.save_int(obj)
        elif isinstance(obj, float):
            write(pickle.BINFLOAT + struct.pack(">d", obj))
        elif isinstance(obj, str):
            data = obj.encode("utf-8", "surrogatepass")
            write(pickle.BINUNICODE + struct.pack("<I", len(data)) + data)
        elif isinstance(obj, bytes):  # protocol 2 has no bytes opcode: as torch.save, via _codecs.encode
            self.save_call(("_codecs", "encode"), (obj.decode("latin1"), "latin1"))
        elif isinstance(obj, tuple):
            self.save_tuple(obj)
        elif isinstance(obj, list):
            write(pickle.EMPTY_LIST)
            if obj:
                write(pickle.MARK)
                for item in obj:
                    self.save(item)
                write(pickle.APPENDS)
        elif isinstance(obj, dict):
            if type(obj) is collections.OrderedDict:
                self.save_call(("collections", "OrderedDict"), ())
            elif type(obj) is dict:
                write(pickle.EMPTY_DICT)
            else:
                raise TypeError(f"cannot write a {type(obj).__name__} into a PyTorch checkpoint.")
            if obj:
                write(pickle.MARK)
                for key, value in obj.items():
                    self.save(key)
                    self.save(value)
                write(pickle.SETITEMS)
        elif isinstance(obj, jt.Var):
            self.save_tensor(obj.numpy())
        elif isinstance(obj, np.ndarray):
            self.save_ndarray(obj)
        elif isinstance(obj, _GlobalRef):
            self.write_global(obj.module, obj.name)
        else:
            raise TypeError(f"cannot write a {type(obj).__name__} into a PyTorch checkpoint.")

    def save_int(self, value: int) -> None:
        if 0 <= value < 256:
            self.out.write(pickle.BININT1 + struct.pack("<B", value))
        elif 0 <= value < 65536:
            self.out.write(pickle.BININT2 + struct.pack("<H", value))
        elif -(2 ** 31) <= value < 2 ** 31:
            self.out.write(pickle.BININT + struct.pack("<i", value))
        else:
            data = pickle.encode_long(value)
            self.out.write(pickle.LONG1 + struct.pack("<B", len(data)) + data)

    def save_tuple(self, items: tuple) -> None:
        short = {0: pickle.EMPTY_TUPLE, 1: pickle.TUPLE1, 2: pickle.TUPLE2, 3: pickle.TUPLE3}
        if len(items) not in short:
            self.out.write(pickle.MARK)
        for item in items:
            self.save(item)
        self.out.write(short.get(len(items), pickle.TUPLE))

    def save_call(self, function: tuple[str, str], args: tuple) -> None:
        self.write_global(*function)
        self.save_tuple(args)
        self.out.write(pickle.REDUCE)

    def save_tensor(self, array: np.ndarray) -> None:
        """A tensor: ``_rebuild_tensor_v2`` over a new storage holding ``array``'s elements."""
        array = np.ascontiguousarray(array)
        name = _STORAGE_NAMES.get(array.dtype.newbyteorder("<") if array.dtype.itemsize > 1 else array.dtype)
        if name is None:
            raise TypeError(f"no torch storage type for dtype {array.dtype}.")
        key = str(len(self.storages))
        self.storages.append(array)
        stride, step = [], 1
        for n in reversed(array.shape):
            stride.insert(0, step)
            step *= n
        self.write_global("torch._utils", "_rebuild_tensor_v2")
        self.out.write(pickle.MARK)
        self.out.write(pickle.MARK)
        self.save("storage")
        self.write_global("torch", name)
        self.save(key)
        self.save("cpu")
        self.save(int(array.size))
        self.out.write(pickle.TUPLE + pickle.BINPERSID)
        self.save(0)
        self.save(tuple(int(n) for n in array.shape))
        self.save(tuple(stride))
        self.save(False)
        self.save_call(("collections", "OrderedDict"), ())
        self.out.write(pickle.TUPLE + pickle.REDUCE)

    def save_ndarray(self, array: np.ndarray) -> None:
        """A numpy array as numpy pickles it (module spelled ``numpy.core``, which numpy 1 and 2 both read)."""
        array = np.ascontiguousarray(array)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"cannot write a numpy array of dtype {array.dtype} into a PyTorch checkpoint.")
        self.save_call(("numpy.core.multiarray", "_reconstruct"), (_GlobalRef("numpy", "ndarray"), (0,), b"b"))
        self.out.write(pickle.MARK)
        self.save(1)
        self.save(tuple(int(n) for n in array.shape))
        self.save_call(("numpy", "dtype"), (array.dtype.str[1:], False, True))
        endian = "|" if array.dtype.itemsize == 1 else "<"
        self.save((3, endian, None, None, None, -1, -1, 0))
        self.out.write(pickle.BUILD)
        self.save(False)
        self.save(array.astype(array.dtype.newbyteorder("<")).tobytes())
        self.out.write(pickle.TUPLE + pickle.BUILD)


class _GlobalRef:
    """A module-level name to be pickled as a GLOBAL (here: ``numpy.ndarray`` as a call argument)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name


def _aligned_entry(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    """Add a stored entry whose data starts on a 64-byte boundary, padded as torch pads (an 'FB' extra field)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    header_end = archive.fp.tell() + 30 + len(name.encode("utf-8"))
    if len(data) > zipfile.ZIP64_LIMIT:  # zipfile appends a 20-byte zip64 field to the local header
        header_end += 20
    padding = (-(header_end + 4)) % _ALIGNMENT
    info.extra = b"FB" + struct.pack("<H", padding) + b"Z" * padding
    archive.writestr(info, data)


def save_torch_checkpoint(obj, path: str) -> None:
    """Write ``obj`` to ``path`` in ``torch.save``'s format, so ``torch.load`` reads it.

    ``obj`` may hold dicts, OrderedDicts, lists, tuples, str, int, float, bool, None, bytes,
    ``jt.Var`` (written as CPU tensors) and numeric numpy arrays (written as numpy arrays).
    The file appears complete or not at all: it is written next to ``path`` and renamed, with
    the permissions a plain ``open`` would give it (``file_modes.replacement_mode``).
    """
    pickler = _Pickler()
    data = pickler.dumps(obj)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".th", dir=os.path.dirname(os.path.abspath(path)))
    os.close(handle)
    try:
        share_like_open(temporary, path)
        with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_STORED) as archive:
            archive.comment = ARCHIVE_COMMENT
            _aligned_entry(archive, f"{_ARCHIVE_NAME}/data.pkl", data)
            _aligned_entry(archive, f"{_ARCHIVE_NAME}/.format_version", b"1")
            _aligned_entry(archive, f"{_ARCHIVE_NAME}/.storage_alignment", str(_ALIGNMENT).encode("ascii"))
            _aligned_entry(archive, f"{_ARCHIVE_NAME}/byteorder", b"little")
            for key, array in enumerate(pickler.storages):
                _aligned_entry(archive, f"{_ARCHIVE_NAME}/data/{key}",
                               array.astype(array.dtype.newbyteorder("<")).tobytes())
            _aligned_entry(archive, f"{_ARCHIVE_NAME}/version", b"3\n")
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
