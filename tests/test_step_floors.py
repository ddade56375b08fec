"""Measured step floors (ceilings.json ``kind_step_floors``): one K step of a kind's tile
alone on its compute unit, on the 16-byte and the scalar load path. The data and its
reader and writer, the cost model that prices a lone tile's step no shorter than its
floor (less of it as tiles share the CU), the device rule that then stops running about
one large tile per SM, and the command that measures them (on the numpy backend with a
fake timer).

Apart from the first test (the committed H100 figures), the floors here are set in
memory (ceilings.use_in_memory): the test's own figures, not measurements, so that what
is asserted does not move when the floors are measured again."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

import portgemm
from portgemm.occupancy import ceilings, get_arch
from portgemm.occupancy.ceilings import ceilings_for, kind_step_floors
from portgemm.planner.cost_model import (kind_costs, lone_weight, predict, stage_times,
                                         start_stage_times, step_floor, tiles_sharing)
from portgemm.planner.parallelism import kind_table
from portgemm.planner.tiling import Request
from portgemm.planner.wavefront_tlp import BatchTables, device_rule, least_possible
from portgemm.tiles import FAMILIES

H100 = get_arch("sm_90")
F16 = FAMILIES["portgemm-f16"]
# a lone tile's K step (aligned, unaligned), seconds: the larger the tile, the longer
LONE = {"32x32/4x4": (1.2e-6, 2.0e-6), "32x32/w16x16": (0.6e-6, 1.0e-6),
        "64x64/w32x32": (0.8e-6, 1.4e-6), "128x64/w64x32": (1.2e-6, 2.0e-6),
        "128x128/w64x32": (1.2e-6, 2.0e-6),
        # the wgmma kinds weighed beside them (and the staged plans' GEMMs)
        "64x128/g64x128": (1.0e-6, 2.0e-6), "128x128/g64x128": (1.2e-6, 2.4e-6)}


@pytest.fixture
def restore_ceilings():
    yield
    ceilings.reload()


def with_floors(floors: dict) -> None:
    """Plan with the H100's measured ceilings, their floors replaced by ``floors``
    ({kind name: (a, u)}; empty: none), in this process."""
    ceilings.reload()
    row = dict(ceilings._load()["measured"]["sm_90"])
    row[ceilings.KIND_STEP_FLOORS] = {n: list(v) for n, v in floors.items()}
    ceilings.use_in_memory("sm_90", row)


def f16_floors(scale: float = 1.0, families=("portgemm-f16", "wgmma-f16")) -> dict:
    return {k.name: tuple(scale * x for x in LONE[k.kind]) for f in families
            for k in FAMILIES[f]}


def batch(seed, b, lo, hi, k_hi):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(lo, hi, b), rng.integers(lo, hi, b),
                     rng.integers(16, k_hi, b)], 1).astype(np.int64)


# --- the data ------------------------------------------------------------------------

def test_the_h100_has_floors_for_the_16_bit_mma_families_only():
    """Measured for portgemm-f16 / -bf16 (session 17); the wgmma kinds' floors were
    measured too but priced staged batches onto the wrong wgmma kind, so aligned
    batches, whose kinds include them, are floored not at all. Other archs: none."""
    c = ceilings_for(H100)
    for fam in ("portgemm-f16", "portgemm-bf16"):
        a, u = c.step_floors_of(FAMILIES[fam])
        assert (a > 0).all() and (u > 0).all()
        mma = [k.engine == "mma" for k in FAMILIES[fam]]
        assert (u[mma] > a[mma]).all()   # the scalar path's chain is the longer
    for fam in ("wgmma-f16", "wgmma-bf16"):
        assert c.step_floors_of(FAMILIES[fam]) is None
        assert c.step_floors_of(FAMILIES[fam] + F16) is None
    for arch in ("sm_80", "gfx90a"):
        assert ceilings_for(get_arch(arch)).step_floors_of(F16) is None


def test_a_family_is_floored_whole_or_not_at_all(restore_ceilings):
    floors = f16_floors()
    with_floors({n: v for n, v in floors.items() if "128x128/w" not in n})
    assert ceilings_for(H100).step_floors_of(F16) is None
    assert ceilings_for(H100).step_floors_of(F16[:2]) is not None
    with_floors(floors)
    a, u = ceilings_for(H100).step_floors_of(F16)
    assert a.tolist() == [LONE[k.kind][0] for k in F16]
    assert u.tolist() == [LONE[k.kind][1] for k in F16]


@pytest.mark.parametrize("bad", [{"nope": [1e-6, 1e-6]}, {F16[0].name: [1e-6]},
                                 {F16[0].name: [0.0, 1e-6]}, {F16[0].name: [1e-6, True]},
                                 {F16[0].name: 1e-6}, [1e-6]])
def test_the_reader_refuses_bad_floors(bad):
    with pytest.raises(ValueError):
        kind_step_floors(bad, "sm_90")


def test_the_writer_replaces_one_familys_floors_and_keeps_the_rest(tmp_path):
    path = tmp_path / "ceilings.json"
    shutil.copy(ceilings.PATH, path)
    try:
        wg = FAMILIES["wgmma-f16"][0].name
        ceilings.write_kind_step_floors("sm_90", {wg: (1e-6, 2e-6)}, "first", path)
        ceilings.write_kind_step_floors("sm_90", f16_floors(families=("portgemm-f16",)),
                                        "second", path)
        row = json.loads(path.read_text())["measured"]["sm_90"]
        floors = row[ceilings.KIND_STEP_FLOORS]
        assert floors[wg] == [1e-6, 2e-6]
        assert {n: f for n, f in floors.items() if n.startswith("portgemm-f16.")} == \
            {k.name: list(LONE[k.kind]) for k in F16}
        assert len([n for n in floors if n.startswith("portgemm-bf16.")]) == len(F16)
        sources = row[ceilings.KIND_STEP_FLOORS + "_source"]
        assert sources["portgemm-f16"] == "second" and sources["wgmma-f16"] == "first"
        assert "bfloat16" in sources["portgemm-bf16"]   # the other family's, kept
        assert row[ceilings.KIND_FACTORS]   # the factors stay
        with pytest.raises(ValueError, match="measure them first"):
            ceilings.write_kind_step_floors("gfx90a", {wg: (1e-6, 2e-6)}, "t", path)
    finally:
        ceilings.reload()


# --- the cost model ------------------------------------------------------------------

def test_the_floor_is_the_paths_weighted_by_the_share(restore_ceilings):
    with_floors(f16_floors())
    share = tuple(i / 8 for i in range(len(F16)))
    got = step_floor(ceilings_for(H100), F16, share)
    want = [f * LONE[k.kind][0] + (1 - f) * LONE[k.kind][1] for f, k in zip(share, F16)]
    assert got.tolist() == pytest.approx(want, rel=1e-15)
    table = kind_table(H100, F16, "per-kind", "float16")
    assert kind_costs(H100, F16, table, "float16", share=share).step_floor.tolist() == \
        got.tolist()
    # without a share (the ladders' costs) the model's own step
    assert kind_costs(H100, F16, table, "float16").step_floor is None


def test_a_lone_tiles_step_is_priced_at_least_its_floor(restore_ceilings):
    """Alone on its CU a tile's step is at least the floor; the floor fades out as tiles
    share the CU, linearly in its warps (lone_weight), and is gone from 16 warps on."""
    table = kind_table(H100, F16, "per-kind", "float16")
    share = (0.0,) * len(F16)
    with_floors({})
    plain = kind_costs(H100, F16, table, "float16", share=share)
    assert plain.step_floor is None
    with_floors(f16_floors())
    kc = kind_costs(H100, F16, table, "float16", share=share)
    floor = np.array([LONE[k.kind][1] for k in F16])
    for tiles in (1.0, 132.0, 198.0, 264.0, 1e4):
        r, u = tiles_sharing(kc, np.full(len(F16), tiles), kc.active, kc.tile_warps)
        w = np.clip((16 - r * kc.tile_warps) / (16 - kc.tile_warps), 0.0, 1.0)
        assert lone_weight(r, u) == pytest.approx(w, abs=1e-12)
        if tiles <= 132:
            assert w.tolist() == [1.0] * len(F16)
        assert (w[r * kc.tile_warps >= 16] == 0.0).all()
        pro0, step0, epi0 = stage_times(plain, r, u)
        pro, step, epi = stage_times(kc, r, u)
        assert step.tolist() == np.maximum(step0, lone_weight(r, u) * floor).tolist()
        assert pro.tolist() == pro0.tolist() and epi.tolist() == epi0.tolist()
    # the rule's Python-float path gives the same numbers
    n = [132, 0, 170, 0, 5]
    for per_kind in (True, False):
        pe, step = start_stage_times(kc, n, per_kind)
        r, u = tiles_sharing(kc, np.array(n, float), kc.active, kc.tile_warps)
        if per_kind:
            r = np.full(len(F16), max(min(max(x / kc.cus, 1.0), a)
                                      for x, a in zip(n, kc.active)))
            u = np.minimum(1.0, r * kc.tile_warps / 16)
        else:
            total, warps = sum(n), float(np.dot(n, kc.tile_warps)) / sum(n)
            r = np.full(len(F16), min(max(total / kc.cus, 1.0), kc.active_max))
            u = np.minimum(1.0, r * warps / 16)
        pro, st, epi = stage_times(kc, r, u)
        assert st.tolist() == step and (pro + epi).tolist() == pe


@pytest.mark.parametrize("seed", range(3))
def test_the_bound_stays_below_the_rules_price_with_floors(restore_ceilings, seed):
    with_floors(f16_floors())
    s = batch(seed, 200, 1, 400, 600)
    req = Request(s, "float16", H100, "per-kind", {"family": "portgemm-f16"})
    table = kind_table(H100, F16, "per-kind", "float16")
    lb = least_possible(req, F16, BatchTables(s, F16))
    *_, predicted = device_rule(req, "wavefront", F16, table, BatchTables(s, F16))
    assert 0 < lb <= predicted * (1 + 1e-12)


def test_one_large_tile_per_sm_gives_way_to_smaller_ones(restore_ceilings):
    """8 GEMMs up to 512 x 512, K up to 512: the model's throughput figures put them on
    about one 64x64 tile per SM; with lone steps dearer the larger the tile, several
    32x32 tiles an SM overlap their chains and the rule takes them."""
    s = batch(0, 8, 16, 513, 513)
    with_floors({})
    before = portgemm.plan(s, "float16", arch="sm_90", use_cache=False)
    assert before.tiles_per_kind() == {"64x64/w32x32": before.n_tiles}
    assert before.n_tiles < 2 * H100.compute_units
    with_floors(f16_floors())
    after = portgemm.plan(s, "float16", arch="sm_90", use_cache=False)
    assert after.tiles_per_kind() == {"32x32/w16x16": after.n_tiles}
    assert after.n_tiles > 2 * H100.compute_units
    # the same model, floors and all, prices the old plan dearer (the new one may stage
    # its operands to aligned rows first: predicted_ms is then the copy's and the GEMMs')
    assert predict(before) > after.predicted_ms


def test_predicted_seconds_of_the_sweep_keep_the_floor(restore_ceilings):
    """tuning.model.predicted_seconds (the kind-factor fit's model) floors a step too, at
    the sizes' own share, so factors fitted after the floors explain what they leave."""
    from portgemm.tuning.model import predicted_seconds
    k = F16[2]   # 64x64/w32x32
    aligned = np.tile([[k.tm, k.tn, 40 * k.tk]], (132, 1))
    odd = aligned - 1
    with_floors({})
    t0 = [predicted_seconds(x, k, "float16", H100) for x in (aligned, odd)]
    with_floors(f16_floors(scale=4.0))
    t1 = [predicted_seconds(x, k, "float16", H100) for x in (aligned, odd)]
    assert t1[0] >= 40 * 4 * LONE[k.kind][0] > t0[0]
    assert t1[1] >= 40 * 4 * LONE[k.kind][1] > t0[1]


# --- the command ---------------------------------------------------------------------

def fake_timer(floors, launch=5e-6):
    """Milliseconds of a lone-tile batch: a launch plus K steps at the kind's floor on
    its path (odd K: the unaligned one)."""
    def timer(dev, bound):
        p = bound.plan
        k = p.kinds[0]
        kk = p.shapes[0, 2]
        return 1e3 * (launch + math.ceil(kk / k.tk) * floors[k.name][int(kk % 2 == 1)])
    return timer


@pytest.fixture
def small_batches(monkeypatch):
    """One GEMM a batch: the numpy backend computes it."""
    from portgemm.tuning import step_floors as cmd
    full = cmd.lone_sizes
    monkeypatch.setattr(cmd, "lone_sizes", lambda kind, cus: [
        type(s)(s.m, s.n, s.k, 1) for s in full(kind, cus)])
    return cmd


def test_lone_sizes_are_at_most_one_tile_per_cu_on_each_path():
    from portgemm.planner.alignment import aligned_rows
    from portgemm.planner.tiling import tile_counts
    from portgemm.tuning.step_floors import STEPS, lone_sizes
    k = F16[2]
    sizes = lone_sizes(k, 132)
    assert [(s.m, s.n, s.k, s.batch) for s in sizes] == [
        (256, 256, STEPS[0] * k.tk, 8), (256, 256, STEPS[1] * k.tk, 8),
        (256, 255, STEPS[0] * k.tk - 1, 8), (256, 255, STEPS[1] * k.tk - 1, 8)]
    for s in sizes:
        assert tile_counts(s.shapes(), (k,)).sum() <= 132
    assert aligned_rows(sizes[0].shapes(), "float16").all()
    assert not aligned_rows(sizes[2].shapes(), "float16").any()


def test_the_command_measures_and_writes_floors(dry_write, small_batches, capsys):
    cmd = small_batches
    want = f16_floors(families=("portgemm-f16",))
    assert dry_write(cmd, ["--dtype", "float16"], fake_timer(want)) == 0
    path, out = dry_write.ceilings, dry_write.out
    assert f"wrote {len(F16)} kind step floors" in capsys.readouterr().out
    got = json.loads(path.read_text())["measured"]["sm_90"][ceilings.KIND_STEP_FLOORS]
    assert {n: f for n, f in got.items() if n.startswith("portgemm-f16.")} == {
        n: [pytest.approx(a, rel=1e-3), pytest.approx(u, rel=1e-3)] for n, (a, u) in want.items()}
    table = json.loads(out.read_text())
    assert table["family"] == "portgemm-f16" and table["kinds"].keys() == want.keys()
    assert all(r["model_step_s"] > 0 and r["excluded"] is None for r in table["kinds"].values())
    # host timings never go into the package's file
    args = cmd.parser().parse_args(["--backend", "numpy", "--dtype", "float16", "--write"])
    assert cmd.run(args, timer=fake_timer(want)) == 2


def test_a_kind_without_both_floors_writes_nothing(dry_write, small_batches, capsys):
    cmd = small_batches
    want = f16_floors(families=("portgemm-f16",))
    flat = dict(want, **{F16[3].name: (want[F16[3].name][0], 0.0)})   # no growth with K
    assert dry_write(cmd, ["--dtype", "float16"], fake_timer(flat)) == 1
    path = dry_write.ceilings
    captured = capsys.readouterr()
    assert "no growth with K" in captured.out and "nothing written" in captured.err
    assert json.loads(path.read_text()) == json.loads(ceilings.PATH.read_text())
