"""Predicted time of a tiling: the software-pipeline latency model, per tile, then waves.

One tile of kind k (tm x tn, K-step tk, ``threads`` threads holding rm x rn each) on a
GEMM with K runs, as the kernel does (double-buffered staging, one barrier per step):

    t_tile = prologue + steps x step(r) + epilogue,        steps = ceil(K / tk)
    step(r)   = max(latency,                    loads of step s+1 are in flight during s
                    global(r), shared(r), compute(r))      the three streams overlap
    global(r)  = (tm + tn) tk e / (copy bandwidth / CUs / r)
    shared(r)  = tk threads reads e / (shared bandwidth per CU x u / r)  reads: TileConfig.reads_per_k
    compute(r) = tm tn tk / (FMA rate per CU x u / r)      the kind's engine's rate: SIMT,
                                                           or the MMA kinds' (ceilings),
                                                           / 3 for 3xtf32's three products
    prologue   = 3 latencies (tile record, GEMM descriptor, first K step) + global(r)
    epilogue   = tm tn e / (copy bandwidth / CUs / r)

e is the element size; r the tiles sharing a CU at once (the launch's tiles per CU,
between 1 and the resident workgroups per CU the occupancy model allows), each taking
1/r of the CU's streams; u = min(1, r x warps per tile / SATURATING_WARPS) is the share
of the CU's issue rate that so few warps can use (a lone 4-warp tile cannot keep a
CU's shared-memory and FMA pipes busy).

A launch of n tiles on S = CUs x resident workgroups per CU slots, tiles in LPT order,
in w = ceil(n / S) waves:

    exec   = max(longest tile, (w - 1) x mean tile + mean tile at the last wave's sharing)
    launch = launch latency + max(exec, unique bytes / copy bandwidth,
                                  flops / FMA rate)

The last wave holds n - (w - 1) S tiles, so its tiles share their CUs with fewer others
(r_last = its tiles per CU, at least 1) and, where they have the warps to use the freed
issue slots and bandwidth, run faster: a launch that fills the device 1.3 times is not
two full waves long. A launch of one wave is its own last wave (r_last = r). Tiles with
few warps gain only their larger share of copy bandwidth (u falls with r, so r / u
stays SATURATING_WARPS / warps); tiles with many warps gain issue rate as well.

A launch of two waves (S < n <= 2 S) that has the device to itself (a fused launch, or
the only launch of a per-kind plan) is priced tile by tile instead, as the device runs
it: the first S tiles start at once, and each later tile starts on the slot that frees
first (list scheduling). The plans launch their tiles longest first, so the second
wave holds the *shortest* tiles and they start as the first wave's shortest tiles end;
the formula above charged them a mean tile after a whole mean wave, which over-priced
a batch of ragged K by up to a third (bench/NOTES.md, session 7). At most 2 S tiles:
one sort and a few passes. From three waves on the formula stands (a per-tile schedule
would loop over the tiles), and so it does for a launch beside others: CUDA runs a
plan's per-kind launches side by side (backends/cuda.py), one launch's second wave
sharing the device with the other kinds' tiles, and as persistent blocks that take
their tiles round robin (backends/persistent.py), not from the block scheduler's queue
(on the H100, pricing those tails tile by tile moved 512/512 b256 to a plan 3 % slower). The device rule's search prices candidates from aggregates
with the formula (:func:`predict_rows`) and re-prices, tile by tile, those that a lower
bound (:func:`rows_lower_bound`) leaves a chance (wavefront_tlp.device_rule).

Per-kind launches are modelled one after another (HIP runs them so; CUDA overlaps them
on side streams, so there the figure is an upper bound). Rates come from the device
ceilings (portgemm/occupancy/ceilings.py: measured where the benchmark wrote them,
modelled from the spec sheet otherwise).

A kind with a measured factor (measured / modelled tile time of the kind run alone: a
tuned family's, occupancy/tuned.py, or else the device's ``kind_factors`` in
ceilings.json) has its tile time multiplied by it. On the H100 the fp64 kinds' factors
run from 0.66 to 0.93 (64x64/w32x32; 32x32/w16x16 0.67): the model charges every
tile's global loads at DRAM copy bandwidth, and a small tile's loads, mostly L2 hits,
come faster, so one MMA rate for every MMA kind ranked the small MMA kinds below what
they measure.

A kind with a measured step floor (ceilings.py ``kind_step_floors``: one K step of a
tile alone on its CU, measured on the 16-byte and the scalar load path by
``python -m portgemm.tuning.step_floors``) has its scaled step raised to at least the
floor, the two paths weighted by the batch's share of 16-byte loads (planner/
alignment.py), where a tile has its CU to itself: step = max(w floor, factor x
step(r)), w = 1 at r = 1 falling linearly in the CU's warps to 0 at SATURATING_WARPS
(lone_weight). A lone tile's step is its own chain of dependent loads, a barrier and
MMAs or FMAs, which the throughput terms and the factors fitted on full waves leave out;
it is what bounds a launch of about one tile per CU: on the H100 a lone 16-bit 64 x 64
tile ran its K steps at ~1.2-1.6 us, ~2-2.5x the model's step with its factor
(bench/NOTES.md, session 17), so the model put one such tile per SM ahead of four
32 x 32 ones that ran 1.4x faster. Enough warps on a CU overlap the tiles' chains
(measured: floors at any sharing bound too hard). Kinds without floors, and calls
without a share (the device rule's ladders are built without the path figures), keep
the model's step.

A kind with measured path efficiencies (occupancy/vector_path.py: the 128 x 128 kinds
on the H100) has its tile time scaled by scalar^(1 - f) x vector^f, f the batch's share
of staged loads on the kernel's 16-byte path (planner/alignment.py; ``kind_costs(...,
share=)``), as a tuned family's factor is.

Split-K is priced outside this module (planner/split_k.py): a split plan is this
model's time of the plan over the K slices plus the reduction's memory time. Not
modelled: L2 reuse beyond the copy bandwidth, bank conflicts, clock changes.

Everything is vectorised over GEMMs; nothing loops over tiles in Python.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..memo import kept_for
from ..occupancy import tuned, vector_path
from ..occupancy.ceilings import Ceilings, ceilings_for
from ..tiles import ITEMSIZE
from .scratch import buffer
from .alignment import split_share

PROLOGUE_LATENCIES = 3
# Warps per compute unit at which its pipes can be kept busy: four per scheduler on
# the four sub-partitions of an SM / SIMDs of a CU, enough to hide the latency of
# dependent shared-memory loads. A model constant, not measured.
SATURATING_WARPS = 16


@dataclass(frozen=True)
class KindCosts:
    """Per-kind constants of the model for one (arch, family, mode, dtype)."""
    tm: np.ndarray
    tn: np.ndarray
    tk: np.ndarray
    tile_warps: np.ndarray      # warps a tile keeps (its own threads, not its block's)
    active: np.ndarray          # resident workgroups per CU of the kind's launch
    g_bytes: np.ndarray         # global bytes per K step
    s_bytes: np.ndarray         # shared-memory bytes read per K step
    fmas: np.ndarray            # FMAs per K step
    c_bytes: np.ndarray         # C bytes written
    cus: float
    ceil: Ceilings
    elem: int
    flops_per_s: float          # the fastest kind's compute rate (the batch floor's)
    active_max: float = 0.0     # derived (set by kind_costs): the most resident per CU,
    tile_warps_max: float = 0.0  # the most warps of a tile, resident slots per kind and
    slots: np.ndarray = None    # of a fused launch
    slots_max: float = 0.0
    factor: np.ndarray = None   # tuned: measured / predicted tile time per kind (None: 1)
    kind_flops: np.ndarray = None  # compute rate per kind: SIMT or MMA (ceilings)
    step_floor: np.ndarray = None  # seconds a K step takes at least, per kind (None: none)

    @property
    def n_kinds(self) -> int:
        return int(self.tm.shape[0])


_memo: dict = {}


def kind_costs(arch, kinds, table, dtype: str, ceil: Ceilings | None = None,
               share: tuple | None = None, depth: float | None = None,
               kind_factors: bool = True) -> KindCosts:
    """The model's per-kind constants from the tile shapes and a KindTable (memoised
    per table, dtype, ceilings and share: KindTables are shared and read-only).
    ``share``: per kind, the batch's share of staged loads on the kernel's vector path
    (planner/alignment.share_for); the kinds with measured path efficiencies
    (occupancy/vector_path.py) have their tile time scaled by it. None: the model's
    time (with the measured kind factors, :func:`measured_factor`, either way).
    ``depth``: the batch's K (:func:`depth_of`), for kind factors measured per depth;
    ``kind_factors`` False: without the device's measured kind factors (a tuned family's
    stay), to price a family as one without them is priced. Where the ceilings have the
    kinds' measured step floors (ceilings.py ``kind_step_floors``) and ``share`` is given,
    each kind's K step is at least its floor at that share (:func:`step_floor`)."""
    c = ceilings_for(arch) if ceil is None else ceil
    # keyed by identity (a Ceilings hashes all its fields, slowly), confirmed on a hit
    key = (id(table), dtype if isinstance(dtype, str) else np.dtype(dtype).name, id(c),
           tuned.version(), share, depth, kind_factors)
    hit = _memo.get(key)
    if hit is not None and hit[0] is table and hit[1] is c:
        return hit[2]
    kc = _kind_costs(arch, kinds, table, dtype, c, depth, kind_factors)
    eff = None if share is None else vector_path.efficiencies(
        arch, dtype if isinstance(dtype, str) else np.dtype(dtype).name, kinds)
    if eff is not None:
        f = vector_path.factor(eff, *split_share(share, len(kinds))[1:])
        kc = dataclasses.replace(kc, factor=f if kc.factor is None else kc.factor * f)
    floor = None if share is None else step_floor(c, kinds, share)
    if floor is not None:
        kc = dataclasses.replace(kc, step_floor=floor)
    if len(_memo) > 256:
        _memo.clear()
    _memo[key] = (table, c, kc)
    return kc


def step_floor(c: Ceilings, kinds, share) -> np.ndarray | None:
    """Per kind, the least seconds a K step of its tiles takes: the measured lone-tile
    step (ceilings.py ``kind_step_floors``) on each load path, weighted by the batch's
    ``share`` of staged loads on the 16-byte path (planner/alignment.py); None where
    the kinds have no floors. How much of it binds depends on how alone a tile is on
    its CU (lone_weight, applied where a step is priced)."""
    floors = c.step_floors_of(kinds)
    if floors is None:
        return None
    f = np.asarray(split_share(share, len(kinds))[0], dtype=np.float64)
    return f * floors[0] + (1.0 - f) * floors[1]


def _kind_costs(arch, kinds, table, dtype: str, c: Ceilings, depth=None,
                measured: bool = True) -> KindCosts:
    f = lambda name: np.array([getattr(k, name) for k in kinds], dtype=np.float64)  # noqa: E731
    tm, tn, tk, threads = (f(n) for n in ("tm", "tn", "tk", "threads"))
    dt = dtype if isinstance(dtype, str) else np.dtype(dtype).name   # bfloat16: a name
    e = ITEMSIZE[dt]
    active = np.asarray(table.active, dtype=np.float64)
    tile_warps = np.ceil(threads / arch.wave_size)
    cus = float(arch.compute_units)
    fam = tuned.tuned_family(arch.name, dt)
    # by engine (ceilings.py); an MMA kind's is its engine's over the MMAs it issues per
    # product (3xtf32: 3)
    rate = np.array([c.kind_flops_per_s(k, dt) for k in kinds])
    return KindCosts(tm=tm, tn=tn, tk=tk, tile_warps=tile_warps, active=active,
                     g_bytes=(tm + tn) * tk * e, s_bytes=tk * threads * f("reads_per_k") * e,
                     fmas=tm * tn * tk, c_bytes=tm * tn * e, cus=cus, kind_flops=rate,
                     ceil=c, elem=e, flops_per_s=float(rate.max()),
                     active_max=float(active.max()), tile_warps_max=float(tile_warps.max()),
                     slots=cus * active, slots_max=cus * float(active.max()),
                     factor=measured_factor(fam, c, kinds, table, depth, measured))


def measured_factor(fam, c: Ceilings, kinds, table, depth=None, measured: bool = True):
    """Per kind, measured / modelled tile time, or None (the model's own time): the tuned
    family's factors where ``kinds`` are that family; else the device's measured kind
    factors (ceilings.json ``kind_factors``: each kind run alone, one launch per kind)
    where every kind has one and the table launches them so (not fused: a fused
    kernel's tiles run with other figures), at the batch's ``depth`` where they were
    measured per depth; else None, as on any arch without them. ``measured`` False: the
    tuned family's factors only."""
    f = fam.factor_of(kinds) if fam else None
    if f is None and measured and all(len(v.kinds) == 1 for v in getattr(table, "variants", ())):
        f = c.kind_factors_of(kinds, depth)
    return f


# depth_of rounds to this ratio (kind_costs memoises per depth): 2^(1/8), a factor
# measured at 32, 256 and 1024 moves by well under 1 % within a step
DEPTH_STEP = 2.0 ** 0.125


_last_depth: list = [None]   # (shapes, depth) of the latest ask: a plan asks several times


def batch_depth(arch, shapes, rows=None) -> float | None:
    """:func:`depth_of` ``shapes`` where ``arch``'s measured ceilings have kind factors
    per depth, else None (nothing computed: no other arch's plans see it). ``rows``:
    the batch's M, N and K as contiguous float64 rows, where the caller has them."""
    if not ceilings_for(arch).kind_depth_factors:
        return None
    hit = _last_depth[0]
    if hit is not None and hit[0] is shapes:
        return hit[1]
    d = depth_of(shapes, rows)
    _last_depth[0] = (shapes, d)
    return d


def depth_of(shapes, rows=None) -> float | None:
    """The batch's K for kind factors measured per depth: the geometric mean of K
    weighted by each GEMM's FMAs (where the time goes), rounded to DEPTH_STEP; None for
    a batch without work. ``rows``: M, N, K as float64 rows where the caller has them
    (the same values: the same products, sum and dot product, on whole rows)."""
    if rows is None:
        s = np.asarray(shapes, dtype=np.float64).reshape(-1, 3)
        rows = s[:, 0], s[:, 1], s[:, 2]
    M, N, K = rows
    w = M * N * K
    total = float(w.sum())
    if not total > 0:
        return None
    mean = float(np.dot(w, np.log(np.maximum(K, 1.0)))) / total
    step = math.log(DEPTH_STEP)
    return float(math.exp(round(mean / step) * step))


def sharing(kc: KindCosts, n_per_kind: np.ndarray, per_kind: bool):
    """(r, u) per kind: tiles sharing a CU at once and the issue share they can use.
    Fused: one launch, every tile counts; per-kind: each kind's launch on its own."""
    n = np.asarray(n_per_kind, dtype=np.float64)
    if per_kind:
        return tiles_sharing(kc, n, kc.active, kc.tile_warps)
    total = float(n.sum())
    r_all = min(max(total / kc.cus, 1.0), float(kc.active.max()))
    warps = float(np.dot(n, kc.tile_warps) / total) if total else float(kc.tile_warps.max())
    r = np.full(kc.n_kinds, r_all)
    u = np.full(kc.n_kinds, min(1.0, r_all * warps / SATURATING_WARPS))
    return r, u


def last_sharing(kc: KindCosts, n_per_kind: np.ndarray, per_kind: bool):
    """(r, u) per kind in the launch's last wave (:func:`sharing`'s counterpart): per
    kind, each kind's launch's own last wave; fused, the one launch's, with its mean
    warps per tile."""
    n = np.asarray(n_per_kind, dtype=np.float64)
    if per_kind:
        _, last = waves_of(n, kc.slots)
        return tiles_sharing(kc, last, kc.active, kc.tile_warps)
    total = float(n.sum())
    _, last = waves_of(total, kc.slots_max)
    warps = float(np.dot(n, kc.tile_warps) / total) if total else float(kc.tile_warps.max())
    r, u = tiles_sharing(kc, last, kc.active_max, warps)
    return np.full(kc.n_kinds, float(r)), np.full(kc.n_kinds, float(u))


def _sharing_of(tiles: float, cus: float, active: float, warps: float):
    """:func:`tiles_sharing` of one launch (or wave) in Python floats: (r, u)."""
    r = min(max(tiles / cus, 1.0), active)
    return r, min(1.0, r * warps / SATURATING_WARPS)


def _last_wave(tiles: float, slots: float) -> float:
    """:func:`waves_of`'s tiles in the last wave, in Python floats."""
    return tiles - max(float(math.ceil(tiles / slots - 1e-9)) - 1.0, 0.0) * slots


def _launch_times(kc: KindCosts, n: list, per_kind: bool):
    """((prologue + epilogue, step), the same in the last wave), each a list per kind, of
    tiles at :func:`sharing` and :func:`last_sharing` of ``n`` tiles per kind (integers,
    as floats): their arithmetic, operation for operation, in Python floats (a handful
    of kinds: NumPy's per-call cost would be most of it). Kinds without tiles get 0.0:
    only GEMMs of no tiles take them, whose times weigh nothing (x 0 tiles) and enter
    no maximum or schedule (predict_gemms), so only the live kinds are computed."""
    cus, tw, act = kc.cus, *_kind_lists(kc)[:2]
    live = [k for k, x in enumerate(n) if x]
    if per_kind:   # each kind's launch on its own (tiles_sharing, waves_of)
        first = {k: _sharing_of(n[k], cus, act[k], tw[k]) for k in live}
        last = {k: _sharing_of(_last_wave(n[k], cus * act[k]), cus, act[k], tw[k])
                for k in live}
        return _times_at(kc, first, live), _times_at(kc, last, live)
    total = sum(n)   # integers: exact in any order, as is the dot product below
    warps = sum(x * w for x, w in zip(n, tw)) / total if total else kc.tile_warps_max
    r, u = _sharing_of(total, cus, kc.active_max, warps)
    rl, ul = _sharing_of(_last_wave(total, kc.slots_max), cus, kc.active_max, warps)
    return (_times_at(kc, dict.fromkeys(live, (r, u)), live),
            _times_at(kc, dict.fromkeys(live, (rl, ul)), live))


def stage_times(kc: KindCosts, r: np.ndarray, u: np.ndarray):
    """(prologue, step, epilogue) seconds per kind at sharing (r, u)."""
    return _scaled(kc, *_unscaled_stage_times(kc, r, u))


def _unscaled_stage_times(kc: KindCosts, r: np.ndarray, u: np.ndarray):
    """:func:`stage_times` before the per-kind factor (the same for every KindCosts of
    one family, mode and dtype that differs only in ``factor``)."""
    c = kc.ceil
    bw = c.copy_bytes_per_s / kc.cus / r
    glob = kc.g_bytes / bw
    shared = kc.s_bytes / (c.smem_bytes_per_s_per_cu * u / r)
    compute = kc.fmas / (kc.kind_flops / 2.0 / kc.cus * u / r)
    step = np.maximum(np.maximum(c.latency_s, glob), np.maximum(shared, compute))
    prologue = PROLOGUE_LATENCIES * c.latency_s + glob
    epilogue = kc.c_bytes / bw
    return prologue, step, epilogue, None if kc.step_floor is None else lone_weight(r, u)


def lone_weight(r, u):
    """How much of a kind's step floor (ceilings.py kind_step_floors, measured alone) binds
    at sharing (r, u): all of it on a tile alone on its CU (r = 1), none once the CU holds
    SATURATING_WARPS warps (u = 1: their chains overlap), linearly in the warps between:
    (S - r w) / (S - w) for tiles of w warps, S = SATURATING_WARPS, which is (1 - u) /
    (1 - u / r). On the H100 floors at any sharing priced tiles two to a CU above what
    they measured (the 128x128 wgmma kind, 8 warps a tile, 0.88x on large staged
    batches), while 64x64 tiles (4 warps) nearly two to a CU still ran at their lone
    chains (bench/NOTES.md, session 17)."""
    r = np.asarray(r, dtype=np.float64)
    return np.where(r <= 1.0, 1.0, np.clip((1.0 - u) / (1.0 - u / r), 0.0, 1.0))


def _scaled(kc: KindCosts, prologue, step, epilogue, lone=None):
    """stage_times' last step: the tuned family's (or measured) correction, per kind,
    then the step's measured floor at the sharing's ``lone`` weight (lone_weight)."""
    if kc.factor is not None:
        prologue, step, epilogue = prologue * kc.factor, step * kc.factor, epilogue * kc.factor
    if kc.step_floor is not None:
        step = np.maximum(step, kc.step_floor * lone)
    return prologue, step, epilogue


def start_stage_times(kc: KindCosts, n_per_kind, per_kind: bool):
    """(prologue + epilogue, step) per kind, as lists of floats, at the sharing the
    device rule weighs alternatives in: the start's tiles ``n_per_kind`` (integers);
    fused, every kind at the one launch's sharing; per kind, every kind as shared as the
    busiest kind's launch. The same IEEE operations, in the same order, as
    :func:`sharing` and :func:`stage_times` on arrays, so the same numbers; on the few
    kinds of a family, Python floats cost a fraction of NumPy's per-call overhead."""
    cus, n = kc.cus, [float(x) for x in n_per_kind]
    tw, act = _kind_lists(kc)[:2]
    if per_kind:   # an alternative kind's launch: as shared as the busiest one
        r1 = max(min(max(x / cus, 1.0), a) for x, a in zip(n, act))
        r = [r1] * len(n)
        u = [min(1.0, r1 * w / SATURATING_WARPS) for w in tw]
    else:
        total = sum(n)   # integers: exact in any order, as is the dot product below
        warps = sum(x * w for x, w in zip(n, tw)) / total if total > 0 else kc.tile_warps_max
        r1, u1 = _sharing_of(total, cus, kc.active_max, warps)
        r, u = [r1] * len(n), [u1] * len(n)
    return _times_at(kc, list(zip(r, u)))


def _times_at(kc: KindCosts, ru, kinds=None):
    """:func:`stage_times` at sharing ``ru`` ((r, u) per kind: a list, or a dict over
    ``kinds``) as lists (prologue + epilogue, step): the same IEEE operations in the
    same order. ``kinds``: only these kinds' entries (the rest 0.0); None: every kind."""
    _, _, g_bytes, s_bytes, fmas_k, c_bytes, fmas, factor, floor = _kind_lists(kc)
    c = kc.ceil
    lat, per_cu = c.latency_s, c.copy_bytes_per_s / kc.cus
    smem = c.smem_bytes_per_s_per_cu
    n_k = len(g_bytes)
    pe, steps = [0.0] * n_k, [0.0] * n_k
    for k in range(n_k) if kinds is None else kinds:
        r, u = ru[k]
        bw = per_cu / r
        glob = g_bytes[k] / bw
        step = max(max(lat, glob), max(s_bytes[k] / (smem * u / r),
                                       fmas_k[k] / (fmas[k] * u / r)))
        pro, epi = PROLOGUE_LATENCIES * lat + glob, c_bytes[k] / bw
        if factor is not None:
            pro, step, epi = pro * factor[k], step * factor[k], epi * factor[k]
        if floor is not None:   # lone_weight, in Python floats
            w = 1.0 if r <= 1.0 else (1.0 - u) / (1.0 - u / r)
            fl = floor[k] * (0.0 if w < 0.0 else 1.0 if w > 1.0 else w)
            if fl > step:
                step = fl
        pe[k] = pro + epi
        steps[k] = step
    return pe, steps


# per-KindCosts memos (_kind_lists, _bound_times, _alone_times): entries before one is emptied
MEMO_ENTRIES = 256
_lists_memo: dict = {}


def _kind_lists(kc: KindCosts) -> tuple:
    """start_stage_times' per-kind constants as lists of floats (tile warps, resident
    workgroups, global, shared and C bytes, FMAs per step, FMA rate per CU, tuned factor
    or None), memoised per KindCosts (shared and read-only)."""
    return kept_for(_lists_memo, kc, id(kc), MEMO_ENTRIES, lambda: (
        kc.tile_warps.tolist(), kc.active.tolist(), kc.g_bytes.tolist(),
        kc.s_bytes.tolist(), kc.fmas.tolist(), kc.c_bytes.tolist(),
        (kc.kind_flops / 2.0 / kc.cus).tolist(),
        kc.factor.tolist() if kc.factor is not None else None,
        kc.step_floor.tolist() if kc.step_floor is not None else None))


def _tile_areas(kc: KindCosts) -> list:
    """tm x tn per kind as floats (the launch order's key before x K), memoised per
    KindCosts."""
    return kept_for(_lists_memo, kc, (id(kc), "areas"), MEMO_ENTRIES,
                    lambda: (kc.tm * kc.tn).tolist())


def steps_of(K: np.ndarray, tk: np.ndarray) -> np.ndarray:
    """ceil(K / tk) K steps (0 for K == 0), broadcasting."""
    return np.ceil(np.asarray(K, dtype=np.float64) / tk)


def waves_of(n, slots):
    """(waves, tiles in the last wave) of n tiles on ``slots`` resident slots (arrays
    broadcast; n == 0 gives 0 waves)."""
    waves = np.ceil(np.asarray(n, dtype=np.float64) / slots - 1e-9)
    return waves, n - np.maximum(waves - 1.0, 0.0) * slots


def tiles_sharing(kc: KindCosts, tiles, active, tile_warps):
    """(r, u) of ``tiles`` tiles resident at once (a launch, or its last wave): tiles per
    CU (at least 1, at most ``active``) and the issue share their warps can use (module
    docstring). Every sharing of the model is this one formula."""
    r = np.minimum(np.maximum(np.asarray(tiles, dtype=np.float64) / kc.cus, 1.0), active)
    return r, np.minimum(1.0, r * tile_warps / SATURATING_WARPS)


def makespan(counts: np.ndarray, times: np.ndarray, slots: float,
             last_times: np.ndarray | None = None, order_key: np.ndarray | None = None,
             alone: bool = True) -> float:
    """exec of one launch: ``counts[i]`` tiles of ``times[i]`` seconds each (``last_times``:
    at the last wave's sharing; None: the same). Two waves, for a launch that has the
    device to itself (``alone``): list scheduling tile by tile (:func:`two_wave_exec`) in
    the launch order, the entries as given or, with ``order_key``, by descending key
    (stable: the plans' longest-first order); otherwise max(longest tile, (waves - 1) x
    mean tile + mean tile of the last wave)."""
    live = counts > 0
    n = float(counts.sum())
    if n == 0:
        return 0.0
    last = times if last_times is None else last_times
    waves = math.ceil(n / slots - 1e-9)
    if waves == 2 and alone:
        if order_key is not None:
            order = np.argsort(-order_key, kind="stable")
            counts, times, last = counts[order], times[order], last[order]
        return two_wave_exec(counts, times, last, slots)
    mean = float(np.dot(counts, times)) / n
    mean_last = float(np.dot(counts, last)) / n
    return max(float(times[live].max()), (waves - 1) * mean + mean_last)


def two_wave_exec(counts: np.ndarray, times: np.ndarray, last_times: np.ndarray,
                  slots: float) -> float:
    """Exec of a launch of S < n <= 2 S tiles, S = ``slots``, in the order given (groups
    of ``counts[i]`` tiles of ``times[i]``; ``last_times``: the same tiles at the last
    wave's sharing): the first S tiles start at once (at the launch's sharing); the j-th
    later tile (at the last wave's sharing) starts when the j-th first-wave tile to end
    ends. Exact list scheduling for two waves."""
    S = int(round(slots))
    c = counts.astype(np.int64)
    first = np.repeat(times, c)
    second = np.repeat(last_times, c)[S:]
    first = first[:S]
    ends = np.sort(first)[:second.shape[0]] + second
    return float(max(first.max(), ends.max())) if ends.size else float(first.max())


def floors(shapes: np.ndarray, kc: KindCosts) -> float:
    """Whole-batch floors: unique bytes at copy bandwidth, flops at the FMA rate."""
    s = shapes.astype(np.float64)
    M, N, K = s[:, 0], s[:, 1], s[:, 2]
    nbytes = kc.elem * float((M * K + K * N + M * N).sum())
    return max(nbytes / kc.ceil.copy_bytes_per_s, 2.0 * float((M * N * K).sum()) / kc.flops_per_s)


class BatchModel:
    """One batch under one family and mode: what every candidate assignment shares
    (tile counts and K steps per GEMM and kind, the floors), so weighing a candidate
    is a few gathers over GEMMs."""

    def __init__(self, shapes: np.ndarray, counts: np.ndarray, kc: KindCosts, per_kind: bool,
                 floor: float | None = None):
        self.kc, self.per_kind, self.n_k = kc, per_kind, kc.n_kinds
        self.base = np.arange(shapes.shape[0]) * kc.n_kinds
        self.counts = counts.astype(np.float64).ravel()
        self.steps = steps_of(shapes[:, 2:3], kc.tk)
        self.K = shapes[:, 2].astype(np.float64)
        self.floor = floors(shapes, kc) if floor is None else floor

    def predict(self, kidx: np.ndarray, kc: KindCosts | None = None):
        """(seconds, tiles per kind) when GEMM i runs its tiles of kind kidx[i], one tile
        per block; per-kind mode: the kinds' launches one after another. ``kc``: other
        costs of the same kinds (their tile shapes, element size and rates: the floors
        and K steps stay), e.g. without measured factors; None: the model's own."""
        flat = self.base + kidx
        c = self.counts[flat]
        steps = self.steps.ravel()[flat]
        return predict_gemms(self.kc if kc is None else kc, kidx, c, steps, self.K,
                             self.per_kind, self.floor)

    def tile_times(self, kidx: np.ndarray) -> np.ndarray:
        """(batch, kinds) seconds of one tile of kind k on GEMM i, at the sharing the
        assignment ``kidx`` gives (the context in which alternatives are weighed)."""
        kc = self.kc
        n_k = np.bincount(kidx, weights=self.counts[self.base + kidx], minlength=self.n_k)
        r, u = sharing(kc, n_k, self.per_kind)
        if self.per_kind:   # an alternative kind's launch: as shared as the busiest one
            r = np.full_like(r, r.max())
            u = np.minimum(1.0, r * kc.tile_warps / SATURATING_WARPS)
        pro, step, epi = stage_times(kc, r, u)
        return (pro + epi) + self.steps * step


# predict_gemms prices a two-wave launch of at most this many GEMMs in Python floats
# (_two_wave_of_gemms), (fused, per kind): below it NumPy's per-call cost is most of the
# price (a fused launch's array path is the cheaper one: one makespan, no selection per
# kind; this CPU, 30 random launches each: Python 1.1-1.5x faster fused up to 32
# GEMMs, slower from 48; per kind 1.2-2.8x faster up to 64, slower from 96)
PY_GEMMS = (32, 64)


def predict_gemms(kc: KindCosts, kidx: np.ndarray, c: np.ndarray, steps: np.ndarray,
                  K: np.ndarray, per_kind: bool, floor: float):
    """(seconds, tiles per kind) of one call when GEMM i runs c[i] tiles of kind kidx[i]
    with steps[i] K steps each (K[i]: its K, for the launch order), one tile per block,
    in the order the plans launch them (tiling.gemm_lpt_order: descending tm tn K;
    per kind, descending K inside each kind's launch)."""
    n_k = np.bincount(kidx, weights=c, minlength=kc.n_kinds)
    n = n_k.tolist()
    times = _launch_times(kc, n, per_kind)
    live = [k for k, x in enumerate(n) if x]
    if not live:
        return 0.0, n_k
    if kidx.shape[0] <= PY_GEMMS[1 if per_kind else 0] and (not per_kind or len(live) == 1):
        # one launch with the device to itself: of two waves, priced in Python
        slots = kc.cus * (float(kc.active[live[0]]) if per_kind else float(kc.active.max()))
        if math.ceil(sum(n) / slots - 1e-9) == 2:
            exec_s = _two_wave_of_gemms(kc, kidx, c, steps, K, times, slots)
            return kc.ceil.launch_s + max(exec_s, floor), n_k
    (pe, step), (pe_l, step_l) = times
    t = np.array(pe).take(kidx) + steps * np.array(step).take(kidx)
    t_last = np.array(pe_l).take(kidx) + steps * np.array(step_l).take(kidx)
    key = kc.tm[kidx] * kc.tn[kidx] * K   # integers below 2**53: exact
    if per_kind:
        exec_s, launches = 0.0, 0
        for k in live:
            sel = kidx == k
            exec_s += makespan(c[sel], t[sel], kc.cus * kc.active[k], t_last[sel], key[sel],
                               alone=len(live) == 1)
            launches += 1
    else:
        exec_s = makespan(c, t, kc.cus * float(kc.active.max()), t_last, key)
        launches = 1
    return launches * kc.ceil.launch_s + max(exec_s, floor), n_k


def _two_wave_of_gemms(kc: KindCosts, kidx, c, steps, K, times, slots: float) -> float:
    """makespan's two-wave price (:func:`two_wave_exec`) of one launch of every GEMM
    with tiles, in Python floats, GEMM by GEMM rather than tile by tile: a GEMM's tiles
    all take one time, so the sorted first wave and the second are runs of equal
    times, and each end is one sum per pair of runs that meet. The same tile times
    (pe + steps x step, two roundings), the same launch order (descending tm tn K,
    stable) and the same sums as on the arrays of tiles; maxima are exact."""
    (pe, step), (pe_l, step_l) = times
    k_of, n_of, s_of, K_of = kidx.tolist(), c.tolist(), steps.tolist(), K.tolist()
    area = _tile_areas(kc)
    key = {i: -(area[k_of[i]] * K_of[i]) for i, x in enumerate(n_of) if x}
    room = int(round(slots))
    first, second = [], []   # runs (time, tiles): the first wave's, the second's in order
    for i in sorted(key, key=key.__getitem__):   # stable: argsort(-key, kind="stable")
        k, x, st = k_of[i], int(n_of[i]), s_of[i]
        into = min(room, x)
        if into:
            first.append((pe[k] + st * step[k], into))
            room -= into
        if x > into:
            second.append((pe_l[k] + st * step_l[k], x - into))
    first.sort()
    end, at, left = first[-1][0], 0, first[0][1]
    for t2, m in second:   # the j-th second-wave tile follows the j-th first to end
        while m:
            x = first[at][0] + t2
            if x > end:
                end = x
            if m < left:
                left -= m
                break
            m -= left
            at += 1
            if at == len(first):   # every first-wave tile followed (n <= 2 S: all done)
                return float(end)
            left = first[at][1]
    return float(end)


def predict_assignment(shapes: np.ndarray, counts: np.ndarray, kidx: np.ndarray,
                       kc: KindCosts, per_kind: bool) -> float:
    """Seconds of one call when GEMM i runs its counts[i, kidx[i]] tiles of kind
    kidx[i], one tile per block."""
    return BatchModel(shapes, counts, kc, per_kind).predict(kidx)[0]


def planned_ms(plan) -> float:
    """A plan's predicted milliseconds: the planner's own figure, else :func:`predict`."""
    return plan.predicted_ms if plan.predicted_ms is not None else predict(plan)


def predict(plan, ceil: Ceilings | None = None, aligned: np.ndarray | None = None,
            four: np.ndarray | None = None) -> float:
    """Predicted milliseconds of one call of any plan (every strategy and mode): its
    blocks as launched (several tiles in a block run one after another; grid-z's
    early-exit blocks cost one latency each). ``aligned``, ``four``: the batch's aligned
    and 4-byte rows (planner/alignment.py; None: dense row-major operands')."""
    from .alignment import share_for
    from .parallelism import kind_table
    if plan.n_tiles == 0:
        return 0.0
    table = kind_table(plan.arch, plan.kinds, plan.mode, plan.dtype.name)
    kc = kind_costs(plan.arch, plan.kinds, table, plan.dtype.name, ceil,
                    share=share_for(plan.arch, plan.dtype.name, plan.kinds, plan.shapes, aligned,
                                    four=four),
                    depth=batch_depth(plan.arch, plan.shapes))
    tiles = plan.tiles
    kind = tiles["kind"].astype(np.int64)
    starts = plan.block_ptr[:-1]
    bkind = kind[starts]
    n_blocks = np.bincount(bkind, minlength=kc.n_kinds).astype(np.float64)
    per_kind = plan.mode != "fused"
    K = plan.shapes[tiles["gemm"], 2]
    steps = steps_of(K, kc.tk[kind])

    def block_times(r, u):
        pro, step, epi = stage_times(kc, r, u)
        return np.add.reduceat(pro[kind] + steps * step[kind] + epi[kind], starts)
    bt = block_times(*sharing(kc, n_blocks, per_kind))
    bt_last = block_times(*last_sharing(kc, n_blocks, per_kind))
    ones = np.ones_like(bt)
    if plan.mode == "fused":
        exec_s = makespan(ones, bt, kc.cus * float(kc.active.max()), bt_last)
        launches = 1
    else:
        exec_s, launches = 0.0, 0
        live = np.flatnonzero(n_blocks)
        for k in live:
            sel = bkind == k
            extra = 0.0
            if plan.grid is not None:   # early-exit blocks: a latency each, in the waves
                launched = float(np.prod(plan.grid))
                extra = (launched - sel.sum()) * kc.ceil.latency_s / (kc.cus * kc.active[k])
            exec_s += makespan(ones[sel], bt[sel], kc.cus * kc.active[k], bt_last[sel],
                               alone=live.shape[0] == 1) + extra
            launches += 1
    return 1e3 * (launches * kc.ceil.launch_s + max(exec_s, floors(plan.shapes, kc)))


# --- many candidate assignments at once (the device rule's search) -------------------

def sharing_rows(kc: KindCosts, n: np.ndarray, per_kind: bool):
    """:func:`sharing` for C assignments at once: ``n`` (C, kinds) tiles per kind ->
    (r, u), each (C, kinds) or, fused, (C, 1) (one sharing for every kind); the same
    arithmetic, row by row."""
    if per_kind:
        return tiles_sharing(kc, n, kc.active, kc.tile_warps)
    total = n.sum(axis=1, keepdims=True)
    busy = total > 0
    # integers: exact in any summation order
    warps = np.where(busy, (n @ kc.tile_warps)[:, None] / np.where(busy, total, 1.0),
                     kc.tile_warps_max)
    return tiles_sharing(kc, total, kc.active_max, warps)


def rows_context(kc: KindCosts, n: np.ndarray, per_kind: bool):
    """What :func:`predict_rows` computes from the candidates' tiles per kind ``n``
    alone: which are busy, their waves, the launch's and its last wave's sharing and
    the stage times there before the per-kind factor. The same for every KindCosts that
    differs from ``kc`` only in ``factor`` (kind_costs' ``share``, ``kind_factors``):
    the device rule prices its candidates twice (with and without the measured path
    efficiencies) on one context."""
    busy = n > 0
    if per_kind:
        # waves_of, with the whole waves before the last kept for the span below
        waves = np.ceil(np.asarray(n, dtype=np.float64) / kc.slots - 1e-9)
        before = np.maximum(waves - 1.0, 0.0)
        r, u = tiles_sharing(kc, np.concatenate([n, n - before * kc.slots]), kc.active,
                             kc.tile_warps)
        safe, busy_t = np.where(busy, n, 1.0), None
    else:
        total = n.sum(axis=1)
        busy_t = total > 0
        safe = np.where(busy_t, total, 1.0)
        # integers: exact in any summation order
        warps = np.where(busy_t, (n @ kc.tile_warps) / safe, kc.tile_warps_max)
        waves = np.ceil(np.asarray(total, dtype=np.float64) / kc.slots_max - 1e-9)
        before = np.maximum(waves - 1.0, 0.0)
        r, u = tiles_sharing(kc, np.concatenate([total, total - before * kc.slots_max]),
                             kc.active_max, np.concatenate([warps, warps]))
        r, u = r[:, None], u[:, None]
    return busy, busy_t, safe, waves, before, _unscaled_stage_times(kc, r, u)


def predict_rows(kc: KindCosts, n: np.ndarray, S: np.ndarray, Mx: np.ndarray, per_kind: bool,
                 floor: float, lower: bool = False, context=None):
    """Seconds of C assignments from per-kind aggregates only: ``n`` tiles, ``S`` tiles x
    K steps, ``Mx`` the most K steps of a live GEMM, each (C, kinds). The same model as
    :meth:`BatchModel.predict` (sum of tile times = pe n + step S per kind; the longest
    tile = pe + step Mx) except for launches of two waves, which this prices with the
    waves formula (the module docstring): no candidate pays a pass over the GEMMs here.
    The launch's sharing and its last wave's are priced together, stacked (2C rows), so
    the stage times cost one evaluation (elementwise: the same numbers as one each).
    ``context``: :func:`rows_context` of ``n``, where the caller has it.

    ``lower``: also return, per row, a lower bound on the tile-by-tile price
    (BatchModel.predict) and whether a launch of the row has two waves (elsewhere the
    two prices are equal): a two-wave launch lasts at least its longest tile and its
    tiles' time at the last wave's sharing (or at the launch's, if shorter) over its
    slots."""
    C = n.shape[0]
    busy, busy_t, safe, waves, before, unscaled = (rows_context(kc, n, per_kind)
                                                  if context is None else context)
    pro, step, epi = _scaled(kc, *unscaled)
    pe = (pro + epi).reshape(2, C, -1)        # [0]: the launch's sharing, [1]: its last wave's
    step = step.reshape(2, C, -1)
    sums = pe * n + step * S                  # sum of tile times per kind, at each sharing
    longest = np.where(busy, pe[0] + Mx * step[0], 0.0)
    if per_kind:
        means = sums / safe
        span = np.maximum(longest, before * means[0] + means[1])
        exec_s = np.add.accumulate(span, axis=1)[:, -1]   # kinds one after another, in order
        launches = busy.sum(axis=1)
    else:
        means = sums.sum(axis=2) / safe
        exec_s = np.maximum(longest.max(axis=1), before * means[0] + means[1])
        launches = busy_t
    fixed = launches * kc.ceil.launch_s
    out = np.where(launches, fixed + np.maximum(exec_s, floor), 0.0)
    if not lower:
        return out
    two = waves == 2.0
    if per_kind:   # a launch beside others is priced by the formula (module docstring)
        two &= (launches == 1)[:, None]
    if not two.any():   # no launch of two waves: the bound is the price itself
        return out, out.copy(), np.zeros(C, dtype=bool)
    # the tiles' time at the last wave's sharing, or at the launch's where a step floor
    # makes that the shorter (lone_weight: fewer tiles a CU, more of the floor)
    low = sums[1] if kc.step_floor is None else np.minimum(sums[0], sums[1])
    if per_kind:
        span_lo = np.where(two, np.maximum(longest, low / kc.slots), span)
        exec_lo = np.add.accumulate(span_lo, axis=1)[:, -1]
        two = two.any(axis=1)
    else:
        exec_lo = np.where(two, np.maximum(longest.max(axis=1),
                                           low.sum(axis=1) / kc.slots_max), exec_s)
    lo = np.where(launches, fixed + np.maximum(exec_lo, floor), 0.0)
    return out, np.minimum(lo, out), two


def resource_bound(kc: KindCosts, counts: np.ndarray, steps: np.ndarray,
                   penalty: np.ndarray, per_kind: bool, floor: float,
                   inverse: np.ndarray | None = None, longest=0.0) -> float:
    """A lower bound on :func:`predict_rows` for every assignment of allowed kinds:
    ``counts``, ``steps`` (K steps) and ``penalty`` (0 where a GEMM may take the kind, a
    value above any time where not: wavefront_tlp.OUT_OF_REACH) are (kinds, batch). A
    tile of kind k sharing its CU with r - 1 others (r at most the resident workgroups A
    of its launch) holds 1/r of the CU for its whole time, which is at least r x (3
    latencies / A + global and C bytes at the CU's share of copy bandwidth + steps x
    max(latency / A, each stream at the CU's full rate)); so whatever the waves, a
    launch takes at least the sum of these per-CU times over its tiles / CUs (the
    mean-tile term of the model, its last wave included), and a call at least one launch
    latency plus the larger of that and the floors. Every GEMM is charged its allowed
    kind of least such time. ``inverse``: each GEMM's column where the columns are
    classes of GEMMs (planner/classes.py). ``longest``: another lower bound on the
    launches' exec where the caller has one (:func:`longest_tile_bound`), or a function
    of the larger of the other two terms giving it (it may then give any value no
    larger than that where it can tell the bound would not be the largest term)."""
    pe, step = _bound_times(kc, per_kind)
    per_cu = np.multiply(steps, step, out=buffer("per_cu", counts.shape, batch=counts.shape[1]))
    per_cu += pe
    per_cu *= counts
    per_cu += penalty
    least = per_cu.min(axis=0)
    if inverse is not None:   # columns are classes: each GEMM's, summed in GEMM order
        least = least.take(inverse)
    live_time = float(least.sum()) / kc.cus
    if callable(longest):
        longest = longest(max(live_time, floor))
    return kc.ceil.launch_s + max(live_time, longest, floor)


def longest_tile_bound(kc: KindCosts, steps: np.ndarray, penalty, live: np.ndarray,
                       per_kind: bool, above: float | None = None, free: int = 0) -> float:
    """A lower bound on every launch's exec for every assignment of allowed kinds (the
    other half of :func:`resource_bound`): a launch lasts at least its longest tile, and
    a tile is never shorter than alone on its CU (r = 1) with the most issue share its
    launch can give it (u at the most warps a tile of the launch has: fused, the
    family's largest; per kind, its own), since every stream's time grows with r and
    falls with u. So the longest tile of any tiling is at least the largest, over the
    live columns, of each column's least such tile. ``steps``, ``penalty``: (kinds,
    batch) or broadcast; ``live``: (batch,). Scaled down by 1e-9 relative, below the
    rounding of the quotients it stands for.

    ``above``: where the caller only needs the bound if it exceeds this (another term
    of a max), first a cap from kind ``free`` alone, which every column may take (its
    penalty 0: a kind of the smallest area, wavefront_tlp.BatchTables): each column's
    least tile is no longer than its tile of that kind, and that is longest at the
    most K steps of a live column (a tile's time grows with its steps; IEEE products
    and sums are monotone, so the cap computed on one column bounds the computed
    table). A cap not above ``above`` is returned as is, without the table passes:
    the max it enters is the same (large batches, whose total time dwarfs one tile)."""
    pe, step = _alone_times(kc, per_kind)
    if above is not None:
        row = steps if steps.ndim == 1 else steps[free]
        most = np.maximum.reduce(np.multiply(row, live), initial=0.0)  # steps >= 0
        cap = float((most * step[free, 0] + pe[free, 0]) * (1 - 1e-9))
        if cap <= above:
            return cap
    t = np.multiply(steps, step, out=buffer("alone", (kc.n_kinds, live.shape[0]),
                                             batch=live.shape[0]))
    t += pe
    t += penalty
    least = t.min(axis=0)
    least *= live   # finite for every column (its smallest allowed kind): x 0 drops it
    return float(least.max(initial=0.0)) * (1 - 1e-9)


def _launch_warps(kc: KindCosts, per_kind: bool) -> np.ndarray:
    """Per kind, the warps of a tile as its launch runs it: the kind's own one launch per
    kind, the family's largest in a fused launch (one block size)."""
    return kc.tile_warps if per_kind else np.full(kc.n_kinds, kc.tile_warps_max)


def _alone_times(kc: KindCosts, per_kind: bool):
    """longest_tile_bound's per-kind (prologue + epilogue, step) seconds of a tile alone
    on its CU, as (kinds, 1) columns, memoised per KindCosts (shared and read-only)."""
    def make():
        warps = _launch_warps(kc, per_kind)
        # without the step floor: it binds less as tiles share a CU (lone_weight), so a
        # shared tile may be priced shorter than a lone one; the rest only grows with r
        plain = kc if kc.step_floor is None else dataclasses.replace(kc, step_floor=None)
        pro, step, epi = stage_times(plain, np.ones(kc.n_kinds),
                                     np.minimum(1.0, warps / SATURATING_WARPS))
        return (pro + epi)[:, None], step[:, None]
    return kept_for(_bound_memo, kc, (id(kc), per_kind, "alone"), MEMO_ENTRIES, make)


_bound_memo: dict = {}


def _bound_times(kc: KindCosts, per_kind: bool):
    """resource_bound's per-kind (prologue + epilogue, step) CU seconds at the most
    sharing, memoised per KindCosts (shared and read-only)."""
    def make():
        c = kc.ceil
        A = kc.active if per_kind else np.full(kc.n_kinds, kc.active_max)
        bw = c.copy_bytes_per_s / kc.cus
        step = np.maximum(np.maximum(c.latency_s / A, kc.g_bytes / bw),
                          np.maximum(kc.s_bytes / c.smem_bytes_per_s_per_cu,
                                     kc.fmas / (kc.flops_per_s / 2.0 / kc.cus)))
        pe = PROLOGUE_LATENCIES * c.latency_s / A + (kc.g_bytes + kc.c_bytes) / bw
        if kc.factor is not None:
            step, pe = step * kc.factor, pe * kc.factor
        if kc.step_floor is not None:   # a CU's share of a step at r <= A: floor w / r
            step = np.maximum(step, kc.step_floor * lone_weight(
                A, np.minimum(1.0, A * _launch_warps(kc, per_kind) / SATURATING_WARPS)) / A)
        return pe[:, None], step[:, None]
    return kept_for(_bound_memo, kc, (id(kc), per_kind), MEMO_ENTRIES, make)
