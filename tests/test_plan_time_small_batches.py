"""The planning-time shortcuts of session 14 (bench/NOTES.md, "Session 14: planning
time") compute the numbers the code before them computed, each against the code it
replaces (kept here verbatim) on random inputs: predict_gemms' launch times of the live kinds only and its
two-wave price GEMM by GEMM in Python floats; like_for_like's kept constants,
unfactored costs and the tables' floors; split-K's splits for every candidate at once;
predict_rows on a context shared by two KindCosts. (Whole plans: test_planner_digests
and test_plan_equivalence.)"""
from __future__ import annotations


import numpy as np
import pytest

from portgemm.occupancy import get_arch
from portgemm.planner import cost_model as C
from portgemm.planner.cost_model import (PROLOGUE_LATENCIES, _kind_lists, _last_wave,
                                         _sharing_of, kind_costs, makespan)
from portgemm.planner.parallelism import kind_table
from portgemm.planner.wavefront_tlp import FAMILY, family_option, our_family


# --- the code before session 14 -------------------------------------------------------

def _old_times_at(kc, r: list, u: list):
    _, _, g_bytes, s_bytes, fmas_k, c_bytes, fmas, factor, _ = _kind_lists(kc)
    c = kc.ceil
    lat, per_cu = c.latency_s, c.copy_bytes_per_s / kc.cus
    smem = c.smem_bytes_per_s_per_cu
    pe, steps = [], []
    for k, (g, s, f, cb) in enumerate(zip(g_bytes, s_bytes, fmas_k, c_bytes)):
        bw = per_cu / r[k]
        glob = g / bw
        step = max(max(lat, glob), max(s / (smem * u[k] / r[k]), f / (fmas[k] * u[k] / r[k])))
        pro, epi = PROLOGUE_LATENCIES * lat + glob, cb / bw
        if factor is not None:
            pro, step, epi = pro * factor[k], step * factor[k], epi * factor[k]
        pe.append(pro + epi)
        steps.append(step)
    return pe, steps


def _old_launch_times(kc, n: list, per_kind: bool):
    cus, tw, act = kc.cus, *_kind_lists(kc)[:2]
    if per_kind:
        first = [_sharing_of(x, cus, a, w) for x, a, w in zip(n, act, tw)]
        last = [_sharing_of(_last_wave(x, cus * a), cus, a, w) for x, a, w in zip(n, act, tw)]
        return _old_times_at(kc, *zip(*first)), _old_times_at(kc, *zip(*last))
    total = sum(n)
    warps = sum(x * w for x, w in zip(n, tw)) / total if total else kc.tile_warps_max
    k = len(n)
    r, u = _sharing_of(total, cus, kc.active_max, warps)
    rl, ul = _sharing_of(_last_wave(total, kc.slots_max), cus, kc.active_max, warps)
    return _old_times_at(kc, [r] * k, [u] * k), _old_times_at(kc, [rl] * k, [ul] * k)


def _old_predict_gemms(kc, kidx, c, steps, K, per_kind, floor):
    n_k = np.bincount(kidx, weights=c, minlength=kc.n_kinds)
    (pe, step), (pe_l, step_l) = _old_launch_times(kc, n_k.tolist(), per_kind)
    t = np.array(pe).take(kidx) + steps * np.array(step).take(kidx)
    t_last = np.array(pe_l).take(kidx) + steps * np.array(step_l).take(kidx)
    key = kc.tm[kidx] * kc.tn[kidx] * K
    if per_kind:
        exec_s, launches = 0.0, 0
        live = np.flatnonzero(n_k)
        for k in live:
            sel = kidx == k
            exec_s += makespan(c[sel], t[sel], kc.cus * kc.active[k], t_last[sel], key[sel],
                               alone=live.shape[0] == 1)
            launches += 1
    else:
        exec_s = makespan(c, t, kc.cus * float(kc.active.max()), t_last, key)
        launches = 1 if n_k.sum() else 0
    if not launches:
        return 0.0, n_k
    return launches * kc.ceil.launch_s + max(exec_s, floor), n_k


# --- the comparisons --------------------------------------------------------------------

def _costs(arch_name: str, dtype: str, per_kind: bool, ours: bool):
    arch = get_arch(arch_name)
    kinds = family_option(our_family(dtype, arch), dtype) if ours else FAMILY
    mode = "per-kind" if per_kind else "fused"
    table = kind_table(arch, kinds, mode, dtype, "exact")
    return kind_costs(arch, kinds, table, dtype)


def _case(rng, kc, per_kind: bool, batch: int):
    """(kidx, c, steps, K): tiles per GEMM drawn so that the launch often has two waves
    (the Python path), with GEMMs of no tiles, one kind or several, tied keys."""
    n_k = kc.n_kinds
    one = rng.random() < (0.8 if per_kind else 0.3)
    kidx = (np.full(batch, int(rng.integers(0, n_k))) if one
            else rng.integers(0, n_k, batch)).astype(np.int64)
    slots = kc.cus * (float(kc.active[kidx[0]]) if per_kind else float(kc.active.max()))
    total = int(slots * float(rng.choice([0.5, 1.0, 1.3, 1.9, 2.0, 2.5])) + rng.integers(-2, 3))
    w = rng.random(batch) * (rng.random(batch) > 0.15)
    if not w.any():
        w[0] = 1.0
    c = np.floor(w / w.sum() * max(total, 0)).astype(np.float64)
    if rng.random() < 0.3:
        c[int(rng.integers(0, batch))] = 0.0
    K = rng.choice([0, 16, 64, 64, 100, 512, 2048], batch).astype(np.float64)
    steps = np.ceil(K / kc.tk[kidx])
    return kidx, c, steps, K


@pytest.mark.parametrize("arch", ["sm_90", "sm_80", "gfx90a"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("per_kind", [False, True])
def test_predict_gemms_equals_the_numpy_one(arch, dtype, per_kind):
    rng = np.random.default_rng([len(arch), ord(arch[-1]), len(dtype), per_kind])
    checked = {"python": 0, "numpy": 0}
    for ours in (False, True):
        kc = _costs(arch, dtype, per_kind, ours)
        for batch in [1, 2, 3, 8, 8, 17, 33, 64, 65, 200] * 12:
            kidx, c, steps, K = _case(rng, kc, per_kind, batch)
            floor = float(rng.choice([0.0, 1e-6, 1e-3]))
            got = C.predict_gemms(kc, kidx, c, steps, K, per_kind, floor)
            want = _old_predict_gemms(kc, kidx, c, steps, K, per_kind, floor)
            assert got[0] == want[0] and type(got[0]) is type(want[0])
            assert got[1].tolist() == want[1].tolist()
            n = want[1].sum()
            live = np.flatnonzero(want[1])
            slots = kc.cus * (float(kc.active[live[0]]) if per_kind and live.size
                              else float(kc.active.max()))
            two = n and (not per_kind or live.size == 1) and np.ceil(n / slots - 1e-9) == 2
            checked["python" if two and batch <= C.PY_GEMMS[1 if per_kind else 0] else "numpy"] += 1
    assert min(checked.values()) > 20, checked


def test_two_wave_runs_on_hand_made_launches():
    """Runs that split across the two waves and across each other: the same ends as
    two_wave_exec on the tiles."""
    kc = _costs("sm_90", "float32", True, True)
    rng = np.random.default_rng(7)
    for _ in range(300):
        batch = int(rng.integers(1, 12))
        kidx = np.zeros(batch, dtype=np.int64)
        slots = kc.cus * float(kc.active[0])
        c = rng.multinomial(int(slots) + int(rng.integers(1, int(slots) + 1)),
                            np.ones(batch) / batch).astype(np.float64)
        K = rng.choice([16, 32, 48, 512, 4096], batch).astype(np.float64)
        steps = np.ceil(K / kc.tk[kidx])
        got = C.predict_gemms(kc, kidx, c, steps, K, True, 0.0)[0]
        assert got == _old_predict_gemms(kc, kidx, c, steps, K, True, 0.0)[0]


def _old_like_for_like(req, kinds, engines):
    """wavefront_tlp.like_for_like before session 14 (its constants made per call, the
    unfactored costs made per price, the floors from the shapes)."""
    import dataclasses
    from portgemm.planner.alignment import share_of
    from portgemm.planner.cost_model import BatchModel, batch_depth
    from portgemm.planner.tiling import tile_counts

    def factored(choice, against):
        return choice.predicted * 1e3
    table = kind_table(req.arch, kinds, req.mode, req.dtype,
                       req.option("occupancy_model", "exact"), resources=req.resources)
    depth = batch_depth(req.arch, req.shapes)
    with_f = kind_costs(req.arch, kinds, table, req.dtype, depth=depth).factor
    if with_f is None:
        return 1.0, factored
    without = kind_costs(req.arch, kinds, table, req.dtype, depth=depth,
                         kind_factors=False).factor
    kf = with_f / (1.0 if without is None else without)
    kf = np.where([k.engine in engines for k in kinds], kf, 1.0)
    if (kf == 1.0).all():
        return 1.0, factored
    lo, hi = min(1.0, 1.0 / float(kf.max())), max(1.0, 1.0 / float(kf.min()))

    def price(choice, against):
        o_ms = choice.predicted * 1e3
        if o_ms * hi < against or o_ms * lo >= against:
            return o_ms * hi if o_ms * hi < against else o_ms * lo
        kc = kind_costs(req.arch, kinds, table, req.dtype, share=share_of(req, kinds),
                        depth=depth)
        plain = dataclasses.replace(kc, factor=kc.factor / kf)
        model = BatchModel(req.shapes, tile_counts(req.shapes, kinds), kc, True)
        t = model.predict(choice.kidx)[0]
        return o_ms * model.predict(choice.kidx, plain)[0] / t if t > 0 else o_ms
    return lo, price


@pytest.mark.parametrize("seed", range(6))
def test_like_for_like_price_equals_the_one_before(seed):
    """The like-for-like price (kept constants, kept unfactored costs, the tables'
    floors) equals the one made from scratch, priced exactly (against = its own
    factored price) and decided by the bounds, on random batches of 1-300 GEMMs, with
    and without classes."""
    import dataclasses
    from portgemm.planner import wavefront_tlp as W
    from portgemm.planner.classes import batch_classes
    from portgemm.planner.tiling import Request
    from test_plan_equivalence import random_shapes
    rng = np.random.default_rng(seed)
    arch = get_arch("sm_90")
    for _ in range(12):
        batch = int(rng.choice([1, 3, 8, 40, 300, 5000]))
        s = random_shapes(rng, batch)
        s.flags.writeable = False
        req = Request(s, "float32", arch, "per-kind",
                      {"family": W.our_family("float32", arch)}, None)
        kinds = W._kinds(req)
        paper = W._kinds(dataclasses.replace(req, mode="fused", options={}))
        cls = batch_classes(s, paper + kinds)
        tabs_p = W.BatchTables(s if cls is None else cls.shapes, paper, classes=cls, full=s)
        tabs = W.BatchTables(tabs_p.shapes, kinds, tabs_p)
        engines = {k.engine for k in paper}
        with W.planning():
            choice = W._choose(req, "wavefront", kinds, tabs)
        lo, new = W.like_for_like(req, kinds, engines, tabs.floor)
        lo0, old = _old_like_for_like(req, kinds, engines)
        assert lo == lo0
        o_ms = choice.predicted * 1e3
        for against in (o_ms, o_ms * 1.01, o_ms * 0.99, o_ms * 2, o_ms / 2, 0.0):
            assert new(choice, against) == old(choice, against)


def _old_splits_for(shapes, target):
    """split_k.splits_for before session 14 (one target per call)."""
    from portgemm.planner.split_k import BK, CANDIDATES, MIN_SLICE
    M, N, K = shapes[:, 0], shapes[:, 1], shapes[:, 2]
    eligible = (M > 0) & (N > 0) & (K >= 2 * MIN_SLICE)
    want = np.maximum(-(-K // max(int(target), 1)), 1)
    pow2 = 1 << np.ceil(np.log2(want.astype(np.float64))).astype(np.int64)
    most = np.maximum(K // MIN_SLICE, 1)
    most_pow2 = 1 << np.floor(np.log2(most.astype(np.float64))).astype(np.int64)
    s = np.minimum(np.minimum(pow2, max(CANDIDATES)), most_pow2)
    s = np.where(eligible, s, 1)
    L = -(-(-(-K // s)) // BK) * BK
    L = np.where(s > 1, L, K)
    s = np.where(s > 1, -(-K // np.maximum(L, 1)), 1)
    return s.astype(np.int64), L.astype(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_splits_for_every_target_at_once_equal_one_by_one(seed):
    from portgemm.planner import split_k
    rng = np.random.default_rng(seed)
    for _ in range(20):
        batch = int(rng.choice([1, 2, 8, 100, 3000]))
        shapes = np.stack([rng.integers(0, 300, batch), rng.integers(0, 300, batch),
                           rng.choice([0, 1, 63, 64, 127, 128, 129, 1000, 4096, 8192,
                                       2**20 + 1, 2**31 - 1], batch)], axis=1)
        k_max = int(shapes[:, 2].max())
        targets = [0, 1, 64, 1000] + [-(-(-(-k_max // S)) // split_k.BK) * split_k.BK
                                      for S in split_k.CANDIDATES]
        s_all, L_all = split_k.splits_for_targets(shapes, targets)
        for t, s, L in zip(targets, s_all, L_all):
            s0, L0 = _old_splits_for(shapes, t)
            assert s.tolist() == s0.tolist() and L.tolist() == L0.tolist()
            s1, L1 = split_k.splits_for(shapes, t)
            assert s1.tolist() == s0.tolist() and L1.tolist() == L0.tolist()


@pytest.mark.parametrize("per_kind", [False, True])
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_predict_rows_on_a_shared_context_equals_its_own(per_kind, arch):
    """The device rule prices its candidates with and without the measured path
    efficiencies on one rows_context: each price equals predict_rows' own."""
    a = get_arch(arch)
    kinds = family_option(our_family("float32", a), "float32")
    table = kind_table(a, kinds, "per-kind" if per_kind else "fused", "float32", "exact")
    ladder = kind_costs(a, kinds, table, "float32")
    rng = np.random.default_rng(int(per_kind) + 2 * len(arch))
    for _ in range(40):
        share = tuple(float(x) for x in rng.integers(0, 65, len(kinds)) / 64)
        kc = kind_costs(a, kinds, table, "float32", share=share)
        rows = int(rng.integers(1, 40))
        n = rng.integers(0, 3000, (rows, len(kinds))) * (rng.random((rows, len(kinds))) < 0.5)
        n = n.astype(np.float64)
        S = n * rng.integers(1, 200, n.shape)
        Mx = rng.integers(0, 200, n.shape).astype(np.float64) * (n > 0)
        floor = float(rng.choice([0.0, 1e-5]))
        context = C.rows_context(kc, n, per_kind)
        for costs in (kc, ladder):
            got = C.predict_rows(costs, n, S, Mx, per_kind, floor, lower=True, context=context)
            want = C.predict_rows(costs, n, S, Mx, per_kind, floor, lower=True)
            for g, w in zip(got, want):
                assert g.tolist() == w.tolist()
