"""Ragged M with the group ends on the device: the launch description the GPU backends
run (one launch of one tile kind over an upper-bound tile list) and a NumPy emulation of
how each block of it finds its work, which the NumPy backend runs so the logic is tested
on any machine. No GPU library here.

The launch (vbatched_gemm.cu, PG_RAGGED) has ``rows // tm + groups`` row slots times
``ceil(N / tn)`` column tiles, one block each: enough for any split of ``rows`` into
``groups`` groups. Each block reads ``offs`` on the device, finds its group by a binary
search and builds that group's descriptor in registers; a block past its group's rows
leaves at once. Nothing but C is written, so a captured graph needs no buffers of ours
(but the per-group scalars, uploaded once).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..kernels.render import DEVICE_TILE_DTYPE
from ..kernels.variants import Variant
from ..tiles import TileConfig

RAGGED_SCALARS = 64   # per-group alpha/beta sets a GPU backend keeps on the device


class RaggedArrays(NamedTuple):
    """The arrays of one call of a RaggedJob (a job holds only their addresses, so one
    job serves every call on the same buffers)."""
    offs: object              # the offsets (device, or host for the NumPy backend)
    A: object
    B: object
    C: object                 # (its type picks the stream: torch's for a torch tensor)


@dataclass(frozen=True, eq=False)
class RaggedJob:
    """One device-offsets call, validated: everything but the group ends is known.
    It holds addresses, not arrays; a GPU backend keeps the launches it encodes for it
    in ``launches`` (per device and stream), so a repeated call only launches."""
    kind: TileConfig
    dtype: np.dtype
    trans_a: bool
    trans_b: bool
    groups: int
    rows: int                 # rows of op(A) and C: the upper bound of offs
    N: int
    K: int
    offs_ptr: int
    a_ptr: int
    b_ptr: int
    c_ptr: int
    a_step: int               # elements from one row of op(A) to the next
    b_stride: int             # elements from one group's B to the next
    lda: int
    ldb: int
    ldc: int
    alpha: float
    beta: float
    alphas: np.ndarray | None  # per-group float64, or None: the scalars apply
    betas: np.ndarray | None
    uploaded: object = None   # offsets this call uploaded (kept alive with the job)
    launches: dict = field(default_factory=dict, repr=False)

    @property
    def tiles_n(self) -> int:
        return -(-self.N // self.kind.tn)

    @property
    def row_slots(self) -> int:
        return self.rows // self.kind.tm + self.groups

    @property
    def n_tiles(self) -> int:
        return self.row_slots * self.tiles_n

    @property
    def variant(self) -> Variant:
        return _variant(self.kind, self.dtype, self.trans_a, self.trans_b)


@lru_cache(maxsize=256)
def _variant(kind, dtype, trans_a: bool, trans_b: bool) -> Variant:
    """The ragged entry point of a call (one per kind, dtype and transposes: a call on
    new buffers builds no new Variant; keyed by the dtype object, whose name numpy
    builds on every read)."""
    return Variant((kind,), np.dtype(dtype).name, "ragged", trans_a, trans_b)


def gemm_args(job: RaggedJob, alphas: int, betas: int) -> list:
    """The ragged entry point's arguments in kernel order, as (kind, value): kind "p" a
    pointer, "i" int32, "q" int64, "d" double. alphas/betas: device pointers or 0."""
    return [("p", job.offs_ptr), ("i", job.groups), ("i", job.rows), ("i", job.tiles_n),
            ("p", job.a_ptr), ("p", job.b_ptr), ("p", job.c_ptr), ("q", job.a_step),
            ("q", job.b_stride), ("i", job.lda), ("i", job.ldb), ("i", job.ldc), ("i", job.N),
            ("i", job.K), ("d", job.alpha), ("d", job.beta), ("p", alphas), ("p", betas)]


def emulate_slots(job: RaggedJob, offs: np.ndarray):
    """What every block of the launch finds (pg_ragged_slot), computed on the host by the
    same steps: (starts, M per group, one DEVICE_TILE_DTYPE record per block: its group
    as ``gemm``, -1 for a block that leaves at once, and its tile's m0 and n0)."""
    offs = np.asarray(offs, np.int64)
    G, rows, tm = job.groups, job.rows, job.kind.tm

    def start(g):  # pg_group_start, vectorised over g (clamped: bad offsets stay inside)
        prev = offs[np.maximum(g - 1, 0)]
        return np.clip(np.where(g > 0, prev, 0), 0, rows)

    g_all = np.arange(G)
    starts = start(g_all)
    M = np.minimum(np.maximum(offs, starts), rows) - starts

    t = np.arange(job.n_tiles)
    r, j = t // job.tiles_n, t % job.tiles_n
    lo, hi = np.zeros_like(t), np.full_like(t, G - 1)
    while (lo < hi).any():  # the kernel's binary search, every block at once
        mid = (lo + hi + 1) >> 1
        ok = start(mid) // tm + mid <= r
        active = lo < hi
        lo = np.where(active & ok, mid, lo)
        hi = np.where(active & ~ok, mid - 1, hi)
    m0 = (r - (starts[lo] // tm + lo)) * tm
    real = (m0 >= 0) & (m0 < M[lo])
    tiles = np.zeros(job.n_tiles, DEVICE_TILE_DTYPE)
    tiles["gemm"] = np.where(real, lo, -1)
    tiles["m0"] = np.where(real, m0, 0)
    tiles["n0"] = j * job.kind.tn
    return starts, M, tiles


class Scalars:
    """Per-group alpha or beta on the device, per device, uploaded once per content and
    never freed while the backend lives (a captured graph may hold their pointers); the
    last RAGGED_SCALARS sets are kept."""

    def __init__(self):
        self._sets: dict = {}

    def get(self, device, host, upload):
        """The device copy of ``host`` (float64, one per group; None for None);
        ``upload(host array)`` makes one."""
        if host is None:
            return None
        key = (device, host.tobytes())
        dev = self._sets.get(key)
        if dev is None:
            dev = self._sets[key] = upload(np.ascontiguousarray(host, np.float64))
            while len(self._sets) > RAGGED_SCALARS:
                self._sets.pop(next(iter(self._sets)))
        return dev
