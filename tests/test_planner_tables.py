"""The device rule's tables computed the cheaper ways of round 3 (bench/NOTES.md,
"Session 6: planning time, round 3") give what the direct definitions give: bucket
counts by table look-up, the start of non-nested kinds per (M, N) bucket, the
not-allowed penalty in place of inf, the nudge table in place of two masked products,
the 16-bit grouped order, and the per-family memos keyed by identity."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm  # noqa: F401  (sets the default resources provider)
from portgemm import planner
from portgemm.occupancy import get_arch
from portgemm.planner import level_search, memo, wavefront_tlp
from portgemm.planner.cost_model import kind_costs, resource_bound
from portgemm.planner.parallelism import kind_table
from portgemm.planner.tiling import _grouped_order
from portgemm.tiles import FAMILIES


def family(name):
    return tuple(sorted(FAMILIES[name], key=lambda k: k.area))


def batches(seed, n=12):
    """Random batches with empty dimensions, K = 0, exact multiples and sizes around
    every tile edge."""
    rng = np.random.default_rng(seed)
    for trial in range(n):
        b = int(rng.choice([1, 7, 100, 1500]))
        top = int(rng.choice([40, 130, 300, 2000]))
        s = rng.integers(0, top + 1, (b, 3))
        if trial % 3 == 1:
            s[:, :2] = (s[:, :2] // 16) * 16
        if trial % 4 == 2:
            s[rng.random(b) < 0.3, rng.integers(0, 3)] = 0
        yield planner._shapes(s)


def test_count_le_is_searchsorted():
    edges = np.array([16.0, 32.0, 64.0, 128.0])
    v = np.array([0, 1, 15, 16, 17, 31, 32, 63, 64, 127, 128, 129, 5000, 2**31 - 1])
    want = edges.searchsorted(v.astype(np.float64), "right")
    np.testing.assert_array_equal(level_search.count_le(edges, v), want)
    np.testing.assert_array_equal(level_search.count_le(edges, v.astype(np.float64)), want)
    np.testing.assert_array_equal(level_search.count_le(edges, v[::2]), want[::2])  # strided


@pytest.mark.parametrize("name", [f for f in FAMILIES if f != "magma"])
def test_start_of_bucket_is_the_largest_allowed_kind(name):
    """Where the family's (M, N) bucket decides the start, BatchTables' start from the
    bucket table equals the kind-by-kind ranking (largest area, then divides, then
    the larger index, among the allowed kinds)."""
    kinds = family(name)
    fk = level_search.family_keys(kinds)
    n = len(kinds)
    for s in batches(len(name)):
        tabs = wavefront_tlp.BatchTables(s, kinds)
        allowed = tabs.allowed
        key = np.where(allowed, tabs.divides * n + fk["rank_c"] * (2 * n) + fk["idx_c"], -1)
        want = key.argmax(axis=0)
        np.testing.assert_array_equal(tabs.start, want)
        if fk["start_of_bucket"] is not None:
            assert tabs.bucket is not None


@pytest.mark.parametrize("name", ["zhang2025", "portgemm", "portgemm-f64", "li2019-128"])
def test_penalty_and_nudges_match_the_masked_tables(name):
    """work x nudge + penalty and T + penalty order every entry as the masked tables
    (inf where not allowed; x n1 where the tile divides, x n0 elsewhere) do: the same
    allowed values, bit for bit, and the not-allowed ones above all of them; the bound
    is the same number."""
    kinds = family(name)
    arch = get_arch("sm_90")
    dtype = "float64" if name.endswith("f64") else "float32"
    table = kind_table(arch, kinds, "per-kind", dtype)
    kc = kind_costs(arch, kinds, table, dtype)
    fk = level_search.family_keys(kinds)
    rng = np.random.default_rng(11)
    for s in batches(3):
        tabs = wavefront_tlp.BatchTables(s, kinds)
        n0, n1, d = level_search.nudges(kinds, int(rng.integers(-1, len(kinds))))
        nudge = tabs.divides * d + n0
        np.testing.assert_array_equal(nudge, np.where(tabs.divides, n1, n0))
        T = rng.random(tabs.counts.shape) * 1e-4 + 1e-7
        work = tabs.counts * T * nudge + tabs.penalty
        direct = np.where(tabs.allowed, tabs.counts * T * np.where(tabs.divides, n1, n0), np.inf)
        np.testing.assert_array_equal(work[tabs.allowed], direct[tabs.allowed])
        assert (work[~tabs.allowed] == wavefront_tlp.OUT_OF_REACH).all()
        np.testing.assert_array_equal(work.min(axis=0), direct.min(axis=0))
        np.testing.assert_array_equal(level_search.first_kind(work == work.min(axis=0), fk),
                                      level_search.first_kind(direct == direct.min(axis=0), fk))
        if tabs.live.any():
            got = resource_bound(kc, tabs.counts, tabs.steps, tabs.penalty, True, 0.0)
            inf_pen = np.where(tabs.allowed, 0.0, np.inf)
            assert got == resource_bound(kc, tabs.counts, tabs.steps, inf_pen, True, 0.0)


def test_grouped_order_16_bit_key_is_the_lexsort():
    rng = np.random.default_rng(5)
    for n in (1, 50, 3000, 9000):
        group = rng.integers(0, 6, n)
        cost = rng.integers(0, 600, n)
        weight = rng.random(n)
        rank = np.empty(6, dtype=np.int64)
        total = np.bincount(group, weights=weight, minlength=int(group.max()) + 1)
        rank[:total.shape[0]][np.argsort(-total, kind="stable")] = np.arange(total.shape[0])
        want = np.lexsort((-cost, rank[group]))
        np.testing.assert_array_equal(_grouped_order(cost, group, weight), want)


def test_per_kind_order_by_k_is_the_order_by_cost():
    """Inside one kind tm x tn is one number, so K orders a kind's GEMMs as tm x tn x K
    does: the per-kind plan's GEMM order from K equals the one from the cost."""
    rng = np.random.default_rng(9)
    kinds = family("portgemm")
    area = np.array([k.tm * k.tn for k in kinds])
    for n in (10, 2000):
        kidx = rng.integers(0, len(kinds), n)
        K = rng.integers(0, 5000, n)
        cost = area[kidx] * K
        weight = cost * rng.integers(1, 30, n).astype(np.float64)
        np.testing.assert_array_equal(_grouped_order(K, kidx, weight),
                                      _grouped_order(cost, kidx, weight))


def test_family_memos_by_identity():
    kinds = family("portgemm")
    again = tuple(list(kinds))
    assert again is not kinds
    assert memo.family_token(kinds) == memo.family_token(again) == memo.family_token(list(kinds))
    assert memo.family_token(kinds) != memo.family_token(family("zhang2025"))
    mutable = list(kinds)
    before = memo.family_token(mutable)
    mutable.pop()   # a list is looked up by value every time, never by its id
    assert memo.family_token(mutable) != before
    assert level_search.family_keys(again) is level_search.family_keys(kinds)
    assert wavefront_tlp.family_option("portgemm", "float32") is \
        wavefront_tlp.family_option("portgemm", "float32")
    with pytest.raises(planner.ValidationError):
        wavefront_tlp.family_option("portgemm", "float64")
    with pytest.raises(planner.ValidationError):
        wavefront_tlp.family_option(["portgemm"], "float32")


# --- classes of GEMMs (planner/classes.py) ------------------------------------------

def class_batches(seed, n=10):
    """Batches that fall into few classes: MoE-like (a few (N, K), tokens per expert
    varying, some experts idle: M = 0), small sizes, repeated shapes, K = 0."""
    rng = np.random.default_rng(seed)
    for trial in range(n):
        b = int(rng.choice([256, 700, 3000]))
        if trial % 3 == 0:
            nk = rng.integers(1, 17, (int(rng.integers(1, 9)), 2)) * 128
            e = rng.integers(0, nk.shape[0], b)
            s = np.stack([rng.integers(0, 200, b), nk[e, 0], nk[e, 1]], axis=1)
        elif trial % 3 == 1:
            s = rng.integers(0, int(rng.choice([20, 64, 130])), (b, 3))
        else:
            base = rng.integers(0, 3000, (max(1, b // 50), 3))
            s = base[rng.integers(0, base.shape[0], b)]
        if trial % 2:
            s[rng.random(b) < 0.05, 2] = 0
        yield planner._shapes(s)


def test_a_class_is_one_column_of_every_table():
    """Every GEMM of a class has its representative's tile counts, steps, allowed and
    dividing tiles and start, under both families the default plan weighs."""
    from portgemm.planner.classes import batch_classes
    for dtype in ("float32", "float64"):
        ours = wavefront_tlp.family_option(wavefront_tlp.OUR_FAMILY[dtype], dtype)
        kinds = wavefront_tlp.FAMILY + ours
        found = 0
        for s in class_batches(2):
            cls = batch_classes(s, kinds)
            if cls is None:
                continue
            found += 1
            assert cls.weights.sum() == len(s) and cls.inverse.max() < len(cls.weights)
            for fam in (wavefront_tlp.FAMILY, ours):
                names = ("counts", "allowed", "divides", "steps_live", "start")
                full = wavefront_tlp.BatchTables(s, fam)   # kept buffers: copies
                want = [getattr(full, name).copy() for name in names]
                rep = wavefront_tlp.BatchTables(cls.shapes, fam)
                for name, w in zip(names, want):
                    np.testing.assert_array_equal(getattr(rep, name).take(cls.inverse, axis=-1), w)
        assert found >= 5


@pytest.mark.parametrize("arch", ["sm_90", "gfx90a", "sm_80"])
def test_plans_over_classes_are_the_plans_gemm_by_gemm(arch, monkeypatch):
    """The default plan with the batch's classes equals, digest and predicted time,
    the plan made GEMM by GEMM (split-K and both dtypes included)."""
    sys_path = __import__("sys").path
    from pathlib import Path
    sys_path.insert(0, str(Path(__file__).resolve().parent))
    from test_planner_digests import digest
    from portgemm.planner import classes
    used = 0
    for dtype in ("float32", "float64"):
        for s in class_batches(len(arch)):
            with_classes = planner.plan(s, dtype=dtype, arch=arch, use_cache=False)
            used += classes.batch_classes(s, wavefront_tlp.FAMILY + wavefront_tlp.family_option(
                wavefront_tlp.OUR_FAMILY[dtype], dtype)) is not None
            monkeypatch.setattr(wavefront_tlp, "batch_classes", lambda shapes, kinds: None)
            plain = planner.plan(s, dtype=dtype, arch=arch, use_cache=False)
            monkeypatch.undo()
            assert digest(with_classes)[0] == digest(plain)[0]
            assert with_classes.predicted_ms == plain.predicted_ms
    assert used >= 8


def test_classes_give_up_on_sizes_far_apart():
    """Sizes 1 and 2**31 - 1 in one batch would make the codes' counts a huge array:
    no classes (the plan is made GEMM by GEMM), found without building it."""
    from portgemm.planner.classes import batch_classes
    kinds = wavefront_tlp.FAMILY + wavefront_tlp.family_option("portgemm", "float32")
    s = np.ones((300, 3), dtype=np.int64)
    s[0, 2] = 2**31 - 1
    assert batch_classes(planner._shapes(s), kinds) is None
    s = np.ones((300, 3), dtype=np.int64) * 64
    assert batch_classes(planner._shapes(s), kinds).weights.tolist() == [300.0]
