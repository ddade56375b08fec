"""Validate a variable-size batch and describe it as flat arrays (a Batch).

One pass per operand list collects each array's pointer/shape/strides/dtype (a 3-D
stack needs none: its pointers are base + i * batch stride); every check after that is
a numpy expression over the whole batch, and the overlap check one sort and sweep over
byte spans, refined exactly (row by row) only for the arrays it flags. Each error is a
typed portgemm error naming the offending GEMM. Validation never writes to any array.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .arrays import (MAX_SPAN, SUPPORTED_DTYPES, SUPPORTED_NAMES, Operand, _kind, _read_only,
                     gather, stacked)
from .arrays import info as _default_info
from .errors import DtypeError, LayoutError, ShapeMismatch, ValidationError
from .memo import kept
from . import small_batch
from .small_batch import SMALL_BATCH, Few

_OPERANDS = "ABC"
# The recipe for column-major (Fortran-ordered) data, per operand: A and B have a flag to
# flip; C has none, so the whole product is transposed (C^T = op(B)^T op(A)^T).
_COLUMN_MAJOR = (
    "for a column-major A pass A.T and flip trans_a",
    "for a column-major B pass B.T and flip trans_b",
    "for a column-major C compute C^T = op(B)^T op(A)^T: pass C.T as C, B as A with "
    "trans_a = not trans_b, and A as B with trans_b = not trans_a")


@dataclass(eq=False)
class Batch:
    A: list                 # as given: a list of 2-D arrays, or one 3-D array (X[i] is GEMM i)
    B: list
    C: list
    shapes: np.ndarray      # (batch, 3) int64: M, N, K of op(A) @ op(B)
    ptr: np.ndarray         # (batch, 3) uint64: data pointers of A, B, C
    ld: np.ndarray          # (batch, 3) int64: row strides in elements of A, B, C as stored
    alpha: np.ndarray       # (batch,) float64
    beta: np.ndarray        # (batch,) float64
    trans_a: bool
    trans_b: bool
    dtype: np.dtype
    size: int
    device: str = "cpu"
    # A small batch checked in pure Python (small_batch.checked): its M N K, pointers and
    # row strides as flat Python lists, from which the descriptors are packed directly.
    flat: tuple | None = None


_READ = object()   # validate(gathered=...): read the lists itself


def validate(A, B, C, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,
             array_info=_default_info, fast_devices=("cpu",), gathered=_READ) -> Batch:
    """Check a batch ``C_i = alpha_i op(A_i) op(B_i) + beta_i C_i`` and describe it.

    Each of A, B, C is a list/tuple of 2-D arrays or one 3-D array (a stack of
    equal-sized matrices, read through its batch stride: no per-matrix views).
    ``array_info(x) -> ArrayInfo`` is the backend's: it decides which arrays it takes.
    Lists of NumPy, CuPy or torch arrays whose device label starts with one of
    ``fast_devices`` take the fast path (arrays.gather); anything else, and every error,
    goes through ``array_info`` one array at a time. ``gathered``: what
    ``gather_lists(A, B, C, fast_devices)`` returned for these very lists (a caller that
    has read them already), so they are not read twice. Raises ShapeMismatch,
    DtypeError, LayoutError or ValidationError (ValueError or TypeError), naming the
    GEMM index where there is one.
    """
    trans_a = _flag(trans_a, "trans_a")
    trans_b = _flag(trans_b, "trans_b")
    A, B, C = _matrices(A, "A"), _matrices(B, "B"), _matrices(C, "C")
    n = _count(A)
    if _count(B) != n or _count(C) != n:
        raise ShapeMismatch(f"A, B and C hold {_count(A)}, {_count(B)} and {_count(C)} matrices")
    alpha = _scalars(alpha, n, "alpha")
    beta = _scalars(beta, n, "beta")
    if n == 0:
        z = np.zeros((0, 3), np.int64)
        return Batch(A, B, C, z, z.astype(np.uint64), z.copy(), alpha, beta, trans_a, trans_b,
                     SUPPORTED_DTYPES[0], 0)

    if n <= SMALL_BATCH and (gathered is _READ or type(gathered) is Few):
        few = _gathered(A, B, C, fast_devices, small=True) if gathered is _READ else gathered
        flat = None if few is None else small_batch.checked(few, n, trans_a, trans_b)
        if flat is not None:
            mnk, ptr, ld = flat
            return Batch(A, B, C, np.array(mnk, np.int64).reshape(n, 3),
                         _per_gemm(ptr, n).view(np.uint64), _per_gemm(ld, n), alpha, beta,
                         trans_a, trans_b, few.dtype, n, few.device, flat)
        gathered = _READ   # not the common case: the vectorised path checks exactly
    whole = _gathered(A, B, C, fast_devices) if gathered is _READ else gathered
    if whole is not None:   # the common case: one pass over all 3n arrays
        dtype, device, contiguous = whole.dtype, whole.device, whole.contiguous
        shp, st, ptr, c_readonly = whole.shape, whole.strides, whole.ptr, whole.readonly[2 * n:]
    else:
        ops = [_operand(X, name, array_info, fast_devices) for X, name in ((A, "A"), (B, "B"),
                                                                            (C, "C"))]
        dtype = _one_dtype(ops, n)
        device = _one_device(ops, n)
        shp = np.concatenate([op.shape for op in ops])   # (3n, 2) rows, cols as stored
        st = np.concatenate([op.strides for op in ops])  # (3n, 2) in elements
        ptr = np.concatenate([op.ptr for op in ops])     # user/device addresses are < 2**63
        c_readonly = ops[2].readonly
        contiguous = False

    shapes_mnk = _shapes(shp, n, trans_a, trans_b)
    ld, lo, hi = _layout(shp, st, ptr, c_readonly, dtype.itemsize, n, contiguous)
    _overlaps(shp, ld, lo, hi, dtype.itemsize, n)

    return Batch(A, B, C, shapes_mnk, np.ascontiguousarray(ptr.view(np.uint64).reshape(3, n).T),
                 np.ascontiguousarray(ld.reshape(3, n).T), alpha, beta, trans_a, trans_b,
                 dtype, n, device)


def _per_gemm(values, n):
    """(n, 3) int64, a row per GEMM, from 3n Python ints in operand order (A's, B's, C's)."""
    return np.ascontiguousarray(np.fromiter(values, np.int64, 3 * n).reshape(3, n).T)


# ---- arguments ---------------------------------------------------------------------------

def _flag(t, name):
    if type(t) is bool or isinstance(t, np.bool_):
        return bool(t)
    raise DtypeError(f"{name} must be a bool, got {t!r}")


def _is_array(X) -> bool:
    return isinstance(X, np.ndarray) or _kind(type(X)) is not None or \
        hasattr(X, "__cuda_array_interface__")


def _matrices(X, name):
    """A list of matrices, or a 3-D array kept as it is (a stack)."""
    if isinstance(X, (list, tuple)):
        return list(X)
    if _is_array(X):
        shape = getattr(X, "shape", None)
        if shape is None:  # an object with only __cuda_array_interface__
            shape = X.__cuda_array_interface__["shape"]
        ndim = len(shape)
        if ndim == 3 and hasattr(X, "__getitem__"):
            return X
        raise DtypeError(f"{name} must be a list or tuple of 2-D arrays, or one 3-D array "
                         f"(a stack of equal-sized matrices, indexable); got one {ndim}-D "
                         f"{type(X).__name__}")
    if isinstance(X, (str, bytes)) or not isinstance(X, Sequence):
        raise DtypeError(f"{name} must be a list or tuple of 2-D arrays, got {type(X).__name__}")
    return list(X)


def _count(X) -> int:
    return len(X) if isinstance(X, list) else int(X.shape[0])


def _each(v, n):
    """A per-operand value (one dtype/device) or a per-matrix tuple, as n values."""
    return v if isinstance(v, tuple) else (v,) * n


def _scalars(x, n, name):
    """alpha or beta: a real scalar or one real per GEMM -> (n,) float64, all finite."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):  # the common case
        v = float(x) if isinstance(x, float) or abs(x) < 2**1023 else math.inf
        if not math.isfinite(v):
            raise ValidationError(f"{name} = {x} is not finite (a scalar {name} applies to "
                                  f"every GEMM)", gemm=0 if n else None)
        return _filled(n, v)
    try:
        arr = np.asarray(x)
    except ValueError as e:  # ragged nested lists
        raise ShapeMismatch(f"{name} must be a scalar or a sequence of {n} numbers ({e})") from None
    except Exception as e:  # e.g. a device array numpy cannot read
        raise DtypeError(f"{name} must be a real scalar or a host sequence of {n} real "
                         f"numbers, got {type(x).__name__} ({e})") from None
    if arr.ndim == 0:
        arr = np.full(n, arr[()], dtype=arr.dtype)
    elif arr.shape != (n,):
        raise ShapeMismatch(f"{name} has shape {arr.shape}; expected a scalar or {n} values")
    if arr.dtype.kind == "c":
        bad = np.flatnonzero(arr.imag != 0)
        raise DtypeError(f"{name} must be real, got complex {arr.dtype}",
                         gemm=int(bad[0]) if bad.size else (0 if n else None))
    if arr.dtype.kind not in "iuf":
        # Find the first non-real value in what the caller passed (asarray may have turned
        # every element into a string because of one).
        values = x if isinstance(x, (list, tuple)) and arr.ndim == 1 else arr.tolist()
        for i, v in enumerate(values):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
                raise DtypeError(f"{name} must be a real number, got {v!r}", gemm=i)
        # e.g. Python ints too large for int64 (held as objects); too large for a double -> inf
        arr = np.array([float(v) if abs(v) < 2**1023 else math.inf for v in values])
    v = arr.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(v))
    if bad.size:
        i = int(bad[0])
        raise ValidationError(f"{name} = {arr[i]} is not finite", gemm=i)
    return v


def _filled(n, v):
    """np.full(n, v), read-only and kept per (n, v, sign of v): a scalar alpha or beta of
    a repeated batch size costs a dict read, not an allocation (nothing writes a Batch's
    scalars; read-only makes sure)."""
    key = (n, v, math.copysign(1.0, v))   # 0.0 == -0.0 as keys: the sign keeps them apart
    return kept(_FILLED, key, 64, lambda: _read_only(np.full(n, v)))


_FILLED: dict = {}


def gather_lists(A, B, C, fast_devices) -> Operand | Few | None:
    """A, B and C read as validate's fast path reads them (arrays.gather over the 3n
    arrays; small_batch.gather, Python tuples, up to SMALL_BATCH GEMMs), when they are
    lists or tuples of one length; else None."""
    if type(A) not in _LISTS or type(B) not in _LISTS or type(C) not in _LISTS or \
            not len(A) == len(B) == len(C):
        return None
    return _gathered(list(A), list(B), list(C), fast_devices, small=len(A) <= SMALL_BATCH)


_LISTS = (list, tuple)


def _gathered(A, B, C, fast_devices, small=False) -> Operand | Few | None:
    """A, B and C read as one list of 3n arrays (arrays.gather; with ``small``,
    small_batch.gather), when all three are lists of one fast type on one of
    ``fast_devices`` in a supported dtype; else None (and the per-operand path, which
    names any offender)."""
    if not fast_devices or type(A) is not list or type(B) is not list or type(C) is not list:
        return None
    whole = (small_batch.gather if small else gather)(A + B + C)
    if whole is None or not whole.device.startswith(fast_devices) or \
            whole.dtype not in SUPPORTED_DTYPES:
        return None
    return whole


def _operand(X, name, array_info, fast_devices) -> Operand:
    if not isinstance(X, list):
        return _stack(X, name, array_info)
    op = gather(X) if fast_devices else None
    if op is not None and op.device.startswith(fast_devices):
        return op
    infos = _infos(X, name, array_info)
    n = len(infos)
    ptrs, shapes, strides, dtypes, devices, readonly = zip(*infos)
    if not all(len(s) == 2 for s in shapes):  # backends' own array_info may skip this check
        i = next(i for i, s in enumerate(shapes) if len(s) != 2)
        raise ValidationError(f"{name}: expected a 2-D array, got shape {tuple(shapes[i])}",
                              gemm=i)
    return Operand(np.array(ptrs, np.uint64).view(np.int64), np.array(shapes, np.int64),
                   np.array(strides, np.int64).reshape(n, 2), dtypes, devices,
                   np.array(readonly, bool))


def _stack(X, name, array_info) -> Operand:
    """A 3-D array as b matrices: pointers from the base and the batch stride, no views."""
    first = _infos([X[0]], name, array_info)[0]   # the backend takes (or refuses) its type
    whole = stacked(X)
    if whole is None:
        raise DtypeError(f"{name}: cannot read a {type(X).__name__} as a 3-D stack")
    ptr, shape, strides, _, _, readonly = whole
    b = int(shape[0])
    step = np.arange(b, dtype=np.int64) * (strides[0] * first.dtype.itemsize)
    return Operand(ptr + step, np.tile(np.array(shape[1:], np.int64), (b, 1)),
                   np.tile(np.array(strides[1:], np.int64), (b, 1)), first.dtype,
                   first.device, np.full(b, bool(readonly)))


def _infos(X, name, array_info):
    try:
        return [array_info(x) for x in X]
    except (ValidationError, DtypeError):
        pass
    for i, x in enumerate(X):  # error path: say which GEMM and operand
        try:
            array_info(x)
        except (ValidationError, DtypeError) as e:
            if e.gemm is not None:
                raise
            raise type(e)(f"{name}: {e}", gemm=i) from None
    raise AssertionError("array_info failed once and then succeeded")  # pragma: no cover


def _one_dtype(ops, n):
    uniform = not any(isinstance(op.dtype, tuple) for op in ops)
    if uniform and len({op.dtype for op in ops}) == 1 and ops[0].dtype in SUPPORTED_DTYPES:
        return ops[0].dtype  # the common case: three uniform operands
    dtypes = [d for op in ops for d in _each(op.dtype, n)]
    first = dtypes[0]
    for k, d in enumerate(dtypes):
        if d not in SUPPORTED_DTYPES:
            raise DtypeError(f"{_OPERANDS[k // n]} has unsupported dtype {d}; portgemm "
                             f"supports {SUPPORTED_NAMES}", gemm=k % n)
        if d != first:
            raise DtypeError(f"mixed dtypes: {_OPERANDS[k // n]} is {d}, A of GEMM 0 is "
                             f"{first}", gemm=k % n)
    return first


def _one_device(ops, n):
    """One device for the whole batch. A bare "cuda" (from __cuda_array_interface__, which
    names no device) matches any "cuda:<id>"; the backend checks the current device."""
    labels = set()
    for op in ops:
        labels.update(op.device if isinstance(op.device, tuple) else (op.device,))
    if len(labels) > 1 and all(d.startswith("cuda") for d in labels):
        labels.discard("cuda")
    if len(labels) == 1:
        return labels.pop()
    devices = [d for op in ops for d in _each(op.device, n)]
    ref = next((d for d in devices if d != "cuda"), devices[0]) \
        if devices[0] == "cuda" else devices[0]
    same = lambda d: d == ref or (d == "cuda" and ref.startswith("cuda"))  # noqa: E731
    k = next(k for k, d in enumerate(devices) if not same(d))
    raise ValidationError(f"{_OPERANDS[k // n]} is on {devices[k]}, A of GEMM 0 on "
                          f"{devices[0]}", gemm=k % n)


# ---- checks over the whole batch ----------------------------------------------------------

def _any(mask) -> bool:
    """mask.any(), about four times cheaper on the small arrays of small batches."""
    return np.count_nonzero(mask) > 0


def _first(mask):
    return int(np.flatnonzero(mask)[0])


def _shapes(shp, n, trans_a, trans_b):
    """(n, 3) M, N, K of op(A) @ op(B) from the (3n, 2) stored shapes; ShapeMismatch
    naming the first GEMM whose K or C disagrees. Three gathers from the flat shapes
    (indices made once per n and flags): every pair compared in one test."""
    flat = shp.reshape(-1)
    mnk, lhs, rhs = _shape_index(n, trans_a, trans_b)
    if np.count_nonzero(flat[lhs] != flat[rhs]):
        _shape_error(shp, n, trans_a, trans_b)
    return flat[mnk]


def _shape_index(n, trans_a, trans_b):
    """Flat indices into the (3n, 2) shapes: (M N K), and the pairs that must agree,
    (K of A, C's rows, C's columns) against (K of B, M, N); kept per (n, flags) up to
    _SHAPE_INDEX_N GEMMs (beyond, making them is small beside reading the arrays)."""
    def make():
        g = np.arange(n, dtype=np.intp)[:, None]
        a, b, c = 2 * g, 2 * (n + g), 2 * (2 * n + g)   # rows of A_i, B_i, C_i
        m, k = (a + 1, a) if trans_a else (a, a + 1)
        kb, nn = (b + 1, b) if trans_b else (b, b + 1)
        return np.hstack([m, nn, k]), np.hstack([k, c, c + 1]), np.hstack([kb, m, nn])

    if n > _SHAPE_INDEX_N:
        return make()
    return kept(_SHAPE_INDEX, (n, trans_a, trans_b), 16, make)


_SHAPE_INDEX: dict = {}
_SHAPE_INDEX_N = 4096


def _shape_error(shp, n, trans_a, trans_b):
    a, b, c = shp[:n], shp[n:2 * n], shp[2 * n:]
    M, K = (a[:, 1], a[:, 0]) if trans_a else (a[:, 0], a[:, 1])
    Kb, N = (b[:, 1], b[:, 0]) if trans_b else (b[:, 0], b[:, 1])
    bad_k = K != Kb
    i = _first(bad_k | (c[:, 0] != M) | (c[:, 1] != N))
    if bad_k[i]:
        raise ShapeMismatch(f"inner dimensions differ: op(A) is {M[i]}x{K[i]}, op(B) is "
                            f"{Kb[i]}x{N[i]}", gemm=i)
    raise ShapeMismatch(f"C is {c[i, 0]}x{c[i, 1]}, op(A) @ op(B) is {M[i]}x{N[i]}", gemm=i)


def _layout(shp, st, ptr, c_readonly, isz, n, contiguous=False):
    """Stride and alignment checks; returns (ld in elements, span start, span end in bytes).
    ``contiguous``: every matrix is row-major contiguous (``st`` derived from the shapes,
    arrays.Operand.contiguous), so only alignment, span and writability are left to check
    where every matrix has 2+ rows and columns."""
    if shp.min() > 1:   # every matrix has 2+ rows and columns: fewer numpy calls
        ends = (_layout_contiguous if contiguous else _layout_2x2)(shp, st, ptr, c_readonly,
                                                                  isz, n)
        if ends is not None:
            return st[:, 0], ptr, ends
    return _layout_general(shp, st, ptr, c_readonly, isz, n)


def _layout_contiguous(shp, st, ptr, c_readonly, isz, n):
    """_layout_2x2 for row-major contiguous matrices (row stride = columns, unit column
    stride: no stride can be negative or let C's rows overlap); None when a check fails."""
    span = shp[:, 0] * shp[:, 1]
    if np.count_nonzero((ptr & (isz - 1)) | (span > MAX_SPAN)) or np.count_nonzero(c_readonly):
        return None
    return ptr + span * isz


def _layout_general(shp, st, ptr, c_readonly, isz, n):
    rows, cols = shp[:, 0], shp[:, 1]
    s0, s1 = st[:, 0], st[:, 1]
    full = (rows > 0) & (cols > 0)
    multi = full & (rows > 1)
    ld = np.where(multi, s0, np.maximum(s0, cols))
    span = np.where(full, (rows - 1) * ld + cols, 0)   # elements from [0, 0] to the end
    # Every check in one test on the common path; _layout_error names the first failure.
    # A stride of a length-1 dimension is never used, so it may be anything.
    bad = (full & (cols > 1) & (s1 != 1)) | (multi & (s0 < 0)) | (full & (ptr % isz != 0)) \
        | (span > MAX_SPAN)
    # C read-only, or rows of C sharing memory (several threads would write them at once)
    cbad = full[2 * n:] & (c_readonly | ((rows[2 * n:] > 1) & (s0[2 * n:] < cols[2 * n:])))
    if _any(bad) or _any(cbad):
        _layout_error(rows, cols, s0, s1, full, multi, span, ptr, c_readonly, isz, n)
    return ld, ptr, ptr + span * isz


def _layout_2x2(shp, st, ptr, c_readonly, isz, n):
    """_layout's checks where every matrix has at least 2 rows and 2 columns (so ld is the
    row stride): the span ends in bytes, or None when any check fails (then _layout's
    general form runs and names the offender)."""
    s0 = st[:, 0]
    span = (shp[:, 0] - 1) * s0 + shp[:, 1]
    bad = (st[:, 1] != 1) | (s0 < 0) | (ptr & (isz - 1) != 0) | (span > MAX_SPAN)
    if _any(bad) or _any(c_readonly) or _any(s0[2 * n:] < shp[2 * n:, 1]):
        return None
    return ptr + span * isz


def _layout_error(rows, cols, s0, s1, full, multi, span, ptr, c_readonly, isz, n):
    def fail(mask, what):
        if mask.any():
            k = _first(mask)
            raise LayoutError(f"{_OPERANDS[k // n]} {what(k)}", gemm=k % n)

    fail(full & (cols > 1) & (s1 != 1),
         lambda k: f"has inner (column) stride {s1[k]} elements; rows must be contiguous "
                   f"({_COLUMN_MAJOR[k // n]})")
    fail(multi & (s0 < 0), lambda k: f"has negative row stride {s0[k]}")
    fail(full & (ptr % isz != 0),
         lambda k: f"data pointer {ptr[k]:#x} is not aligned to its itemsize {isz}")
    is_c = np.arange(rows.size) >= 2 * n
    fail(is_c & full & np.concatenate([np.zeros(2 * n, bool), c_readonly]),
         lambda k: "is read-only")
    fail(is_c & multi & (s0 < cols),
         lambda k: f"has overlapping rows (row stride {s0[k]} < {cols[k]} columns)")
    fail(span > MAX_SPAN, lambda k: f"spans {span[k]} elements from its first to its last; "
                                    f"the kernels index with 32-bit offsets (at most {MAX_SPAN})")
    raise AssertionError("a layout check failed and none names an array")  # pragma: no cover


def _overlaps(shp, ld, lo, hi, isz, n):
    """C_i may share no memory with any C_j (j != i), A_j or B_j. A and B may overlap freely.

    First a test of byte spans; only arrays it flags are refined exactly, by listing
    their rows as byte intervals (so column slices of one buffer that interleave
    without sharing elements pass)."""
    if _disjoint(lo, hi) or not _any_span_meets_c(lo, hi, n):
        return
    nonempty = hi > lo
    c_ids = np.flatnonzero(nonempty[2 * n:]) + 2 * n
    ab_ids = np.flatnonzero(nonempty[:2 * n])
    flag_c, flag_ab = _span_flags(lo[c_ids], hi[c_ids], lo[ab_ids], hi[ab_ids])
    if not flag_c.any() and not flag_ab.any():
        return
    ids = np.concatenate([ab_ids[flag_ab], c_ids[flag_c]])
    owner, start, end = _row_intervals(ids, shp, ld, lo, hi, isz)
    is_c = owner >= 2 * n

    co, cs, ce = owner[is_c], start[is_c], end[is_c]
    order = np.argsort(cs, kind="stable")
    co, cs, ce = co[order], cs[order], ce[order]
    reach = np.maximum.accumulate(ce)
    bad = cs[1:] < reach[:-1]
    if bad.any():
        k = _first(bad) + 1
        j = _first(ce[:k] > cs[k])
        gi, gj = sorted((int(co[k]) - 2 * n, int(co[j]) - 2 * n))
        raise LayoutError(f"C overlaps C of GEMM {gj} (one launch would write both at once)",
                          gemm=gi)
    # C intervals are now disjoint and sorted, so their ends are sorted too.
    ao, as_, ae = owner[~is_c], start[~is_c], end[~is_c]
    j = np.searchsorted(cs, ae, side="left") - 1
    hit = (j >= 0) & (ce[np.maximum(j, 0)] > as_)
    if hit.any():
        cg = co[j[hit]] - 2 * n
        k = int(np.argmin(cg))
        gi, other = int(cg[k]), int(ao[hit][k])
        op, gj = _OPERANDS[other // n], other % n
        whose = "its own " + op if gj == gi else f"{op} of GEMM {gj}"
        raise LayoutError(f"C overlaps {whose}", gemm=gi)


def _disjoint(lo, hi):
    """Whether no two of the byte spans [lo, hi) share a byte (False when any span is
    empty: the full sweep handles those): the common case of separately allocated arrays,
    in a handful of numpy calls. Sorted by start, non-empty spans are disjoint iff each
    ends by the next one's start (then the ends are sorted too, so no running maximum)."""
    order = lo.argsort()
    s, e = lo[order], hi[order]
    return not np.count_nonzero(e <= s) and not np.count_nonzero(s[1:] < e[:-1])


def _any_span_meets_c(lo, hi, n):
    """Whether any non-empty C span meets another non-empty span (C, A or B): one sort and
    sweep over all 3n byte spans, the common path's whole overlap test. Sorted by start,
    a later span meets an earlier one iff it starts before that one's end: before the
    furthest end of the earlier C spans, or (for a C) of all earlier spans."""
    order = np.argsort(lo, kind="stable")
    s, e = lo[order], hi[order]
    live = e > s
    is_c = order >= 2 * n
    low = np.iinfo(np.int64).min
    reach_c = np.maximum.accumulate(np.where(live & is_c, e, low))
    reach = np.maximum.accumulate(np.where(live, e, low))
    hit = (s[1:] < reach_c[:-1]) | (is_c[1:] & (s[1:] < reach[:-1]))
    return bool((hit & live[1:]).any())


def _span_flags(cs, ce, as_, ae):
    """Which C spans overlap another C span or any A/B span, and which A/B spans overlap a C."""
    order = np.argsort(cs, kind="stable")
    s, e = cs[order], ce[order]
    reach = np.maximum.accumulate(e)
    f = np.zeros(s.size, bool)
    f[1:] |= s[1:] < reach[:-1]
    f[:-1] |= e[:-1] > s[1:]
    # A/B span [a, b) meets some C iff a C starting before b reaches past a.
    j = np.searchsorted(s, ae, side="left")
    flag_ab = (j > 0) & (reach[np.maximum(j - 1, 0)] > as_)
    if as_.size:
        o2 = np.argsort(as_, kind="stable")
        s2, reach2 = as_[o2], np.maximum.accumulate(ae[o2])
        j2 = np.searchsorted(s2, e, side="left")
        f |= (j2 > 0) & (reach2[np.maximum(j2 - 1, 0)] > s)
    flag_c = np.empty_like(f)
    flag_c[order] = f
    return flag_c, flag_ab


def _row_intervals(ids, shp, ld, lo, hi, isz):
    """Byte intervals [start, end) covering exactly the elements of arrays ``ids``: one per
    row when rows have gaps between them (ld > cols), else the whole span."""
    rows, cols, l = shp[ids, 0], shp[ids, 1], ld[ids]
    split = (rows > 1) & (l > cols)
    count = np.where(split, rows, 1)
    owner_pos = np.repeat(np.arange(ids.size), count)
    first = np.cumsum(count) - count
    r = np.arange(owner_pos.size) - first[owner_pos]
    start = lo[ids][owner_pos] + r * l[owner_pos] * isz
    width = np.where(split, cols * isz, hi[ids] - lo[ids])
    return ids[owner_pos], start, start + width[owner_pos]
