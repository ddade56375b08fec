"""Vectorised helpers every planner shares: per-GEMM tile counts, the flat tile list
for a per-GEMM kind choice, block ordering (longest first) and block_ptr.

Nothing here loops over GEMMs or tiles in Python.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ValidationError
from ..plan import TILE_DTYPE, Plan


@dataclass
class Request:
    """What plan() hands a strategy: validated inputs, resolved defaults."""
    shapes: np.ndarray          # (batch, 3) int64, read-only
    dtype: str                  # "float32" | "float64"
    arch: object                # occupancy Arch
    mode: str
    options: dict = field(default_factory=dict)

    @property
    def batch(self) -> int:
        return int(self.shapes.shape[0])

    def option(self, name, default):
        v = self.options.get(name)
        return default if v is None else v


def cdiv(a, b):
    return -(-a // b)


# The most tiles one plan may hold. A tile record is 24 bytes and building the list
# takes a few times that at its peak, so this bounds planning memory near 1.5 GB; a
# batch that needs more tiles is refused (docs/design.md §5) and should be split.
MAX_TILES = 2**24


def check_tile_count(tiles_per_gemm: np.ndarray, gemm_ids: np.ndarray) -> None:
    """ValidationError, before anything of that size is allocated, when the plan would
    hold more than MAX_TILES tiles; names the GEMM (``gemm_ids[j]`` for the j-th count)
    at which the running count passes the limit."""
    total = np.cumsum(tiles_per_gemm)
    if total.size and int(total[-1]) > MAX_TILES:
        i = int(gemm_ids[np.searchsorted(total, MAX_TILES, side="right")])
        raise ValidationError(f"the plan needs {int(total[-1]):,} tiles, more than the "
                              f"{MAX_TILES:,} a plan may hold (about 24 bytes each); the "
                              f"count passes the limit at this GEMM; split the batch", gemm=i)


def tile_grid(shapes: np.ndarray, kinds):
    """(gm, gn), each (batch, n_kinds) int64: tile rows and columns GEMM i needs with
    kind k (0 when M or N is 0). One scalar division per distinct tile edge, which numpy
    does much faster than a broadcast division."""
    def per_edge(x, edges):
        out = np.empty((x.shape[0], len(edges)), dtype=np.int64)
        done = {}
        for j, e in enumerate(edges):
            if e not in done:
                done[e] = (x + (e - 1)) // e
            out[:, j] = done[e]
        return out
    return (per_edge(shapes[:, 0], [k.tm for k in kinds]),
            per_edge(shapes[:, 1], [k.tn for k in kinds]))


def tile_counts(shapes: np.ndarray, kinds) -> np.ndarray:
    """(batch, n_kinds) int64: tiles GEMM i needs with kind k (0 when M or N is 0)."""
    gm, gn = tile_grid(shapes, kinds)
    return gm * gn


def kind_counts(counts: np.ndarray, kidx: np.ndarray, n_kinds: int) -> np.ndarray:
    """Workgroups per kind (float64) when GEMM i uses kind kidx[i]."""
    per_gemm = counts[np.arange(counts.shape[0]), kidx]
    return np.bincount(kidx, weights=per_gemm, minlength=n_kinds)


def build_tiles(shapes: np.ndarray, kinds, kidx: np.ndarray, gemm_order=None,
                m_fastest: bool = False) -> np.ndarray:
    """The flat tile list: GEMMs in ``gemm_order`` (default 0..batch-1), each GEMM's
    tiles row-major over its tile grid (``m_fastest``: column-major, i.e. the order a
    grid with x = tile row launches them).

    Per-tile work is a handful of int32 repeats written straight into the fields (a
    repeat of the 24-byte records is several times slower); the coordinate along a
    tile row/column is computed per *line* (a few thousand), the one across it per tile.
    """
    i32 = np.int32
    if gemm_order is None:
        gemm_order = np.arange(shapes.shape[0])
    tm_k = np.array([k.tm for k in kinds], dtype=np.int64)
    tn_k = np.array([k.tn for k in kinds], dtype=np.int64)
    g = np.asarray(gemm_order, dtype=np.int64)
    kk = kidx[g]
    tm, tn = tm_k[kk], tn_k[kk]
    gm, gn = cdiv(shapes[g, 0], tm), cdiv(shapes[g, 1], tn)   # 0 when M or N is 0
    n_t = gm * gn
    check_tile_count(n_t, g)
    if m_fastest:  # a line is a tile column: gn lines of gm tiles
        lines, per_line, lstep, pstep = gn, gm, tn, tm
    else:          # a line is a tile row: gm lines of gn tiles
        lines, per_line, lstep, pstep = gm, gn, tm, tn
    lg = np.repeat(np.arange(g.shape[0], dtype=i32), lines)        # line -> GEMM slot
    first = np.cumsum(lines) - lines
    lcoord = (np.arange(lg.shape[0], dtype=np.int64) - first[lg]) * lstep[lg]
    llen = per_line[lg]
    n = int(llen.sum())
    tiles = np.empty(n, dtype=TILE_DTYPE)
    if n == 0:
        return tiles
    tiles["gemm"] = np.repeat(g.astype(i32), n_t)
    tiles["tm"] = np.repeat(tm.astype(i32), n_t)
    tiles["tn"] = np.repeat(tn.astype(i32), n_t)
    tiles["kind"] = np.repeat(kk.astype(i32), n_t)
    lf, pf = ("n0", "m0") if m_fastest else ("m0", "n0")
    tiles[lf] = np.repeat(lcoord.astype(i32), llen)
    pos = np.arange(n, dtype=i32)                                   # index inside the line
    pos -= np.repeat((np.cumsum(llen) - llen).astype(i32), llen)
    pos *= np.repeat(pstep.astype(i32), n_t)
    tiles[pf] = pos
    return tiles


def gemm_lpt_order(cost_per_tile: np.ndarray, group=None, total_cost=None) -> np.ndarray:
    """GEMM order for one-tile-per-block plans: longest tiles first (stable). When
    ``group`` (the kind) is given, each group is contiguous, the group with the largest
    sum of ``total_cost`` (a GEMM's whole cost) first."""
    if group is None:
        return np.argsort(-cost_per_tile, kind="stable")
    return _grouped_order(-cost_per_tile, group, total_cost)


def _grouped_order(neg_cost: np.ndarray, group: np.ndarray, weight) -> np.ndarray:
    n_groups = int(group.max()) + 1 if group.size else 0
    total = np.bincount(group, weights=weight, minlength=n_groups)
    rank = np.empty(n_groups, dtype=np.int64)
    rank[np.argsort(-total, kind="stable")] = np.arange(n_groups)
    return np.lexsort((neg_cost, rank[group]))  # lexsort is stable


def single_tile_blocks(n_tiles: int) -> np.ndarray:
    return np.arange(n_tiles + 1, dtype=np.int32)


def pack_blocks(tiles: np.ndarray, block_of: np.ndarray, K: np.ndarray,
                by_kind: bool = False):
    """Order blocks by estimated cost (sum of tm*tn*K over their tiles), descending and
    stable, so the longest blocks start first (LPT). ``block_of[t]`` numbers the block
    of tile t (0..n_blocks-1, any order); tiles keep their relative order inside a
    block. With ``by_kind`` (per-kind launches) a block's kind is its first tile's and
    blocks of one kind are contiguous, heaviest kind first.

    Returns (tiles ordered by block, block_ptr int32).
    """
    n = tiles.shape[0]
    if n == 0:
        return tiles, np.zeros(1, dtype=np.int32)
    nb = int(block_of.max()) + 1
    cost = tiles["tm"].astype(np.float64) * tiles["tn"] * K[tiles["gemm"]]
    bcost = np.bincount(block_of, weights=cost, minlength=nb)
    if by_kind:
        bkind = np.empty(nb, dtype=np.int64)
        bkind[block_of[::-1]] = tiles["kind"][::-1]   # first tile's kind wins
        border = _grouped_order(-bcost, bkind, weight=bcost)
    else:
        border = np.argsort(-bcost, kind="stable")
    rank = np.empty(nb, dtype=np.int64)
    rank[border] = np.arange(nb)
    torder = np.argsort(rank[block_of], kind="stable")
    sizes = np.bincount(block_of, minlength=nb)[border]
    block_ptr = np.zeros(nb + 1, dtype=np.int32)
    np.cumsum(sizes, out=block_ptr[1:])
    return take_tiles(tiles, torder), block_ptr


def take_tiles(tiles: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """tiles[idx], through an (n, 6) int32 view: numpy gathers plain rows an order of
    magnitude faster than structured records."""
    assert TILE_DTYPE.itemsize == 4 * len(TILE_DTYPE.names)
    rows = tiles.view(np.int32).reshape(-1, len(TILE_DTYPE.names))
    return np.take(rows, idx, axis=0).reshape(-1).view(TILE_DTYPE)


def notes_for_shapes(shapes: np.ndarray) -> list[str]:
    notes = []
    empty = int(((shapes[:, 0] == 0) | (shapes[:, 1] == 0)).sum())
    if empty:
        notes.append(f"{empty} GEMM(s) with M or N == 0 get no tiles")
    k0 = int(((shapes[:, 2] == 0) & (shapes[:, 0] > 0) & (shapes[:, 1] > 0)).sum())
    if k0:
        notes.append(f"{k0} GEMM(s) with K == 0 get tiles that only write beta*C")
    return notes


def make_plan(req: Request, strategy: str, kinds, tiles, block_ptr, tlp, threshold,
              tlp_model, occupancy, notes, grid=None) -> Plan:
    tiles.flags.writeable = False
    block_ptr.flags.writeable = False
    return Plan(strategy=strategy, arch=req.arch, dtype=np.dtype(req.dtype),
                shapes=req.shapes, kinds=tuple(kinds), tiles=tiles, block_ptr=block_ptr,
                mode=req.mode, tlp=float(tlp), tlp_threshold=float(threshold),
                tlp_model=tlp_model, occupancy=dict(occupancy), grid=grid,
                notes=tuple(notes))
