"""The planning-time shortcuts of session 10 (bench/NOTES.md, "Session 10: planning time")
give the plans the general path gives: the longest-tile bound that lets a plan (and
split-K's inner replans) skip a launch structure is a lower bound on every rule's
prediction, an inner
replan is the same plan (tiles, kinds, prediction) as the same request planned on its
own, and the device rule's tile-by-tile prices (Python-float sharing) are the array
formula's to the bit. Random batches, many seeds, every dtype and arch the default plan
takes."""
from __future__ import annotations

import dataclasses
import math
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

import portgemm  # noqa: F401  (sets the default resources provider)
from portgemm import planner
from portgemm.occupancy import get_arch
from portgemm.planner import wavefront_tlp
from portgemm.planner.cost_model import (_launch_times, batch_depth, kind_costs, last_sharing,
                                         longest_tile_bound, sharing, stage_times)
from portgemm.planner.parallelism import kind_table
from portgemm.planner.tiling import PlanToBuild, Request, built
from portgemm.tiles import FAMILIES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plan_equivalence import random_shapes  # noqa: E402

ARCHS = ("sm_90", "sm_80", "gfx90a")


def small_batch(rng) -> np.ndarray:
    """1 to 64 GEMMs (the sizes split-K replans) of test_plan_equivalence's distributions:
    the design grid's, MoE-like, repeated, tiny with empty dimensions, long K, exact
    multiples."""
    return random_shapes(rng, int(rng.integers(1, 65)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("arch", ARCHS)
def test_longest_tile_bound_never_exceeds_a_prediction(dtype, arch):
    """least_possible (cost_model.longest_tile_bound beside resource_bound)
    stays at or below the rule's predicted time, both structures of the default plan, so
    a plan that skips a structure by it returns the plan it would have."""
    rng = np.random.default_rng(zlib.crc32(f"{dtype}{arch}".encode()))
    a = get_arch(arch)
    for _ in range(40):
        s = planner._shapes(small_batch(rng))
        for mode, fam in (("fused", None), ("per-kind", wavefront_tlp.our_family(dtype, a)),
                          ("per-kind", None)):
            req = Request(s, dtype, a, mode, {} if fam is None else {"family": fam})
            kinds = wavefront_tlp._kinds(req)
            tabs = wavefront_tlp.BatchTables(s, kinds)
            lb = wavefront_tlp.least_possible(req, kinds, tabs)
            c = wavefront_tlp._choose(req, "wavefront", kinds, tabs)
            assert lb <= c.predicted, (arch, dtype, mode, fam, s.tolist())


def test_longest_tile_bound_is_the_longest_least_tile():
    """On one GEMM, one kind allowed: the bound is that tile's time alone on a CU."""
    a = get_arch("sm_90")
    kinds = wavefront_tlp.FAMILY
    table = kind_table(a, kinds, "fused", "float32")
    kc = kind_costs(a, kinds, table, "float32")
    steps = np.array([[3.0, 5.0]] * len(kinds))
    live = np.array([True, False])
    penalty = np.zeros((len(kinds), 2))
    penalty[1:, :] = wavefront_tlp.OUT_OF_REACH
    r = np.ones(len(kinds))
    pro, step, epi = stage_times(kc, r, np.minimum(1.0, kc.tile_warps_max / 16))
    want = float(pro[0] + epi[0] + 3.0 * step[0])
    got = longest_tile_bound(kc, steps, penalty, live, per_kind=False)
    assert got == pytest.approx(want, rel=1e-8) and got <= want


@pytest.mark.parametrize("seed", range(6))
def test_inner_replans_plan_what_a_plan_of_its_own_does(seed):
    """Request.inner (split-K's virtual GEMMs) may skip a structure by the longest-tile
    bound, plans its parent's family first and defers building; the plan is the same:
    tiles, kinds, mode, TLP and predicted_ms."""
    rng = np.random.default_rng(100 + seed)
    for trial in range(25):
        s = planner._shapes(small_batch(rng))
        dtype = ("float32", "float64")[trial % 2]
        a = get_arch(ARCHS[(trial // 2) % 3])
        req = Request(s, dtype, a, "fused", {}, mode_given=False)
        own = wavefront_tlp.plan_wavefront(req)
        # inner: True, or the family of the plan it is inside (planned first): either
        # structure first, and a family that names neither
        hint = (True, wavefront_tlp.FAMILY[0].family, wavefront_tlp.our_family(dtype, a),
                "no-such-family")[trial % 4]
        pending = wavefront_tlp.plan_wavefront(dataclasses.replace(req, inner=hint))
        assert isinstance(pending, PlanToBuild)   # built only if split-K keeps it
        assert pending.predicted_ms == own.predicted_ms
        inner = built(pending)
        assert inner.mode == own.mode and inner.kinds == own.kinds
        assert inner.predicted_ms == own.predicted_ms
        assert float(inner.tlp) == float(own.tlp)
        for f in ("gemm", "kind", "gm", "gn"):
            np.testing.assert_array_equal(getattr(inner.layout, f), getattr(own.layout, f))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("arch", ARCHS)
def test_launch_times_equal_the_array_formula(dtype, arch):
    """predict_gemms' tile times (_launch_times: sharing and last-wave sharing in Python
    floats) equal sharing / last_sharing / stage_times on arrays, bit for bit, for the
    kinds with tiles (the others are 0.0: only GEMMs of no tiles take them), for every
    family with kernels in the dtype, both modes, at random tile counts (one and several
    waves, empty kinds)."""
    from portgemm.tiles import family_dtypes
    a = get_arch(arch)
    rng = np.random.default_rng(zlib.crc32(f"{arch}{dtype}".encode()))
    fams = [f for f in FAMILIES if f != "magma" and dtype in family_dtypes(f)]
    assert fams
    for fam in fams:
        kinds = tuple(sorted(FAMILIES[fam], key=lambda k: k.area))
        for mode in ("fused", "per-kind"):
            try:
                table = kind_table(a, kinds, mode, dtype)
            except Exception:   # a family this arch does not build
                continue
            kc = kind_costs(a, kinds, table, dtype, depth=batch_depth(a, np.array([[64, 64, 64]])))
            for _ in range(30):
                n = rng.integers(0, 3000, len(kinds)).astype(np.float64)
                n[rng.random(len(kinds)) < 0.3] = 0.0
                per_kind = mode == "per-kind"
                (pe, step), (pe_l, step_l) = _launch_times(kc, n.tolist(), per_kind)
                # kinds without tiles: 0.0 (only GEMMs of no tiles take them: session 14)
                live = n > 0
                for got in (pe, step, pe_l, step_l):
                    assert np.array(got)[~live].tolist() == [0.0] * int((~live).sum())
                pro, st, epi = stage_times(kc, *sharing(kc, n, per_kind))
                assert np.array(pe)[live].tolist() == (pro + epi)[live].tolist()
                assert np.array(step)[live].tolist() == st[live].tolist()
                pro, st, epi = stage_times(kc, *last_sharing(kc, n, per_kind))
                assert np.array(pe_l)[live].tolist() == (pro + epi)[live].tolist()
                assert np.array(step_l)[live].tolist() == st[live].tolist()


@pytest.mark.parametrize("seed", range(4))
def test_default_plans_of_small_batches_are_deterministic_and_split_as_before(seed):
    """Planning twice gives equal plans, and a split plan's inner plan is the plan of its
    virtual GEMMs (with their GEMMs' leading dimensions) made on its own, without the
    inner shortcut, prediction for prediction."""
    rng = np.random.default_rng(500 + seed)
    for trial in range(20):
        s = small_batch(rng)
        kw = dict(dtype=("float32", "float64")[trial % 2], arch=ARCHS[trial % 3])
        p = planner.plan(s, use_cache=False, **kw)
        q = planner.plan(s, use_cache=False, **kw)
        assert p.predicted_ms == q.predicted_ms and list(p.notes) == list(q.notes)
        if p.split is None:
            continue
        v = p.split.plan
        gemm = np.repeat(np.arange(s.shape[0]), p.split.splits)
        lds = s[gemm][:, 2:0:-1]   # each slice keeps its GEMM's operand layout
        own = planner.plan(v.shapes, use_cache=False, split_k=False, lds=lds, **kw)
        assert own.predicted_ms == v.predicted_ms
        np.testing.assert_array_equal(own.layout.kind, v.layout.kind)
        assert math.isclose(p.split.predicted_ms, v.predicted_ms + p.split.reduce_ms,
                            rel_tol=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_dense_ladders_equal_the_typed_ones(seed):
    """level_search.dense_rounds and dense_cap_aggregates (few columns) give typed_rounds'
    and cap_aggregates' numbers exactly, and the same kinds per column at every rounds
    row, for every tile family (nested or not, one tk or several), with and without
    class weights, over random batches, ladders and caps."""
    from portgemm.planner import level_search as L
    rng = np.random.default_rng(900 + seed)
    fams = [f for f in FAMILIES if f != "magma"]
    for trial in range(12):
        kinds = tuple(sorted(FAMILIES[fams[(seed * 12 + trial) % len(fams)]], key=lambda k: k.area))
        s = small_batch(rng)
        tabs = wavefront_tlp.BatchTables(s, kinds)
        fk, B, n = tabs.fk, s.shape[0], len(kinds)
        counts = tabs.counts.copy()
        if trial % 3 == 0:   # class weights: a column stands for several GEMMs
            counts *= rng.integers(1, 5, B)
        cs = counts * tabs.steps
        steps_live = tabs.steps_live.copy()
        start, least = tabs.start.copy(), rng.integers(0, n, B)
        n_levels = max(int(rng.integers(2, 10)), n)
        mn = (s[:, 0], s[:, 1])
        (a_n, a_s, a_m), a_kinds = L.typed_rounds(fk, mn, start, least, counts, cs, steps_live,
                                                  n_levels, None, tabs.bucket)
        (b_n, b_s, b_m), b_kinds = L.dense_rounds(fk, mn, start, least, counts, cs, steps_live,
                                                  n_levels, tabs.bucket)
        for x, y in ((a_n, b_n), (a_s, b_s), (a_m, b_m)):
            assert x.tolist() == y.tolist()
        for row in range(2 * n_levels):
            assert a_kinds(row).tolist() == b_kinds(row).tolist()
        T = rng.uniform(1e-6, 1e-4, (n, B))
        work = counts * T
        allowed = tabs.allowed.copy()
        fastest = L.first_kind(allowed & (T == np.where(allowed, T, np.inf).min(axis=0)), fk)
        t_long = float(T.max())
        n_caps = int(rng.integers(1, L.MAX_CAPS + 1))
        lo, hi = L.cap_events(work, T, allowed, fk["idx_c"] == fastest, t_long, n_caps,
                              max(n_caps + 1, n_levels))
        lo, hi = lo.copy(), hi.copy()
        want = L.cap_aggregates(lo, hi, counts, cs, steps_live, max(n_caps + 1, n_levels))
        got = L.dense_cap_aggregates(lo, hi, counts, cs, steps_live, max(n_caps + 1, n_levels))
        for x, y in zip(want, got):
            assert x.tolist() == y.tolist()
