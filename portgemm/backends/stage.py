"""Running a staged plan (``plan.staging``, planner/staging.py) on any backend.

Two phases, both on the caller's stream:

1. The copy (kernels/vbatched_gemm.cu, PG_STAGE_COPY; variants.StageCopy), one launch:
   every staged operand, as stored (A: M x K, or K x M when transposed; B: K x N, or N
   x K), copied into the workspace at its reserved offset with its row stride rounded up
   to 16 bytes (plan.staged_ld). An operand reserved by the plan is staged where its rows
   are not 16-byte aligned in this call (leading dimension or base address) and the
   GEMM reads it (alpha_i != 0, a non-empty matrix: alpha = 0 never reads A or B); the
   others are read where they are. No operand staged: no launch.
2. The GEMMs: the inner plan ``staging.plan`` over the batch with the staged operands'
   pointers and leading dimensions replaced by their copies'. The backend's own execute /
   prepare runs it: the inner plan is an ordinary Plan (never split: planner/staging.py).

The host side is here: the copy's table and its block -> unit mapping (the kernel's
indexing, split.reduce_slots over units), the inner batch's fields, and the NumPy
backend's emulation of both phases. A GPU backend supplies the same ``ops`` as for
split-K (backends/split.py), and the workspace follows split-K's rule: unbound calls
(execute) share one per plan, device and calling stream (a call on a stream being
captured into a graph, with none of its own, takes one the plan already has on that
device); a bound call (prepare) allocates its own at bind time and holds it, so a CUDA
graph captured from it stays valid while it lives.

Device-offset (ragged, MoE) calls never come here: their groups are slices of packed
buffers the caller laid out, and their kinds take the operands' alignment as it is.
"""
from __future__ import annotations

import numpy as np

from ..kernels.render import STAGE_DTYPE
from ..kernels.variants import StageCopy
from ..plan import staged_ld
from ..problem import Batch
from .launch import cached_upload
from .split import PhaseCall, reduce_slots, stream_state
from .split import _pack as pack_table, _reduce_args as table_args


def stored_dims(batch) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), each (batch, 2) int64: A and B as stored (the transpose flags)."""
    M, N, K = batch.shapes[:, 0], batch.shapes[:, 1], batch.shapes[:, 2]
    a = (K, M) if batch.trans_a else (M, K)
    b = (N, K) if batch.trans_b else (K, N)
    return np.stack([a[0], b[0]], axis=1), np.stack([a[1], b[1]], axis=1)


def staged_in_call(staging, batch) -> np.ndarray:
    """(batch, 2) bool: the operands this call copies (module docstring, phase 1)."""
    rows, cols = stored_dims(batch)
    isz = batch.dtype.itemsize
    ld = batch.ld[:, :2].astype(np.int64)
    ptr = batch.ptr[:, :2].astype(np.uint64)
    unaligned = ((ld * isz) % 16 != 0) | ((ptr % np.uint64(16)) != 0)
    reads = (batch.alpha != 0)[:, None] & (rows > 0) & (cols > 0)
    return staging.reserved & unaligned & reads


def copy_table(staging, batch, ws_ptr: int, chunk: int = StageCopy.chunk):
    """(records, block_start, staged) of the copy: one STAGE_DTYPE record per staged
    operand (GEMM order, A before B), the first block of each (int32, one more entry: the
    block count), and staged_in_call's mask."""
    staged = staged_in_call(staging, batch)
    g, x = np.nonzero(staged)
    rows, cols = stored_dims(batch)
    isz = batch.dtype.itemsize
    rec = np.zeros(g.shape[0], STAGE_DTYPE)
    rec["src"] = batch.ptr[g, x]
    rec["dst"] = np.uint64(ws_ptr) + (staging.offset[g, x] * isz).astype(np.uint64)
    rec["src_ld"] = batch.ld[g, x]
    rec["dst_ld"] = staged_ld(cols[g, x], isz)
    rec["rows"], rec["cols"] = rows[g, x], cols[g, x]
    units = rows[g, x] * (rec["dst_ld"].astype(np.int64) // (16 // isz))
    blocks = -(-units // chunk)
    start = np.concatenate([[0], np.cumsum(blocks)]).astype(np.int32)
    return rec, start, staged


def inner_fields(staging, batch, rec, staged) -> tuple:
    """Batch fields after A, B, C of the inner plan's call: the staged operands' pointers
    and leading dimensions those of their copies (``rec``, in copy_table's order)."""
    g, x = np.nonzero(staged)
    ptr = batch.ptr.copy()
    ld = batch.ld.copy()
    ptr[g, x] = rec["dst"]
    ld[g, x] = rec["dst_ld"]
    return (batch.shapes, ptr, ld, batch.alpha, batch.beta, batch.trans_a, batch.trans_b,
            batch.dtype, batch.size, batch.device)


# -- the NumPy backend: both phases on the host ---------------------------------------

def emulate(be, plan, batch) -> None:
    """Run ``plan`` (with a staging) on host arrays as the GPU backends do: the copy into
    a NaN-poisoned workspace over exactly the units the kernel's blocks cover (a row's
    last unit zero-filled past its columns), then the inner plan through ``be.execute``
    on views of the copies (their own row strides)."""
    st = plan.staging
    W = np.full(max(st.workspace_elems, 1), np.nan, batch.dtype)
    rec, start, staged = copy_table(st, batch, 0)
    isz = batch.dtype.itemsize
    v = 16 // isz
    per_row = rec["dst_ld"].astype(np.int64) // v
    r, e = reduce_slots(start, rec["rows"].astype(np.int64) * per_row)
    A, B = list(batch.A[i] for i in range(batch.size)), list(batch.B[i] for i in range(batch.size))
    ops = (A, B)
    for k, (i, xi) in enumerate(zip(*(a.tolist() for a in np.nonzero(staged)))):
        src = np.asarray(ops[xi][i])
        units = e[r == k]
        row, col = np.divmod(units, per_row[k])
        cols = (col * v)[:, None] + np.arange(v)[None, :]
        rows = np.broadcast_to(row[:, None], cols.shape)
        inside = cols < int(rec["cols"][k])
        vals = np.zeros(cols.shape, batch.dtype)
        vals[inside] = src[rows[inside], cols[inside]]
        base = int(rec["dst"][k]) // isz
        ld = int(rec["dst_ld"][k])
        W[base + rows * ld + cols] = vals
        n_rows, n_cols = int(rec["rows"][k]), int(rec["cols"][k])
        ops[xi][i] = W[base:base + n_rows * ld].reshape(n_rows, ld)[:, :n_cols]
    be.execute(st.plan, Batch(A, B, batch.C, *inner_fields(st, batch, rec, staged)))


# -- the GPU backends -----------------------------------------------------------------

def _encode_copy(ops, plan, rec, start, table):
    return ops.encode(StageCopy(plan.dtype.name), int(start[-1]), table_args(ops.ptr(table), rec))


def _new_call(ops, plan, batch, stream, key) -> PhaseCall:
    st = plan.staging
    state = stream_state(plan, key, ops, stream, st.workspace_elems * plan.dtype.itemsize)
    rec, start, staged = copy_table(st, batch, ops.ptr(state["ws"]))
    table = enc = None
    if rec.shape[0]:
        table = cached_upload(state["reduce"], pack_table(rec, start),
                              lambda h: ops.upload(h, stream))
        enc = _encode_copy(ops, plan, rec, start, table)
    return PhaseCall(key, inner_fields(st, batch, rec, staged), state["ws"], table, enc)


def execute(be, ops, plan, batch, prev: PhaseCall | None = None) -> PhaseCall:
    """Both phases on the caller's current stream (backend.execute for a staged plan);
    ``prev``: what an earlier call of this batch returned, reused on the same device
    and stream."""
    stream = ops.stream_of(batch)()
    key = (ops.device(), ops.stream_key(stream))
    call = prev if isinstance(prev, PhaseCall) and prev.key == key else \
        _new_call(ops, plan, batch, stream, key)
    if call.phase is not None:
        ops.launch(call.phase, stream)
    call.inner = be.execute(plan.staging.plan, Batch(batch.A, batch.B, batch.C, *call.fields),
                            call.inner)
    return call


def prepare(be, ops, plan, batch):
    """The bound call of a staged plan: its own workspace and copy table, made now; each
    call launches the copy, then the inner plan's bound call, on the caller's stream at
    call time."""
    st = plan.staging
    current = ops.stream_of(batch)
    stream = current()
    ws = ops.alloc(st.workspace_elems * plan.dtype.itemsize, stream)
    rec, start, staged = copy_table(st, batch, ops.ptr(ws))
    table = enc = None
    if rec.shape[0]:
        # uploaded before the inner bind, which waits for its own uploads on this stream
        table = ops.upload(pack_table(rec, start), stream)
        enc = _encode_copy(ops, plan, rec, start, table)
    inner = be.prepare(st.plan, Batch(batch.A, batch.B, batch.C,
                                      *inner_fields(st, batch, rec, staged)))
    launch = ops.launch

    def call():
        if enc is not None:
            launch(enc, current())
        inner()
    call.gemms = (inner, ws, table)   # the buffers live as long as the call
    return call
