"""What portgemm needs to know about one array: pointer, shape, strides, dtype, device.

``info(x)`` takes a numpy array (host, device "cpu") or anything exporting
``__cuda_array_interface__`` (device "cuda"). It runs once per array per call, so it
reads attributes directly and builds nothing it does not return.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .errors import DtypeError, LayoutError, ValidationError


class ArrayInfo(NamedTuple):
    ptr: int                 # address of element [0, 0]
    shape: tuple             # (rows, cols)
    strides: tuple           # in ELEMENTS, as stored (may be negative or zero)
    dtype: np.dtype
    device: str              # "cpu" | "cuda"
    readonly: bool = False


_new = tuple.__new__  # NamedTuple's own __new__ is a Python function; this skips it


def info(x) -> ArrayInfo:
    """ArrayInfo of a 2-D array; ValidationError if not 2-D, LayoutError if a byte stride is
    not a whole number of elements, DtypeError if ``x`` is not an array at all."""
    if isinstance(x, np.ndarray):
        if x.ndim != 2:
            raise ValidationError(f"expected a 2-D array, got {x.ndim}-D with shape {x.shape}")
        isz = x.itemsize
        s0, s1 = x.strides
        if s0 % isz or s1 % isz:
            raise LayoutError(f"byte strides {x.strides} are not multiples of the itemsize {isz}")
        # x.ctypes.data is the costliest step (~0.8 us); nothing cheaper is public.
        return _new(ArrayInfo, (x.ctypes.data, x.shape, (s0 // isz, s1 // isz), x.dtype,
                                "cpu", not x.flags.writeable))
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(cai)
    raise DtypeError(f"expected a 2-D array (numpy.ndarray or an object with "
                     f"__cuda_array_interface__), got {type(x).__name__}")


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
