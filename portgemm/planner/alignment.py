"""Which of a batch's operand loads take the kernel's 16-byte vector path.

The kernel stages a tile's A and B slices with 16-byte loads (cp.async 16, float4 /
double2) only where the slice can take them, and element by element otherwise
(kernels/vbatched_gemm.cu, pg_tile and pg_copy_units). Its rule, per GEMM and operand:

    vec_a = A 16-byte aligned and lda % V == 0 (and m0 % V == 0 when A is transposed)
    vec_b = B 16-byte aligned and ldb % V == 0 (and n0 % V == 0 when B is not)
    a slice is copied 16 bytes at a time when vec_x and the whole slice lies inside
    the matrix (the tile's rows or columns and its K step); edge slices go element by
    element, with bounds checks

V = 16 / element size. Tile corners (m0, n0) are multiples of the tile sizes, all
multiples of V, so that condition always holds; base pointers from allocators are
aligned (a pointer that is not only makes this module optimistic, never the result
wrong). So what decides is the leading dimension: for dense row-major operands, lda = K
and ldb = N; lists and packed batches know theirs (plan(lds=...)).

:func:`vector_share` gives, per kind, the share of the batch's staged K-loop loads that
take the vector path, weighted by tiles x K steps (the loop's time); the cost model
scales each kind's K step between its scalar and vector efficiency by it
(occupancy/vector_path.py).
"""
from __future__ import annotations

import numpy as np

from ..occupancy import ceilings
from ..occupancy.vector_path import efficiencies
from ..tiles import ITEMSIZE
from .memo import family_token


def aligned_rows(shapes: np.ndarray, dtype: str, lds=None) -> np.ndarray:
    """(batch, 2) bool: the rows of A and of B are 16-byte aligned. ``lds``: (batch, 2)
    leading dimensions of the stored A and B in elements; None: dense row-major
    operands, A M x K (lda = K) and B K x N (ldb = N)."""
    mask = 16 // ITEMSIZE[dtype] - 1   # elements in 16 bytes: a power of two
    return (_leading_dims(shapes, lds) & mask) == 0


def four_byte_rows(shapes: np.ndarray, dtype: str, lds=None) -> np.ndarray:
    """(batch, 2) bool: the rows of A and of B take the 16-bit kinds' 4-byte copies (their
    leading dimension is even but rows are not 16-byte aligned); all False for the
    other dtypes, whose narrow path is one. ``lds`` as for aligned_rows."""
    ld = _leading_dims(shapes, lds)
    if ITEMSIZE[dtype] != 2:
        return np.zeros(ld.shape, dtype=bool)
    return ((ld & 1) == 0) & ((ld & 7) != 0)


def _leading_dims(shapes: np.ndarray, lds=None) -> np.ndarray:
    """(batch, 2): ``lds``, or dense row-major operands' (lda = K, ldb = N)."""
    if lds is None:
        return np.asarray(shapes)[:, 2:0:-1]
    return np.asarray(lds, dtype=np.int64).reshape(-1, 2)


def row_share(shapes: np.ndarray, rows: np.ndarray, tm, tn, tk) -> np.ndarray:
    """Per kind, the share of the K loop's staged A and B elements whose rows are
    ``rows`` ((batch, 2) bool, A's and B's), over the batch's tiles x K steps: a 16-bit
    operand's slices all take its rows' copy path (kernels/vbatched_gemm.cu pg_copy16,
    edge slices too, with bounds), so a GEMM adds its tiles x steps x (tm if A's rows
    are ``rows`` + tn if B's are). The 16-bit kinds' three copy paths are weighed by it
    (share_for); fp32's two by vector_share, inside slices only (its edge slices go
    element by element)."""
    M, N, K = np.asarray(shapes, dtype=np.float64).T
    a, b = np.asarray(rows, dtype=np.float64).T
    out = np.zeros(len(tm))
    for i, (m, n, k) in enumerate(zip(tm, tn, tk)):
        g = np.ceil(M / m) * np.ceil(N / n) * np.ceil(K / k)
        total = float(g.sum())
        out[i] = float(np.dot(g, m * a + n * b)) / (m + n) / total if total > 0 else 0.0
    return out


def vector_share(shapes: np.ndarray, aligned: np.ndarray, tm, tn, tk) -> np.ndarray:
    """Per kind (tm, tn, tk sequences), the share of the K loop's staged A and B elements
    that move 16 bytes at a time (module docstring), over the batch's tiles x K steps:
    an operand's slice does where its rows are aligned, the tile lies wholly inside the
    matrix in that operand's dimension (M for A, N for B) and the step is not the last,
    partial one. Summed over a GEMM's gm x gn tiles and its steps, A's fast elements are
    tm tk x (full tile rows fm) x gn x (whole steps), B's likewise."""
    M, N, K = np.asarray(shapes, dtype=np.float64).T
    a, b = np.asarray(aligned, dtype=np.float64).T
    out = np.zeros(len(tm))
    done = {}   # kinds of one tile shape (128x128/8x8 and /16x8) share the figure
    for i, mnk in enumerate(zip(tm, tn, tk)):
        if mnk not in done:
            done[mnk] = _tile_share(M, N, K, a, b, *mnk)
        out[i] = done[mnk]
    return out


def _tile_share(M, N, K, a, b, m: int, n: int, k: int) -> float:
    """vector_share of one tile shape (m, n, k) over the batch's rows M, N, K and aligned
    flags a, b (float64): each quotient divided once, floored and ceiled from it."""
    # a power of two's reciprocal is exact, and so is the product: the same quotients
    qm, qn, qk = (v * (1.0 / e) if e & (e - 1) == 0 else v / e for v, e in ((M, m), (N, n), (K, k)))
    fm, fn, fk = np.floor(qm), np.floor(qn), np.floor(qk)
    gm, gn = np.ceil(qm, out=qm), np.ceil(qn, out=qn)
    total = float(np.dot(gm * gn, np.ceil(qk, out=qk)))
    fast = m * np.dot(np.multiply(a, fm, out=fm), gn * fk) + n * np.dot(
        np.multiply(b, fn, out=fn), np.multiply(gm, fk, out=fk))
    return fast / (m + n) / total if total > 0 else 0.0


def _tile_share_from(qm, qn, gm, gn, gk, counts, K, a, b, m: int, n: int, k: int) -> float:
    """:func:`_tile_share` from the tile grid's rows the caller has (share_for's
    ``grid``; only read): the same quotients, ceilings and products, so the same
    arrays into the same dot products, fewer passes."""
    fm, fn = np.floor(qm), np.floor(qn)
    fk = np.floor(K * (1.0 / k) if k & (k - 1) == 0 else K / k)
    total = float(np.dot(counts, gk))   # counts: gm x gn, the product _tile_share takes
    fast = m * np.dot(np.multiply(a, fm, out=fm), gn * fk) + n * np.dot(
        np.multiply(b, fn, out=fn), np.multiply(gm, fk, out=fk))
    return fast / (m + n) / total if total > 0 else 0.0


# the share is rounded to this step: kind_costs memoises per share, and a batch's share
# moves the prediction by at most a few tenths of a per cent within a step
SHARE_STEP = 1.0 / 64

# ((arch, dtype, ceilings), shapes, aligned, kinds, share, four) of the latest ask
_last: list = [None]


def share_for(arch, dtype: str, kinds, shapes: np.ndarray, aligned=None, *, grid=None,
              four=None):
    """The vector share per kind (a tuple, rounded to SHARE_STEP) of a batch for the cost
    model, or None where no kind has measured path efficiencies or step floors (then
    nothing is computed: the model's time stands). Kinds without figures get 0 (their
    factor is 1 whatever the share). Where some kind has a figure of its own for the
    4-byte path (vector_path.PathFigures.three_way: the 16-bit kinds' measured
    ``kind_path_factors``), the tuple goes on with the shares its path figures take, by
    rows (row_share): each kind's of 16-byte rows (the share above for kinds without),
    then of 4-byte rows (0 for kinds without), 3 x len(kinds) entries in all
    (split_share); the step floors keep the share above, as they were measured and fitted.
    ``aligned``: aligned_rows of the batch (None: dense row-major operands); ``four``:
    its four_byte_rows (None: dense operands', or none where ``aligned`` is given). A plan
    asks several times about one batch (the rule, its bound, each
    family): the latest answer is kept, keyed by the arrays' identity. ``grid``: where
    the caller has the batch's tile grids under ``kinds`` already (the device rule's
    tables, GEMM by GEMM), a function of a kind's index giving its rows (quotients M /
    tm and N / tn, their ceilings, the K steps, the tile counts and K, as
    :func:`_tile_share` computes them), or None for a kind it has not."""
    hit = _last[0]
    if hit is not None and hit[1] is shapes and hit[2] is aligned and hit[3] is kinds \
            and hit[5] is four and hit[0] == (arch.name, dtype, ceilings.version()):
        return hit[4]
    tiles = _shared_tiles(arch, dtype, kinds)
    if tiles is None:
        return None
    shared, by_four = tiles
    f = [0.0] * len(kinds)
    if shared:
        s = np.asarray(shapes)
        if aligned is None:   # aligned_rows' test, column by column: A's rows (K), B's (N)
            mask = 16 // ITEMSIZE[dtype] - 1
            a, b = (((s[:, d] & mask) == 0).astype(np.float64) for d in (2, 1))
        else:
            a, b = np.asarray(aligned, dtype=np.float64).T
        mnk_rows = None
        for mnk, where in shared:
            have = None if grid is None else grid(where[0])
            if have is None and mnk_rows is None:
                mnk_rows = np.asarray(s, dtype=np.float64).T
            v = (_tile_share(*mnk_rows, a, b, *mnk) if have is None else
                 _tile_share_from(*have, a, b, *mnk))
            for i in where:
                f[i] = v
    if by_four:
        s = np.asarray(shapes)
        wide = aligned_rows(s, dtype) if aligned is None else aligned
        rows = four_byte_rows(s, dtype) if four is None and aligned is None else (
            np.zeros((s.shape[0], 2), dtype=bool) if four is None else four)
        fw, f4 = list(f), [0.0] * len(kinds)
        for (m, n, k), where in by_four:
            w, v = (float(row_share(s, r, [m], [n], [k])[0]) for r in (wide, rows))
            for i in where:
                fw[i], f4[i] = w, v
        f = f + fw + f4
    # round half to even, as np.round; f x 64 and its multiple of 1/64 are exact
    share = tuple(round(x / SHARE_STEP) * SHARE_STEP for x in f)
    _last[0] = ((arch.name, dtype, ceilings.version()), shapes, aligned, kinds, share, four)
    return share


def split_share(share, n: int):
    """A share_for tuple of ``n`` kinds as (the step floors' 16-byte shares, the path
    figures' 16-byte shares, their 4-byte shares or None)."""
    if share is None:
        return None, None, None
    if len(share) == n:
        return share, share, None
    return share[:n], share[n:2 * n], share[2 * n:]


_shared_memo: dict = {}


def _shared_tiles(arch, dtype: str, kinds):
    """None where no kind of ``kinds`` has measured path efficiencies and the kinds have
    no measured step floors (ceilings.py), else (the tile shapes (tm, tn, tk) of the
    kinds that have either, each with those kinds' indices (kinds of one shape share one
    figure); those of the kinds whose 4-byte path has a figure of its own, likewise);
    memoised per (arch, dtype, family, ceilings)."""
    key = (arch.name, dtype, family_token(kinds), ceilings.version())
    hit = _shared_memo.get(key, _shared_memo)
    if hit is not _shared_memo:
        return hit
    eff = efficiencies(arch, dtype, kinds)
    floored = ceilings.ceilings_for(arch).step_floors_of(kinds) is not None
    if eff is None and not floored:
        out = None
    else:
        has = (np.ones(len(kinds), dtype=bool) if floored else
               (eff.wide != 1.0) | (eff.four != 1.0) | (eff.two != 1.0))
        out = (_by_tile(kinds, has),
               () if eff is None else _by_tile(kinds, eff.three_way))
    if len(_shared_memo) > 256:
        _shared_memo.clear()
    _shared_memo[key] = out
    return out


def _by_tile(kinds, has) -> tuple:
    """((tm, tn, tk), indices) of the kinds where ``has``, grouped by tile shape."""
    groups: dict = {}
    for i in np.flatnonzero(has).tolist():
        k = kinds[i]
        groups.setdefault((k.tm, k.tn, k.tk), []).append(i)
    return tuple((mnk, tuple(where)) for mnk, where in groups.items())


def share_of(req, kinds, grid=None):
    """:func:`share_for` of a planner Request (its shapes, dtype, arch and aligned)."""
    return share_for(req.arch, req.dtype, kinds, req.shapes, req.aligned, grid=grid,
                     four=req.four)


# The share of a batch's multiply-adds whose GEMMs have both operands' rows 16-byte aligned
# from which the kinds that stage only such rows fast are weighed (aligned_batch).
ALIGNED_SHARE = 0.9


def aligned_batch(shapes: np.ndarray, dtype: str, aligned=None) -> bool:
    """Whether at least ALIGNED_SHARE of the batch's M N K sits in GEMMs whose A and B rows
    are both 16-byte aligned (aligned_rows; ``aligned``: the batch's, None: dense
    row-major). The wgmma kinds (tiles.WEIGHED_WITH) are weighed only for such batches:
    their copies of unaligned rows (4- and 2-byte, kernels/vbatched_gemm.cu PgWgStage) ran
    the H100 grid's large random GEMMs 12-28 % slower than the mma.sync kinds (bench/
    NOTES.md, session 8), which the cost model, pricing every kind's aligned rate, did
    not see."""
    s = np.asarray(shapes, dtype=np.float64)
    if s.size == 0:
        return True
    rows = aligned_rows(shapes, dtype) if aligned is None else np.asarray(aligned)
    work = s[:, 0] * s[:, 1] * s[:, 2]
    total = float(work.sum())
    return total == 0.0 or float(work[rows.all(axis=1)].sum()) >= ALIGNED_SHARE * total
