"""What portgemm needs to know about one array: pointer, shape, strides, dtype, device.

``info(x)`` takes a numpy array (host, device "cpu"; not a subclass such as a masked
array) or anything exporting ``__cuda_array_interface__`` (device "cuda"): the per-array
path, which names the offending array. ``gather(X)`` reads a whole list of NumPy, CuPy
or torch arrays at once (the per-call hot path); ``stacked(X)`` a 3-D array.
"""
from __future__ import annotations

import ctypes
from itertools import starmap
import struct
import sys
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from .errors import DtypeError, LayoutError, ValidationError
from .memo import kept


class ArrayInfo(NamedTuple):
    ptr: int                 # address of element [0, 0]
    shape: tuple             # (rows, cols)
    strides: tuple           # in ELEMENTS, as stored (may be negative or zero)
    dtype: np.dtype
    device: str              # "cpu" | "cuda"
    readonly: bool = False


class _Dtypes(tuple):
    """The element types portgemm computes in. bfloat16 is ml_dtypes' numpy dtype, which
    exists only once ml_dtypes is imported (by whoever made the array), so it is matched
    by name: checking a dtype never imports ml_dtypes."""

    def __contains__(self, d) -> bool:
        return tuple.__contains__(self, d) or \
            (getattr(d, "name", None) == "bfloat16" and getattr(d, "itemsize", 0) == 2)


SUPPORTED_DTYPES = _Dtypes((np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)))
SUPPORTED_NAMES = "float32, float64, float16 and bfloat16"


def bfloat16_dtype() -> np.dtype:
    """NumPy's bfloat16 (ml_dtypes, imported here, on first use): how portgemm names
    torch.bfloat16 tensors and reads bfloat16 NumPy/CuPy data."""
    try:
        import ml_dtypes
    except ImportError:
        raise DtypeError("bfloat16 needs the ml_dtypes package (pip install ml_dtypes; "
                         "NumPy has no bfloat16 of its own)") from None
    return np.dtype(ml_dtypes.bfloat16)


def numpy_dtype(name) -> np.dtype:
    """The numpy dtype of a dtype name ("bfloat16": ml_dtypes', DtypeError without it)."""
    return bfloat16_dtype() if name == "bfloat16" else np.dtype(name)


_new = tuple.__new__  # NamedTuple's own __new__ is a Python function; this skips it
MAX_SPAN = 2**31 - 1  # elements one matrix may span: the kernels use 32-bit offsets


def info(x) -> ArrayInfo:
    """ArrayInfo of a 2-D array; ValidationError if not 2-D, LayoutError if a byte stride is
    not a whole number of elements, DtypeError if ``x`` is not an array at all."""
    if isinstance(x, np.ndarray):
        if type(x) is not np.ndarray and not isinstance(x, np.memmap):
            # A masked array's mask or np.matrix's products would be ignored or misread
            # after earlier GEMMs were written; refuse every such subclass up front.
            raise DtypeError(f"{type(x).__module__}.{type(x).__name__} is an ndarray "
                             f"subclass whose arithmetic may differ from ndarray's; pass "
                             f"np.asarray(x) (a plain view of the same memory)")
        if x.ndim != 2:
            raise ValidationError(f"expected a 2-D array, got {x.ndim}-D with shape {x.shape}")
        isz = x.itemsize
        s0, s1 = x.strides
        if s0 % isz or s1 % isz:
            raise LayoutError(f"byte strides {x.strides} are not multiples of the itemsize {isz}")
        # x.ctypes.data is the costliest step (~0.8 us); nothing cheaper is public.
        return _new(ArrayInfo, (x.ctypes.data, x.shape, (s0 // isz, s1 // isz), x.dtype,
                                "cpu", not x.flags.writeable))
    if _kind(type(x)) == "torch" and str(x.dtype) == "torch.bfloat16":
        return _torch_bf16_info(x)   # torch exports no __cuda_array_interface__ for it
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(cai)
    raise DtypeError(f"expected a 2-D array (numpy.ndarray or an object with "
                     f"__cuda_array_interface__), got {type(x).__name__}")


def _torch_bf16_info(x) -> ArrayInfo:
    if x.dim() != 2:
        raise ValidationError(f"expected a 2-D array, got {x.dim()}-D with shape {tuple(x.shape)}")
    dev = x.get_device()
    return _new(ArrayInfo, (x.data_ptr(), tuple(x.shape), tuple(x.stride()), bfloat16_dtype(),
                            "cuda" if dev >= 0 else "torch-cpu", False))


def _from_cai(cai: dict) -> ArrayInfo:
    shape = tuple(int(d) for d in cai["shape"])
    if len(shape) != 2:
        raise ValidationError(f"expected a 2-D array, got {len(shape)}-D with shape {shape}")
    if cai.get("mask") is not None:
        raise LayoutError("masked device arrays are not supported")
    dtype = np.dtype(cai["typestr"])
    isz = dtype.itemsize
    strides = cai.get("strides")
    if strides is None:  # C-contiguous by the interface's definition
        st = (shape[1], 1)
    else:
        s0, s1 = (int(s) for s in strides)
        if s0 % isz or s1 % isz:
            raise LayoutError(f"byte strides {tuple(strides)} are not multiples of the "
                              f"itemsize {isz}")
        st = (s0 // isz, s1 // isz)
    ptr, readonly = cai["data"]
    return _new(ArrayInfo, (int(ptr or 0), shape, st, dtype, "cuda", bool(readonly)))


# ---- whole operands at once (the per-call hot path) ----------------------------------------

class Operand(NamedTuple):
    """One operand of a batch (a list of 2-D arrays or one 3-D stack) as flat arrays."""
    ptr: np.ndarray          # (n,) int64: address of each matrix's element [0, 0]
    shape: np.ndarray        # (n, 2) int64: rows, cols as stored
    strides: np.ndarray      # (n, 2) int64: in elements
    dtype: np.dtype
    device: str
    readonly: np.ndarray     # (n,) bool
    # Every matrix says it is row-major contiguous (CuPy's flag), so ``strides`` were
    # derived from the shapes, not read: checks those strides imply may be skipped.
    contiguous: bool = False


_TORCH_DTYPES: dict = {}     # torch dtype -> numpy dtype, filled on first use


def _torch_dtype(torch, d):
    if not _TORCH_DTYPES:
        _TORCH_DTYPES.update({torch.float32: np.dtype(np.float32),
                              torch.float64: np.dtype(np.float64),
                              torch.float16: np.dtype(np.float16)})
    if d is getattr(torch, "bfloat16", None) and d not in _TORCH_DTYPES:
        _TORCH_DTYPES[d] = bfloat16_dtype()   # DtypeError without ml_dtypes
    return _TORCH_DTYPES.get(d)


def _kind(t):
    """Which fast reader takes arrays of type ``t``: "numpy", "cupy", "torch" or None.
    CuPy and torch are looked up in sys.modules: an array of theirs implies they are loaded."""
    if t is np.ndarray or t is np.memmap:
        return "numpy"
    cupy = sys.modules.get("cupy")
    if cupy is not None and t is cupy.ndarray:
        return "cupy"
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(t, torch.Tensor):
        return "torch"
    return None


_DTYPE, _SHAPE, _STRIDES, _DATA = (attrgetter(a) for a in ("dtype", "shape", "strides", "data"))
_PTR, _DEVICE_ID = attrgetter("ptr"), attrgetter("device_id")   # of a CuPy MemoryPointer


def gather(X) -> Operand | None:
    """The fast path of a list of arrays of one known type (NumPy, CuPy or torch), read
    with plain attribute reads in one pass per attribute; None when anything is unusual
    (mixed types, not 2-D, mixed dtypes or devices, odd byte strides, an unsupported
    torch dtype), so that the caller takes the per-array path, which names the offender."""
    n = len(X)
    kind = list_kind(X)
    if kind is None:
        return None
    if kind == "torch":
        return _gather_torch(X, n)
    dtype = _one(list(map(_DTYPE, X)))   # map with attrgetter: no bytecode per element
    if dtype is None:
        return None
    shape = _pairs(X, _SHAPE, n)   # None unless every array is 2-D
    if shape is None:
        return None
    contiguous = kind == "cupy" and _all_c_contiguous(X)
    if contiguous:
        # Row-major with unit columns: the strides follow from the shapes, so they are
        # not read (CuPy builds a tuple per read). A length-1 dimension's stride, which
        # C-contiguity leaves free, is never used (problem._layout).
        strides = shape[:, ::-1].copy()   # (cols, rows), then (cols, 1): two numpy calls
        strides[:, 1] = 1
    else:
        bstrides = _pairs(X, _STRIDES, n)
        if bstrides is None or np.count_nonzero(bstrides % dtype.itemsize):
            return None
        strides = bstrides // dtype.itemsize
    if kind == "numpy":
        ptr = _host_pointers(X)
        readonly = np.fromiter([not x.flags.writeable for x in X], bool, n)
        device = "cpu"
    else:  # cupy: x.data is a MemoryPointer; its attributes are cheap slots
        mem = list(map(_DATA, X))
        dev = _one(list(map(_DEVICE_ID, mem)))
        if dev is None:
            return None
        device = f"cuda:{dev}"
        ptr = map(_PTR, mem)
        readonly = _writable(n)
    return _new(Operand, (np.fromiter(ptr, np.int64, n), shape, strides, dtype, device,
                          readonly, contiguous))


def list_kind(X):
    """_kind of the one type of every array in the non-empty list X, else None (also
    for an empty list): which fast reader takes the whole list."""
    if not X:
        return None
    t = _one(list(map(type, X)))
    return _kind(t) if t is not None else None


def _one(values):
    """The one value every element of ``values`` equals, else None. list.count compares
    by identity first, so a list of one type or dtype object costs no hashing (a set
    of them hashes each)."""
    first = values[0]
    return first if values.count(first) == len(values) else None


_C_CONTIGUOUS = attrgetter("_c_contiguous")   # CuPy's flag: a plain slot, no tuple built


def _all_c_contiguous(X) -> bool:
    """Whether every CuPy array in X says it is C-contiguous (False where the flag is
    missing: then the strides are read)."""
    try:
        return all(map(_C_CONTIGUOUS, X))
    except AttributeError:
        return False


def _struct_pointers(X):
    """Data pointers read from each array's __array_struct__ (numpy's public C interface,
    PyArrayInterface: ``data`` at byte 40 on 64-bit): about 4x cheaper than x.ctypes.data
    or __array_interface__, which build Python objects per array."""
    caps = [x.__array_struct__ for x in X]   # each capsule lives while it is read
    return [_FROM_ADDRESS(_CAPSULE_POINTER(c, None) + 40).value for c in caps]


def _interface_pointers(X):
    return [x.__array_interface__["data"][0] for x in X]


def _pick_host_pointers():
    """The struct reader where it reads this interpreter's arrays right, else the dict."""
    try:
        probe = [np.zeros((3, 4), np.float32)[1:, 1:], np.zeros(5)[::2]]
        if ctypes.sizeof(ctypes.c_void_p) == 8 and \
                _struct_pointers(probe) == _interface_pointers(probe):
            return _struct_pointers
    except Exception:  # noqa: BLE001 - any surprise: the portable reader
        pass
    return _interface_pointers


_CAPSULE_POINTER = ctypes.pythonapi.PyCapsule_GetPointer
_CAPSULE_POINTER.restype = ctypes.c_void_p
_CAPSULE_POINTER.argtypes = [ctypes.py_object, ctypes.c_char_p]
_FROM_ADDRESS = ctypes.c_int64.from_address
_host_pointers = _pick_host_pointers()


def torch_readers(t):
    """(data_ptr, stride, get_device) of torch tensors of type ``t``, as C-level callables
    for map: the methods as ``t`` resolves them (torch.Tensor's method descriptors, for a
    plain tensor), called with the tensor, which skips the bound method methodcaller
    makes per call."""
    return t.data_ptr, t.stride, t.get_device


def torch_common(X):
    """(data_ptr, stride, dtype, device) of torch tensors X of one type (list_kind) that
    share one dtype portgemm takes and one device: the readers (torch_readers), the
    NumPy dtype and "cuda:<index>" ("torch-cpu" on the host: the per-array path); None
    when they do not."""
    data_ptr, stride, get_device = torch_readers(type(X[0]))
    tdtype = _one(list(map(_DTYPE, X)))
    dev = _one(list(map(get_device, X)))   # -1 on the host
    if tdtype is None or dev is None:
        return None
    dtype = _torch_dtype(sys.modules["torch"], tdtype)
    if dtype is None:
        return None
    return data_ptr, stride, dtype, f"cuda:{dev}" if dev >= 0 else "torch-cpu"


def _gather_torch(X, n):
    common = torch_common(X)
    if common is None:
        return None
    data_ptr, stride, dtype, device = common
    shape = _pairs(X, _SHAPE, n)   # None unless every tensor is 2-D
    if shape is None:
        return None
    strides = _pairs(X, stride, n)   # torch strides are in elements
    if strides is None:
        return None
    ptr = np.fromiter(map(data_ptr, X), np.int64, n)
    return _new(Operand, (ptr, shape, strides, dtype, device, _writable(n), False))


def _writable(n):
    """(n,) False: the readonly flags of arrays that cannot be read-only (CuPy, torch);
    one read-only array per n, kept."""
    return kept(_WRITABLE, n, _PACKERS_KEPT, lambda: _read_only(np.zeros(n, bool)))


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


_WRITABLE: dict = {}


def _pairs(X, read, n):
    """(n, 2) int64 from ``read(x)`` (shape or strides) of each of the n arrays X; None
    when one is not a pair of int64s. Each pair is packed by one C call as it is read
    (itertools.starmap over a 2-int64 struct, whose pack refuses any other count of
    values): so this is also the 2-D check, with no ``ndim`` read an array, and each
    tuple is freed at once (holding n fresh tuples would set off the garbage collector
    on every large call)."""
    try:
        raw = b"".join(starmap(_PAIR, map(read, X)))
    except (struct.error, TypeError):   # not a pair, not integers, or past int64's range
        return None
    return np.frombuffer(raw, np.int64).reshape(n, 2)


_PAIR = struct.Struct("=2q").pack
_PACKERS_KEPT = 64   # read-only flag arrays kept (_writable), one per batch size


def stacked(X) -> tuple | None:
    """(base pointer, shape, strides in elements, dtype, device, readonly) of a 3-D array
    (NumPy, CuPy, torch or __cuda_array_interface__), or None if ``X`` is none of these.
    Raises LayoutError if a byte stride is not a whole number of elements."""
    kind = _kind(type(X))
    if kind == "torch":
        dev = X.get_device()
        dtype = _torch_dtype(sys.modules["torch"], X.dtype)
        if dtype is None:
            raise DtypeError(f"unsupported torch dtype {X.dtype}")
        return (X.data_ptr(), tuple(X.shape), tuple(X.stride()), dtype,
                f"cuda:{dev}" if dev >= 0 else "torch-cpu", False)
    if kind == "numpy":
        ptr, ro = X.__array_interface__["data"]
        shape, bst, dtype, device = X.shape, X.strides, X.dtype, "cpu"
    elif kind == "cupy":
        ptr, ro = X.data.ptr, False
        shape, bst, dtype, device = X.shape, X.strides, X.dtype, f"cuda:{X.data.device_id}"
    else:
        cai = getattr(X, "__cuda_array_interface__", None)
        if cai is None:
            return None
        shape, dtype = tuple(int(d) for d in cai["shape"]), np.dtype(cai["typestr"])
        bst = cai.get("strides") or tuple(int(np.prod(shape[i + 1:])) * dtype.itemsize
                                          for i in range(len(shape)))
        ptr, ro = cai["data"]
        device = "cuda"
    isz = dtype.itemsize
    if any(s % isz for s in bst):
        raise LayoutError(f"byte strides {tuple(bst)} are not multiples of the itemsize {isz}")
    return int(ptr or 0), tuple(shape), tuple(s // isz for s in bst), dtype, device, bool(ro)
