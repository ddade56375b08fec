"""The device rule's candidates, all priced at once: per-kind aggregates of every
candidate tiling from a fixed number of passes over the (kind, GEMM) tables.

A candidate gives each GEMM one kind; the cost model needs of it only, per kind, the
tiles, the tiles x K steps and the most K steps of a live GEMM (cost_model.predict_rows).
The device rule's candidates come in three *ladders* of levels, each level one
candidate:

- Algorithm 1's rounds from the start (level 0: the largest fitting tiles) and from
  the least-work tiles: level j puts every GEMM j steps smaller (each step the largest
  allowed tile of the next smaller area), staying at the smallest once there. A GEMM's
  kinds along the rounds depend only on its *type* (its start, its least-work kind and
  which tiles fit it), so one bincount per quantity sums the (kind, GEMM) table per
  (type, kind), and every level is a gather from that small table (typed_rounds).
- caps: level 0 gives each GEMM its least predicted work among the allowed tiles;
  level j >= 1 the least work among the tiles no longer than tau_j = t_long / 2**j
  (t_long: the longest tile of the start), the GEMM's fastest tile where none is that
  short. Along the ladder a GEMM holds each kind over a run of consecutive levels
  [lo, hi): kind k from the first level at which every tile of less work is too long
  (lo: the most levels any of them is within) to the last at which k itself is within.
  So each (kind, GEMM) is one event (lo, hi), and one bincount per quantity over
  (lo, hi, kind) gives every level's aggregates at once: level j sums the runs with
  lo <= j < hi (cap_events, cap_aggregates).

The number of NumPy calls depends on neither the batch nor the number of levels;
nothing here loops over GEMMs, tiles or levels in Python.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .memo import per_family
from .scratch import buffer

MAX_CAPS = 8          # tau = longest tile / 2**j, j = 1..MAX_CAPS
LADDERS = ("rounds from the start", "rounds from the least work", "caps")


@per_family
def family_keys(kinds: tuple):
    """Per-family constants (memoised per kind tuple): tm, tn, tk as float rows and
    columns; the dense area rank (equal areas share one); the start's key (larger rank,
    then divides, then larger index); the tie-break key of equal work; whether the
    kinds nest (distinct areas, tm and tn never shrinking as tiles grow, so the tiles
    that fit are a prefix of the kinds); whether every kind has one tk; the kinds'
    reversed indices as bytes (first_kind); a kind of the smallest area, which every
    GEMM may take ("free"), and the rows of every such kind ("rank0_rows")."""
    n = len(kinds)
    tm = np.array([k.tm for k in kinds], dtype=np.float64)
    tn = np.array([k.tn for k in kinds], dtype=np.float64)
    tk = np.array([k.tk for k in kinds], dtype=np.float64)
    area = np.array([k.area for k in kinds], dtype=np.int64)
    rank = np.unique(area, return_inverse=True)[1].astype(np.int64).reshape(-1)
    idx = np.arange(n)
    nested = bool((rank == idx).all() and (np.diff(tm) >= 0).all() and (np.diff(tn) >= 0).all())
    col = lambda a: a[:, None]  # noqa: E731  (a kind column against a batch row)
    m_edges, n_edges = np.unique(tm), np.unique(tn)
    # x / edge is x x (1 / edge) exactly where every edge is a power of two (a product is
    # about twice as fast as a quotient over a (kinds, batch) table)
    pow2 = all(e > 0 and e & (e - 1) == 0 for k in kinds for e in (k.tm, k.tn, k.tk))
    return _read_only({"m_edges": m_edges, "n_edges": n_edges,
            "inv": None if not pow2 else {"tm_c": col(1.0 / tm), "tn_c": col(1.0 / tn),
                                          "tk_c": col(1.0 / tk), "tk1": 1.0 / tk[:1, None]},
            "start_of_bucket": None if nested else _start_of_bucket(kinds, rank, m_edges, n_edges),
            "kinds": kinds, "tm": tm, "tn": tn, "tk": tk, "rank": rank, "idx": idx, "n": n,
            "tm_c": col(tm), "tn_c": col(tn), "tk_c": col(tk), "idx_c": col(idx),
            "rank_c": col(rank), "rank0_rows": np.flatnonzero(rank == 0),
            "start_key_c": col(rank * (2 * n) + idx),
            "start_key1_c": col(rank * (2 * n) + idx + 1),
            "order_key": rank * n + idx, "nested": nested,
            "free": int(np.flatnonzero(rank == 0)[0]),   # a kind every GEMM may take
            "one_tk": bool((tk == tk[0]).all()), "revidx_c": col(n - idx).astype(np.int8)})


def _read_only(constants: dict) -> dict:
    """``constants`` with every array in it (nested dicts too) made read-only: they are
    shared by every plan of the family (and count_le keeps its tables by their identity)."""
    for v in constants.values():
        if isinstance(v, np.ndarray):
            v.flags.writeable = False
        elif isinstance(v, dict):
            _read_only(v)
    return constants


def _start_of_bucket(kinds: tuple, rank: np.ndarray, m_edges, n_edges):
    """(buckets,) int64: the start (the allowed kind of largest area; equal areas: the
    one that divides, then the larger index) of a GEMM in each bucket (mb, nb), mb x
    (len(n_edges) + 1) + nb, mb (nb) the tile heights (widths) <= M (N), where the
    bucket decides it: its allowed kinds of largest area share one tm and tn, so they
    divide alike and the larger index wins. None where some bucket leaves it to M and
    N themselves (BatchTables.start then ranks the kinds GEMM by GEMM)."""
    out = []
    for mb in range(len(m_edges) + 1):
        for nb in range(len(n_edges) + 1):
            top_m = m_edges[mb - 1] if mb else 0
            top_n = n_edges[nb - 1] if nb else 0
            ok = [i for i, k in enumerate(kinds)
                  if (k.tm <= top_m and k.tn <= top_n) or rank[i] == 0]
            best = max(rank[i] for i in ok)
            tops = [i for i in ok if rank[i] == best]
            if len({(kinds[i].tm, kinds[i].tn) for i in tops}) > 1:
                return None
            out.append(max(tops))
    out = np.array(out, dtype=np.int64)
    out.flags.writeable = False
    return out


@per_family
def nudges(kinds: tuple, top_dividing: int):
    """(not dividing, dividing, their difference) columns of the relative nudge that
    breaks ties of equal predicted work: 1 + 1e-10 (1 - key / max key), key = divides x
    kinds^2 + rank x kinds + index; the max key over the batch is set by the largest
    dividing kind's key (``top_dividing``, -1: none divides) or else by the largest
    kind's."""
    fk = family_keys(kinds)
    n_k, key = fk["n"], fk["order_key"]
    key_max = max(int(key.max()), 1)    # 0 only for one kind, where no tie is to break
    if top_dividing >= 0:
        key_max = max(key_max, n_k * n_k + top_dividing)
    out = tuple((1 + 1e-10 * (1 - (key + d * n_k * n_k) / key_max))[:, None] for d in (0, 1))
    out += (out[1] - out[0],)   # exact (Sterbenz): n0 + (n1 - n0) is n1
    for a in out:
        a.flags.writeable = False
    return out


@lru_cache(maxsize=64)
def _count_table(edges: tuple) -> np.ndarray:
    """count_le's table: entry v is how many of ``edges`` are <= v, v = 0..max(edges)."""
    out = np.searchsorted(np.array(edges), np.arange(int(max(edges)) + 1), "right")
    out = out.astype(np.int64)
    out.flags.writeable = False
    return out


def count_le(edges: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(batch,) int64: how many of the sorted ``edges`` (whole tile edges) are <= each
    of ``values`` (non-negative), i.e. edges.searchsorted(values, "right"). For integer
    values, a look-up in a table of the edges' range (values clipped to its end): two
    linear passes, about 4x cheaper than numpy's binary search per element at 8,192
    GEMMs."""
    if values.dtype.kind not in "iu":
        return edges.searchsorted(values, "right")
    hit = _tables_by_id.get(id(edges))   # the edges are kept per-family arrays
    if hit is not None and hit[0] is edges:
        table = hit[1]
    else:
        table = _count_table(tuple(edges.tolist()))
        if len(_tables_by_id) > 256:
            _tables_by_id.clear()
        if not edges.flags.writeable:   # read-only: its table stays its table
            _tables_by_id[id(edges)] = (edges, table)
    return table.take(np.minimum(values, table.shape[0] - 1))


_tables_by_id: dict = {}   # id(edges) -> (edges, count_le's table), read-only edges only


def first_kind(mask: np.ndarray, fk) -> np.ndarray:
    """(batch,) int64: the first kind (smallest index) where ``mask`` (kinds, batch) is
    true, ``kinds`` where none is: a max of bytes over the short axis (numpy's argmax
    along it is several times slower than its reductions)."""
    return fk["n"] - (mask * fk["revidx_c"]).max(axis=0).astype(np.int64)


def cap_bins(T: np.ndarray, t_long: float, n_caps: int) -> np.ndarray:
    """(kinds, batch) int8: for each tile, how many caps tau_j = t_long / 2**j (j =
    1..n_caps) it is no longer than (T >= 0). Exact without dividing or frexp: tau_j is
    t_long with j subtracted from its binary exponent (a normal number: t_long is
    seconds, far above 2**-1014), i.e. its bit pattern less j << 52, and non-negative
    doubles order as their bit patterns, so T <= tau_j iff j <= (bits(t_long) -
    bits(T)) >> 52: one subtraction and one shift over the table, then a clip. The
    result is a kept buffer (scratch.py): valid for this plan only."""
    B = T.shape[-1]
    d = np.subtract(np.float64(t_long).view(np.int64), T.view(np.int64),
                    out=buffer("cap_bits", T.shape, np.int64, B))
    np.right_shift(d, 52, out=d)
    np.maximum(d, 0, out=d)   # a clip, without np.clip's Python layers
    return np.minimum(d, n_caps, out=buffer("cap_bins", T.shape, np.int8, B))


def cap_events(work: np.ndarray, T: np.ndarray, allowed: np.ndarray, fastest_mask: np.ndarray,
               t_long: float, n_caps: int, n_levels: int):
    """(lo, hi), each (kinds, batch) int8, of the caps ladder: GEMM i takes kind k at
    levels lo <= j < hi. hi: 1 + the caps k is within where allowed (level 0 is no cap),
    0 where not, every level for the GEMM's fastest tile (the one taken where no tile is
    short enough); lo: the most levels any tile of less work reaches. Both are kept
    buffers (scratch.py): valid for this plan only. One byte per entry (levels <=
    MAX_CAPS + 1 or the kinds, far below 127): the (kinds, kinds, batch) step below
    runs on bytes throughout, with no conversions."""
    n_k, B = work.shape
    hi = cap_bins(T, t_long, n_caps)
    hi += 1
    hi *= allowed.view(np.int8)   # a bool's byte is 0 or 1: x 1 keeps, x 0 clears
    # every level for the fastest tile: hi <= n_caps + 1 <= n_levels, so a max with
    # n_levels x mask is the masked store (np.putmask), in two unmasked passes
    np.maximum(hi, np.multiply(fastest_mask.view(np.int8), n_levels,
                               out=buffer("hi_fast", hi.shape, np.int8, B)), out=hi)
    # [k, k', i]: k' has less work than k
    less = np.less(work[None, :, :], work[:, None, :],
                   out=buffer("less", (n_k, n_k, B), np.bool_, B))
    held = np.multiply(less.view(np.int8), hi[None, :, :],
                       out=buffer("less_hi", (n_k, n_k, B), np.int8, B))
    lo = np.maximum.reduce(held, axis=1, out=buffer("lo", (n_k, B), np.int8, B))
    return lo, hi


@per_family
def round_table(kinds: tuple):
    """Algorithm 1's rounds for every GEMM *type* that decides them, memoised per family:
    (m_edges, n_edges, seq). A GEMM's allowed kinds (those that fit, and the smallest
    area) depend only on how many distinct tile heights fit its M and widths its N (its
    buckets, ``searchsorted`` on ``m_edges`` and ``n_edges``); seq[mb, nb, b, j] is the
    kind after j rounds from kind b in bucket (mb, nb) (each round: the largest allowed
    kind of the next smaller area; still once at the smallest), for j < kinds."""
    fk = family_keys(kinds)
    n, rank = fk["n"], fk["rank"]
    m_edges, n_edges = fk["m_edges"], fk["n_edges"]
    seq = np.empty((len(m_edges) + 1, len(n_edges) + 1, n, n), dtype=np.int64)
    for mb in range(len(m_edges) + 1):
        for nb in range(len(n_edges) + 1):
            ok = [(k.tm <= (m_edges[mb - 1] if mb else 0) and
                   k.tn <= (n_edges[nb - 1] if nb else 0)) or rank[i] == 0
                  for i, k in enumerate(kinds)]
            for b in range(n):
                k = b
                for j in range(n):
                    seq[mb, nb, b, j] = k
                    lower = [i for i in range(n) if ok[i] and rank[i] < rank[k]]
                    if lower:
                        k = max(lower, key=lambda i: (rank[i], i))
    seq.flags.writeable = False
    return m_edges, n_edges, seq


@lru_cache(maxsize=16)
def nested_rounds(n: int) -> np.ndarray:
    """round_table's seq for nested kinds, where every kind below the start is allowed:
    (1, 1, n, n), j rounds from b reach max(b - j, 0)."""
    out = np.maximum(np.arange(n)[:, None] - np.arange(n)[None, :], 0).reshape(1, 1, n, n)
    out.flags.writeable = False
    return out


def typed_rounds(fk, shapes_mn, start, least, counts, cs, steps_live, n_levels: int,
                 k_live=None, bucket=None, totals: bool = False):
    """Per-kind aggregates (tiles, tiles x steps, most steps), each (2 x levels, kinds), of
    Algorithm 1's rounds from the start and from the least-work tiles (level 0: the base
    itself), and a function giving every GEMM's kind at one of these rows (the winner's).

    Every GEMM of one *type* (its start, its least-work kind and its M and N buckets,
    round_table's) takes the same kind in every round, so one bincount per quantity
    over the (kind, GEMM) table sums it per (type, kind), and every round's aggregates
    are gathers from that small table (integers: exact in any order). ``k_live``: K
    per GEMM (0 where it has no tiles), where the caller has it: the most K steps of a
    type are then those of its longest K, kind by kind (ceil(K / tk) never falls as K
    grows), from one pass over the GEMMs instead of one over (kind, GEMM). ``bucket``:
    BatchTables.bucket, where the caller has it. ``totals``: also return, per kind, the
    whole batch's tiles, tiles x steps and most steps of a live GEMM (the one-kind
    candidates' aggregates), summed over the small (type, kind) tables instead of
    over (kind, GEMM) again: integers, so the same numbers."""
    n = fk["n"]
    M, N = shapes_mn
    m_edges, n_edges, seq = round_table(fk["kinds"])
    nmb, nnb = len(m_edges) + 1, len(n_edges) + 1
    typ = start * n + least
    if not fk["nested"]:   # nested kinds: the start decides which kinds are allowed
        typ *= nmb * nnb
        # the edges no larger than M (N); ``bucket``: the same, where the caller has it
        typ += count_le(m_edges, M) * nnb + count_le(n_edges, N) if bucket is None else bucket
    else:
        nmb = nnb = 1
        seq = nested_rounds(n)
    n_typ = n * n * nmb * nnb
    flat = np.add(typ * n, fk["idx_c"], out=buffer("type_kind", counts.shape, np.int64,
                                                   counts.shape[1])).reshape(-1)
    # (type, kind) per (kind, GEMM)
    t_n = sums_at(flat, counts.reshape(-1), n_typ * n)
    t_s = sums_at(flat, cs.reshape(-1), n_typ * n)
    if steps_live.ndim == 1:   # one tk: a GEMM's steps are the same for every kind
        t_m = np.zeros(n_typ)
        np.maximum.at(t_m, typ, steps_live)
        most = np.full(n, np.maximum.reduce(t_m))          # the batch's, every kind
        t_m = t_m.repeat(n)
    elif k_live is not None:   # steps = ceil(K / tk) grow with K: the type's longest K
        k_max = np.zeros(n_typ)
        np.maximum.at(k_max, typ, k_live)
        t_m = np.ceil(np.divide(k_max[:, None], fk["tk"][None, :])).reshape(-1)
        # the batch's: the same formula at the longest K (IEEE division is monotone)
        most = np.ceil(np.divide(np.maximum.reduce(k_max), fk["tk"]))
    else:
        t_m = np.zeros(n_typ * n)
        np.maximum.at(t_m, flat, steps_live.reshape(-1))
        most = None
    # the present types' kinds along both ladders (a family constant per type), type
    # by type: consecutive entries add to different (row, kind) cells, so the sums
    # below do not wait on one another
    present = np.bincount(typ, minlength=n_typ).nonzero()[0]
    kinds_at, row_base = _typed_paths(seq, n_levels)
    at = kinds_at.take(present, axis=0)                  # (types present, 2L)
    cell = (present * n)[:, None] + at                   # where each reads, ...
    rows = row_base + at                                 # ... and adds
    size = 2 * n_levels * n
    agg_n = np.bincount(rows.reshape(-1), weights=t_n.take(cell).reshape(-1), minlength=size)
    agg_s = np.bincount(rows.reshape(-1), weights=t_s.take(cell).reshape(-1), minlength=size)
    agg_m = np.zeros(size)
    np.maximum.at(agg_m, rows.reshape(-1), t_m.take(cell).reshape(-1))

    def kinds_of(row: int) -> np.ndarray:
        """Each GEMM's kind at row ``row`` (ladder x levels + level) of the rounds."""
        return kinds_at[:, row].take(typ)
    aggs = (agg_n.reshape(-1, n), agg_s.reshape(-1, n), agg_m.reshape(-1, n))
    if not totals:
        return aggs, kinds_of
    # sums of integers over the types as one product with ones (a reduction down the
    # (types, kinds) table's short rows runs element by element); absent types hold 0,
    # below every live GEMM's steps (>= 0): the same maxima
    ones = _ones(n_typ)
    if most is None:
        most = np.maximum.reduce(t_m.reshape(n_typ, n), axis=0)
    return aggs, kinds_of, (ones @ t_n.reshape(n_typ, n), ones @ t_s.reshape(n_typ, n), most)


def sums_at(keys: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """np.bincount(keys, weights, minlength=size) for keys below ``size``: the same adds
    in the same order (np.add.at: one pass; bincount first scans the keys for their
    least and greatest): 0.75-0.85x its time over a (kinds, 8,192) table, caches cold."""
    out = np.zeros(size)
    np.add.at(out, keys, weights)
    return out


_typed_memo: dict = {}


def _typed_paths(seq: np.ndarray, n_levels: int):
    """typed_rounds' constants for one round table and number of levels, over every
    GEMM type (memoised by the table's identity, itself memoised per family):
    (kinds_at, row_base), kinds_at (types, 2L) each type's kind j rounds from its start
    (column j) and from its least-work kind (column L + j), row_base (1, 2L) each
    column's offset in the (row, kind) aggregates."""
    key = (id(seq), n_levels)
    hit = _typed_memo.get(key)
    if hit is not None and hit[0] is seq:
        return hit[1]
    nmb, nnb, n = seq.shape[0], seq.shape[1], seq.shape[-1]
    t_start, rest = np.divmod(np.arange(n * n * nmb * nnb), n * nmb * nnb)
    t_least, t_bucket = np.divmod(rest, nmb * nnb)
    path = _round_paths(seq, n_levels)[0]
    # (types, 2, L) -> (types, 2L): the rounds from the start, then from the least work
    kinds_at = path.take(np.stack([t_start, t_least], axis=1) + (n * t_bucket)[:, None], axis=0)
    out = (np.ascontiguousarray(kinds_at.reshape(-1, 2 * n_levels)),
           (np.arange(2 * n_levels) * n)[None, :])
    for a in out:
        a.flags.writeable = False
    if len(_typed_memo) > 256:
        _typed_memo.clear()
    _typed_memo[key] = (seq, out)
    return out


_paths_memo: dict = {}


def _round_paths(seq: np.ndarray, n_levels: int):
    """typed_rounds' constants for one round table and number of levels (memoised by
    the table's identity, which is itself memoised per family): (path, row_base), path
    ((buckets x kinds), levels) the kind after j rounds from each (bucket, base kind),
    capped at the last round, and row_base ((2L, 1)) each ladder row's offset."""
    key = (id(seq), n_levels)
    hit = _paths_memo.get(key)
    if hit is not None and hit[0] is seq:
        return hit[1]
    n = seq.shape[-1]
    levels = np.minimum(np.arange(n_levels), n - 1)
    path = np.ascontiguousarray(seq.reshape(-1, n)[:, levels])
    row_base = (np.arange(2 * n_levels) * n)[:, None]
    for a in (path, row_base):
        a.flags.writeable = False
    if len(_paths_memo) > 256:
        _paths_memo.clear()
    _paths_memo[key] = (seq, (path, row_base))
    return path, row_base


def cap_aggregates(lo, hi, counts, cs, steps_live, n_levels: int):
    """Per-kind (tiles, tiles x steps, most steps of a live GEMM) of every level of the
    caps ladder, each (levels, kinds): one bincount per quantity over its (kind, GEMM)
    events (lo, hi), then per level a sum (a max) over the runs that hold it."""
    n_k, B = counts.shape
    L1 = n_levels + 1
    size = L1 * L1 * n_k
    # each (kind, GEMM) event's (lo, hi, kind) cell, in two bytes over the whole table
    # (a few short passes: cheaper than widening and combining gathered lo and hi)
    dt = np.int16 if size < 2**15 else np.intp
    cell = np.multiply(lo, L1, dtype=dt, out=buffer("cap_cells", lo.shape, dt, B))
    cell += hi
    cell *= n_k
    cell += _kind_column(n_k, dt)
    # only the runs that hold a level (a GEMM's few kinds of least work): the rest would
    # add nothing, so the sums and the max run over a fraction of the table (a run of
    # one cell in many neighbouring GEMMs makes each add wait on the one before, so
    # summing the others' zeros costs more than picking the runs out)
    held = (lo < hi).reshape(-1).nonzero()[0]
    keys = cell.reshape(-1).take(held).astype(np.intp)
    t_n = sums_at(keys, counts.reshape(-1).take(held), size)
    t_s = sums_at(keys, cs.reshape(-1).take(held), size)
    t_m = np.zeros(size)
    steps = steps_live.take(held % B) if steps_live.ndim == 1 else steps_live.reshape(-1).take(held)
    np.maximum.at(t_m, keys, steps)
    hold = _holds(n_levels)                             # (levels, L1 * L1)
    n = hold @ t_n.reshape(L1 * L1, n_k)                 # integers: exact in any order
    S = hold @ t_s.reshape(L1 * L1, n_k)
    # level j's most steps: the max over runs lo <= j < hi, from two running maxima
    # (over hi from the top, then over lo from the bottom): R[lo, h] = max over hi >= h,
    # C[l, h] = max over lo <= l of R[lo, h], and level j reads C[j, j + 1] (maxima of
    # steps >= 0, 0 where no run holds the level: the masked maximum's numbers)
    t_m = t_m.reshape(L1, L1, n_k)
    R = np.maximum.accumulate(t_m[:, ::-1], axis=1)[:, ::-1]
    C = np.maximum.accumulate(R, axis=0)
    lv = np.arange(n_levels)
    return n, S, C[lv, lv + 1]


@lru_cache(maxsize=64)
def _ones(n: int) -> np.ndarray:
    """(n,) ones, read-only: a sum down a table's columns as one matrix product."""
    out = np.ones(n)
    out.flags.writeable = False
    return out


@lru_cache(maxsize=64)
def _kind_column(n_k: int, dtype) -> np.ndarray:
    """(n_k, 1) each row's kind, in ``dtype`` (cap_aggregates' cells), read-only."""
    out = np.arange(n_k, dtype=dtype)[:, None]
    out.flags.writeable = False
    return out


@lru_cache(maxsize=32)
def _holds(n_levels: int) -> np.ndarray:
    """(levels, (levels + 1)^2) float: 1 where the run (lo, hi) holds level j."""
    L1 = n_levels + 1
    lo = np.arange(L1)[:, None]
    hi = np.arange(L1)[None, :]
    j = np.arange(n_levels)[:, None, None]
    out = ((lo <= j) & (j < hi)).reshape(n_levels, -1).astype(np.float64)
    out.flags.writeable = False
    return out


def level_kinds(lo: np.ndarray, hi: np.ndarray, level: int, fk, fallback: np.ndarray,
                live: np.ndarray) -> np.ndarray:
    """(batch,) the kind each GEMM takes at ``level`` of a ladder (``fallback`` for the
    GEMMs with no tiles, whose kind the model never sees)."""
    held = (lo <= level) & (level < hi)
    return np.where(live, first_kind(held, fk), fallback)


# Up to this many columns the ladders' aggregates are summed column by column
# (dense_rounds, dense_cap_aggregates): a few passes over (levels, kinds, columns), where
# typed_rounds' and cap_aggregates' grouping by type and event costs more calls than it
# saves (a batch of 8 GEMMs and its split-K replans of 15 to 60 virtual GEMMs: 1.1-1.2x
# a miss, 64 GEMMs 1.1x, 128-256 1.02-1.03x; from 400 columns on the (levels, kinds,
# columns) passes cost more: 0.87-0.95x; this CPU, bench/NOTES.md session 10).
DENSE_COLUMNS = 256


def dense_rounds(fk, shapes_mn, start, least, counts, cs, steps_live, n_levels: int,
                 bucket=None):
    """:func:`typed_rounds` (its aggregates and kinds_of, the same numbers: sums of
    integers and maxima) for few columns, GEMM by GEMM instead of type by type: every
    column's kind at every level of both ladders is one gather from the round paths,
    and each aggregate one bincount over (level, kind)."""
    n, B = fk["n"], start.shape[0]
    if fk["nested"]:
        base = np.concatenate([start, least])
        path, row_base = _round_paths(nested_rounds(n), n_levels)
    else:
        m_edges, n_edges, seq = round_table(fk["kinds"])
        M, N = shapes_mn
        if bucket is None:
            bucket = count_le(m_edges, M) * (len(n_edges) + 1) + count_le(n_edges, N)
        base = np.concatenate([start, least])
        base += np.concatenate([bucket, bucket]) * n
        path, row_base = _round_paths(seq, n_levels)
    # (2L, B): row j < L the kind j rounds from the start, row L + j from the least work
    kinds_at = path.take(base, axis=0).reshape(2, B, n_levels).transpose(0, 2, 1)
    kinds_at = kinds_at.reshape(2 * n_levels, B)
    at = (kinds_at * B + np.arange(B)).reshape(-1)    # (kind, column) in the tables
    rows = (row_base + kinds_at).reshape(-1)           # (row, kind) of the aggregates
    size = 2 * n_levels * n
    agg_n = np.bincount(rows, weights=counts.reshape(-1).take(at), minlength=size)
    agg_s = np.bincount(rows, weights=cs.reshape(-1).take(at), minlength=size)
    agg_m = np.zeros(size)
    steps = steps_live.take(at % B) if steps_live.ndim == 1 else steps_live.reshape(-1).take(at)
    np.maximum.at(agg_m, rows, steps)

    def kinds_of(row: int) -> np.ndarray:
        """Each column's kind at row ``row`` (ladder x levels + level) of the rounds."""
        return kinds_at[row].copy()
    return (agg_n.reshape(-1, n), agg_s.reshape(-1, n), agg_m.reshape(-1, n)), kinds_of


def dense_cap_aggregates(lo, hi, counts, cs, steps_live, n_levels: int):
    """:func:`cap_aggregates` (the same numbers: sums of integers and maxima of K steps
    >= 0) for few columns: which (kind, column) runs hold each level, as one (levels,
    kinds, columns) mask, then a sum (a max) along the columns."""
    lv = np.arange(n_levels)[:, None, None]
    held = (lo <= lv) & (lv < hi)
    n = (held * counts).sum(axis=2)
    S = (held * cs).sum(axis=2)
    M = (held * steps_live).max(axis=2)
    return n, S, M
