"""Small batches read and checked in pure Python: below SMALL_BATCH GEMMs, each NumPy call
of the vectorised path (about 1-5 us each on a tiny array, dozens of them per call) costs
more than the per-array work itself, so a call of a few GEMMs reads its lists into Python
tuples (``gather``) and checks the common case with plain loops (``checked``).

``checked`` accepts only the common case: no empty matrix, unit column strides, row
strides of at least a row (no row overlapping the next), aligned pointers, spans the
kernels can index, no read-only C, and no C span meeting any other span. Anything else (a legal but
unusual layout, or an error) returns None, and the caller runs the vectorised path, which
checks exactly (row by row where spans meet) and names the offending GEMM: so the same
typed error is raised whatever the batch size, and nothing is ever accepted here that the
vectorised path would refuse.
"""
from __future__ import annotations

import struct
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from .arrays import (_C_CONTIGUOUS, _DATA, _DEVICE_ID, _DTYPE, _PTR, _SHAPE, _STRIDES,
                     MAX_SPAN, _host_pointers, _new, _one, list_kind, torch_common)

# At most this many GEMMs take the pure-Python path: measured on the H100 host
# (tools/profile_host.py's sweep, bench/NOTES.md session 5) it is faster at 4 and 8 GEMMs
# (validate 50 / 70 us against 66 / 78; a call on new views 37 / 49 against 49 / 68) and
# slower from 16 on (validate 126 against 78 us): about 1.5 us an array in Python against
# a fixed ~70 us of NumPy calls.
SMALL_BATCH = 8


class Few(NamedTuple):
    """The 3n arrays of a small batch, read once: Python tuples, no NumPy."""
    ptr: tuple               # 3n data pointers
    shape: tuple             # 3n (rows, cols)
    strides: tuple | None    # 3n (row, col) strides in elements; None: all row-major contiguous
    dtype: np.dtype
    device: str
    readonly: tuple | None   # n read-only flags of C (NumPy); None: none can be read-only
    contiguous: bool = False


_WRITEABLE = attrgetter("flags.writeable")


def gather(X) -> Few | None:
    """arrays.gather's reads of the arrays X (one known type: NumPy, CuPy or torch) as
    Python tuples; None when anything is unusual (then the per-array path names it)."""
    n = len(X)
    kind = list_kind(X)
    if kind is None:
        return None
    try:
        if kind == "torch":
            return _torch(X, n)
        dtype = _one(list(map(_DTYPE, X)))
        if dtype is None:
            return None
        shape = tuple(map(_SHAPE, X))
        if not _pairs_only(shape, n):
            return None
        contiguous = kind == "cupy" and _all_c_contiguous(X)
        strides = None if contiguous else _element_strides(tuple(map(_STRIDES, X)),
                                                           dtype.itemsize)
        if not contiguous and strides is None:
            return None
        if kind == "numpy":
            ptr = tuple(_host_pointers(X))
            readonly = tuple(not w for w in map(_WRITEABLE, X[2 * (n // 3):]))
            device = "cpu"
        else:
            mem = list(map(_DATA, X))
            dev = _one(list(map(_DEVICE_ID, mem)))
            if dev is None:
                return None
            ptr, readonly, device = tuple(map(_PTR, mem)), None, f"cuda:{dev}"
    except (AttributeError, TypeError):
        return None
    return _new(Few, (ptr, shape, strides, dtype, device, readonly, contiguous))


def _all_c_contiguous(X) -> bool:
    try:
        return all(map(_C_CONTIGUOUS, X))
    except AttributeError:
        return False


def _element_strides(bstrides, isz):
    """Byte strides as element strides, or None when one is not a whole element."""
    out = []
    for s0, s1 in bstrides:
        if s0 % isz or s1 % isz:
            return None
        out.append((s0 // isz, s1 // isz))
    return tuple(out)


def _torch(X, n):
    common = torch_common(X)
    if common is None:
        return None
    data_ptr, stride, dtype, device = common
    shape = tuple(map(_SHAPE, X))
    if not _pairs_only(shape, n):
        return None
    strides = tuple(map(stride, X))
    ptr = tuple(map(data_ptr, X))
    return _new(Few, (ptr, shape, strides, dtype, device, None, False))


def _pairs_only(shape, n) -> bool:
    """Whether all n shapes (tuples, as read) are pairs: the 2-D check from the shapes
    already read (len of a tuple, no further read of the arrays)."""
    return list(map(len, shape)).count(2) == n


def checked(few: Few, n: int, trans_a: bool, trans_b: bool):
    """The flat fields of a small batch in the common case: (M N K of each GEMM in turn,
    the 3n pointers and the 3n row strides in elements, A's then B's then C's), Python
    ints; None when any check does not pass the common case (the vectorised path then
    decides, exactly). (One plain loop: measured faster here than a chain of maps.)"""
    shp, isz, ptr, st = few.shape, few.dtype.itemsize, few.ptr, few.strides
    mnk = _mnk(shp, n, trans_a, trans_b)
    if mnk is None or (few.readonly is not None and any(few.readonly)):
        return None
    rows_st = [c for _, c in shp] if st is None else [s0 for s0, _ in st]
    lds, spans = [], []
    for (rows, cols), s0, p, is_c in zip(shp, rows_st, ptr, _IS_C[n]):
        if rows < 1 or cols < 1 or p % isz:   # empty, or misaligned
            return None
        if rows > 1:
            if s0 < cols:   # rows overlapping the next (or a negative stride)
                return None
            ld = s0
        else:               # one row: its stride is never used (as problem._layout)
            ld = s0 if s0 > cols else cols
            if ld > MAX_SPAN:   # not an int32 descriptor field: the vectorised path
                return None
        span = (rows - 1) * ld + cols
        if span > MAX_SPAN:
            return None
        lds.append(ld)
        spans.append((p, p + span * isz, is_c))
    if st is not None and [s1 for _, s1 in st].count(1) != 3 * n:   # unit column strides
        return None
    if _c_meets_any(spans):
        return None
    return mnk, ptr, lds


def _mnk(shp, n, trans_a, trans_b):
    """M, N, K of each GEMM (flat), or None when K or C disagrees."""
    mnk = []
    for (ar, ac), (br, bc), (cr, cc) in zip(shp[:n], shp[n:2 * n], shp[2 * n:]):
        m, k = (ac, ar) if trans_a else (ar, ac)
        kb, nn = (bc, br) if trans_b else (br, bc)
        if k != kb or cr != m or cc != nn:
            return None
        mnk += (m, nn, k)
    return mnk


def _c_meets_any(spans) -> bool:
    """Whether any C span [lo, hi) shares a byte with another span (C, A or B); A and B
    spans may meet each other (a B shared by every GEMM). ``spans``: (lo, hi, is C), all
    non-empty. One sort and sweep: sorted by start, a span meets an earlier one iff it
    starts before the furthest end of the earlier C spans, or (a C span) before the
    furthest end of all earlier spans."""
    reach = reach_c = -1
    for start, end, is_c in sorted(spans):
        if start < reach_c or (is_c and start < reach):
            return True
        if end > reach:
            reach = end
        if is_c and end > reach_c:
            reach_c = end
    return False


class _Flags(dict):
    """n -> 3n flags, True for C's arrays (items 2n on), made once per n."""

    def __missing__(self, n):
        flags = (False,) * (2 * n) + (True,) * n
        if n <= SMALL_BATCH:
            self[n] = flags
        return flags


_IS_C = _Flags()


_DESCRIPTOR = struct.Struct("<3Q6i2d")   # kernels/render.GEMM_DTYPE, 64 bytes a GEMM


def descriptor_bytes(mnk, ptr, ld, alpha, beta) -> bytes:
    """The per-GEMM device descriptors (GEMM_DTYPE records) of a checked small batch
    (checked's fields), packed in one pass: the NumPy field-by-field fill costs eleven
    NumPy calls."""
    pack, n = _DESCRIPTOR.pack, len(alpha)
    out = bytearray()
    for i in range(n):
        j = 3 * i
        out += pack(ptr[i], ptr[n + i], ptr[2 * n + i], ld[i], ld[n + i], ld[2 * n + i],
                    mnk[j], mnk[j + 1], mnk[j + 2], alpha[i], beta[i])
    return bytes(out)
