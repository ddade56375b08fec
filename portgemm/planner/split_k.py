"""Split-K: where a batch's tiles cannot fill the device and K is long, split GEMMs along K.

GEMM i split s_i ways becomes s_i *virtual GEMMs* over K slices [j L_i, (j + 1) L_i)
(slice length L_i a multiple of the widest K step of any kind, BK, and at least 2 BK;
the last slice takes the rest): virtual GEMM j computes W_ij = op(A_i)[:, slice] @
op(B_i)[slice, :] into a workspace (M_i x N_i, leading dimension N_i) through the
ordinary kernels and kinds, pointers offset only; GEMMs with s_i = 1 run in the same
launch as themselves. A deterministic reduction then writes C_i = alpha_i sum_j W_ij
(j = 0, 1, ... in order) + beta_i C_i. No atomics.

When: only where the unsplit plan's tiles are fewer than one wave of the device (its
compute units times the most workgroups of its kinds one unit holds), and for GEMMs
whose K holds at least two slices of 2 BK. Which s: for each candidate S in CANDIDATES
the slice length is set by the longest K, L = ceil(K_max / S) rounded up to BK, and
every eligible GEMM takes the fewest splits (a power of two up to S) whose slices are
no longer than L, so short-K GEMMs stay whole and the split ones end with slices of
about the same length (the makespan is the longest tile's). Each candidate is planned
by the same strategy over its virtual shapes (in order of S, until one is slower than
the one before) and priced by the cost model
(cost_model.py) plus the reduction: one launch latency and its bytes at the measured
copy bandwidth (s_i M_i N_i workspace elements read, C read and written: the planner
does not know beta, so it assumes C is read). The cheapest wins; a tie keeps the
unsplit plan. Vectorised over GEMMs: the loop is over the few candidates only.
"""
from __future__ import annotations

import numpy as np

from ..occupancy.ceilings import ceilings_for
from ..plan import Plan, SplitK
from .cost_model import planned_ms
from .tiling import built

CANDIDATES = (2, 4, 8, 16)
# The K step of the slices: a multiple of every K step of a kind that may split (the
# fp32 / fp64 families; the 16-bit ones never split: planner.HALF_FAMILY), so no K step
# straddles two slices and the offset A and B keep their 16-byte alignment. Those steps
# are at most 16 (tests/test_split_k.py); 32 is what the split-K plans were measured
# with (it was the widest step of any family then, the 16-bit wgmma kinds' BK included).
BK = 32
MIN_SLICE = 2 * BK


def wave_slots(p: Plan) -> int:
    """Workgroups one wave of the device holds for ``p``: its compute units times the
    most workgroups of its used kinds one unit holds (at least one)."""
    used = p.tiles_per_kind()
    active = [p.occupancy[k.name].active_workgroups for k in p.kinds
              if k.kind in used and k.name in p.occupancy]
    return int(p.arch.compute_units) * max(active or [1])


def splits_for(shapes: np.ndarray, target: int) -> tuple[np.ndarray, np.ndarray]:
    """(s, L) per GEMM for the slice-length target ``target``: the fewest splits (a power
    of two, at most max(CANDIDATES)) whose slices are no longer than ``target``, no more
    than leave each slice MIN_SLICE long, L rounded up to BK, and s = ceil(K / L); GEMMs
    with an empty M or N, or K < 2 MIN_SLICE, keep s = 1 and L = K."""
    s, L = splits_for_targets(shapes, [target])
    return s[0], L[0]


def splits_for_targets(shapes: np.ndarray, targets) -> tuple[np.ndarray, np.ndarray]:
    """:func:`splits_for` of each target at once: (s, L), each (targets, batch). The same
    operations on each (target, GEMM) entry, broadcast: one pass for every candidate."""
    M, N, K = shapes[:, 0], shapes[:, 1], shapes[:, 2]
    eligible = (M > 0) & (N > 0) & (K >= 2 * MIN_SLICE)
    t = np.maximum(np.array(targets, dtype=np.int64), 1)[:, None]
    want = np.maximum(-(-K // t), 1)
    pow2 = 1 << np.ceil(np.log2(want.astype(np.float64))).astype(np.int64)
    most = np.maximum(K // MIN_SLICE, 1)
    most_pow2 = 1 << np.floor(np.log2(most.astype(np.float64))).astype(np.int64)
    s = np.minimum(np.minimum(pow2, max(CANDIDATES)), most_pow2)
    s = np.where(eligible, s, 1)
    L = -(-(-(-K // s)) // BK) * BK
    L = np.where(s > 1, L, K)
    s = np.where(s > 1, -(-K // np.maximum(L, 1)), 1)
    return s.astype(np.int64), L.astype(np.int64)


def virtual_shapes(shapes: np.ndarray, s: np.ndarray, L: np.ndarray) -> np.ndarray:
    """(sum s, 3) int64: GEMM i's s_i slices in order, GEMM after GEMM."""
    B = shapes.shape[0]
    rep = np.repeat(np.arange(B), s)
    first = np.cumsum(s) - s
    j = np.arange(rep.shape[0]) - first[rep]
    out = shapes[rep].copy()
    out[:, 2] = np.minimum(L[rep], shapes[rep, 2] - j * L[rep])
    out.flags.writeable = False
    return out


def reduce_ms(shapes: np.ndarray, s: np.ndarray, elem: int, ceil) -> float:
    """Predicted milliseconds of the reduction launch: one launch latency plus its bytes
    (the workspace read, C read and written) at the copy bandwidth."""
    split = s > 1
    mn = (shapes[split, 0] * shapes[split, 1]).astype(np.float64)
    nbytes = elem * float(((s[split] + 2) * mn).sum())
    return 1e3 * (ceil.launch_s + nbytes / ceil.copy_bytes_per_s)


def consider(unsplit: Plan, replan) -> Plan:
    """``unsplit`` itself, or a copy carrying the split (Plan.split) the cost model
    predicts faster. ``replan(shapes, gemm) -> Plan``: the same strategy and options over
    virtual shapes (``gemm``: each slice's GEMM, whose operands' layout it keeps), never
    split; or a tiling.PlanToBuild, built here only if kept."""
    shapes = unsplit.shapes
    if shapes.shape[0] == 0 or unsplit.n_tiles == 0:
        return unsplit
    K = shapes[:, 2]
    if int(K.max()) < 2 * MIN_SLICE:
        return unsplit
    # a wave of the used kinds holds at most CUs x the most any kind holds: a plan that
    # fills that fills its wave, without counting its tiles per kind (a pass per GEMM)
    most = max((o.active_workgroups for o in unsplit.occupancy.values()), default=1)
    if unsplit.n_tiles >= int(unsplit.arch.compute_units) * max(most, 1):
        return unsplit
    wave = wave_slots(unsplit)
    if unsplit.n_tiles >= wave:
        return unsplit
    ceil = ceilings_for(unsplit.arch)
    elem = unsplit.dtype.itemsize
    base = planned_ms(unsplit)
    k_max = int(K[(shapes[:, 0] > 0) & (shapes[:, 1] > 0)].max(initial=0))
    best, weighed, seen, last = None, [], set(), float("inf")
    # every candidate's splits in one pass (most plans reach two or more)
    s_of, L_of = splits_for_targets(shapes, [-(-(-(-k_max // S)) // BK) * BK
                                             for S in CANDIDATES])
    for S, s, L in zip(CANDIDATES, s_of, L_of):
        if int(s.max()) < 2 or s.tobytes() in seen:
            continue
        seen.add(s.tobytes())
        vplan = replan(virtual_shapes(shapes, s, L), np.repeat(np.arange(shapes.shape[0]), s))
        gemm_ms, red_ms = planned_ms(vplan), reduce_ms(shapes, s, elem, ceil)
        total = gemm_ms + red_ms
        weighed.append(f"S={S} {total:.4g}")
        if total < (base if best is None else best[0]) * (1 - 1e-9):
            best = (total, gemm_ms, red_ms, s, L, vplan, S)
        if total > last:   # slower than the fewer splits before: more will not help
            break
        last = total
    if best is None:
        if not weighed:
            return unsplit
        return unsplit.with_notes(
            f"split-K: weighed (the {unsplit.n_tiles} tiles fill {unsplit.n_tiles / wave:.0%} "
            f"of a wave of {wave}): {', '.join(weighed)} ms, none faster than "
            f"unsplit {base:.4g} ms")
    total, gemm_ms, red_ms, s, L, vplan, S = best
    vplan = built(vplan)
    n_split = int((s > 1).sum())
    why = (f"split-K: {n_split} of {shapes.shape[0]} GEMM(s) split (up to {int(s.max())} ways, "
           f"slices of {int(L[s > 1].min())}..{int(L[s > 1].max())}): the unsplit plan's "
           f"{unsplit.n_tiles} tiles fill {unsplit.n_tiles / wave:.0%} of a wave of {wave}; "
           f"predicted {total:.4g} ms (GEMMs {gemm_ms:.4g} + reduction {red_ms:.4g}) vs "
           f"{base:.4g} ms unsplit; weighed {', '.join(weighed)} ms")
    split = SplitK(splits=s, slice_k=L, plan=vplan, predicted_ms=total, unsplit_ms=base,
                   reduce_ms=red_ms, reason=why)
    return unsplit.with_split(split)
