"""The cost model's last partial wave (planner/cost_model.py): a launch's last wave holds
fewer tiles per CU, so tiles that have the warps to use the freed share run faster; the
three ways the model is evaluated (the rule's per-kind aggregates, one assignment, a
built plan) agree."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import portgemm  # noqa: F401  (sets the default resources provider)
from portgemm import planner
from portgemm.occupancy import get_arch
from portgemm.planner.cost_model import (BatchModel, kind_costs, makespan, predict,
                                         predict_gemms, predict_rows, stage_times, sharing,
                                         two_wave_exec)
from portgemm.planner.parallelism import kind_table
from portgemm.planner.tiling import tile_grid
from portgemm.tiles import PORTGEMM, ZHANG2025

ARCH = get_arch("sm_90")


def model(kinds, mode, shapes):
    table = kind_table(ARCH, kinds, mode, "float32")
    kc = kind_costs(ARCH, kinds, table, "float32")
    gm, gn = tile_grid(shapes, kinds)
    return kc, BatchModel(shapes, gm * gn, kc, mode == "per-kind", floor=0.0)


def test_a_partial_last_wave_of_large_tiles_is_shorter_than_a_full_one():
    """64x64 tiles (8 warps) in the fused launch: one wave of S tiles, then S + 1 tiles.
    The lone tile of the second wave has a CU to itself: the launch takes more than one
    wave and less than two."""
    kc, _ = model(ZHANG2025, "fused", np.array([[64, 64, 512]]))
    slots = int(kc.slots_max)
    large = len(ZHANG2025) - 1
    one = BatchModel(np.tile([64, 64, 512], (slots, 1)),
                     np.ones((slots, len(ZHANG2025))), kc, False, floor=0.0)
    two = BatchModel(np.tile([64, 64, 512], (slots + 1, 1)),
                     np.ones((slots + 1, len(ZHANG2025))), kc, False, floor=0.0)
    t1 = one.predict(np.full(slots, large))[0] - kc.ceil.launch_s
    t2 = two.predict(np.full(slots + 1, large))[0] - kc.ceil.launch_s
    r, u = sharing(kc, np.eye(len(ZHANG2025))[large] * slots, False)
    pro, step, epi = stage_times(kc, r, u)
    full_tile = pro[large] + 32 * step[large] + epi[large]
    assert t1 == pytest.approx(full_tile, rel=1e-12)       # one wave: the tile itself
    assert t1 < t2 < 2 * t1


def test_two_waves_are_scheduled_tile_by_tile_longest_first():
    """A launch of S < n <= 2 S tiles (hand-worked, S = 4): the four longest start at
    once; each later tile starts on the slot that frees first, so the shortest tiles of
    the second wave follow the shortest of the first (10 + 0 ... 7 + 3 = 10), where the
    waves formula charges a mean tile after a mean wave (6.5 + 6.5). Equal tiles: the two
    agree (a partial wave of equal tiles is a whole tile long)."""
    times = np.array([2.0, 10.0, 3.0, 9.0, 8.0, 7.0])   # any order: longest first
    ones = np.ones(6)
    assert makespan(ones, times, 4.0, order_key=times) == 10.0
    assert two_wave_exec(ones, np.sort(times)[::-1], np.sort(times)[::-1], 4.0) == 10.0
    # the second wave at its own (faster) sharing: 7 + 3 x 0.5, 8 + 2 x 0.5
    assert two_wave_exec(np.array([1.0, 1, 1, 1, 2]), np.array([10.0, 9, 8, 7, 3]),
                         np.array([5.0, 4.5, 4, 3.5, 1.5]), 4.0) == 10.0
    # the launch order as given (a built plan's blocks), here shortest first: 9 and 10
    # start when 2 and 3 end
    short_first = np.array([2.0, 3, 7, 8, 9, 10])
    assert two_wave_exec(ones, short_first, short_first, 4.0) == 13.0
    equal = np.full(6, 5.0)
    assert makespan(ones, equal, 4.0, order_key=equal) == 10.0
    assert makespan(ones, equal, 4.0, order_key=equal, alone=False) == 10.0
    # beside other launches the formula stands: (2 - 1) x 6.5 + 6.5
    assert makespan(ones, times, 4.0, order_key=times, alone=False) == pytest.approx(13.0)


def test_a_launch_beside_others_keeps_the_waves_formula():
    """Per-kind plans: a lone launch of two waves is priced tile by tile, one beside
    other kinds' launches by the formula (CUDA overlaps them and runs them persistent),
    which is what the aggregates (predict_rows) give."""
    kinds = PORTGEMM
    kc, _ = model(kinds, "per-kind", np.array([[32, 32, 32]]))
    slots = int(kc.slots[0])
    rng = np.random.default_rng(5)
    n = slots + slots // 2                      # 1.5 waves of the 32x32 kind
    K = rng.integers(16, 513, n).astype(np.float64)
    steps = np.ceil(K / kc.tk[0])
    c = np.ones(n)
    lone = np.zeros(n, dtype=np.int64)
    alone_s = predict_gemms(kc, lone, c, steps, K, True, 0.0)[0]
    S = np.array([[float((c * steps).sum())] + [0.0] * (len(kinds) - 1)])
    Mx = np.array([[steps.max()] + [0.0] * (len(kinds) - 1)])
    nk = np.array([[float(n)] + [0.0] * (len(kinds) - 1)])
    formula, low, two = predict_rows(kc, nk, S, Mx, True, 0.0, lower=True)
    assert two[0] and low[0] <= alone_s < formula[0]   # ragged K: the second wave is short
    mixed = np.concatenate([lone, [1]])                 # one 64x64 tile beside them
    c2, steps2, K2 = np.append(c, 1.0), np.append(steps, 1.0), np.append(K, 16.0)
    got = predict_gemms(kc, mixed, c2, steps2, K2, True, 0.0)[0]
    nk2 = nk.copy()
    nk2[0, 1] = 1.0
    S2, Mx2 = S.copy(), Mx.copy()
    S2[0, 1], Mx2[0, 1] = 1.0, 1.0
    rows, low2, two2 = predict_rows(kc, nk2, S2, Mx2, True, 0.0, lower=True)
    assert not two2[0] and got == pytest.approx(rows[0], rel=1e-12)


def test_one_wave_is_its_own_last_wave():
    """Fewer tiles than slots: the launch is its longest tile, as before."""
    shapes = np.array([[256, 256, 300], [64, 512, 40], [100, 100, 1000]])
    for kinds, mode in ((ZHANG2025, "fused"), (PORTGEMM, "per-kind")):
        kc, bm = model(kinds, mode, shapes)
        kidx = np.array([0, 1, 1])
        s, n = bm.predict(kidx)
        t = bm.tile_times(kidx)
        r, u = sharing(kc, n, mode == "per-kind")
        pro, step, epi = stage_times(kc, r, u)
        steps = np.ceil(shapes[:, 2] / kc.tk[kidx])
        tiles = pro[kidx] + steps * step[kidx] + epi[kidx]
        launches = len(np.unique(kidx)) if mode == "per-kind" else 1
        if mode == "fused":
            expect = launches * kc.ceil.launch_s + tiles.max()
        else:
            expect = launches * kc.ceil.launch_s + sum(tiles[kidx == k].max() for k in (0, 1))
        assert s == pytest.approx(expect, rel=1e-12)
        assert t.shape == (3, len(kinds))


@pytest.mark.parametrize("kinds,mode", [(ZHANG2025, "fused"), (ZHANG2025, "per-kind"),
                                        (PORTGEMM, "per-kind"), (PORTGEMM, "fused")])
def test_aggregates_and_one_assignment_agree_over_many_waves(kinds, mode):
    """predict_rows (the device rule's search, per-kind aggregates only) and
    BatchModel.predict (one assignment, per GEMM) give the same seconds, from one
    wave to many, partial last waves included, except where a launch has two waves:
    there BatchModel schedules the tiles one by one, and predict_rows' lower bound
    stays at or below that price."""
    rng = np.random.default_rng(3)
    for batch in (1, 7, 100, 1500):
        shapes = np.stack([rng.integers(1, 700, batch), rng.integers(1, 700, batch),
                           rng.integers(1, 2000, batch)], axis=1).astype(np.int64)
        kc, bm = model(kinds, mode, shapes)
        floor = 0.0
        gm, gn = tile_grid(shapes, kinds)
        counts = (gm * gn).astype(np.float64)
        n_k = len(kinds)
        for _ in range(5):
            kidx = rng.integers(0, n_k, batch)
            s, n = bm.predict(kidx)
            c = counts[np.arange(batch), kidx]
            steps = np.ceil(shapes[:, 2] / kc.tk[kidx])
            S = np.bincount(kidx, weights=c * steps, minlength=n_k)
            Mx = np.zeros(n_k)
            np.maximum.at(Mx, kidx, steps)
            rows, low, two = predict_rows(kc, n[None], S[None], Mx[None], mode == "per-kind",
                                          floor, lower=True)
            if two[0]:
                assert low[0] <= s * (1 + 1e-12)
            else:
                assert rows[0] == pytest.approx(s, rel=1e-12)
                assert low[0] == rows[0]


def test_a_plan_predicts_what_its_rule_predicted():
    """cost_model.predict on a built one-tile-per-block plan (its blocks as launched)
    gives the rule's predicted_ms, both launch structures, multi-wave batches."""
    rng = np.random.default_rng(9)
    for batch in (8, 64, 700):
        shapes = np.stack([rng.integers(16, 1025, batch), rng.integers(16, 1025, batch),
                           rng.integers(16, 513, batch)], axis=1)
        for kw in ({"mode": "fused"}, {"family": "portgemm", "mode": "per-kind"}):
            p = planner.plan(shapes, arch=ARCH, use_cache=False, **kw)
            assert predict(p) == pytest.approx(p.predicted_ms, rel=1e-9)


def test_replay_rebuilds_the_timed_shapes():
    """bench/planner_proof.py --replay rebuilds each case's shapes from the seed alone
    (the operands' draws skipped), the same as the run drew them."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import planner_proof

    class FakeCp:   # the run's operands, on the host, never used
        @staticmethod
        def asarray(a, dtype=None):
            return None

        @staticmethod
        def empty(shape, dtype=None):
            return None

    rng = np.random.default_rng(11)
    drawn = [(name, s) for name, _, _, (s, *_ops) in planner_proof.cases(FakeCp, rng, True)]
    rebuilt = [(name, s) for name, _, _, s in planner_proof.rebuilt_cases(11, True)]
    assert [n for n, _ in drawn] == [n for n, _ in rebuilt]
    for (_, a), (_, b) in zip(drawn, rebuilt):
        np.testing.assert_array_equal(a, b)


def test_ceilings_in_memory_replace_the_files_for_this_process_only():
    """ceilings.use_in_memory (the replay's --ceilings): plans made after it are
    predicted with those figures and are not the cached ones; reload() goes back to the
    file, which was never written."""
    from portgemm.occupancy import ceilings
    text = ceilings.PATH.read_text()
    shapes = np.tile([200, 300, 400], (16, 1))
    before = planner.plan(shapes, arch=ARCH)
    entry = {**ceilings.ceilings_for(ARCH).as_dict()}
    entry["launch_s"] = entry["launch_s"] + 1e-3
    try:
        ceilings.use_in_memory(ARCH.name, {f: entry[f] for f in ceilings.FIELDS})
        after = planner.plan(shapes, arch=ARCH)
        assert after is not before
        assert after.predicted_ms == pytest.approx(before.predicted_ms + 1.0, rel=1e-6)
        with pytest.raises(ValueError):
            ceilings.use_in_memory(ARCH.name, {"launch_s": 1.0})
    finally:
        ceilings.reload()
    assert ceilings.PATH.read_text() == text
    assert planner.plan(shapes, arch=ARCH).predicted_ms == pytest.approx(before.predicted_ms)


# --- predict_rows as it was before its sharings were stacked (a frozen reference) -----

def _predict_rows_reference(kc, n, S, Mx, per_kind, floor):
    """cost_model.predict_rows before the speed work: each sharing's stage times
    evaluated on their own, the kinds' spans added one by one."""
    from portgemm.planner.cost_model import sharing_rows, tiles_sharing, waves_of
    r, u = sharing_rows(kc, n, per_kind)
    pro, step, epi = stage_times(kc, r, u)
    pe = pro + epi
    busy = n > 0
    longest = np.where(busy, pe + Mx * step, 0.0)
    tile_sum = pe * n + step * S
    if per_kind:
        waves, last = waves_of(n, kc.slots)
        pro, step, epi = stage_times(kc, *tiles_sharing(kc, last, kc.active, kc.tile_warps))
        safe = np.where(busy, n, 1.0)
        mean = tile_sum / safe
        mean_last = ((pro + epi) * n + step * S) / safe
        span = np.maximum(longest, np.maximum(waves - 1.0, 0.0) * mean + mean_last)
        exec_s = span[:, 0].copy()
        for k in range(1, span.shape[1]):
            exec_s += span[:, k]
        launches = busy.sum(axis=1)
    else:
        total = n.sum(axis=1)
        safe = np.where(total > 0, total, 1.0)
        mean = tile_sum.sum(axis=1) / safe
        waves, last = waves_of(total, kc.slots_max)
        warps = np.where(total > 0, (n @ kc.tile_warps) / safe, kc.tile_warps_max)
        rl, ul = tiles_sharing(kc, last, kc.active_max, warps)
        pro, step, epi = stage_times(kc, rl[:, None], ul[:, None])
        mean_last = ((pro + epi) * n + step * S).sum(axis=1) / safe
        exec_s = np.maximum(longest.max(axis=1), np.maximum(waves - 1.0, 0.0) * mean + mean_last)
        launches = total > 0
    return np.where(launches, launches * kc.ceil.launch_s + np.maximum(exec_s, floor), 0.0)


@pytest.mark.parametrize("arch", ["sm_90", "gfx90a"])
@pytest.mark.parametrize("family", ["zhang2025", "portgemm", "li2019-128", "tune"])
@pytest.mark.parametrize("mode", ["fused", "per-kind"])
def test_predict_rows_gives_the_reference_numbers_exactly(arch, family, mode):
    """Rows with idle kinds, one wave to many, with and without a floor: the same
    floats, bit for bit, as the unstacked evaluation."""
    from portgemm.errors import ResourceError
    from portgemm.tiles import FAMILIES
    a = get_arch(arch)
    kinds = tuple(sorted(FAMILIES[family], key=lambda k: k.area))
    rng = np.random.default_rng(17)
    for dtype in ("float32", "float64"):
        try:
            kc = kind_costs(a, kinds, kind_table(a, kinds, mode, dtype), dtype)
        except ResourceError:   # a kind this arch cannot hold in this dtype
            continue
        for trial in range(20):
            C, k = int(rng.integers(1, 20)), len(kinds)
            n = (rng.integers(0, 3, (C, k)) * rng.integers(0, 200_000, (C, k))).astype(float)
            S = n * rng.integers(1, 60, (C, k))
            Mx = np.where(n > 0, rng.integers(1, 60, (C, k)), 0).astype(float)
            floor = float(rng.random() * 1e-3) if trial % 2 else 0.0
            want = _predict_rows_reference(kc, n, S, Mx, mode == "per-kind", floor)
            got = predict_rows(kc, n, S, Mx, mode == "per-kind", floor)
            assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("mode", ["fused", "per-kind"])
@pytest.mark.parametrize("family", ["zhang2025", "portgemm", "tune"])
def test_start_stage_times_match_the_array_model_exactly(mode, family):
    """The device rule's start sharing in Python floats (cost_model.start_stage_times)
    gives the array model's numbers bit for bit: sharing (per kind: every kind as
    shared as the busiest launch), stage times, the tuned correction factor."""
    from dataclasses import replace as dc_replace
    from portgemm.planner.cost_model import SATURATING_WARPS, start_stage_times
    from portgemm.tiles import FAMILIES
    kinds = tuple(sorted(FAMILIES[family], key=lambda k: k.area))
    kc = kind_costs(ARCH, kinds, kind_table(ARCH, kinds, mode, "float32"), "float32")
    rng = np.random.default_rng(23)
    for trial in range(40):
        n = (rng.integers(0, 2, len(kinds)) * rng.integers(0, 100_000, len(kinds))).astype(float)
        k = kc if trial % 2 else dc_replace(kc, factor=rng.random(len(kinds)) + 0.5)
        r, u = sharing(k, n, mode == "per-kind")
        if mode == "per-kind":
            r = np.full_like(r, r.max())
            u = np.minimum(1.0, r * k.tile_warps / SATURATING_WARPS)
        pro, step, epi = stage_times(k, r, u)
        pe, st = start_stage_times(k, n.tolist(), mode == "per-kind")
        assert np.array(pe).tobytes() == (pro + epi).tobytes()
        assert np.array(st).tobytes() == step.tobytes()


def test_a_small_batch_of_ragged_k_keeps_the_papers_fused_tiles():
    """Two batches of 8 GEMMs where the H100 ran the paper's fused tiles faster than the
    choice of the waves formula (bench/NOTES.md, session 7): in 1024/128 the fused
    launch of 64x64 tiles fills the device 1.3 times, in 256/512 the 16x16 tiles 1.3
    times, and in both the second wave holds the shortest tiles. Priced tile by tile,
    the default plan is the paper's family fused, and its predicted time is what
    cost_model.predict gives for the plan as built."""
    wide_short_k = np.array([[136, 300, 69], [681, 711, 127], [412, 729, 41], [863, 277, 109],
                             [639, 40, 38], [204, 629, 33], [499, 870, 91], [147, 332, 98]])
    ragged_k = np.array([[28, 48, 447], [44, 107, 481], [206, 29, 150], [45, 96, 54],
                         [247, 219, 504], [234, 82, 163], [85, 242, 243], [51, 88, 275]])
    # wide_short_k as the session-7 model priced it: since session 8 the fp32 kind factors
    # offer 64x64/8x4 on every GEMM, which won on a like batch (bench/NOTES.md, session 8)
    from portgemm.occupancy import ceilings
    row = dict(ceilings._load()["measured"][ARCH.name])
    row[ceilings.KIND_FACTORS] = {n: f for n, f in row.get(ceilings.KIND_FACTORS, {}).items()
                                  if not n.startswith("portgemm.")}
    for shapes in (wide_short_k, ragged_k):
        if shapes is wide_short_k:
            ceilings.use_in_memory(ARCH.name, row)
        try:
            p = planner.plan(shapes, arch=ARCH, use_cache=False)
        finally:
            ceilings.reload()
        assert p.mode == "fused" and p.kinds[0].family == "zhang2025"
        assert predict(p) == pytest.approx(p.predicted_ms, rel=1e-9)
        slots = ARCH.compute_units * max(o.active_workgroups for o in p.occupancy.values())
        assert slots < p.n_tiles <= 2 * slots
