"""One-tile-per-block plans expanded on the device: what the GPU backends send (the
plan's per-GEMM layout as a small int32 table), the expansion kernel's arguments, and a
NumPy emulation of that kernel (vbatched_gemm.cu, PG_TILE_EXPAND), which the tests run
so its logic is checked on any machine. No GPU library here.

A plan state made this way never builds the tile list on the host: the table is
O(batch), and one launch on the caller's stream writes the tile records and the block
pointers (0, 1, 2, ...) before the GEMM launches that read them.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..kernels.render import DEVICE_TILE_DTYPE
from ..kernels.variants import TileExpand

# Rows of the table, in the kernel's order.
ROWS = ("first", "gemm", "gn", "tm", "tn", "kind")


class Expansion(NamedTuple):
    """A layout as the expansion kernel takes it: ``table`` int32 (6, spans + 1), one
    column per GEMM that has tiles, in launch order (rows: ROWS; first's last entry is
    n_tiles, the other rows' last entry 0)."""
    table: np.ndarray
    spans: int
    n_tiles: int

    @property
    def blocks(self) -> int:
        """Blocks of the launch: one thread per tile and one for the last pointer."""
        return -(-(self.n_tiles + 1) // TileExpand.threads)


def expansion(layout, kind_zero: bool = False) -> Expansion | None:
    """The table for ``layout`` (a tile_layout.TileLayout); ``kind_zero``: every tile's
    kind 0 (a per-kind entry point holds one kind, id 0). None when the kernel cannot
    write it: column-major grids (magma's, which runs as grid-z and needs no list)."""
    if layout.m_fastest:
        return None
    n = layout.n_tiles
    keep = np.flatnonzero(layout.first[1:] != layout.first[:-1])   # GEMMs with tiles
    s = keep.shape[0]
    table = np.zeros((len(ROWS), s + 1), np.int32)
    table[0, :s] = layout.first.take(keep)
    table[0, s] = n
    for row, values in enumerate((layout.gemm, layout.gn, layout.tm, layout.tn), start=1):
        table[row, :s] = values.take(keep)
    if not kind_zero:
        table[5, :s] = layout.kind.take(keep)
    return Expansion(table, s, n)


def per_kind_launches(layout):
    """[(kind, first block, blocks)] for per-kind launches over the layout's own order,
    kinds in order of first use (as launch.per_kind_layout makes them); None when some
    kind's tiles are not contiguous (then the list must be reordered on the host)."""
    counts = np.diff(layout.first)
    used = np.flatnonzero(counts)
    kinds, counts = layout.kind.take(used), counts.take(used)
    if kinds.shape[0] == 0:
        return []
    starts = np.concatenate([[0], np.flatnonzero(kinds[1:] != kinds[:-1]) + 1])
    run_kinds = kinds.take(starts)
    if np.unique(run_kinds).shape[0] != run_kinds.shape[0]:
        return None
    run_tiles = np.add.reduceat(counts, starts)
    first = np.concatenate([[0], np.cumsum(run_tiles)[:-1]])
    return [(int(k), int(f), int(c)) for k, f, c in zip(run_kinds, first, run_tiles)]


def expand_args(exp: Expansion, table_ptr: int, tiles_ptr: int, block_ptr_ptr: int) -> list:
    """The expansion kernel's arguments in kernel order, as (kind, value): "p" a
    pointer, "i" int32."""
    return [("p", table_ptr), ("i", exp.spans), ("i", exp.n_tiles), ("p", tiles_ptr),
            ("p", block_ptr_ptr)]


def emulate_expand(table: np.ndarray, spans: int, n_tiles: int):
    """What the kernel writes, by the same steps: (tiles of DEVICE_TILE_DTYPE,
    block_ptr int32 of n_tiles + 1)."""
    table = np.asarray(table, np.int64).reshape(len(ROWS), spans + 1)
    first, gemm, gn, tm, tn, kind = table
    t = np.arange(n_tiles)
    lo, hi = np.zeros_like(t), np.full_like(t, spans - 1)
    while (lo < hi).any():  # the kernel's binary search, every thread at once
        mid = (lo + hi + 1) >> 1
        ok = first[mid] <= t
        active = lo < hi
        lo = np.where(active & ok, mid, lo)
        hi = np.where(active & ~ok, mid - 1, hi)
    i = t - first[lo]
    r = i // gn[lo]
    tiles = np.zeros(n_tiles, DEVICE_TILE_DTYPE)
    tiles["gemm"] = gemm[lo]
    tiles["m0"] = r * tm[lo]
    tiles["n0"] = (i - r * gn[lo]) * tn[lo]
    tiles["kind"] = kind[lo]
    return tiles, np.arange(n_tiles + 1, dtype=np.int32)
