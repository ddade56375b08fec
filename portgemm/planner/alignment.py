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

from ..tiles import ITEMSIZE


def aligned_rows(shapes: np.ndarray, dtype: str, lds=None) -> np.ndarray:
    """(batch, 2) bool: the rows of A and of B are 16-byte aligned. ``lds``: (batch, 2)
    leading dimensions of the stored A and B in elements; None: dense row-major
    operands, A M x K (lda = K) and B K x N (ldb = N)."""
    v = 16 // ITEMSIZE[dtype]
    if lds is None:
        ld = np.asarray(shapes)[:, [2, 1]]
    else:
        ld = np.asarray(lds, dtype=np.int64).reshape(-1, 2)
    return ld % v == 0


def vector_share(shapes: np.ndarray, aligned: np.ndarray, tm, tn, tk) -> np.ndarray:
    """Per kind (tm, tn, tk arrays), the share of the K loop's staged A and B elements
    that move 16 bytes at a time (module docstring), over the batch's tiles x K steps:
    an operand's slice does where its rows are aligned, the tile lies wholly inside the
    matrix in that operand's dimension (M for A, N for B) and the step is not the last,
    partial one."""
    s = np.asarray(shapes, dtype=np.float64)
    M, N, K = s[:, 0:1], s[:, 1:2], s[:, 2:3]
    tm, tn, tk = (np.asarray(x, dtype=np.float64)[None, :] for x in (tm, tn, tk))
    gm, gn, steps = np.ceil(M / tm), np.ceil(N / tn), np.ceil(K / tk)
    weight = gm * gn * steps                                   # (batch, kinds)
    total = weight.sum(axis=0)
    if not total.any():
        return np.zeros(tm.shape[1])
    k_in = np.floor(K / tk) / np.maximum(steps, 1.0)
    a = aligned[:, 0:1] * np.floor(M / tm) / np.maximum(gm, 1.0) * k_in
    b = aligned[:, 1:2] * np.floor(N / tn) / np.maximum(gn, 1.0) * k_in
    fast = (tm * a + tn * b) / (tm + tn)
    return (weight * fast).sum(axis=0) / np.where(total > 0, total, 1.0)


# the share is rounded to this step: kind_costs memoises per share, and a batch's share
# moves the prediction by at most a few tenths of a per cent within a step
SHARE_STEP = 1.0 / 64


def share_for(arch, dtype: str, kinds, shapes: np.ndarray, aligned=None):
    """The vector share per kind (a tuple, rounded to SHARE_STEP) of a batch for the cost
    model, or None where no kind has measured path efficiencies (then nothing is
    computed: the model's time stands). ``aligned``: aligned_rows of the batch (None:
    dense row-major operands)."""
    from ..occupancy.vector_path import efficiencies
    if efficiencies(arch.name, dtype, kinds) is None:
        return None
    if aligned is None:
        aligned = aligned_rows(shapes, dtype)
    f = vector_share(shapes, aligned, [k.tm for k in kinds], [k.tn for k in kinds],
                     [k.tk for k in kinds])
    return tuple((np.round(f / SHARE_STEP) * SHARE_STEP).tolist())


def share_of(req, kinds):
    """:func:`share_for` of a planner Request (its shapes, dtype, arch and aligned)."""
    return share_for(req.arch, req.dtype, kinds, req.shapes, req.aligned)
