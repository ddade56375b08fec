"""gemm_grouped: ragged M (mixture of experts), one buffer per operand.

Group g is rows [offs[g-1], offs[g]) of op(A) and C (offs[-1] = 0 implied), as in
``torch._grouped_mm``'s ``offs``. Host offsets are validated and become a Batch for the
planner and the backend's ``execute``; device offsets never leave the device: the
backend's ``execute_ragged`` makes one launch whose blocks read them (backends/ragged.py).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..backends.ragged import RaggedArrays, RaggedJob
from ..errors import DtypeError, LayoutError, ShapeMismatch, ValidationError
from ..planner import DEFAULT_STRATEGY, check_precision
from ..precision import how, split
from ..problem import _flag, _layout
from ..api import backend_of
from ..arrays import _kind as array_kind
from .operands import (CallCache, Views, call_key, check_operands, first, group_error,
                       group_scalars, host_call, make_batch, operand_key, read, value_key)
from .ragged_kind import choose_kind

_MAX_SLOTS = 2**31 - 1 - 256


def gemm_grouped(A, B, C, offs, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,
                 backend=None, strategy=None, device_offs=None, precision=None):
    """C[rows of g] = alpha_g op(A)[rows of g] @ op(B[g]) + beta_g C[rows of g] for each
    group g, in place; returns C.

    A: (T, K) (stored (K, T) with trans_a); B: (G, K, N) (stored (G, N, K) with trans_b);
    C: (T, N); all one dtype (float32 or float64) on the backend's device. offs: G
    non-decreasing group ends with offs[G-1] <= T: group g is rows [offs[g-1], offs[g])
    (offs[-1] = 0), rows from offs[G-1] on are neither read nor written; empty groups are
    legal. alpha, beta: scalars or one per group.

    Offsets on the host (a sequence or NumPy array) are checked exactly, and C may not
    overlap A or B. Offsets on the device (int32, contiguous) are never copied to the
    host: the kernel reads them on the device, so the call does not synchronise
    and may be captured in a CUDA graph that stays correct when ``offs`` changes in place
    between replays (warm it up with one uncaptured call of the same sizes first). Device
    offsets cannot be checked: values that break the rules above give wrong results, but
    no access outside A, B or C. device_offs: None (decide by where offs is), True (run
    the device path; host offsets are uploaded, and the NumPy backend emulates the
    kernel's lookup) or False (device offsets are copied to the host and checked).
    precision: as gemm_vbatched's ("ieee", "tf32", "3xtf32"; float32), on both paths.

    A call that repeats an earlier one (the same arrays by address and layout, the same
    host offsets by value, or the same device offsets array, and equal scalars) is not
    validated or planned again: it only launches (operands.CallCache).
    """
    be = backend_of(backend)
    if precision is not None:   # keys and plans carry the mode with the strategy
        strategy = how(strategy, precision)
    fast = _fast_key(be, A, B, C, offs, alpha, beta, trans_a, trans_b, strategy, device_offs)
    tkey = None
    if fast is not None:
        entry = _fast.get(fast)
        if entry is None and type(offs) is fast[1]:   # device offsets, new buffers?
            tkey = _template_key(fast)
            entry = _from_template(_templates.get(tkey), fast)
            if entry is not None:
                _fast.put(fast, entry)
        if entry is not None:   # a repeated call: only launch
            if entry is not _NOTHING:
                _run(be, entry, offs, A, B, C)
            return C
    ta, tb = _flag(trans_a, "trans_a"), _flag(trans_b, "trans_b")
    a, b, c = read(A, "A"), read(B, "B"), read(C, "C")
    host, dev = _offsets(offs, be)
    on_device = dev is not None if device_offs is None else bool(device_offs)
    if on_device:   # offsets read on the device: their address is what a launch uses
        o_key = dev[:5] if dev is not None else None   # (uploaded per call: not cached)
    else:           # offsets read on the host: their values
        o_key = value_key(host) if host is not None else None
    key = call_key((be, ta, tb, strategy, on_device), operand_key(a), operand_key(b),
                   operand_key(c), o_key, value_key(alpha), value_key(beta))
    entry = _calls.get(key)
    if entry is None:
        entry = _validate(be, a, b, c, host, dev, on_device, alpha, beta, ta, tb, strategy)
        _calls.put(key, entry)
    if key is not None and fast is not None:
        _fast.put(fast, entry)
        if tkey is not None and type(entry) is RaggedJob and entry.uploaded is None:
            _templates.put(tkey, (entry,) + _whole_layout(a, b, c, entry.dtype.itemsize)[1:])
    if entry is not _NOTHING:
        _run(be, entry, offs if dev is not None else None, A, B, C)
    return C


def _template_key(fast):
    """A device-offsets call's fast key without its buffers' addresses (each pointer's
    alignment kept, which validation reads): what a call on new buffers of the same
    layout shares with a validated one."""
    return fast[:6] + tuple((g[0] % 16,) + g[1:] for g in fast[6:10]) + fast[10:]


def _from_template(template, fast):
    """The RaggedJob of a device-offsets call on new buffers, from a validated call of
    the same layout (its checks, kind and sizes): only what depends on the addresses is
    redone, C apart from A and B. None without a template."""
    if template is None:
        return None
    job, span, b_start = template
    (a_ptr, *_), (b_ptr, *_), (c_ptr, *_), (o_ptr, *_) = fast[6:10]
    _check_c_apart(_spans((a_ptr, b_ptr, c_ptr), span, b_start))
    return replace(job, offs_ptr=o_ptr, a_ptr=a_ptr, b_ptr=b_ptr, c_ptr=c_ptr, launches={})


def _run(be, entry, dev_offs, A, B, C):
    """Launch a validated call: a RaggedJob reads the device offsets (or those it
    uploaded), a HostCall the sizes it was validated with."""
    if type(entry) is RaggedJob:
        o = dev_offs if entry.uploaded is None else entry.uploaded
        be.execute_ragged(entry, RaggedArrays(o, A, B, C))
    else:
        entry.run(be, (A, B, C))


def _fast_key(be, A, B, C, offs, alpha, beta, ta, tb, strategy, device_offs):
    """The key of a call whose arrays are all CuPy arrays or all torch tensors, with bool
    flags and int/float scalars, read in one pass without building Operands (None for
    any other call: it takes the full key). It holds what the full key holds: each
    array's type, pointer, shape, byte strides, dtype and device, the host offsets by
    value or the device offsets' geometry."""
    cls = type(C)
    geometry = _GEOMETRY[cls]
    if (geometry is None or type(A) is not cls or type(B) is not cls
            or (ta is not True and ta is not False) or (tb is not True and tb is not False)
            or type(alpha) not in _SCALARS or type(beta) not in _SCALARS):
        return None
    t = type(offs)
    if t is np.ndarray:
        o = (offs.dtype.str, offs.shape, offs.tobytes())
    elif t is cls and device_offs is not False:
        o = geometry(offs)
        if getattr(o[1], "type", None) == "cpu":
            return None   # host offsets in a torch tensor: by value, on the full path
    else:
        return None
    return (be, cls, ta, tb, strategy, device_offs, geometry(A), geometry(B), geometry(C), o,
            alpha, beta)


def _cupy_geometry(x):
    d = x.data
    return d.ptr, d.device_id, x.shape, x.strides, x.dtype


def _torch_geometry(x):
    return x.data_ptr(), x.device, x.shape, x.stride(), x.dtype


class _Geometry(dict):
    """Array type -> its geometry reader, found on first sight of a type (arrays._kind:
    CuPy's ndarray, torch's Tensor and its subclasses); None for any other type."""

    def __missing__(self, cls):
        reader = {"cupy": _cupy_geometry, "torch": _torch_geometry}.get(array_kind(cls))
        if len(self) < 64:   # a bounded memo: types are few
            self[cls] = reader
        return reader


_GEOMETRY = _Geometry()
_SCALARS = (float, int)


_calls = CallCache()
_fast = CallCache()   # the same entries by _fast_key
_templates = CallCache()   # device-offsets jobs by _template_key (calls on new buffers)
_NOTHING = "nothing"   # a validated call that writes nothing (no group, N = 0, no rows)


def _validate(be, a, b, c, host, dev, on_device, alpha, beta, ta, tb, strategy):
    """The full checks of one call: a RaggedJob (device offsets), a HostCall (host
    offsets) or _NOTHING. Typed errors; nothing is written."""
    dtype = check_operands(be, {"A": a, "B": b, "C": c}, {"A": 2, "B": 3, "C": 2})
    G = b.shape[0]
    K, rows = a.shape if ta else a.shape[::-1]
    Kb, N = b.shape[:0:-1] if tb else b.shape[1:]
    if K != Kb:
        raise ShapeMismatch(f"inner dimensions differ: op(A) is {rows}x{K}, op(B[g]) is {Kb}x{N}")
    if c.shape != (rows, N):
        raise ShapeMismatch(f"C is {c.shape[0]}x{c.shape[1]}, op(A) @ op(B[g]) stacks to {rows}x{N}")
    alphas, alpha_scalar = group_scalars(alpha, G, "alpha")
    betas, beta_scalar = group_scalars(beta, G, "beta")
    if on_device:
        uploaded = None
        if dev is None:  # upload (the NumPy backend emulates the device path on the host)
            o = _int32(host)
            dev = read(o if be.name == "numpy" else be.to_device(o), "offs")
            uploaded = dev.obj
        _check_device_offsets(dev, a, G)
        if G == 0:
            return _NOTHING
        job = _job(be, a, b, c, dev, rows, N, K, dtype, ta, tb, strategy,
                   (alphas, alpha_scalar), (betas, beta_scalar), uploaded)
        return _NOTHING if job is None else job
    if host is None:  # device offsets, copied to the host on request (device_offs=False)
        o = dev.obj
        host = o.cpu().numpy() if hasattr(o, "cpu") else np.asarray(be.to_host(o))
    ends = _host_offsets(host, G, rows)
    if G == 0:
        return _NOTHING
    batch, views = _batch(a, b, c, ends, rows, N, K, alphas, betas, ta, tb, dtype)
    return host_call(be, batch, views, strategy) or _NOTHING


# ---- offsets -----------------------------------------------------------------------------

def _offsets(offs, be):
    """(host array, None) or (None, device Operand)."""
    if isinstance(offs, (list, tuple, np.ndarray)):
        return offs, None
    try:
        o = read(offs, "offs")
    except DtypeError:
        return offs, None  # e.g. a range: let numpy read it
    if o.device == "cpu":
        return (offs.numpy() if hasattr(offs, "numpy") else offs), None
    if be.name == "numpy":
        raise DtypeError(f"the numpy backend takes host offsets; offs is on {o.device}")
    return None, o


def _int32(offs) -> np.ndarray:
    o = _host_array(offs)
    if o.dtype.kind not in "iu":
        raise DtypeError(f"offs must be integers, got dtype {o.dtype}")
    return np.ascontiguousarray(o, np.int32)


def _check_device_offsets(o, a, G):
    if o.dtype != np.int32:
        raise DtypeError(f"device offs must be int32 (as torch._grouped_mm's), got {o.dtype}")
    if o.shape != (G,):
        raise ShapeMismatch(f"offs has shape {o.shape}; expected ({G},), one end per group")
    if G > 1 and o.strides[0] != 1:
        raise LayoutError(f"device offs must be contiguous, got stride {o.strides[0]} elements")
    if o.device != a.device:
        raise ValidationError(f"offs is on {o.device}, A on {a.device}")


def _host_array(offs) -> np.ndarray:
    try:
        return np.asarray(offs)
    except Exception as e:  # noqa: BLE001 - anything numpy cannot read
        raise DtypeError(f"offs must be integers, got {type(offs).__name__} ({e})") from None


def _host_offsets(offs, G, rows) -> np.ndarray:
    o = _host_array(offs)
    if o.dtype.kind not in "iu":
        raise DtypeError(f"offs must be integers, got dtype {o.dtype}")
    if o.shape != (G,):
        raise ShapeMismatch(f"offs has shape {o.shape}; expected ({G},), one end per group")
    o = o.astype(np.int64)
    if G and o[0] < 0:
        raise group_error(ValidationError, f"offs[0] = {o[0]} is negative", 0)
    bad = o[1:] < o[:-1]
    if bad.any():
        g = first(bad) + 1
        raise group_error(ValidationError, f"offs[{g}] = {o[g]} < offs[{g - 1}] = {o[g - 1]}; "
                                           f"group ends must be non-decreasing", g)
    bad = o > rows
    if bad.any():
        g = first(bad)
        raise group_error(ValidationError, f"ends at row {o[g]}, past the {rows} rows of "
                                           f"op(A) and C", g)
    return o


# ---- host offsets: a Batch --------------------------------------------------------------

def _batch(a, b, c, ends, rows, N, K, alphas, betas, ta, tb, dtype):
    G = ends.size
    isz = dtype.itemsize
    starts = np.concatenate([[0], ends[:-1]])
    M = ends - starts
    g = np.arange(G)
    a_shp = np.stack([np.full(G, K), M], 1) if ta else np.stack([M, np.full(G, K)], 1)
    b_shp = np.broadcast_to(np.array(b.shape[1:]), (G, 2))
    c_shp = np.stack([M, np.full(G, N)], 1)
    shp = np.concatenate([a_shp, b_shp, c_shp])
    st = np.repeat(np.array([a.strides, b.strides[1:], c.strides], np.int64), G, axis=0)
    a_step = a.strides[1] if ta else a.strides[0]
    ptr = np.concatenate([a.ptr + starts * a_step * isz, b.ptr + g * b.strides[0] * isz,
                          c.ptr + starts * c.strides[0] * isz]).astype(np.int64)
    s_l, e_l = starts.tolist(), ends.tolist()

    def views(A, B, C):  # per-group host views of this call's arrays (NumPy backend)
        return (Views(G, (lambda i: A[:, s_l[i]:e_l[i]]) if ta else (lambda i: A[s_l[i]:e_l[i]])),
                Views(G, lambda i: B[i]), Views(G, lambda i: C[s_l[i]:e_l[i]]))
    shapes = np.stack([M, np.full(G, N), np.full(G, K)], 1)
    batch = make_batch(views(a.obj, b.obj, c.obj), shp, st, ptr, c.readonly, shapes, alphas,
                       betas, ta, tb, dtype, a.device)
    return batch, views


# ---- device offsets: a RaggedJob ---------------------------------------------------------

def _job(be, a, b, c, offs, rows, N, K, dtype, ta, tb, strategy, alpha, beta, uploaded):
    """Validated launch description (None when nothing is to be written: N = 0 or no rows)."""
    ld, span, b_start = _whole_layout(a, b, c, dtype.itemsize)
    _check_c_apart(_spans((a.ptr, b.ptr, c.ptr), span, b_start))
    if N == 0 or rows == 0:
        return None
    kind = _kind(be, offs.shape[0], rows, N, K, dtype, strategy)
    (alphas, a1), (betas, b1) = alpha, beta
    job = RaggedJob(kind, dtype, ta, tb, offs.shape[0], rows, N, K, offs.ptr,
                    a.ptr, b.ptr, c.ptr,
                    a.strides[1] if ta else a.strides[0], b.strides[0],
                    ld[0], ld[1], ld[2], float(alphas[0]), float(betas[0]),
                    None if a1 else alphas, None if b1 else betas, uploaded)
    if job.n_tiles > _MAX_SLOTS:  # one block a slot, indexed with 32-bit ints
        raise ValidationError(f"the upper-bound tile list has {job.n_tiles} slots; device "
                              f"offsets support at most {_MAX_SLOTS}")
    return job


def _spans(ptrs, span, b_start):
    """(lo, hi) byte spans of A, every B[g] and C from their pointers (_whole_layout)."""
    lo = (ptrs[0], ptrs[1] + b_start, ptrs[2])
    return lo, tuple(p + n for p, n in zip(lo, span))


def _check_c_apart(spans):
    """Groups are unknown with device offsets, so C may share no byte span with A or B
    (conservative)."""
    lo, hi = spans
    if hi[2] > lo[2]:
        for k, name in ((0, "A"), (1, "B")):
            if hi[k] > lo[k] and lo[k] < hi[2] and lo[2] < hi[k]:
                raise LayoutError(f"C overlaps {name} (with device offsets C may share no "
                                  f"memory span with A or B)")


_layouts: dict = {}
_LAYOUTS_KEPT = 256


def _whole_layout(a, b, c, isz):
    """Whole A, C and one B[g] through the lists path's stride checks (problem._layout,
    n = 1): (row strides in elements, byte spans, B's covering every B[g]), kept per
    geometry (shapes, strides, C's writability, each pointer's alignment)."""
    key = (a.shape, a.strides, b.shape, b.strides, c.shape, c.strides, c.readonly,
           a.ptr % isz, b.ptr % isz, c.ptr % isz, isz)
    got = _layouts.get(key)
    if got is not None:
        return got
    shp = np.array([a.shape, b.shape[1:], c.shape], np.int64)
    st = np.array([a.strides, b.strides[1:], c.strides], np.int64)
    ptr = np.array([a.ptr, b.ptr, c.ptr], np.int64)
    try:
        ld, lo, hi = _layout(shp, st, ptr, np.array([c.readonly]), isz, 1)
    except (ValidationError, DtypeError) as e:  # about a whole operand, not one group
        raise type(e)(str(e).split(": ", 1)[-1]) from None
    span = [int(h - o) for o, h in zip(lo, hi)]
    start = 0
    if span[1] > 0:  # B's span: from B[0]'s to B[G-1]'s (relative to B[0])
        extra = (b.shape[0] - 1) * b.strides[0] * isz
        start, span[1] = min(extra, 0), span[1] + abs(extra)
    got = (int(ld[0]), int(ld[1]), int(ld[2])), (span[0], span[1], span[2]), start
    if len(_layouts) >= _LAYOUTS_KEPT:
        _layouts.clear()
    _layouts[key] = got
    return got


_kinds: dict = {}
_KINDS_KEPT = 256


def _kind(be, G, rows, N, K, dtype, strategy):
    """The one tile kind of a device-offsets call: by default (no strategy, or the
    default one) the cost model's choice for G groups of T rows in all
    (ragged_kind.choose_kind); with another strategy named (or no candidate weighed),
    the kind that strategy's per-kind plan of G groups of the mean size uses most. Chosen
    once per sizes and kept, so repeated calls (and a graph captured after a warm-up
    call) run the same kernels on the same buffers even when compiling the first call's
    kernels refines the planner's resource figures."""
    arch = be.arch()
    key = (G, rows, N, K, dtype, arch.name, arch.compute_units, strategy)
    kind = _kinds.get(key)
    if kind is None:
        strategy, precision = split(strategy)
        precision = check_precision(precision, dtype, arch)   # as plan() would
        if strategy is None or strategy == DEFAULT_STRATEGY:
            kind = choose_kind(arch, G, rows, N, K, dtype, precision)
        if kind is None:
            from ..planner import plan
            m = max(1, -(-rows // G))
            p = plan(np.tile([m, N, K], (G, 1)), dtype=dtype, arch=arch, strategy=strategy,
                     mode="per-kind", split_k=False, precision=precision)
            kind = p.kinds[int(np.argmax(p.tile_counts()))]   # from the layout: no tile list
        if len(_kinds) >= _KINDS_KEPT:
            _kinds.pop(next(iter(_kinds)))
        _kinds[key] = kind
    return kind
