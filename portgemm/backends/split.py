"""Running a split-K plan (``plan.split``, planner/split_k.py) on any backend.

Two phases, both on the caller's stream:

1. The virtual GEMMs: the inner plan ``split.plan`` over a batch whose GEMM ``first[i] +
   j`` is slice j of GEMM i: A and B advanced to the slice's first k (columns of op(A),
   rows of op(B); only the pointers move), writing workspace slice j (leading dimension
   N_i) with alpha 1 and beta 0. Where alpha_i = 0 the slices get alpha 0, so they
   write zeros without reading A or B (the kernels' BLAS rule). GEMMs that do not split
   run here as themselves, in the same launch(es). The backend's own execute / prepare
   runs this phase: the inner plan is an ordinary Plan.
2. The reduction (kernels/vbatched_gemm.cu, PG_SPLIT_REDUCE; variants.SplitReduce):
   C_i = alpha_i sum_j W_ij + beta_i C_i over the split GEMMs, j in order, so results
   do not depend on scheduling; beta_i = 0 never reads C_i, alpha_i = 0 never reads W.

The host side (no GPU library) is here: the virtual batch's fields, the reduction's
table and its block -> element mapping (``reduce_slots``, the kernel's indexing), and
the NumPy backend's emulation of both phases. A GPU backend supplies ``ops``: device(),
stream_of(batch) (a callable giving the caller's current stream at call time),
stream_key(stream), alloc(nbytes, stream), upload(host, stream), ptr(buffer),
encode(variant, blocks, args) and launch(encoded, stream).

Workspace: unbound calls (execute) share one per plan, device and calling stream
(calls on one stream run in order, so they may share it; calls on others get their
own), except that a call on a stream being captured into a graph, with none of its own
yet, takes one the plan already has on that device rather than allocate during the
capture (so replays of that graph must not overlap calls on the stream it came from);
a bound call (prepare) allocates its own at bind time and holds it, so a CUDA graph
captured from it stays valid while it lives and never shares it.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import numpy as np

from ..kernels.render import REDUCE_DTYPE
from ..kernels.variants import SplitReduce
from ..problem import Batch
from .launch import cached_upload, torch_device


def _virtual_index(split):
    """(GEMM of each virtual GEMM, its slice j, the slice's first k)."""
    s = split.splits
    rep = np.repeat(np.arange(s.shape[0]), s)
    j = np.arange(rep.shape[0]) - split.first[rep]
    return rep, j, j * split.slice_k[rep]


def virtual_fields(split, batch, ws_ptr: int) -> tuple:
    """Batch fields after A, B, C (shapes, ptr, ld, alpha, beta, trans_a, trans_b, dtype,
    size, device) of the virtual GEMMs, their workspace at device address ``ws_ptr``."""
    rep, j, k0 = _virtual_index(split)
    isz = batch.dtype.itemsize
    ld = batch.ld[rep].copy()
    # elements between consecutive k of op(A) (a row of A^T when transposed) and op(B)
    a_step = ld[:, 0] if batch.trans_a else 1
    b_step = 1 if batch.trans_b else ld[:, 1]
    ptr = batch.ptr[rep].copy()
    ptr[:, 0] += (k0 * a_step * isz).astype(np.uint64)
    ptr[:, 1] += (k0 * b_step * isz).astype(np.uint64)
    sliced = split.splits[rep] > 1
    M, N = batch.shapes[rep, 0], batch.shapes[rep, 1]
    woff = split.workspace_offset[rep] + j * M * N
    ptr[sliced, 2] = np.uint64(ws_ptr) + (woff[sliced] * isz).astype(np.uint64)
    ld[sliced, 2] = N[sliced]
    alpha = batch.alpha[rep].copy()
    alpha[sliced] = (alpha[sliced] != 0).astype(np.float64)
    beta = batch.beta[rep].copy()
    beta[sliced] = 0.0
    return (split.plan.shapes, ptr, ld, alpha, beta, batch.trans_a, batch.trans_b,
            batch.dtype, int(rep.shape[0]), batch.device)


def reduce_table(split, batch, ws_ptr: int, chunk: int = SplitReduce.chunk):
    """(records, block_start) of the reduction: one REDUCE_DTYPE record per split GEMM,
    ascending, and its first block (int32, one more entry: the block count)."""
    g = split.split_gemms
    rec = np.zeros(g.shape[0], REDUCE_DTYPE)
    rec["C"] = batch.ptr[g, 2]
    isz = batch.dtype.itemsize
    rec["W"] = np.uint64(ws_ptr) + (split.workspace_offset[g] * isz).astype(np.uint64)
    rec["ldc"] = batch.ld[g, 2]
    rec["M"], rec["N"] = batch.shapes[g, 0], batch.shapes[g, 1]
    rec["s"] = split.splits[g]
    rec["alpha"], rec["beta"] = batch.alpha[g], batch.beta[g]
    blocks = -(-(batch.shapes[g, 0] * batch.shapes[g, 1]) // chunk)
    start = np.concatenate([[0], np.cumsum(blocks)]).astype(np.int32)
    return rec, start


def reduce_slots(start: np.ndarray, mn: np.ndarray, chunk: int = SplitReduce.chunk):
    """(record, element) of every element the reduction kernel's blocks write, in block
    order: block b serves the last record g with start[g] <= b, elements (b - start[g])
    chunk + t for t < chunk that lie inside its M x N (the kernel's indexing)."""
    b = np.arange(int(start[-1]))
    g = np.searchsorted(start[:-1], b, side="right") - 1
    e = ((b - start[g]) * chunk)[:, None] + np.arange(chunk)[None, :]
    keep = e < mn[g][:, None]
    return np.broadcast_to(g[:, None], e.shape)[keep], e[keep]


def _pack(rec: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The reduction's table as one buffer: the records (48 bytes each, so the int32
    block starts that follow stay aligned), then block_start."""
    return np.concatenate([rec.view(np.uint8), start.view(np.uint8)])


def _reduce_args(buf_ptr: int, rec: np.ndarray):
    return (("p", buf_ptr), ("p", buf_ptr + rec.nbytes), ("i", rec.shape[0]))


# -- the NumPy backend: both phases on the host ---------------------------------------

def emulate(be, plan, batch) -> None:
    """Run ``plan`` (with a split) on host arrays as the GPU backends do: the virtual
    GEMMs through ``be.execute`` into a NaN-poisoned workspace, then the reduction over
    exactly the elements the kernel's blocks cover, summing in slice order in the
    batch's dtype."""
    sp = plan.split
    W = np.full(sp.workspace_elems, np.nan, batch.dtype)   # read only where written
    fields = virtual_fields(sp, batch, 0)
    rep, j, k0 = _virtual_index(sp)
    A, B, C = [], [], []
    vshapes = sp.plan.shapes
    for v, (i, jj, k) in enumerate(zip(rep.tolist(), j.tolist(), k0.tolist())):
        M, N, kv = (int(x) for x in vshapes[v])
        a, b = batch.A[i], batch.B[i]
        A.append(a[k:k + kv] if batch.trans_a else a[:, k:k + kv])
        B.append(b[:, k:k + kv] if batch.trans_b else b[k:k + kv])
        if sp.splits[i] > 1:
            off = int(sp.workspace_offset[i]) + jj * M * N
            C.append(W[off:off + M * N].reshape(M, N))
        else:
            C.append(batch.C[i])
    be.execute(sp.plan, Batch(A, B, C, *fields))

    rec, start = reduce_table(sp, batch, 0)
    mn = rec["M"].astype(np.int64) * rec["N"]
    g, e = reduce_slots(start, mn)
    bounds = np.searchsorted(g, np.arange(rec.shape[0] + 1)).tolist()
    dt = batch.dtype.type
    for r, i in enumerate(sp.split_gemms.tolist()):
        ee = e[bounds[r]:bounds[r + 1]]
        rows, cols = np.divmod(ee, int(rec["N"][r]))
        c = batch.C[i]
        alpha, beta = dt(rec["alpha"][r]), dt(rec["beta"][r])
        x = np.zeros(ee.shape[0], batch.dtype)
        if alpha != 0:   # alpha == 0 never reads W
            base = int(sp.workspace_offset[i])
            acc = W[base + ee]
            for jj in range(1, int(rec["s"][r])):
                acc = acc + W[base + jj * int(mn[r]) + ee]
            x = alpha * acc
        if beta != 0:    # beta == 0 never reads C
            x = x + beta * c[rows, cols]
        c[rows, cols] = x


# -- the GPU backends -----------------------------------------------------------------

class Ops:
    """What a GPU backend's split-K operations share: the device and the caller's stream
    (``stream_for(torch device or None)``, the backend's own rule). Subclasses add
    stream_key, alloc, upload, ptr, encode and launch (module docstring)."""

    def __init__(self, be, stream_for):
        self.be, self._stream_for = be, stream_for

    def device(self) -> int:
        return self.be._dev()

    @staticmethod
    def capturing(stream) -> bool:
        """Whether ``stream`` is being captured into a graph (no graphs: never)."""
        return False

    def stream_of(self, batch):
        """A callable giving the caller's current stream for ``batch`` at call time
        (it keeps the torch device, not the arrays)."""
        tdev, stream = torch_device(batch), self._stream_for
        return lambda: stream(tdev)


# plan -> {(device, stream key): {"ws": workspace, "reduce": uploaded tables by bytes}}
_STATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


class PhaseCall:
    """What execute() returns for a split or staged plan (backends/stage.py) in place of
    descriptors: what a repeat of the same batch on the same device and stream reuses (no
    user array): the inner plan's fields and call, the workspace, the uploaded table and
    the encoded launch of the other phase (the reduction after the inner plan, or the
    staging copy before it; None: nothing to launch)."""

    __slots__ = ("key", "fields", "inner", "workspace", "table", "phase")

    def __init__(self, key, fields, workspace, table, phase):
        self.key, self.fields, self.inner = key, fields, None
        self.workspace, self.table, self.phase = workspace, table, phase


def stream_state(plan, key, ops, stream, nbytes: int) -> dict:
    """The workspace (``nbytes``) and uploaded tables ("reduce": by their bytes) of an
    unbound call of ``plan`` on (device, stream) ``key`` (the module docstring's rule;
    backends/stage.py's too)."""
    with _lock:
        per = _STATES.setdefault(plan, {})
        st = per.get(key)
        if st is None and ops.capturing(stream):   # no allocation inside a capture
            st = next((v for k, v in reversed(per.items()) if k[0] == key[0]), None)
        if st is None:
            st = per[key] = {"ws": ops.alloc(nbytes, stream), "reduce": OrderedDict()}
    return st


def _new_call(ops, plan, batch, stream, key) -> PhaseCall:
    st = stream_state(plan, key, ops, stream, plan.split.workspace_elems * plan.dtype.itemsize)
    ws = ops.ptr(st["ws"])
    rec, start = reduce_table(plan.split, batch, ws)
    table = cached_upload(st["reduce"], _pack(rec, start), lambda h: ops.upload(h, stream))
    enc = ops.encode(SplitReduce(plan.dtype.name), int(start[-1]),
                     _reduce_args(ops.ptr(table), rec))
    return PhaseCall(key, virtual_fields(plan.split, batch, ws), st["ws"], table, enc)


def execute(be, ops, plan, batch, prev: PhaseCall | None = None) -> PhaseCall:
    """Both phases on the caller's current stream (backend.execute for a split plan);
    ``prev``: what an earlier call of this batch returned, reused on the same device
    and stream."""
    stream = ops.stream_of(batch)()
    key = (ops.device(), ops.stream_key(stream))
    call = prev if prev is not None and prev.key == key else \
        _new_call(ops, plan, batch, stream, key)
    call.inner = be.execute(plan.split.plan, Batch(batch.A, batch.B, batch.C, *call.fields),
                            call.inner)
    ops.launch(call.phase, stream)
    return call


def prepare(be, ops, plan, batch):
    """The bound call of a split plan: its own workspace and reduction table, made now;
    each call launches the inner plan's bound call, then the reduction, on the caller's
    stream at call time."""
    sp = plan.split
    current = ops.stream_of(batch)
    stream = current()
    ws = ops.alloc(sp.workspace_elems * plan.dtype.itemsize, stream)
    rec, start = reduce_table(sp, batch, ops.ptr(ws))
    # uploaded before the inner bind, which waits for its own uploads on this stream
    table = ops.upload(_pack(rec, start), stream)
    inner = be.prepare(sp.plan, Batch(batch.A, batch.B, batch.C,
                                      *virtual_fields(sp, batch, ops.ptr(ws))))
    enc = ops.encode(SplitReduce(plan.dtype.name), int(start[-1]),
                     _reduce_args(ops.ptr(table), rec))
    launch = ops.launch

    def call():
        inner()
        launch(enc, current())
    call.gemms = (inner, ws, table)   # the buffers live as long as the call
    return call
