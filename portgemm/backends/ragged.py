"""Ragged M with the group ends on the device: the launch description the GPU backends
run (the prologue, then one tile kind over an upper-bound tile list) and a NumPy
emulation of the prologue, which the NumPy backend runs so the logic is tested on any
machine. No GPU library here.

The prologue (vbatched_gemm.cu, PG_RAGGED_PROLOGUE) reads ``offs`` on the device and
writes each group's descriptor and the tile list: ``rows // tm + groups`` row slots
times ``ceil(N / tn)`` column tiles, enough for any split of ``rows`` into ``groups``
groups; unused slots hold gemm = -1 and their blocks leave at once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..kernels.render import DEVICE_TILE_DTYPE
from ..kernels.variants import RaggedPrologue, Variant
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

    @property
    def prologue(self) -> RaggedPrologue:
        return _prologue(self.dtype)

    def prologue_blocks(self) -> int:
        return -(-max(self.n_tiles, self.groups) // RaggedPrologue.threads)


@lru_cache(maxsize=256)
def _variant(kind, dtype, trans_a: bool, trans_b: bool) -> Variant:
    """The GEMM kernel of a ragged call (one per kind, dtype and transposes: a call on
    new buffers builds no new Variant; keyed by the dtype object, whose name numpy
    builds on every read)."""
    return Variant((kind,), np.dtype(dtype).name, "tile-list", trans_a, trans_b)


@lru_cache(maxsize=8)
def _prologue(dtype) -> RaggedPrologue:
    return RaggedPrologue(np.dtype(dtype).name)


def prologue_args(job: RaggedJob, gemms: int, tiles: int, alphas: int, betas: int) -> list:
    """The prologue's arguments in kernel order, as (kind, value): kind "p" a pointer,
    "i" int32, "q" int64, "d" double. alphas/betas: device pointers or 0."""
    k = job.kind
    return [("p", job.offs_ptr), ("i", job.groups), ("i", job.rows), ("i", k.tm), ("i", k.tn),
            ("i", job.tiles_n), ("i", job.n_tiles), ("p", job.a_ptr), ("p", job.b_ptr),
            ("p", job.c_ptr), ("q", job.a_step), ("q", job.b_stride), ("i", job.lda),
            ("i", job.ldb), ("i", job.ldc), ("i", job.N), ("i", job.K), ("d", job.alpha),
            ("d", job.beta), ("p", alphas), ("p", betas), ("p", gemms), ("p", tiles)]


def emulate_prologue(job: RaggedJob, offs: np.ndarray):
    """What the prologue writes, computed on the host by the same steps:
    (starts, M per group, tile list of DEVICE_TILE_DTYPE with gemm = -1 in unused slots)."""
    offs = np.asarray(offs, np.int64)
    G, rows, tm = job.groups, job.rows, job.kind.tm

    def start(g):  # pg_group_start, vectorised over g
        prev = offs[np.maximum(g - 1, 0)]
        return np.clip(np.where(g > 0, prev, 0), 0, rows)

    g_all = np.arange(G)
    starts = start(g_all)
    M = np.minimum(np.maximum(offs, starts), rows) - starts

    t = np.arange(job.n_tiles)
    r, j = t // job.tiles_n, t % job.tiles_n
    lo, hi = np.zeros_like(t), np.full_like(t, G - 1)
    while (lo < hi).any():  # the kernel's binary search, every thread at once
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


class Scratch:
    """Device buffers a ragged call writes (descriptors, tiles) and the block pointers
    (0, 1, 2, ...: one tile per block), per (device, stream). Never freed while the
    backend lives, so a captured graph's pointers stay valid; a call picks the smallest
    buffer set that fits and allocates (power-of-two sizes) only when none does, so
    capture a call only after one uncaptured call of at least its size on that stream."""

    def __init__(self):
        self._sets: dict = {}
        self._scalars: dict = {}

    def scalars(self, device, host, upload):
        """Per-group alpha or beta on the device (None for None), uploaded once per
        content; the last RAGGED_SCALARS sets are kept (a captured graph may hold one)."""
        if host is None:
            return None
        key = (device, host.tobytes())
        dev = self._scalars.get(key)
        if dev is None:
            dev = self._scalars[key] = upload(np.ascontiguousarray(host, np.float64))
            while len(self._scalars) > RAGGED_SCALARS:
                self._scalars.pop(next(iter(self._scalars)))
        return dev

    def get(self, key, groups: int, n_tiles: int, alloc, upload):
        """(gemms, tiles, block_ptr) buffers; ``alloc(nbytes)`` and ``upload(host)``."""
        sets = self._sets.setdefault(key, [])
        for cap_g, cap_t, bufs in sets:
            if cap_g >= groups and cap_t >= n_tiles:
                return bufs
        from ..kernels.render import GEMM_DTYPE
        cap_g = 1 << max(groups - 1, 0).bit_length()
        cap_t = 1 << max(n_tiles - 1, 0).bit_length()
        bufs = (alloc(cap_g * GEMM_DTYPE.itemsize), alloc(cap_t * DEVICE_TILE_DTYPE.itemsize),
                upload(np.arange(cap_t + 1, dtype=np.int32)))
        sets.append((cap_g, cap_t, bufs))
        sets.sort(key=lambda s: (s[0], s[1]))
        return bufs
