"""The packed operands of the grouped API: one array per operand (any rank), read in
O(1) calls, and the per-group checks shared by both packed forms.

Errors name the offending group ("group g: ..."); ``err.gemm`` is that index too, since
group g runs as GEMM g.
"""
from __future__ import annotations

import sys
from typing import NamedTuple

import numpy as np

from ..call_cache import CallCache  # noqa: F401 (the grouped calls' cache)
from ..errors import DtypeError, LayoutError, ValidationError
from ..arrays import SUPPORTED_NAMES, bfloat16_dtype
from ..problem import SUPPORTED_DTYPES, Batch, _layout, _overlaps


class Operand(NamedTuple):
    ptr: int          # address of element [0, ..., 0]
    shape: tuple
    strides: tuple    # in elements
    dtype: np.dtype
    device: str       # "cpu" | "cuda" | "cuda:N" | ...
    readonly: bool
    obj: object       # the array itself


def group_error(cls, message: str, group: int | None):
    """A ``cls`` error whose message names the group."""
    e = cls(message)
    if group is not None:
        e.gemm = e.group = int(group)
        e.args = (f"group {group}: {message}",)
    return e


def regroup(e):
    """The same error as a lists-path one ("GEMM i: ..."), worded for groups."""
    msg = str(e)
    gemm = getattr(e, "gemm", None)
    if gemm is not None and msg.startswith(f"GEMM {gemm}: "):
        msg = msg[len(f"GEMM {gemm}: "):]
    return group_error(type(e), msg.replace("GEMM ", "group "), gemm)


_TORCH_DTYPES = {"torch.float32": np.dtype(np.float32), "torch.float64": np.dtype(np.float64),
                 "torch.float16": np.dtype(np.float16),
                 "torch.int32": np.dtype(np.int32), "torch.int64": np.dtype(np.int64)}


def read(x, name: str) -> Operand:
    """Pointer, shape, strides (elements), dtype and device of one array, by attribute
    reads: numpy, CuPy, PyTorch, then anything with __cuda_array_interface__."""
    if isinstance(x, np.ndarray):
        return _checked(name, x.ctypes.data, x.shape, x.strides, x.dtype, "cpu",
                        not x.flags.writeable, x)
    cupy = sys.modules.get("cupy")   # loaded if x is one of its arrays
    if cupy is not None and isinstance(x, cupy.ndarray):
        return _checked(name, x.data.ptr, x.shape, x.strides, x.dtype,
                        f"cuda:{x.data.device_id}", False, x)
    mod = type(x).__module__ or ""
    if mod.startswith("torch") and hasattr(x, "data_ptr"):
        dtype = bfloat16_dtype() if str(x.dtype) == "torch.bfloat16" else \
            _TORCH_DTYPES.get(str(x.dtype))
        if dtype is None:
            raise DtypeError(f"{name} has unsupported dtype {x.dtype}")
        dev = x.device
        where = "cpu" if dev.type == "cpu" else f"{dev.type}:{dev.index or 0}"
        return Operand(x.data_ptr(), tuple(x.shape), tuple(x.stride()), dtype, where, False, x)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        shape = tuple(int(d) for d in cai["shape"])
        dtype = np.dtype(cai["typestr"])
        strides = cai.get("strides")
        if strides is None:  # C-contiguous by the interface's definition
            strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * dtype.itemsize
                            for i in range(len(shape)))
        ptr, readonly = cai["data"]
        return _checked(name, int(ptr or 0), shape, strides, dtype, "cuda", bool(readonly), x)
    raise DtypeError(f"{name} must be an array (numpy, CuPy, PyTorch or one with "
                     f"__cuda_array_interface__), got {type(x).__name__}")


def _checked(name, ptr, shape, byte_strides, dtype, device, readonly, obj) -> Operand:
    isz = dtype.itemsize
    strides = tuple([s // isz for s in byte_strides])
    if any([s % isz for s in byte_strides]):
        raise LayoutError(f"{name}: byte strides {tuple(byte_strides)} are not multiples of "
                          f"the itemsize {isz}")
    return _new(Operand, (ptr, tuple(shape), strides, dtype, device, bool(readonly), obj))


_new = tuple.__new__  # NamedTuple's own __new__ is a Python function; this skips it


def check_operands(backend, ops: dict, ndims: dict) -> np.dtype:
    """Ranks, one supported dtype, one device of the backend's kind; returns the dtype."""
    for name, op in ops.items():
        if len(op.shape) != ndims[name]:
            raise ValidationError(f"{name} must be {ndims[name]}-D, got shape {op.shape}")
    host = backend.name == "numpy"
    for name, op in ops.items():
        if (op.device == "cpu") != host:
            want = "host arrays (numpy)" if host else "device arrays"
            raise DtypeError(f"the {backend.name} backend takes {want}; {name} is on "
                             f"{op.device} ({type(op.obj).__name__})")
    first = next(iter(ops))
    for name, op in ops.items():
        if op.dtype not in SUPPORTED_DTYPES:
            raise DtypeError(f"{name} has unsupported dtype {op.dtype}; portgemm supports "
                             f"{SUPPORTED_NAMES}")
        if op.dtype != ops[first].dtype:
            raise DtypeError(f"mixed dtypes: {name} is {op.dtype}, {first} is {ops[first].dtype}")
        if op.device != ops[first].device:
            raise ValidationError(f"{name} is on {op.device}, {first} on {ops[first].device}")
    return ops[first].dtype


class Views:
    """A lazy sequence of per-group host views (only the NumPy backend reads them)."""

    def __init__(self, n: int, make):
        self._n, self._make = n, make

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if not -self._n <= i < self._n:
            raise IndexError(i)
        return self._make(i % self._n)


def make_batch(views, shp, st, ptr, c_readonly, shapes, alpha, beta, trans_a, trans_b,
               dtype, device) -> Batch:
    """The Batch of G groups from their stored geometry, stacked A, B, C: shp and st
    (3G, 2) rows/cols and strides in elements, ptr (3G,) int64. Runs the lists path's
    stride, span and exact overlap checks over every group at once."""
    G = shapes.shape[0]
    try:
        ld, lo, hi = _layout(shp, st, ptr, np.broadcast_to(c_readonly, (G,)), dtype.itemsize, G)
        _overlaps(shp, ld, lo, hi, dtype.itemsize, G)
    except (ValidationError, DtypeError) as e:
        raise regroup(e) from None
    return Batch(*views, shapes, np.ascontiguousarray(ptr.view(np.uint64).reshape(3, G).T),
                 np.ascontiguousarray(ld.reshape(3, G).T), alpha, beta, trans_a, trans_b,
                 dtype, G, device)


def group_scalars(x, G: int, name: str):
    """alpha/beta: (per-group float64 array, whether one scalar was given)."""
    from ..problem import _scalars
    try:
        return _scalars(x, G, name), np.ndim(x) == 0
    except (ValidationError, DtypeError) as e:
        raise regroup(e) from None


def first(mask) -> int:
    return int(np.flatnonzero(mask)[0])


# ---- repeated calls: validated once, then only launched ---------------------------------

def operand_key(op: Operand) -> tuple:
    """What validation reads of one operand: pointer, shape, strides, dtype, device,
    read-only (and its type: torch tensors launch on torch's stream)."""
    return op[:6] + (type(op.obj),)


def value_key(x):
    """A hashable stand-in for a host array of integers or floats given by value (the
    whole content), or None when there is none (the call is then not cached)."""
    if type(x) is int or type(x) is float:
        return x
    try:
        a = np.asarray(x)
    except Exception:  # noqa: BLE001 - the full path raises the typed error
        return None
    if a.dtype.kind not in "iuf":
        return None
    return a.dtype.str, a.shape, a.tobytes()


def call_key(settings: tuple, *values):
    """The cache key of ``settings`` (backend, flags, strategy) and operand and value
    keys, or None where a value has no key (an unhashable key is never cached either)."""
    if None in values:
        return None
    return settings + values


class HostCall:
    """A validated host-sizes call: its plan and the Batch's arrays, without the user's
    arrays; ``run`` binds this call's arrays and launches on the backend's current
    stream, reusing the descriptors the first launch uploaded. On a GPU backend with a
    ``relauncher`` the launches are encoded on the first repeat, so from then on a
    repeated call is what a bound call is: the raw launches."""

    def __init__(self, plan, batch: Batch, views):
        self.plan = plan
        self.fields = (batch.shapes, batch.ptr, batch.ld, batch.alpha, batch.beta,
                       batch.trans_a, batch.trans_b, batch.dtype, batch.size, batch.device)
        self.views = views   # (objects) -> (A, B, C) per-group views, built lazily
        self.gemms = None
        self.relaunch = None

    def run(self, backend, objs):
        if self.relaunch is not None:
            self.relaunch()
            return
        if getattr(backend, "name", None) in ("cuda", "hip"):
            # The GPU backends read pointers from the Batch and C[0] only to pick the
            # stream (torch's for torch tensors): no per-group views needed.
            A, B, C = ([x] for x in objs)
        else:
            A, B, C = self.views(*objs)
        batch = Batch(A, B, C, *self.fields)
        relauncher = getattr(backend, "relauncher", None)
        if self.gemms is not None and relauncher is not None:
            # A repeat (an entry only ever runs on the backend of its key): encode once
            # now, then only launch. A call that never repeats pays nothing for it.
            self.relaunch = relauncher(self.plan, batch, self.gemms)
            if self.relaunch is not None:
                self.relaunch()
                return
        self.gemms = backend.execute(self.plan, batch, self.gemms)


def host_call(backend, batch, views, strategy) -> HostCall | None:
    """Plan a validated batch (None when it has no GEMM)."""
    if batch.size == 0:
        return None
    from ..planner import plan
    from ..precision import split
    strategy, precision = split(strategy)   # a precision.Mode: strategy and mode
    p = plan(batch.shapes, dtype=batch.dtype, arch=backend.arch(), strategy=strategy,
             split_k=False,   # the packed API does not split K (package docstring)
             precision=precision,
             lds=batch.ld[:, :2])   # row strides: the cost model prices 16-byte loads
    return HostCall(p, batch, views)
