"""The planning-time shortcuts of session 11 (bench/NOTES.md, "Session 11: planning
time") compute the numbers the code before them computed: the caps ladder's bins from
the IEEE bit patterns (no frexp) and its events in bytes, the one-kind candidates'
totals from typed_rounds' (type, kind) tables, and the structure bound's longest-tile
term skipped where a cap from the smallest kind shows it is not the largest. Each
against the formula it replaces, on random tables and batches."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from portgemm import planner
from portgemm.occupancy import get_arch
from portgemm.planner import level_search as L
from portgemm.planner import wavefront_tlp
from portgemm.planner.cost_model import (batch_depth, kind_costs, longest_tile_bound,
                                         resource_bound)
from portgemm.planner.parallelism import kind_table
from portgemm.planner.tiling import Request
from portgemm.tiles import FAMILIES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plan_equivalence import random_shapes  # noqa: E402


def _frexp_bins(T, t_long, n_caps):
    """cap_bins as it was: exponents and mantissas (frexp)."""
    mT, eT = np.frexp(T)
    mL, eL = math.frexp(t_long)
    return np.minimum(np.maximum(eL - eT - (mT > mL), 0), n_caps)


def _old_cap_events(work, T, allowed, fastest_mask, t_long, n_caps, n_levels):
    """cap_events as it was, in int64 throughout."""
    hi = (_frexp_bins(T, t_long, n_caps) + 1) * allowed
    hi = np.maximum(hi, fastest_mask * n_levels)
    less = work[None, :, :] < work[:, None, :]
    return (less * hi[None, :, :]).max(axis=1), hi


@pytest.mark.parametrize("seed", range(10))
def test_cap_bins_from_bit_patterns_equal_frexp_and_the_definition(seed):
    rng = np.random.default_rng(seed)
    t_long = float(rng.uniform(1e-7, 1e-1))
    at = t_long / 2.0 ** np.arange(0, 12)
    T = np.concatenate([at, np.nextafter(at, 0), np.nextafter(at, 1), [0.0, 5e-324, 1e-310,
                        t_long * 1e6, 1e300], np.exp(rng.uniform(-25, 0, 300))])
    T = np.stack([T, T])   # (kinds, batch)
    for n_caps in range(1, L.MAX_CAPS + 1):
        got = L.cap_bins(T, t_long, n_caps)
        assert got.dtype == np.int8
        want = sum((T <= t_long / 2.0 ** j).astype(np.int64) for j in range(1, n_caps + 1))
        assert got.tolist() == want.tolist()
        # frexp's (0, 0) for T = 0 read as no cap; tiles take time (T > 0), and there the
        # two agree
        pos = T[0] > 0
        assert got[:, pos].tolist() == _frexp_bins(T[:, pos], t_long, n_caps).tolist()


@pytest.mark.parametrize("seed", range(10))
def test_cap_events_in_bytes_equal_the_int64_ones(seed):
    rng = np.random.default_rng(100 + seed)
    n_k, B = int(rng.integers(2, 9)), int(rng.integers(1, 2000))
    T = rng.uniform(1e-6, 1e-3, (n_k, B))
    T[:, rng.random(B) < 0.2] = T[0, 0]                       # ties in time
    work = rng.uniform(1.0, 2.0, (n_k, B))
    work[:, rng.random(B) < 0.2] = 1.5                         # ties in work
    allowed = rng.random((n_k, B)) < 0.7
    allowed[0] = True
    T_allowed = np.where(allowed, T, np.inf)
    fk = {"n": n_k, "revidx_c": (n_k - np.arange(n_k))[:, None].astype(np.int8)}
    fastest = L.first_kind(T_allowed == T_allowed.min(axis=0), fk)
    mask = np.arange(n_k)[:, None] == fastest
    t_long = float(T.max())
    n_caps = int(rng.integers(1, L.MAX_CAPS + 1))
    n_levels = max(n_caps + 1, n_k)
    lo, hi = L.cap_events(work, T, allowed, mask, t_long, n_caps, n_levels)
    want_lo, want_hi = _old_cap_events(work, T, allowed, mask, t_long, n_caps, n_levels)
    assert lo.tolist() == want_lo.tolist() and hi.tolist() == want_hi.tolist()


@pytest.mark.parametrize("seed", range(8))
def test_typed_rounds_totals_equal_the_direct_sums(seed):
    """typed_rounds(totals=True): per kind the batch's tiles, tiles x steps and most
    steps of a live GEMM, as one_kind_rows summed them over (kind, GEMM): every family,
    with and without class weights and the longest-K shortcut."""
    rng = np.random.default_rng(300 + seed)
    fams = [f for f in FAMILIES if f != "magma"]
    for trial in range(10):
        kinds = tuple(sorted(FAMILIES[fams[(seed * 10 + trial) % len(fams)]],
                             key=lambda k: k.area))
        s = planner._shapes(random_shapes(rng, int(rng.integers(1, 3000))))
        tabs = wavefront_tlp.BatchTables(s, kinds)
        fk, B, n = tabs.fk, s.shape[0], len(kinds)
        counts = tabs.counts.copy()
        if trial % 3 == 0:
            counts *= rng.integers(1, 5, B)
        cs = counts * tabs.steps
        steps_live = tabs.steps_live.copy()
        k_live = None if fk["one_tk"] or trial % 2 else tabs.K * tabs.live
        least = rng.integers(0, n, B)
        _, _, totals = L.typed_rounds(fk, (s[:, 0], s[:, 1]), tabs.start.copy(), least, counts,
                                      cs, steps_live, n, k_live, tabs.bucket, totals=True)
        got = wavefront_tlp.one_kind_rows(counts, cs, steps_live, fk, totals)
        want = wavefront_tlp.one_kind_rows(counts, cs, steps_live, fk)
        for x, y in zip(got, want):
            assert x.tolist() == y.tolist()


def _exact_bound(req, kinds, tabs):
    """least_possible as it was: the longest-tile term always computed."""
    table = kind_table(req.arch, kinds, req.mode, req.dtype, "exact")
    depth = batch_depth(req.arch, req.shapes)
    kc = kind_costs(req.arch, kinds, table, req.dtype,
                    share=wavefront_tlp.share_of(req, kinds), depth=depth)
    one_kind = kind_costs(req.arch, kinds, table, req.dtype, depth=depth).factor is not None
    penalty, per_kind = 0.0 if one_kind else tabs.penalty, req.mode == "per-kind"
    longest = longest_tile_bound(kc, tabs.steps, penalty, tabs.live, per_kind)
    capped = longest_tile_bound(kc, tabs.steps, penalty, tabs.live, per_kind, 0.0,
                                tabs.fk["free"])
    assert capped >= longest   # the cap never falls below the bound it stands for
    return resource_bound(kc, tabs.counts, tabs.steps, penalty, per_kind, tabs.floor(kc),
                          tabs.inverse, longest)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("arch", ["sm_90", "sm_80", "gfx90a"])
def test_structure_bound_with_the_capped_longest_tile_is_the_exact_one(dtype, arch):
    """least_possible, which skips the longest-tile term where its cap is not above the
    other terms, equals the bound with the term computed, for both structures of the
    default plan, from 1 to 9,000 GEMMs (small batches keep the term, large ones skip it)."""
    rng = np.random.default_rng(sum(map(ord, dtype + arch)))
    a = get_arch(arch)
    for _ in range(12):
        s = planner._shapes(random_shapes(rng, int(rng.choice([int(rng.integers(1, 64)),
                                                               int(rng.integers(64, 9000))]))))
        for mode, fam in (("fused", None), ("per-kind", wavefront_tlp.our_family(dtype, a))):
            req = Request(s, dtype, a, mode, {} if fam is None else {"family": fam})
            kinds = wavefront_tlp._kinds(req)
            tabs = wavefront_tlp.BatchTables(s, kinds)
            if not tabs.live.any():
                continue
            assert wavefront_tlp.least_possible(req, kinds, tabs) == _exact_bound(req, kinds, tabs)


def test_one_kind_totals_fall_back_where_a_sum_could_round():
    """one_kind_rows takes typed_rounds' totals only below 2**53 (where every partial
    sum of these integers is exact in any order); past it, its own sums (the order they
    always had)."""
    rng = np.random.default_rng(5)
    kinds = tuple(sorted(FAMILIES["portgemm"], key=lambda k: k.area))
    fk = wavefront_tlp.family_keys(kinds)
    n, B = len(kinds), 700
    counts = rng.integers(1, 2**20, (n, B)).astype(np.float64)
    cs = counts * rng.integers(2**30, 2**31, B).astype(np.float64)   # sums past 2**53
    steps_live = rng.integers(0, 9, (n, B)).astype(np.float64)
    wrong = (counts.sum(axis=1) + 1.0, cs.sum(axis=1) * 2.0, steps_live.max(axis=1))
    got = wavefront_tlp.one_kind_rows(counts, cs, steps_live, fk, wrong)
    want = wavefront_tlp.one_kind_rows(counts, cs, steps_live, fk)
    for x, y in zip(got, want):
        assert x.tolist() == y.tolist()


@pytest.mark.parametrize("seed", range(6))
def test_vector_share_from_the_rule_tables_equals_its_own(seed):
    """alignment.share_for with the device rule's tile grids (BatchTables.grid_rows)
    gives the share it computes from the shapes, bit for bit: every family with measured
    path efficiencies on sm_90 and sm_80, dense and strided operand layouts."""
    from portgemm.planner import alignment
    rng = np.random.default_rng(900 + seed)
    for arch in ("sm_90", "sm_80"):
        a = get_arch(arch)
        for dtype in ("float32", "float64"):
            req = Request(planner._shapes(random_shapes(rng, int(rng.integers(257, 5000)))),
                          dtype, a, "per-kind", {"family": wavefront_tlp.our_family(dtype, a)})
            kinds = wavefront_tlp._kinds(req)
            tabs = wavefront_tlp.BatchTables(req.shapes, kinds)
            s = req.shapes
            lds = s[:, 2:0:-1] + rng.integers(0, 3, (s.shape[0], 2)) * (rng.random() < 0.5)
            for rows in (None, alignment.aligned_rows(s, dtype, lds)):
                alignment._last[0] = None
                want = alignment.share_for(a, dtype, kinds, s, rows)
                alignment._last[0] = None
                got = alignment.share_for(a, dtype, kinds, s, rows, grid=tabs.grid_rows)
                assert got == want


@pytest.mark.parametrize("seed", range(4))
def test_depth_and_dense_share_from_rows_equal_the_shapes_ones(seed):
    """cost_model.depth_of from the tables' contiguous rows, and share_for's aligned
    flags of dense operands tested column by column, give the figures computed from
    the shapes (and from aligned_rows) to the bit."""
    from portgemm.planner import alignment
    from portgemm.planner.cost_model import depth_of
    rng = np.random.default_rng(1100 + seed)
    a = get_arch("sm_90")
    kinds = tuple(sorted(FAMILIES["portgemm"], key=lambda k: k.area))
    for _ in range(10):
        s = planner._shapes(random_shapes(rng, int(rng.integers(1, 9000))))
        tabs = wavefront_tlp.BatchTables(s, kinds)
        assert depth_of(s, (tabs.M, tabs.N, tabs.K)) == depth_of(s)
        alignment._last[0] = None
        dense = alignment.share_for(a, "float32", kinds, s)
        alignment._last[0] = None
        assert dense == alignment.share_for(a, "float32", kinds, s,
                                            alignment.aligned_rows(s, "float32"))


@pytest.mark.parametrize("seed", range(6))
def test_classes_give_up_on_a_sample_only_where_the_batch_would(seed):
    """classes.batch_classes' early give-up (the first SAMPLE GEMMs already past the K or
    N limit) only where the whole batch's count gives up too: the same classes, or None,
    as without it, for batches that pay (MoE-like, repeated, small sizes) and those that
    do not (uniform sizes, long K)."""
    from portgemm.planner import classes
    rng = np.random.default_rng(1300 + seed)
    kinds = wavefront_tlp.FAMILY + tuple(sorted(FAMILIES["portgemm"], key=lambda k: k.area))
    real = classes._gives_up_on_a_sample
    for _ in range(25):
        s = planner._shapes(random_shapes(rng, int(rng.integers(256, 9000))))
        got = classes.batch_classes(s, kinds)
        try:
            classes._gives_up_on_a_sample = lambda shapes, steps: False
            want = classes.batch_classes(s, kinds)
        finally:
            classes._gives_up_on_a_sample = real
        assert (got is None) == (want is None)
        if got is not None:
            for x, y in zip((got.shapes, got.weights, got.inverse),
                            (want.shapes, want.weights, want.inverse)):
                assert x.tolist() == y.tolist()
