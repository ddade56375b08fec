"""Vectorised helpers every planner shares: per-GEMM tile counts, the tile layout (or
the flat tile list) for a per-GEMM kind choice, block ordering (longest first) and
block_ptr.

Nothing here loops over GEMMs or tiles in Python.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..arrays import numpy_dtype
from ..errors import ValidationError
from ..plan import TILE_DTYPE, Plan
from ..tile_layout import TileLayout
from .memo import per_family


@dataclass
class Request:
    """What plan() hands a strategy: validated inputs, resolved defaults."""
    shapes: np.ndarray          # (batch, 3) int64, read-only
    dtype: str                  # "float32" | "float64" | "float16" | "bfloat16"
    arch: object                # occupancy Arch
    mode: str
    options: dict = field(default_factory=dict)
    resources: object = None    # the resources provider (None: the default one)
    mode_given: bool = True     # False: the caller named no mode (the strategy may choose)
    # (batch, 2) bool: A's and B's rows are 16-byte aligned (planner/alignment.py);
    # None: dense row-major operands, read from the shapes
    aligned: np.ndarray | None = None
    # (batch, 2) bool: their rows take the 16-bit kinds' 4-byte copies (alignment.
    # four_byte_rows); None: dense operands' where ``aligned`` is None, else none do
    four: np.ndarray | None = None
    # a plan inside another (split-K's virtual GEMMs): only its tiles and prediction
    # are read, so the strategy may take cheaper exact shortcuts (wavefront_tlp.plan_with);
    # a string: the tile family of the plan it is inside (a hint: the likely winner)
    inner: bool | str = False

    @property
    def batch(self) -> int:
        return int(self.shapes.shape[0])

    def option(self, name, default):
        v = self.options.get(name)
        return default if v is None else v


class PlanToBuild:
    """An inner replan's plan before it is built (Request.inner): its predicted
    milliseconds, and ``build()`` for the Plan itself. Split-K weighs its candidates by
    prediction and builds only the one it keeps (building, the GEMM order and tile
    layout, is a tenth of a small replan)."""
    __slots__ = ("predicted_ms", "_build")

    def __init__(self, predicted_ms: float, build):
        self.predicted_ms, self._build = predicted_ms, build

    def build(self) -> Plan:
        return self._build()


def built(p) -> Plan:
    """``p`` itself, or the Plan of a PlanToBuild."""
    return p.build() if isinstance(p, PlanToBuild) else p


def cdiv(a, b):
    return -(-a // b)


def cdiv_array(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ceil(a / b) elementwise for non-negative int64 a < 2**53 and positive b, through
    float64: numpy divides by an array of integers one hardware division at a time, by
    floats in SIMD. Exact: a correctly rounded quotient lies within a * 2**-53 < 1/b of
    a / b, nearer than the next multiple of 1/b, so its ceiling is the true one."""
    q = np.true_divide(a, b)
    return np.ceil(q, out=q).astype(np.int64)


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


@per_family
def kind_edges(kinds: tuple) -> np.ndarray:
    """(2, n_kinds) int64, read-only: each kind's tm and tn (memoised per kind tuple)."""
    out = np.array([[k.tm for k in kinds], [k.tn for k in kinds]], dtype=np.int64).reshape(2, -1)
    out.flags.writeable = False
    return out


def tile_grid(shapes: np.ndarray, kinds):
    """(gm, gn), each (batch, n_kinds) int64: tile rows and columns GEMM i needs with
    kind k (0 when M or N is 0): one broadcast ceil-division per dimension."""
    tm, tn = kind_edges(tuple(kinds))
    return cdiv_array(shapes[:, 0:1], tm), cdiv_array(shapes[:, 1:2], tn)


def tile_counts(shapes: np.ndarray, kinds) -> np.ndarray:
    """(batch, n_kinds) int64: tiles GEMM i needs with kind k (0 when M or N is 0)."""
    gm, gn = tile_grid(shapes, kinds)
    return gm * gn


def kind_counts(counts: np.ndarray, kidx: np.ndarray, n_kinds: int) -> np.ndarray:
    """Workgroups per kind (float64) when GEMM i uses kind kidx[i]."""
    n_k = counts.shape[1]   # a flat take is cheaper than 2-D fancy indexing
    per_gemm = counts.reshape(-1).take(kidx + np.arange(0, counts.shape[0] * n_k, n_k))
    return np.bincount(kidx, weights=per_gemm, minlength=n_kinds)


def tile_layout(shapes: np.ndarray, kinds, kidx: np.ndarray, gemm_order=None,
                m_fastest: bool = False, per_gemm=None) -> TileLayout:
    """A one-tile-per-block plan's tiles as per-GEMM runs (O(batch)): GEMMs in
    ``gemm_order`` (default 0..batch-1), GEMM i tiled by kind ``kidx[i]``, each GEMM's
    tiles row-major over its tile grid (``m_fastest``: column-major, i.e. the order a
    grid with x = tile row launches them). ``per_gemm``: per_gemm_tiles(shapes, kinds,
    kidx) where the caller has it (then one gather each). ValidationError past
    MAX_TILES tiles."""
    i64 = np.int64
    g = (np.arange(shapes.shape[0], dtype=i64) if gemm_order is None
         else np.array(gemm_order, dtype=i64))   # a copy: the layout keeps it
    kk = np.asarray(kidx).take(g).astype(i64, copy=False)
    if per_gemm is not None:
        tm, tn, gm, gn = (a.take(g) for a in per_gemm)
        return _layout(g, kk, tm, tn, gm, gn, m_fastest)
    edges = kind_edges(tuple(kinds))
    tm, tn = edges[0].take(kk), edges[1].take(kk)
    mn = shapes.take(g, axis=0)   # a row gather: several times faster than shapes[g, :2]
    gm, gn = cdiv_array(mn[:, 0], tm), cdiv_array(mn[:, 1], tn)     # 0 when M or N is 0
    return _layout(g, kk, tm, tn, gm, gn, m_fastest)


def per_gemm_tiles(shapes: np.ndarray, kinds, kidx: np.ndarray):
    """(tm, tn, gm, gn), each (batch,) int64 in GEMM order: GEMM i's tile edges and tile
    grid under kind ``kidx[i]`` (what tile_layout's ``per_gemm`` takes)."""
    edges = kind_edges(tuple(kinds))
    tm, tn = edges[0].take(kidx), edges[1].take(kidx)
    shifts = _edge_shifts(tuple(kinds))
    if shifts is None:
        return tm, tn, cdiv_array(shapes[:, 0], tm), cdiv_array(shapes[:, 1], tn)
    # power-of-two edges: ceil(v / 2**s) = (v + 2**s - 1) >> s, exact in int64 (v < 2**31)
    # and a few times cheaper than the float division of two int64 arrays
    return (tm, tn, np.right_shift(shapes[:, 0] + (tm - 1), shifts[0].take(kidx)),
            np.right_shift(shapes[:, 1] + (tn - 1), shifts[1].take(kidx)))


@per_family
def _edge_shifts(kinds: tuple):
    """(2, n_kinds) int64, read-only: log2 of each kind's tm and tn, or None where some
    edge is not a power of two (memoised per kind tuple)."""
    edges = kind_edges(kinds)
    if ((edges & (edges - 1)) != 0).any() or (edges <= 0).any():
        return None
    out = np.array([[int(e).bit_length() - 1 for e in row] for row in edges.tolist()],
                   dtype=np.int64).reshape(2, -1)
    out.flags.writeable = False
    return out


def _layout(g, kk, tm, tn, gm, gn, m_fastest) -> TileLayout:
    n_t = gm * gn
    first = np.zeros(g.shape[0] + 1, dtype=np.int64)
    n_t.cumsum(out=first[1:])
    if first[-1] > MAX_TILES:
        check_tile_count(n_t, g)   # raises, naming the GEMM
    for a in (g, kk, tm, tn, gm, gn, first):
        a.flags.writeable = False
    return TileLayout(g, kk, tm, tn, gm, gn, first, bool(m_fastest))


def build_tiles(shapes: np.ndarray, kinds, kidx: np.ndarray, gemm_order=None,
                m_fastest: bool = False, per_gemm=None) -> np.ndarray:
    """The flat tile list of ``tile_layout(...)`` (same arguments), expanded on the host:
    for plans that pack several tiles in a block (li2019), which need the list itself."""
    return tile_layout(shapes, kinds, kidx, gemm_order, m_fastest, per_gemm).tiles()


def gemm_lpt_order(cost_per_tile: np.ndarray, group=None, total_cost=None) -> np.ndarray:
    """GEMM order for one-tile-per-block plans: longest tiles first (stable). When
    ``group`` (the kind) is given, each group is contiguous, the group with the largest
    sum of ``total_cost`` (a GEMM's whole cost) first."""
    if group is None:
        return stable_argsort_desc(cost_per_tile)
    return _grouped_order(cost_per_tile, group, total_cost)


def _grouped_order(cost: np.ndarray, group: np.ndarray, weight) -> np.ndarray:
    """Groups contiguous (heaviest total ``weight`` first), inside a group descending
    ``cost``; stable. The same permutation as lexsort((-cost, rank[group]))."""
    n_groups = int(group.max()) + 1 if group.size else 0
    total = np.bincount(group, weights=weight, minlength=n_groups)
    rank = np.empty(n_groups, dtype=np.int64)
    rank[stable_argsort_desc(total)] = np.arange(n_groups)
    icost = _exact_int(cost) if cost.size else None
    if icost is not None:
        lo, hi = int(icost.min()), int(icost.max())
        span = hi - lo + 1
        if span * max(n_groups, 1) <= 2**16:   # one 16-bit key: one counting sort
            key = rank[group] * span + (hi - icost)
            return np.argsort(key.astype(np.uint16), kind="stable")
        if span * max(n_groups, 1) < 2**62:   # one key: group rank, then -cost
            key = rank[group] * span + (hi - icost)
            # numpy's stable sort of one integer key is several times cheaper than
            # lexsort of two; from _RADIX_MIN keys on, the radix passes are cheaper still
            return _radix_argsort(key) if key.size >= _RADIX_MIN else np.argsort(key, kind="stable")
    return np.lexsort((-np.asarray(cost), rank[group]))  # lexsort is stable


def _exact_int(x: np.ndarray):
    """``x`` as int64 if every value is a non-negative integer below 2**53 (so the
    conversion is exact and orders the same), else None."""
    x = np.asarray(x)
    if x.dtype.kind in "iu":
        return x.astype(np.int64, copy=False) if (x.size == 0 or x.min() >= 0) else None
    if x.dtype.kind != "f" or (x.size and not (x.min() >= 0 and x.max() < 2.0**53)):
        return None
    xi = x.astype(np.int64)
    return xi if np.array_equal(xi, x) else None


def _radix_argsort(key: np.ndarray) -> np.ndarray:
    """Stable ascending argsort of a non-negative int64 key: least-significant-digit
    radix over 16-bit digits, each pass numpy's stable sort of uint16 (a counting sort),
    so two or three linear passes instead of a comparison sort."""
    order = np.arange(key.shape[0], dtype=np.intp)
    top = int(key.max()) if key.size else 0
    shift = 0
    while True:
        digit = ((key[order] >> shift) & 0xFFFF).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
        shift += 16
        if top >> shift == 0:
            return order


# Below this many keys numpy's own stable sort is cheaper than the radix passes' calls.
_RADIX_MIN = 2048


def stable_argsort(x: np.ndarray) -> np.ndarray:
    """np.argsort(x, kind="stable"), by radix for many non-negative integral keys."""
    xi = _exact_int(x) if np.size(x) >= max(1, _RADIX_MIN) else None
    if xi is None:
        return np.argsort(x, kind="stable")
    return _radix_argsort(xi)


def stable_argsort_desc(x: np.ndarray) -> np.ndarray:
    """np.argsort(-x, kind="stable"), faster for the non-negative integral costs the
    planners sort (radix over 16-bit digits); any other input takes numpy's sort."""
    xi = _exact_int(x) if np.size(x) >= max(1, _RADIX_MIN) else None
    if xi is None:
        return np.argsort(-np.asarray(x), kind="stable")
    return _radix_argsort(int(xi.max()) - xi)


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
        border = _grouped_order(bcost, bkind, weight=bcost)
    else:
        border = stable_argsort_desc(bcost)
    rank = np.empty(nb, dtype=np.int64)
    rank[border] = np.arange(nb)
    torder = np.argsort(rank[block_of], kind="stable")   # runs of equal ranks: timsort
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
    zero = shapes == 0
    if not zero.any():   # the common case: one pass
        return []
    notes = []
    # from the one comparison above: sizes are >= 0, so > 0 is "not == 0"
    no_tiles = zero[:, 0] | zero[:, 1]
    empty = int(np.count_nonzero(no_tiles))
    if empty:
        notes.append(f"{empty} GEMM(s) with M or N == 0 get no tiles")
    k0 = int(np.count_nonzero(zero[:, 2] > no_tiles))   # K == 0 and M, N > 0
    if k0:
        notes.append(f"{k0} GEMM(s) with K == 0 get tiles that only write beta*C")
    return notes


def make_plan(req: Request, strategy: str, kinds, tiles, block_ptr, tlp, threshold,
              tlp_model, occupancy, notes, grid=None, predicted_ms=None) -> Plan:
    """The Plan. ``tiles`` is the flat list with its ``block_ptr`` (None: one tile per
    block) or, for one tile per block, a TileLayout (``block_ptr`` None): the list is
    then expanded only when read."""
    layout = None
    if isinstance(tiles, TileLayout):
        layout, tiles = tiles, None
    else:
        if block_ptr is None:
            block_ptr = single_tile_blocks(tiles.shape[0])
        tiles.flags.writeable = False
        block_ptr.flags.writeable = False
    return Plan(strategy=strategy, arch=req.arch, dtype=numpy_dtype(req.dtype),
                shapes=req.shapes, kinds=tuple(kinds), tiles=tiles, block_ptr=block_ptr,
                mode=req.mode, tlp=float(tlp), tlp_threshold=float(threshold),
                tlp_model=tlp_model, occupancy=dict(occupancy), grid=grid,
                notes=tuple(notes), predicted_ms=predicted_ms, layout=layout)
