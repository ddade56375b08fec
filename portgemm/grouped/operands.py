"""The packed operands of the grouped API: one array per operand (any rank), read in
O(1) calls, and the per-group checks shared by both packed forms.

Errors name the offending group ("group g: ..."); ``err.gemm`` is that index too, since
group g runs as GEMM g.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import DtypeError, LayoutError, ValidationError
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
                 "torch.int32": np.dtype(np.int32), "torch.int64": np.dtype(np.int64)}


def read(x, name: str) -> Operand:
    """Pointer, shape, strides (elements), dtype and device of one array, by attribute
    reads: numpy, CuPy, PyTorch, then anything with __cuda_array_interface__."""
    if isinstance(x, np.ndarray):
        return _checked(name, x.ctypes.data, x.shape, x.strides, x.dtype, "cpu",
                        not x.flags.writeable, x)
    mod = type(x).__module__ or ""
    if mod.startswith("torch") and hasattr(x, "data_ptr"):
        dtype = _TORCH_DTYPES.get(str(x.dtype))
        if dtype is None:
            raise DtypeError(f"{name} has unsupported dtype {x.dtype}")
        dev = x.device
        where = "cpu" if dev.type == "cpu" else f"{dev.type}:{dev.index or 0}"
        return Operand(x.data_ptr(), tuple(x.shape), tuple(x.stride()), dtype, where, False, x)
    if mod.startswith("cupy") and hasattr(x, "data"):
        return _checked(name, x.data.ptr, x.shape, x.strides, x.dtype,
                        f"cuda:{x.data.device_id}", False, x)
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
    if any(s % isz for s in byte_strides):
        raise LayoutError(f"{name}: byte strides {tuple(byte_strides)} are not multiples of "
                          f"the itemsize {isz}")
    return Operand(int(ptr), tuple(shape), tuple(s // isz for s in byte_strides), dtype,
                   device, bool(readonly), obj)


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
                             f"float32 and float64")
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


def run(backend, batch, strategy):
    """Plan the validated batch and launch it on the backend's current stream."""
    if batch.size == 0:
        return
    from ..planner import plan
    p = plan(batch.shapes, dtype=batch.dtype, arch=backend.arch(), strategy=strategy)
    backend.execute(p, batch)
