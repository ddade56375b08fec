"""Alignment staging: whether to copy a batch's unaligned operands to aligned rows first.

The kernel's fast operand copies (16-byte cp.async in the mma.sync kinds, the wgmma kinds'
stages) need rows that start on 16 bytes (planner/alignment.py). A dense 16-bit operand
has lda = K or ldb = N, so a random batch has 7 rows in 8 that do not, and its GEMMs run
the 4- and 2-byte copies: on the H100 a random 512-cubed batch ran 47 TFLOP/s against 75
with the same shapes on aligned rows, and the wgmma kinds (338 aligned) are not weighed
at all for such batches (alignment.aligned_batch). Staging copies each unaligned operand
once, in one launch (backends/stage.py, kernels/vbatched_gemm.cu PG_STAGE_COPY), into a
workspace whose rows are rounded up to 16 bytes, then runs a plan made for aligned rows
on the copies.

The decision is the cost model's, never a size rule: staged = the inner plan's predicted
time (the same strategy over the same shapes, the reserved operands' rows aligned), its
time past its launches divided by the measured speedup of aligned rows (aligned_speedup:
the cost model's 16-bit figures were fitted on mostly unaligned batches), plus the copy
(one launch latency and the bytes read and written at the measured copy bandwidth,
occupancy/ceilings.py, times the copy kernel's measured efficiency); it wins only where that is below the direct plan's prediction.
Where the kinds have measured figures per copy path (ceilings.json
``kind_path_factors``, occupancy/vector_path.py), the model prices both plans on their
own rows and the inner plan's prediction stands as it is (aligned_speedup would count
the paths twice).
Before planning again, a bound of a few array sums (staged_bound_ms) rules out batches
where staging cannot pay: the copy plus the fastest the staged GEMMs could be predicted
already reach the direct prediction. Batches whose rows are all aligned are never
weighed.

Which operands: those whose rows are not 16-byte aligned under the plan's leading
dimensions (alignment.aligned_rows), and whose staged copy stays inside the kernels'
32-bit offsets. Only the 16-bit dtypes are weighed: they never split K, so a staged plan
is never split (a split's slices would each need their own aligned K offsets), and fp32 /
fp64 have not been measured to gain.
"""
from __future__ import annotations

import numpy as np

from ..occupancy import vector_path
from ..occupancy.ceilings import ceilings_for
from ..plan import Plan, Staging, staged_span
from ..problem import MAX_SPAN
from .alignment import aligned_rows
from .cost_model import planned_ms

STAGED_DTYPES = ("float16", "bfloat16")

# The cost model's 16-bit rates and kind factors were fitted on the grid's and the tuning
# sweep's batches, whose rows are mostly not 16-byte aligned: on the H100 it predicted
# the direct plans of the grid cells in bench/NOTES.md session 9 within 0.8-1.1x of their
# measured time, and their staged inner plans (aligned rows) 1.5-1.8x too slow. So the
# inner plan's time past its launches is divided by what aligned rows measured to give:
# per arch and tile area (tm x tn) of the 16-bit mma.sync kinds, one GEMM's time with its
# rows' copy width (16, 4 or 2 bytes: kernels/vbatched_gemm.cu pg_align_of; 8-byte rows
# take the 4-byte copy) over its time on 16-byte rows. H100, 4096^3 float16 through one
# kind, every leading dimension in one class (bench/NOTES.md, session 7, align_probe.txt):
# 128x128 273 / 166 / 96 TFLOP/s, 64x64 152 / 107 / 69. Kinds of other areas take the
# nearest measured area's; archs not listed have no figures, so the model sees no gain
# there and never stages by itself.
NARROW_COPY_SLOWDOWN = {
    "sm_90": {128 * 128: {16: 1.0, 4: 273 / 166, 2: 273 / 96},
              64 * 64: {16: 1.0, 4: 152 / 107, 2: 152 / 69}},
}
# The narrow copies slow a tile's K loop, not its epilogue (the C store, whose rows staging
# leaves as they are): a GEMM of depth K gains 1 + (factor - 1) K / (K + EPILOGUE_K).
# Fitted on the session 9 grid (bench/results/2026-11-24-h100-stage, call 3: the 21 cells
# staged with 128, each against session 8's direct time, 0.88-1.19x): 512 stages the six
# that gained (1.03-1.19x) and none of those that lost; 128 staged 21, six of them
# 0.88-0.95x (short-K batches of 256-1024 GEMMs, small batches).
EPILOGUE_K = 512
# The copy kernel's rate over the ceilings' copy bandwidth (a large contiguous copy): the
# staged copies measured 0.98-1.40x their prediction at full bandwidth (call 3's probe,
# staged call minus its inner call, eight cells; median 1.2): many short rows.
COPY_EFFICIENCY = 0.8


def copy_ms(shapes: np.ndarray, staged: np.ndarray, itemsize: int, ceil) -> float:
    """Predicted milliseconds of the copy launch: one launch latency plus the staged
    operands' bytes, read once and written once, at COPY_EFFICIENCY of the copy
    bandwidth (which counts read and written bytes together)."""
    s = np.asarray(shapes, dtype=np.float64)
    M, N, K = s[:, 0], s[:, 1], s[:, 2]
    elems = float(np.dot(staged[:, 0], M * K) + np.dot(staged[:, 1], K * N))
    return 1e3 * (ceil.launch_s
                  + 2.0 * itemsize * elems / (COPY_EFFICIENCY * ceil.copy_bytes_per_s))


def best_rate(dtype: str, ceil) -> float:
    """The fastest rate any kind may run ``dtype`` at on this device (FLOP/s)."""
    return max(ceil.mma_flops_per_s(dtype), ceil.wgmma_flops_per_s,
               ceil.mfma_flops_per_s(dtype), ceil.flops_per_s(dtype))


def staged_bound_ms(direct: Plan, launches_ms: float, ceil, paths: float = 1.0) -> float:
    """A lower bound of the staged GEMMs' predicted time: one launch plus the larger of
    the batch's floors (its flops at the fastest rate, its unique bytes at the copy
    bandwidth: cost_model.floors) and the direct plan's time past its launches sped up
    by the most aligned rows can give in the model, the fastest rate over the slowest
    rate of the direct plan's kinds (aligned rows add faster kinds: on sm_90 the wgmma
    ones) times ``paths``, the least ratio of a kind's 16-byte path figure to its
    slowest (path_gain; 1 where the model prices every kind at one rate whatever its
    rows)."""
    s = direct.shapes.astype(np.float64)
    M, N, K = s[:, 0], s[:, 1], s[:, 2]
    dt = direct.dtype.name
    best = best_rate(dt, ceil)
    nbytes = direct.dtype.itemsize * float((M * K + K * N + M * N).sum())
    floor = max(2.0 * float((M * N * K).sum()) / best, nbytes / ceil.copy_bytes_per_s)
    used = direct.tiles_per_kind()
    slowest = min((ceil.kind_flops_per_s(k, dt) for k in direct.kinds if k.kind in used),
                  default=best)
    sped_up = max(planned_ms(direct) - launches_ms, 0.0) * slowest / best * paths
    return 1e3 * ceil.launch_s + max(1e3 * floor, sped_up)


def _launches(p: Plan, ceil) -> float:
    """Milliseconds of ``p``'s launches (one per used kind, per kind; fused: one)."""
    return 1e3 * ceil.launch_s * (len(p.tiles_per_kind()) if p.mode != "fused" else 1)


def copy_width(lds: np.ndarray, itemsize: int) -> np.ndarray:
    """(batch, 2) int: the widest copy in bytes (16, 4 or 2) the rows of leading
    dimensions ``lds`` allow (pg_align_of, base addresses taken as aligned)."""
    nbytes = np.asarray(lds, dtype=np.int64) * itemsize
    return np.where(nbytes % 16 == 0, 16, np.where(nbytes % 4 == 0, 4, 2))


def aligned_speedup(p: Plan, lds: np.ndarray) -> float:
    """How much faster the batch's GEMMs run on aligned rows than on rows of leading
    dimensions ``lds``, measured: per GEMM the mean of its two operands' factors
    (NARROW_COPY_SLOWDOWN, blended over the plan's kinds by tile area) discounted by its
    depth (EPILOGUE_K), weighted by the GEMMs' multiply-adds; 1 where the arch has no
    figures."""
    table = NARROW_COPY_SLOWDOWN.get(p.arch.name)
    if not table:
        return 1.0
    areas = sorted(table)
    per = p.tiles_per_kind()
    weight = {}
    for k in p.kinds:
        if k.kind in per:
            area = min(areas, key=lambda a: abs(np.log(a / (k.tm * k.tn))))
            weight[area] = weight.get(area, 0.0) + per[k.kind] * k.tm * k.tn
    total_w = sum(weight.values())
    if total_w <= 0:
        return 1.0
    width = copy_width(lds, p.dtype.itemsize)
    f = np.zeros(width.shape, dtype=np.float64)
    for area, w in weight.items():
        for bytes_, slow in table[area].items():
            f += (w / total_w) * np.where(width == bytes_, slow, 0.0)
    s = p.shapes.astype(np.float64)
    K = s[:, 2]
    gain = 1.0 + (f.mean(axis=1) - 1.0) * K / (K + EPILOGUE_K)
    work = s[:, 0] * s[:, 1] * K
    total = float(work.sum())
    return float(np.dot(work, gain) / total) if total > 0 else 1.0


def path_gain(p: Plan) -> float | None:
    """Where the cost model prices ``p``'s kinds by copy path (their measured three-way
    figures, occupancy/vector_path.py), the least ratio of a kind's 16-byte figure to its
    slowest (the most aligned rows can speed a tile in the model: any kind, since the
    staged plan may choose kinds the direct one did not); else None."""
    eff = vector_path.efficiencies(p.arch, p.dtype.name, p.kinds)
    if eff is None or not eff.three_way.any():
        return None
    return float((eff.wide / np.maximum(np.maximum(eff.wide, eff.four), eff.two)).min())


def consider(direct: Plan, lds: np.ndarray, replan, force: bool = False) -> Plan:
    """``direct`` itself, or a copy carrying the staging (Plan.staging) the cost model
    predicts faster. ``lds``: (batch, 2) leading dimensions of A and B that ``direct``
    was planned for (dense: K and N); ``replan(rows) -> Plan``: the same
    strategy and options over the same shapes with aligned rows ``rows``, never split or
    staged. ``force``: stage every operand that can be, whatever the model says (tests
    and measurements: plan(..., staging=True))."""
    shapes = direct.shapes
    dt = direct.dtype.name
    if dt not in STAGED_DTYPES or direct.split is not None or direct.n_tiles == 0:
        return direct
    M, N, K = shapes[:, 0], shapes[:, 1], shapes[:, 2]
    live = (M > 0) & (N > 0) & (K > 0)
    isz = direct.dtype.itemsize
    aligned = aligned_rows(shapes, dt, lds)
    want = ~aligned & live[:, None] \
        & (staged_span(shapes, isz) <= MAX_SPAN)
    if not want.any():
        return direct
    ceil = ceilings_for(direct.arch)
    # the model's own figures per copy path where the kinds have them (then the inner
    # plan's prediction is on aligned rows already), else the measured speedup
    paths = path_gain(direct)
    speed = 1.0 if paths is not None else aligned_speedup(direct, lds)
    if paths is None and speed <= 1.0 and not force:   # no figures: the model sees no gain
        return direct
    base = planned_ms(direct)
    cp = copy_ms(shapes, want, isz, ceil)
    launch = 1e3 * ceil.launch_s

    def on_aligned(ms: float, launches_ms: float) -> float:
        """A plan's predicted time with its time past its launches sped up by ``speed``."""
        return launches_ms + max(ms - launches_ms, 0.0) / speed
    if not force:
        bound = cp + on_aligned(staged_bound_ms(direct, _launches(direct, ceil), ceil,
                                                1.0 if paths is None else paths), launch)
        if bound >= base:
            return direct.with_notes(
                f"staging: not weighed: the copy of {int(want.sum())} unaligned operand(s) "
                f"({cp:.4g} ms) and the fastest staged GEMMs possible ({bound - cp:.4g} ms) "
                f"already reach the direct plan's {base:.4g} ms")
    inner = replan(aligned | want)
    inner_ms = on_aligned(planned_ms(inner), _launches(inner, ceil))
    total = inner_ms + cp
    how = (f"GEMMs {inner_ms:.4g}: the model's, by its copy-path figures" if paths is not None
           else f"GEMMs {inner_ms:.4g}: the model's {planned_ms(inner):.4g} past its launches "
                f"over x{speed:.3g}, what aligned rows measured")
    if not force and total >= base * (1 - 1e-9):
        return direct.with_notes(
            f"staging: weighed: copying {int(want.sum())} unaligned operand(s) to aligned "
            f"rows predicts {total:.4g} ms (copy {cp:.4g} + {how}), not faster than "
            f"{base:.4g} ms direct")
    why = (f"staging: {int(want[:, 0].sum())} A and {int(want[:, 1].sum())} B operand(s) "
           f"with rows not 16-byte aligned are copied to aligned rows first"
           f"{' (asked for: staging=True)' if force else ''}; predicted {total:.4g} ms "
           f"(copy {cp:.4g} + {how}; on {', '.join(inner.tiles_per_kind())}) vs "
           f"{base:.4g} ms direct")
    return direct.with_staging(Staging(reserved=want, plan=inner, predicted_ms=total,
                                       direct_ms=base, copy_ms=cp, reason=why))
