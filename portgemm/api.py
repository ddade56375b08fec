"""The public entry points: gemm_vbatched, run (Plan.run) and bind (Plan.bind).

Arrows go one way: api -> planner -> occupancy, api -> backends -> kernels. Plan.run and
Plan.bind are attached to Plan here, so plan.py needs nothing from this module.
"""
from __future__ import annotations

import numpy as np

from . import precision as precision_mode, reuse
from .backends import base as _registry
from .backends.base import get_backend
from .call_cache import CallCache, LayoutCall, layout_key
from .errors import DtypeError, ShapeMismatch
from .plan import Plan
from .planner import plan as make_plan
from .problem import _READ, Batch, gather_lists, validate


_last_object = (None, None)   # (a backend object passed as backend=, get_backend's answer)


def backend_of(name):
    """get_backend(name); a backend *object* passed on every call is checked against the
    protocol once, not per call (names are looked up every time: the registry may change)."""
    global _last_object
    if name is None:   # the first of the order, once made, is every later call's answer
        first = _registry._instances.get(_registry.ORDER[0])
        return first if first is not None else get_backend(None)
    if isinstance(name, str):
        return get_backend(name)
    last = _last_object   # one tuple read: threads never see half of a pair
    if name is last[0]:
        return last[1]
    be = get_backend(name)
    _last_object = (name, be)
    return be


def _validate(be, A, B, C, alpha, beta, trans_a, trans_b, whole=_READ):
    """problem.validate with the backend's readers (``whole``: the lists already read by
    gather_lists, or _READ to read them)."""
    return validate(A, B, C, alpha, beta, trans_a, trans_b, be.array_info,
                    getattr(be, "fast_devices", ()), gathered=whole)


def gemm_vbatched(A, B, C, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,
                  backend=None, strategy=None, precision=None):
    """C_i = alpha_i op(A_i) op(B_i) + beta_i C_i for every i, in place; returns C.

    A, B, C: lists/tuples of 2-D arrays of one dtype (float32 or float64) on the backend's
    device, any strides with unit inner stride; or 3-D arrays (b, rows, cols), a batch of
    b equal-sized GEMMs read through the batch stride (lists and stacks may be mixed).
    alpha, beta: scalars or one per GEMM. op(X) is X.T when the trans flag is set.
    backend: "cuda", "hip", "numpy", None (the first available, in that order) or a
    backend object. strategy: a planner name (portgemm.strategies()) or None.
    precision (float32): "ieee" (None, the default), "tf32" or "3xtf32" on the tensor
    cores (portgemm/precision.py; PrecisionError / PrecisionUnavailable as portgemm.plan).
    BLAS semantics: beta = 0 never reads C (NaN there is overwritten); alpha = 0 never
    reads A or B (C = beta C); M, N or K = 0 is legal (K = 0: C = beta C).

    Raises (all PortgemmError): ShapeMismatch, LayoutError, ValidationError (ValueErrors)
    and DtypeError (a TypeError) for bad arrays, naming the GEMM; UnknownBackend /
    UnknownStrategy (ValueError) for unknown names, ArgumentTypeError (TypeError) for a
    non-string name; DeviceUnavailable when the named backend cannot run here. Nothing
    is written when validation fails.

    Repeated calls on the same arrays (the reuse path, CUDA backend, lists or tuples of
    CuPy arrays or torch tensors): from the third call with the same array objects (by
    identity, in the same positions), scalars, flags, backend and strategy, a call
    skips validation, planning and the descriptor upload and only launches, after
    checking that no array changed in place: each CuPy array's rows and ndim (which
    fix its shape: CuPy's one in-place change, ``x.shape = ...``, keeps the size); each
    tensor's type, data_ptr(), shape, stride(), dtype and device (by torch's own C++
    checks where it has them); per-GEMM alpha/beta values. A call repeating one
    that hit, on the same three list objects and with the same backend, strategy,
    flags and scalar objects, is found by the lists' ids and compares its arrays' ids
    (a changed element is seen) before that check. Any
    difference (an element replaced, an array reshaped or re-pointed in place, other
    scalars) takes the full path. The plan is the one made for the first of the
    repeated calls. Nothing keeps the arrays alive (weak references; an entry goes when
    any of its arrays does); portgemm.reuse describes the rule in full.

    Calls on new array objects over the same memory (the layout cache, lists or tuples
    of NumPy or CuPy arrays or torch tensors): a call whose arrays have the pointers,
    shapes, strides, dtype, device, type and writability of an earlier validated call,
    with equal scalars, flags, backend and strategy, reads each array once and then
    only launches that call's plan and descriptors (portgemm.call_cache). Any
    difference takes the full path; a refused call is never kept.
    """
    be = backend_of(backend)
    # the caches key on the strategy and, where not "ieee", the precision mode with it
    how = strategy if precision is None else precision_mode.how(strategy, precision)
    if reuse.fast(be, how, A, B, C, alpha, beta, trans_a, trans_b):
        return C
    k, X = reuse.key(be, how, A, B, C, alpha, beta, trans_a, trans_b)
    if k is not None and reuse.launch(k, X, A, B, C, alpha, beta, be, how):
        return C
    snap = reuse.snapshot(k, X) if k is not None else None
    whole, lk, entry = _layout_lookup(be, how, A, B, C, alpha, beta, trans_a, trans_b)
    if entry is not None:   # the same memory, layout and scalars as a validated call
        p, (batch, gemms) = entry.plan, _relaunch(entry, A, B, C, snap is not None)
    else:
        batch = _validate(be, A, B, C, alpha, beta, trans_a, trans_b, whole)
        if batch.size == 0:
            return C
        # the operands' row strides: the cost model prices the kernel's 16-byte loads
        p = make_plan(batch.shapes, dtype=batch.dtype, arch=be.arch(), strategy=strategy,
                      precision=precision, lds=batch.ld[:, :2])
        gemms = be.execute(p, batch)
        if lk is not None:
            _layouts.put(lk, LayoutCall(be, p, batch, gemms))
    if k is not None:
        reuse.remember(k, be, batch, p, gemms, snap)
    return C


# Lists calls by layout_key (call_cache.py): few, since a key holds every array's layout
# (40 bytes an array) and an entry its device descriptors.
_layouts = CallCache(kept=16)


def _layout_lookup(be, how, A, B, C, alpha, beta, trans_a, trans_b):
    """(the lists read in one pass or None, their layout key or None, its entry or None)."""
    whole = gather_lists(A, B, C, getattr(be, "fast_devices", ()))
    if whole is None:
        return None, None, None
    lk = layout_key(be, how, whole, C, alpha, beta, trans_a, trans_b)
    return whole, lk, (_layouts.get(lk) if lk is not None else None)


def _relaunch(entry, A, B, C, keep):
    """Launch a layout entry over this call's lists: (its Batch, the descriptors used).
    Where the entry has its encoded launches and the caller keeps no Batch (``keep``
    False: reuse.remember makes no entry), none is made: (None, the descriptors)."""
    if not keep and entry.relaunch is not None:
        entry.relaunch()
        return None, entry.gemms
    batch = Batch(list(A), list(B), list(C), *entry.fields)
    return batch, entry.run(batch)


def _checked(plan, A, B, C, alpha, beta, trans_a, trans_b, backend, whole=_READ):
    be = backend_of(backend)   # run() passes its backend object: checked once, not again
    batch = _validate(be, A, B, C, alpha, beta, trans_a, trans_b, whole)
    if batch.size and batch.dtype != plan.dtype:
        raise DtypeError(f"plan was made for {plan.dtype}, arrays are {batch.dtype}")
    if batch.shapes.shape != plan.shapes.shape or not np.array_equal(batch.shapes, plan.shapes):
        bad = _first_mismatch(batch.shapes, plan.shapes)
        raise ShapeMismatch("shapes differ from the ones the plan was made for", gemm=bad)
    return be, batch


def run(plan, A, B, C, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, backend=None):
    """C_i = alpha_i op(A_i) op(B_i) + beta_i C_i for the shapes ``plan`` was made for;
    returns C. Arguments and errors as gemm_vbatched's; the shapes and dtype must be the
    plan's (ShapeMismatch / DtypeError otherwise). Repeated calls on the same arrays take
    gemm_vbatched's reuse path, and calls on new arrays over the same memory its layout
    cache (the same rules, with this plan in place of the strategy)."""
    be = backend_of(backend)
    if reuse.fast(be, plan, A, B, C, alpha, beta, trans_a, trans_b):
        return C
    k, X = reuse.key(be, plan, A, B, C, alpha, beta, trans_a, trans_b)
    if k is not None and reuse.launch(k, X, A, B, C, alpha, beta, be, plan):
        return C
    snap = reuse.snapshot(k, X) if k is not None else None
    # keyed by the plan's id: an entry holds its plan, so the id is that plan's while kept
    whole, lk, entry = _layout_lookup(be, id(plan), A, B, C, alpha, beta, trans_a, trans_b)
    if entry is not None:
        batch, gemms = _relaunch(entry, A, B, C, snap is not None)
    else:
        be, batch = _checked(plan, A, B, C, alpha, beta, trans_a, trans_b, be, whole)
        if not batch.size:
            return C
        gemms = be.execute(plan, batch)
        if lk is not None:
            _layouts.put(lk, LayoutCall(be, plan, batch, gemms))
    if k is not None:
        reuse.remember(k, be, batch, plan, gemms, snap)
    return C


class BoundGemm:
    """One plan bound to fixed arrays, validated once: calling it only launches.

    For loops that run the same batch on the same buffers (inference, solvers): it
    skips the per-call validation and reuses its device descriptors; on the CUDA
    backend a call is the raw launches with argument buffers encoded at bind time, on
    the caller's current stream. It holds the arrays, the plan and those descriptors,
    so a CUDA graph captured from it stays valid while it lives. Calling it returns the
    C given at bind time; the bound arrays' shapes must not change in place while bound.
    """

    def __init__(self, plan, backend, batch, C):
        self.plan, self.backend, self.batch, self.C = plan, backend, batch, C
        prepare = getattr(backend, "prepare", None)
        if not batch.size:
            self._launch = _nothing
        elif prepare is not None:
            self._launch = prepare(plan, batch)
        else:  # a backend without a lean path: execute, reusing its descriptors
            self._gemms = None

            def launch():
                self._gemms = backend.execute(plan, batch, self._gemms)
            self._launch = launch

    def __call__(self):
        self._launch()
        return self.C


def _nothing():
    pass


def bind(plan, A, B, C, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,
         backend=None) -> BoundGemm:
    """Validate once and return a BoundGemm: a callable that only launches.

    Arguments and errors as in ``run``. The call binds the arrays, not the lists
    holding them: it records each array's pointer, shape and strides now, and every
    later call computes into those same arrays. Replacing an element of a list
    afterwards (``C[0] = other``) is not seen: the bound call still writes the old
    array, although it returns the list ``C`` as it is then, which holds the new
    one. To compute into other arrays, bind again. Writing into the bound arrays'
    contents (``C[0][...] = x``, ``A[1][:] = y``) is fine and is seen by the next call.
    """
    be, batch = _checked(plan, A, B, C, alpha, beta, trans_a, trans_b, backend)
    return BoundGemm(plan, be, batch, C)


def _first_mismatch(a, b):
    if a.shape != b.shape:
        return None
    return int(np.flatnonzero((a != b).any(axis=1))[0])


Plan.run = run
Plan.bind = bind
