"""gemm_grouped_general: the MAGMA vbatched form. One flat buffer per operand, a (G, 3)
sizes array, per-group element offsets into the buffers and leading dimensions."""
from __future__ import annotations

import numpy as np

from ..api import backend_of
from ..errors import DtypeError, LayoutError, ShapeMismatch, ValidationError
from ..precision import how
from ..problem import _flag
from .operands import (CallCache, Views, call_key, check_operands, first, group_error,
                       group_scalars, host_call, make_batch, operand_key, read, value_key)

_INT_LIMIT = 2**31 - 1


def gemm_grouped_general(A, B, C, sizes, a_offsets, b_offsets, c_offsets, lda, ldb, ldc,
                         alpha=1.0, beta=0.0, trans_a=False, trans_b=False, backend=None,
                         strategy=None, precision=None):
    """C_g = alpha_g op(A_g) @ op(B_g) + beta_g C_g for each group g, in place; returns C.

    A, B, C: 1-D contiguous buffers of one dtype (float32 or float64) on the backend's
    device. sizes: (G, 3) integers M, N, K of group g. Group g's matrices are row-major
    inside the buffers: A_g starts at element a_offsets[g] of A, is stored M x K (K x M
    with trans_a) with row stride lda[g] >= its columns; likewise B_g (K x N, N x K with
    trans_b) and C_g (M x N). Offsets: G non-negative integers; lda, ldb, ldc: one
    integer or G. alpha, beta: scalars or one per group. Every matrix must lie inside its
    buffer, and no C_g may share an element with another C or any A or B. precision:
    as gemm_vbatched's ("ieee", "tf32", "3xtf32"; float32).

    A call that repeats an earlier one (the same buffers by address and layout, equal
    sizes, offsets, leading dimensions and scalars) is not validated or planned again.
    """
    be = backend_of(backend)
    strategy = how(strategy, precision)   # keys and plans carry the mode with the strategy
    ta, tb = _flag(trans_a, "trans_a"), _flag(trans_b, "trans_b")
    ops = {"A": read(A, "A"), "B": read(B, "B"), "C": read(C, "C")}
    key = call_key((be, ta, tb, strategy), *map(operand_key, ops.values()),
                   *map(value_key, (sizes, a_offsets, b_offsets, c_offsets, lda, ldb, ldc,
                                    alpha, beta)))
    entry = _calls.get(key)
    if entry is None:
        entry = _validate(be, ops, sizes, (a_offsets, b_offsets, c_offsets), (lda, ldb, ldc),
                          alpha, beta, ta, tb, strategy)
        _calls.put(key, entry)
    if entry is not None:
        entry.run(be, tuple(op.obj for op in ops.values()))
    return C


_calls = CallCache()


def _validate(be, ops, sizes, offsets, lds, alpha, beta, ta, tb, strategy):
    """The full checks of one call: its HostCall (None when it has no group)."""
    dtype = check_operands(be, ops, {"A": 1, "B": 1, "C": 1})
    for name, op in ops.items():
        if op.shape[0] > 1 and op.strides[0] != 1:
            raise LayoutError(f"{name} must be a contiguous buffer, got stride "
                              f"{op.strides[0]} elements")
    s = _sizes(sizes)
    G = s.shape[0]
    M, N, K = s[:, 0], s[:, 1], s[:, 2]
    alphas, _ = group_scalars(alpha, G, "alpha")
    betas, _ = group_scalars(beta, G, "beta")
    stored = {"A": (K, M) if ta else (M, K), "B": (N, K) if tb else (K, N), "C": (M, N)}
    offsets, lds = dict(zip("ABC", offsets)), dict(zip("ABC", lds))
    shp, st, ptr, starts = [], [], [], {}
    for name, op in ops.items():
        rows, cols = stored[name]
        off = _ints(offsets[name], G, f"{name.lower()}_offsets", scalar=False)
        ld = _ints(lds[name], G, f"ld{name.lower()}", scalar=True)
        _fits(name, rows, cols, off, ld, op.shape[0])
        shp.append(np.stack([rows, cols], 1))
        st.append(np.stack([ld, np.ones(G, np.int64)], 1))
        ptr.append(op.ptr + off * dtype.itemsize)
        starts[name] = (off.tolist(), ld.tolist(), rows.tolist(), cols.tolist())

    def views(*bufs):  # per-group host views of this call's buffers (NumPy backend)
        return tuple(Views(G, _viewer(buf, *starts[n])) for buf, n in zip(bufs, "ABC"))
    batch = make_batch(views(*(op.obj for op in ops.values())), np.concatenate(shp),
                       np.concatenate(st), np.concatenate(ptr).astype(np.int64),
                       ops["C"].readonly, s, alphas, betas, ta, tb, dtype, ops["A"].device)
    return host_call(be, batch, views, strategy)


def _sizes(sizes) -> np.ndarray:
    try:
        s = np.asarray(sizes)
    except ValueError as e:  # ragged lists
        raise ShapeMismatch(f"sizes must be a (G, 3) integer array of M, N, K: {e}") from None
    except Exception as e:  # noqa: BLE001 - e.g. a device array: sizes live on the host
        raise DtypeError(f"sizes must be a host integer array, got {type(sizes).__name__} "
                         f"({e})") from None
    if s.ndim == 1 and s.size == 0:
        s = s.reshape(0, 3)
    if s.ndim != 2 or s.shape[1] != 3:
        raise ShapeMismatch(f"sizes has shape {s.shape}; expected (G, 3): M, N, K per group")
    if s.dtype.kind not in "iu":
        raise DtypeError(f"sizes must be integers, got dtype {s.dtype}")
    s = s.astype(np.int64)
    bad = (s < 0).any(axis=1) | (s > _INT_LIMIT).any(axis=1)
    if bad.any():
        g = first(bad)
        raise group_error(ValidationError, f"M, N, K = {s[g].tolist()} must lie in "
                                           f"[0, 2**31)", g)
    return s


def _ints(x, G, name, scalar) -> np.ndarray:
    """G non-negative integers (one integer broadcast if ``scalar``)."""
    try:
        a = np.asarray(x)
    except Exception as e:  # noqa: BLE001 - e.g. a device array: these are host arrays
        raise DtypeError(f"{name} must be host integers, got {type(x).__name__} ({e})") from None
    if a.dtype.kind not in "iu":
        raise DtypeError(f"{name} must be integers, got dtype {a.dtype}")
    if a.ndim == 0 and scalar:
        a = np.full(G, a[()])
    if a.shape != (G,):
        want = f"one integer or {G}" if scalar else f"{G}"
        raise ShapeMismatch(f"{name} has shape {a.shape}; expected {want} (one per group)")
    a = a.astype(np.int64)
    bad = a < 0
    if bad.any():
        g = first(bad)
        raise group_error(ValidationError, f"{name}[{g}] = {a[g]} is negative", g)
    return a


def _fits(name, rows, cols, off, ld, length):
    """Row stride at least the columns, and the whole matrix inside the buffer."""
    full = (rows > 0) & (cols > 0)
    bad = full & (rows > 1) & (ld < cols)
    if bad.any():
        g = first(bad)
        raise group_error(LayoutError, f"ld{name.lower()} = {ld[g]} is less than the "
                                       f"{cols[g]} columns of {name} as stored", g)
    end = off + np.where(full, (rows - 1) * ld + cols, 0)
    bad = full & (end > length)
    if bad.any():
        g = first(bad)
        raise group_error(ValidationError, f"{name} reaches element {end[g]}, past the "
                                           f"{length} elements of its buffer", g)


def _viewer(buf, off, ld, rows, cols):
    """Group i's matrix as a strided host view of ``buf`` (NumPy backend)."""
    def view(i):
        if rows[i] == 0 or cols[i] == 0:
            return np.empty((rows[i], cols[i]), buf.dtype)
        return np.lib.stride_tricks.as_strided(buf[off[i]:], (rows[i], cols[i]),
                                               (ld[i] * buf.itemsize, buf.itemsize))
    return view
