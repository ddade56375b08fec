"""The device rule's search (all candidates priced at once, level_search.py) never
chooses a tiling the cost model predicts slower than the search it replaced chose: a
frozen copy of that search (per-GEMM candidate predictions, weighed one at a time,
stopping once the best reached the threshold) lives here, in the test, and both run
over many random batches, archs, dtypes, modes, TLP formulas, options and tile
families; the whole default plan (both launch structures, split-K) too, against the
default plan made with the frozen search, over a broad randomized set.

``python tests/test_planner_rule_speed.py --report`` prints the distribution of
new / old predicted time over that set."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import portgemm  # noqa: F401  (sets the default resources provider)
from portgemm import planner
from portgemm.occupancy import ceilings, get_arch
from portgemm.errors import ValidationError
from portgemm.planner import level_search, wavefront_tlp
from portgemm.planner.cost_model import BatchModel, batch_depth, kind_costs
from portgemm.planner.parallelism import (device_threads, kind_table, launch_capacity,
                                          resident_tlp, workgroup_tlp)
from portgemm.planner.tiling import Request, kind_counts, tile_grid
from portgemm.tiles import LI2019_128, LI2019_256, ZHANG2025, TileConfig

MAX_CAPS = 8
DEVICE_FACTOR = 1.0


# --- the frozen reference: the device rule's search as it was (the model it prices
# with is the package's, unchanged: imported) --------------------------------------------


def _area_keys(kinds):
    """(dense area rank per kind, index per kind): equal areas share a rank."""
    area = np.array([k.area for k in kinds], dtype=np.int64)
    return np.unique(area, return_inverse=True)[1].astype(np.int64), np.arange(len(kinds))


def frozen_device_rule(req, tlp_formula: str, kinds, table):
    """The device rule (module docstring). Returns (kidx, TLP, threshold, notes,
    predicted seconds)."""
    arch, shapes = req.arch, req.shapes
    n_k = len(kinds)
    # the measured kind factors at the batch's depth, as the rule reads them (session 8)
    kc = kind_costs(arch, kinds, table, req.dtype, depth=batch_depth(arch, req.shapes))
    per_kind = req.mode == "per-kind"
    gm, gn = tile_grid(shapes, kinds)
    counts = gm * gn
    rows = np.arange(req.batch)
    tm = np.array([k.tm for k in kinds], dtype=np.int64)
    tn = np.array([k.tn for k in kinds], dtype=np.int64)
    M, N = shapes[:, 0:1], shapes[:, 1:2]
    rank, idx = _area_keys(kinds)
    divides = (gm * tm == M) & (gn * tn == N)
    allowed = ((tm <= M) & (tn <= N)) | (rank == 0)      # fits, or among the smallest
    live = counts[:, 0] > 0

    given = req.options.get("tlp_threshold")
    factor = float(req.option("tlp_factor", DEVICE_FACTOR))
    device_cap = float(device_threads(arch))

    def gate(n_wg):
        """(TLP, threshold) of an assignment with n_wg tiles per kind."""
        if tlp_formula == "wavefront":
            t = resident_tlp(n_wg, table.tile_threads, table.active, arch.compute_units)
        else:
            t = workgroup_tlp(n_wg, table.threads)
        if given is not None:
            return t, float(given)
        return t, min(device_cap, factor * launch_capacity(n_wg, table.tile_threads, table.active,
                                                    arch.compute_units))

    notes = []
    # largest fitting (equal areas: the one that divides); then, for equal predicted
    # work, the one that divides, then the larger: a relative nudge far below any real gap
    start = np.where(allowed, rank * (2 * n_k) + divides * n_k + idx, -1).argmax(axis=1)
    if not req.batch or not live.any():
        return (start, *gate(kind_counts(counts, start, n_k)), notes, 0.0)
    model = BatchModel(shapes, counts, kc, per_kind)
    best = start
    best_s, best_n = model.predict(start)
    start_s = best_s
    T = model.tile_times(start)
    key = divides * (n_k * n_k) + rank * n_k + idx
    work = np.where(allowed, counts * T * (1 + 1e-10 * (1 - key / key.max())), np.inf)
    fastest = np.where(allowed, T, np.inf).argmin(axis=1)
    t_fast = float(T[rows, fastest][live].max())   # below this cap every GEMM is at its fastest
    t_long = float(T[rows, start][live].max())

    def capped(tau):
        """Least work among tiles no longer than tau (none: the fastest tile)."""
        sc = np.where(T <= tau, work, np.inf)
        trial = sc.argmin(axis=1)
        none = np.isinf(sc[rows, trial])
        trial[none] = fastest[none]
        return trial

    def shrink(kidx):
        """Every GEMM one step smaller (the next smaller allowed tile), where it can."""
        below = allowed & (rank < rank[kidx][:, None])
        j = np.where(below, rank * n_k + idx, -1).argmax(axis=1)
        return np.where(below[rows, j], j, kidx)

    def candidates():
        yield work.argmin(axis=1)                 # least predicted work per GEMM
        k = best
        for _ in range(n_k - 1):                  # Algorithm 1's rounds, judged by the model
            nk = shrink(k)
            if np.array_equal(nk, k):
                break
            k = nk
            yield k
        for j in range(1, MAX_CAPS + 1):          # the longest tiles shrink first
            tau = t_long / 2.0 ** j
            yield capped(tau)
            if tau < t_fast:
                break

    tried = kept = 0
    reached = False
    for trial in candidates():
        t, th = gate(best_n)
        if t >= th * (1 - 1e-9):
            reached = True
            break
        if np.array_equal(trial, best):
            continue
        tried += 1
        s, n = model.predict(trial)
        if s < best_s * (1 - 1e-9):
            best, best_s, best_n = trial, s, n
            kept += 1
    t, th = gate(best_n)
    notes.append(f"cost model: {tried} smaller tiling(s) weighed, {kept} kept; predicted "
                 f"{best_s * 1e3:.4g} ms (largest fitting tiles: {start_s * 1e3:.4g} ms)")
    if not reached and t < th * (1 - 1e-9):
        if (rank[best][live] == 0).all():
            notes.append("threshold not reached: every GEMM already at the smallest tile")
        else:
            notes.append("threshold not reached: cost model predicts no smaller tiles faster "
                         "(TLP below the threshold only signals that smaller tiles may help)")
    return best, t, th, notes, best_s




# --- the comparison -----------------------------------------------------------------

BIG = ZHANG2025 + (TileConfig("test-big", "128x128", 128, 128, 16, 256, 8, 8),)
FAMILIES = {"zhang2025": ZHANG2025, "li2019-128": LI2019_128, "li2019-256": LI2019_256,
            "zhang2025+128x128": BIG}


def random_batch(rng, batch):
    """Shapes of one of several distributions: the design grid's, tiny, long K, large,
    exact multiples, empty dimensions mixed in, and a few repeated shapes."""
    kind = rng.integers(0, 7)
    if kind == 0:
        top = int(rng.choice([128, 256, 1024]))
        s = np.stack([rng.integers(16, top + 1, batch), rng.integers(16, top + 1, batch),
                      rng.integers(16, 513, batch)], axis=1)
    elif kind == 1:
        s = rng.integers(1, 40, (batch, 3))
    elif kind == 2:
        s = np.stack([rng.integers(1, 200, batch), rng.integers(1, 200, batch),
                      rng.integers(1000, 8000, batch)], axis=1)
    elif kind == 3:
        s = rng.integers(500, 3000, (batch, 3))
    elif kind == 4:
        s = rng.integers(1, 40, (batch, 3)) * 16
    elif kind == 5:
        s = rng.integers(0, 300, (batch, 3))
        s[rng.random(batch) < 0.2, rng.integers(0, 3)] = 0
    else:
        base = rng.integers(1, 1100, (max(1, batch // 8), 3))
        s = base[rng.integers(0, base.shape[0], batch)]
    return s.astype(np.int64)


def both(shapes, arch, dtype, mode, formula, kinds, **options):
    a = get_arch(arch)
    s = planner._shapes(shapes)
    req = Request(s, dtype, a, mode, options)
    table = kind_table(a, kinds, mode, dtype)
    return (req, table, wavefront_tlp.device_rule(req, formula, kinds, table),
            frozen_device_rule(req, formula, kinds, table))


def assert_no_worse(req, table, formula, kinds, new, old):
    """The new choice: allowed tiles only, its prediction the model's own (BatchModel,
    one assignment), no slower than the frozen search's, and its TLP and threshold
    those of the choice."""
    kidx, t, th, notes, pred = new
    okidx, ot, oth, onotes, opred = old
    assert pred <= opred * (1 + 1e-9) + 1e-300
    s = req.shapes
    if s.shape[0] == 0:
        return
    gm, gn = tile_grid(s, kinds)
    counts = gm * gn
    kc = kind_costs(req.arch, kinds, table, req.dtype)
    live = counts[:, 0] > 0
    if live.any():
        want = BatchModel(s, counts, kc, req.mode == "per-kind").predict(kidx)[0]
        assert pred == pytest.approx(want, rel=1e-12)
    tm = np.array([k.tm for k in kinds])[kidx]
    tn = np.array([k.tn for k in kinds])[kidx]
    rank, _ = _area_keys(kinds)
    fits = (tm <= s[:, 0]) & (tn <= s[:, 1])
    assert (fits | (rank[kidx] == 0))[live].all()
    n_wg = kind_counts(counts, kidx, len(kinds))
    tlp = (resident_tlp(n_wg, table.tile_threads, table.active, req.arch.compute_units)
           if formula == "wavefront" else workgroup_tlp(n_wg, table.threads))
    assert t == pytest.approx(tlp, rel=1e-12)


def check(shapes, arch, dtype, mode, formula, kinds, **options):
    req, table, new, old = both(shapes, arch, dtype, mode, formula, kinds, **options)
    assert_no_worse(req, table, formula, kinds, new, old)
    return new, old


@pytest.mark.parametrize("arch", ["sm_90", "gfx90a", "sm_80", "gfx1100"])
@pytest.mark.parametrize("mode", ["fused", "per-kind"])
@pytest.mark.parametrize("formula", ["wavefront", "workgroup"])
def test_never_slower_than_the_frozen_search(arch, mode, formula):
    rng = np.random.default_rng(zlib.crc32(f"{arch} {mode} {formula}".encode()))
    for trial in range(40):
        batch = int(rng.choice([0, 1, 2, 3, 7, 30, 100, 400, 1024, 3000]))
        shapes = random_batch(rng, batch)
        dtype = ["float32", "float64"][trial % 2]
        opts = {}
        if trial % 5 == 1:
            opts["tlp_factor"] = float(rng.choice([0.01, 0.25, 0.5, 2.0]))
        elif trial % 5 == 2:
            opts["tlp_threshold"] = float(rng.choice([1.0, 2048.0, 1e5, 1e7]))
        check(shapes, arch, dtype, mode, formula, ZHANG2025, **opts)


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("mode", ["fused", "per-kind"])
def test_never_slower_for_other_families(family, mode):
    """Families with equal areas (li2019's tall and wide), one tk of 8, a fifth size:
    rounds over GEMM types that are not simply one kind down."""
    rng = np.random.default_rng(len(family) + len(mode))
    for trial in range(30):
        batch = int(rng.choice([1, 5, 64, 500, 2000]))
        shapes = random_batch(rng, batch)
        opts = {"tlp_threshold": 1e7} if trial % 4 == 3 else {}
        for arch in ("sm_90", "gfx90a"):
            check(shapes, arch, "float32", mode, "wavefront", FAMILIES[family], **opts)


@pytest.mark.parametrize("shapes", [
    np.tile([1008, 1008, 512], (64, 1)), np.tile([1000, 1000, 512], (64, 1)),
    np.tile([96, 96, 1024], (100, 1)), [[256, 256, 1024]], np.tile([256, 256, 256], (4096, 1)),
    [[0, 5, 5], [5, 0, 5]], [[7, 9, 0]], [[1, 1, 1]]])
@pytest.mark.parametrize("mode", ["fused", "per-kind"])
def test_never_slower_on_hand_picked_batches(shapes, mode):
    for formula in ("wavefront", "workgroup"):
        new, old = check(np.asarray(shapes), "sm_90", "float32", mode, formula, ZHANG2025)
        if np.asarray(shapes).shape[0] >= 4096:   # a full device: the start stands in both
            np.testing.assert_array_equal(new[0], old[0])


def test_mixed_tk_family_takes_the_per_kind_steps():
    """A family whose kinds differ in tk (K steps per kind, not per GEMM)."""
    fam = (TileConfig("test-tk", "a", 16, 16, 8, 128, 2, 1),
           TileConfig("test-tk", "b", 32, 32, 16, 128, 4, 2),
           TileConfig("test-tk", "c", 64, 64, 32, 256, 4, 4))
    a = get_arch("sm_90")
    kc = kind_costs(a, fam, kind_table(a, ZHANG2025[:3], "per-kind", "float32"), "float32")
    assert kc.n_kinds == 3
    rng = np.random.default_rng(5)
    for _ in range(20):
        shapes = random_batch(rng, int(rng.choice([1, 50, 700])))
        s = planner._shapes(shapes)
        for mode in ("fused", "per-kind"):
            req = Request(s, "float32", a, mode, {})
            # borrow zhang2025's launches (same block sizes) for the table
            table = kind_table(a, ZHANG2025[:2] + ZHANG2025[3:4], mode, "float32")
            assert_no_worse(req, table, "wavefront", fam,
                            wavefront_tlp.device_rule(req, "wavefront", fam, table),
                            frozen_device_rule(req, "wavefront", fam, table))


# --- the plan cache sees the ceilings -------------------------------------------------

def test_plan_cache_key_includes_the_ceilings_version(monkeypatch):
    planner.clear_cache()
    shapes = np.tile([300, 200, 100], (8, 1))
    p = planner.plan(shapes, arch="sm_90")
    assert planner.plan(shapes, arch="sm_90") is p
    v = ceilings.version()
    ceilings.reload()          # what the benchmark does after writing measured ceilings
    assert ceilings.version() != v
    q = planner.plan(shapes, arch="sm_90")
    assert q is not p and np.array_equal(q.tiles, p.tiles)   # same figures, replanned
    assert planner.plan(shapes, arch="sm_90") is q


@pytest.mark.parametrize("mode", ["fused", "per-kind"])
def test_whole_plan_is_the_rules_choice_in_longest_first_order(mode):
    """The plan's tiles (kinds and the longest-first GEMM order, per kind in per-kind
    mode) are those the rule's choice and the ordering give."""
    from portgemm.planner.tiling import build_tiles, gemm_lpt_order
    rng = np.random.default_rng(11)
    for _ in range(12):
        shapes = random_batch(rng, int(rng.choice([1, 40, 900])))
        p = planner.plan(shapes, arch="sm_90", mode=mode, use_cache=False)
        s = planner._shapes(shapes)
        req = Request(s, "float32", get_arch("sm_90"), mode, {})
        table = kind_table(req.arch, ZHANG2025, mode, "float32")
        kidx = wavefront_tlp.device_rule(req, "wavefront", ZHANG2025, table)[0]
        tm = np.array([k.tm for k in ZHANG2025], dtype=np.int64)
        tn = np.array([k.tn for k in ZHANG2025], dtype=np.int64)
        cost = (tm[kidx] * tn[kidx] * s[:, 2]).astype(np.float64)
        if mode == "per-kind":
            gm, gn = tile_grid(s, ZHANG2025)
            order = gemm_lpt_order(cost, kidx, cost * (gm * gn)[np.arange(len(s)), kidx])
        else:
            order = gemm_lpt_order(cost)
        np.testing.assert_array_equal(p.tiles, build_tiles(s, ZHANG2025, kidx, gemm_order=order))


@pytest.mark.parametrize("strategy", ["wavefront-tlp", "workgroup-tlp"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_default_plan_is_the_faster_structure_planned_alone(strategy, dtype):
    """The default plan (no mode, no family) builds only the structure it picks: the
    same tiles, order, notes and prediction as planning each structure on its own and
    keeping the one predicted faster (ties: the paper's kinds fused), whether or not
    the loser's bound let it go unplanned."""
    ours = wavefront_tlp.OUR_FAMILY[dtype]
    rng = np.random.default_rng(zlib.crc32(f"{strategy} {dtype}".encode()))
    for _ in range(12):
        shapes = random_batch(rng, int(rng.choice([1, 8, 64, 700])))
        p = planner.plan(shapes, dtype, arch="sm_90", strategy=strategy, use_cache=False)
        fused = planner.plan(shapes, dtype, arch="sm_90", strategy=strategy, mode="fused",
                             use_cache=False)
        alone = planner.plan(shapes, dtype, arch="sm_90", strategy=strategy, mode="per-kind",
                             family=ours, use_cache=False)
        want = alone if alone.predicted_ms < fused.predicted_ms else fused
        assert p.mode == want.mode and p.kinds == want.kinds
        assert p.predicted_ms == want.predicted_ms
        np.testing.assert_array_equal(p.tiles, want.tiles)
        assert p.notes[:-1] == want.notes and p.notes[-1].startswith("launch structure:")


def test_cap_bins_count_the_caps_a_tile_is_within():
    """level_search.cap_bins (exponents, no division) against its definition, with
    tiles exactly at a cap, just either side of one, and far beyond every cap."""
    rng = np.random.default_rng(3)
    t_long = float(rng.uniform(1e-4, 1e-2))
    at = t_long / 2.0 ** np.arange(0, 10)
    T = np.concatenate([at, np.nextafter(at, 0), np.nextafter(at, 1), [t_long * 4, 1e-300],
                        rng.uniform(1e-7, 2e-2, 200)])
    T = np.stack([np.sort(T), np.sort(T) * 1.5, np.sort(T) * 2])   # (kinds, batch)
    for n_caps in (1, 3, 8):
        want = sum((T <= t_long / 2.0 ** j).astype(np.int64) for j in range(1, n_caps + 1))
        np.testing.assert_array_equal(level_search.cap_bins(T, t_long, n_caps), want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_structure_bound_never_exceeds_a_prediction(dtype):
    """least_possible (cost_model.resource_bound) is a lower bound on the rule's
    predicted time, in both modes and for both families, so skipping a structure whose
    bound exceeds the other's prediction never changes the default plan."""
    rng = np.random.default_rng(zlib.crc32(dtype.encode()))
    for trial in range(60):
        s = planner._shapes(random_batch(rng, int(rng.choice([1, 3, 30, 300, 2000]))))
        arch = get_arch(["sm_90", "sm_80", "gfx90a"][trial % 3])
        for mode, fam in (("fused", None), ("per-kind", wavefront_tlp.OUR_FAMILY[dtype]),
                          ("per-kind", None)):
            req = Request(s, dtype, arch, mode, {} if fam is None else {"family": fam})
            kinds = wavefront_tlp._kinds(req)
            tabs = wavefront_tlp.BatchTables(s, kinds)
            c = wavefront_tlp._choose(req, "wavefront", kinds, tabs)
            assert wavefront_tlp.least_possible(req, kinds, tabs) <= c.predicted * (1 + 1e-9)


# --- the whole default plan over a broad randomized set ----------------------------

def broad_batch(rng):
    """(shapes, dtype, arch): uniform, log-normal, bimodal or MoE-like (a few expert
    shapes, tokens per expert varying) sizes; batch 1..8192 (log-uniform); MaxMN 16 to
    4096; K up to 8192; fp32 or fp64; sm_80, sm_90 or gfx90a."""
    batch = int(np.exp(rng.uniform(0, np.log(8192))))
    top = int(rng.choice([16, 64, 256, 1024, 4096]))
    kmax = int(rng.choice([64, 512, 8192]))
    while batch * top * top > 2**33:   # keep the plans under tiling.MAX_TILES
        batch = max(1, batch // 2)
    dist = int(rng.integers(0, 4))
    if dist == 0:
        s = np.stack([rng.integers(1, top + 1, batch), rng.integers(1, top + 1, batch),
                      rng.integers(1, kmax + 1, batch)], axis=1)
    elif dist == 1:
        s = np.exp(rng.normal(np.log(top) - 1.0, 0.8, (batch, 3)))
        s = np.clip(np.round(s), 1, [top, top, kmax])
    elif dist == 2:
        small = rng.random(batch) < 0.7
        s = np.where(small[:, None], rng.integers(1, max(2, top // 8) + 1, (batch, 3)),
                     rng.integers(max(1, top // 2), top + 1, (batch, 3)))
        s[:, 2] = np.minimum(s[:, 2], kmax)
    else:
        experts = rng.integers(1, 65)
        nk = np.stack([rng.integers(16, top + 1, experts), rng.integers(16, kmax + 1, experts)],
                      axis=1)
        e = rng.integers(0, experts, batch)
        s = np.stack([rng.integers(0, top + 1, batch), nk[e, 0], nk[e, 1]], axis=1)
    dtype = ["float32", "float64"][int(rng.integers(0, 2))]
    arch = ["sm_80", "sm_90", "gfx90a"][int(rng.integers(0, 3))]
    return s.astype(np.int64), dtype, arch


def _frozen_rule(req, tlp_formula, kinds, table, tabs=None):
    return frozen_device_rule(req, tlp_formula, kinds, table)


def default_ratios(n_batches: int, seed: int = 20261124, modes=(None, "fused", "per-kind")):
    """new / old predicted ms of plan() over ``n_batches`` broad batches, per mode
    (None: the default plan, both structures and split-K)."""
    import pytest as _pt
    out = []
    rng = np.random.default_rng(seed)
    mp = _pt.MonkeyPatch()
    try:
        for i in range(n_batches):
            s, dtype, arch = broad_batch(rng)
            mode = modes[i % len(modes)]
            results = []
            for frozen in (False, True):
                if frozen:
                    mp.setattr(wavefront_tlp, "device_rule", _frozen_rule)
                try:
                    results.append(planner.plan(s, dtype, arch=arch, mode=mode,
                                                use_cache=False).predicted_ms)
                except ValidationError:
                    results.append(None)
                finally:
                    mp.undo()
            out.append((results[0], results[1], s.shape[0], dtype, arch, mode))
    finally:
        mp.undo()
    return out


def test_default_plans_never_slower_by_the_model_over_a_broad_set():
    for new, old, batch, dtype, arch, mode in default_ratios(320):
        if old is None or new is None:
            assert old is None and new is None   # refused (too many tiles) by both
            continue
        assert new <= old * 1.005 + 1e-12, (new, old, batch, dtype, arch, mode)


if __name__ == "__main__" and "--report" in __import__("sys").argv:
    rows = [r for r in default_ratios(int(__import__("sys").argv[-1])
                                      if __import__("sys").argv[-1].isdigit() else 320)
            if r[0] is not None and r[1]]
    ratio = np.array([new / old for new, old, *_ in rows])
    print(f"{len(ratio)} batches: new / old predicted time: geometric mean "
          f"{np.exp(np.log(ratio).mean()):.4f}, max {ratio.max():.6f}, min {ratio.min():.4f}")
    print(f"  faster by > 0.5 %: {(ratio < 0.995).mean():.1%}, equal (within 1e-9): "
          f"{(abs(ratio - 1) <= 1e-9).mean():.1%}, slower by > 1e-9: {(ratio > 1 + 1e-9).mean():.1%}")
    print("  quantiles (5, 25, 50, 75, 95 %): "
          + ", ".join(f"{q:.4f}" for q in np.quantile(ratio, [0.05, 0.25, 0.5, 0.75, 0.95])))


# --- the ladders against their definitions, per GEMM ---------------------------------

def _direct_aggregates(kidx, counts, steps_live, n_k):
    """(tiles, tiles x steps, most steps) per kind of one assignment, per GEMM."""
    cols = np.arange(kidx.shape[0])
    c = counts[kidx, cols]
    st = steps_live[kidx, cols] if steps_live.ndim == 2 else steps_live
    n = np.bincount(kidx, weights=c, minlength=n_k)
    S = np.bincount(kidx, weights=c * st, minlength=n_k)
    Mx = np.zeros(n_k)
    np.maximum.at(Mx, kidx, st)
    return n, S, Mx


@pytest.mark.parametrize("seed", range(20))
def test_caps_ladder_is_least_work_within_each_cap(seed):
    """cap_events + cap_aggregates: level 0 the least work among the allowed tiles,
    level j (1..n_caps) the least work among those no longer than t_long / 2**j, the
    fastest where none is, and every GEMM at its fastest past the last cap; each
    level's per-kind aggregates those of that assignment."""
    rng = np.random.default_rng(seed)
    n_k, B = int(rng.integers(2, 8)), int(rng.integers(1, 300))
    T = rng.uniform(1e-6, 1e-3, (n_k, B))
    tie = rng.random(B) < 0.2                   # some GEMMs with equal tile times
    T[:, tie] = T[0, tie]
    work = rng.uniform(1.0, 2.0, (n_k, B)) * (1 + 1e-10 * np.arange(n_k)[:, None])
    allowed = rng.random((n_k, B)) < 0.7
    allowed[0] = True
    counts = rng.integers(0, 50, (n_k, B)).astype(np.float64)
    steps_live = rng.integers(0, 40, B).astype(np.float64)
    cs = counts * steps_live
    work = np.where(allowed, work, np.inf)
    T_allowed = np.where(allowed, T, np.inf)
    fk = {"n": n_k, "revidx_c": (n_k - np.arange(n_k))[:, None].astype(np.int8)}
    fastest = level_search.first_kind(T_allowed == T_allowed.min(axis=0), fk)
    t_long = float(T.max())
    n_caps = int(rng.integers(1, 9))
    n_levels = max(n_caps + 1, n_k)
    lo, hi = level_search.cap_events(work, T, allowed, np.arange(n_k)[:, None] == fastest,
                                     t_long, n_caps, n_levels)
    n, S, Mx = level_search.cap_aggregates(lo, hi, counts, cs, steps_live, n_levels)
    cols = np.arange(B)
    for j in range(n_levels):
        within = (allowed & (T <= t_long / 2.0 ** j) if j <= n_caps else
                  np.zeros_like(allowed)) if j else allowed
        pick = np.where(within, work, np.inf).argmin(axis=0)
        want = np.where(within.any(axis=0), pick, fastest)
        np.testing.assert_array_equal(
            level_search.level_kinds(lo, hi, j, fk, fastest, np.ones(B, bool)), want)
        for got, exp in zip((n[j], S[j], Mx[j]), _direct_aggregates(want, counts, steps_live, n_k)):
            np.testing.assert_allclose(got, exp, rtol=0, atol=0)
        assert (counts[want, cols] >= 0).all()


@pytest.mark.parametrize("family", ["zhang2025", "li2019-128", "zhang2025+128x128", "portgemm"])
def test_round_ladders_shrink_every_gemm_one_area_at_a_time(family):
    """typed_rounds: round j from a base takes every GEMM to the largest allowed kind
    of the next smaller area, j times (staying at the smallest), per GEMM as in the
    frozen search's shrink; its aggregates are those of that assignment."""
    from portgemm.tiles import FAMILIES as ALL
    kinds = FAMILIES.get(family) or tuple(sorted(ALL[family], key=lambda k: k.area))
    rng = np.random.default_rng(len(family))
    s = planner._shapes(random_batch(rng, 500))
    tabs = wavefront_tlp.BatchTables(s, kinds)
    fk, n_k = tabs.fk, len(kinds)
    rank, idx = _area_keys(kinds)
    least = np.where(tabs.allowed, rng.random((n_k, len(s))), np.inf).argmin(axis=0)
    cs = tabs.counts * tabs.steps
    n_levels = n_k + 2
    (n, S, Mx), kinds_of = level_search.typed_rounds(
        fk, (tabs.M, tabs.N), tabs.start, least, tabs.counts, cs, tabs.steps_live, n_levels)
    rows = np.arange(len(s))
    allowed = tabs.allowed.T
    for ladder, base in enumerate((tabs.start, least)):
        k = base
        for j in range(n_levels):
            row = ladder * n_levels + j
            np.testing.assert_array_equal(kinds_of(row), k)
            want = _direct_aggregates(k, tabs.counts, tabs.steps_live, n_k)
            for got, exp in zip((n[row], S[row], Mx[row]), want):
                np.testing.assert_allclose(got, exp, rtol=0, atol=0)
            below = allowed & (rank < rank[k][:, None])
            nxt = np.where(below, rank * n_k + idx, -1).argmax(axis=1)
            k = np.where(below[rows, nxt], nxt, k)
