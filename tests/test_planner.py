"""Planner tests: the coverage property for every strategy and mode, Algorithm 1 and
li2019's tiling engine on hand-checked batches, block constraints, the cache, errors."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import portgemm.planner as planner
from portgemm.errors import DtypeError, UnknownArch, UnknownStrategy, ValidationError
from portgemm.occupancy import get_arch
from portgemm.plan import TILE_DTYPE
from portgemm.planner import parallelism
from portgemm.planner.coordinated import binary_batching, threshold_batching
from portgemm.planner.tiling import build_tiles
from portgemm.planner.wavefront_tlp import initial_kinds
from portgemm.tiles import LI2019_256, ZHANG2025

ZK = [k.kind for k in ZHANG2025]
STRATEGY_MODES = [("wavefront-tlp", "fused"), ("wavefront-tlp", "per-kind"),
                  ("workgroup-tlp", "fused"), ("workgroup-tlp", "per-kind"),
                  ("coordinated", "fused"), ("coordinated", "per-kind"),
                  ("magma", "grid-z")]


def kinds_of(p):
    """Kind name of each GEMM's tiles (None for a GEMM without tiles)."""
    out = [None] * p.batch
    for t in p.tiles:
        name = p.kinds[t["kind"]].kind
        assert out[t["gemm"]] in (None, name)
        out[t["gemm"]] = name
    return out


def check_plan(p, shapes):
    """Every invariant a backend relies on."""
    shapes = np.asarray(shapes, dtype=np.int64).reshape(-1, 3)
    tiles, ptr = p.tiles, p.block_ptr
    assert tiles.dtype == TILE_DTYPE
    assert ptr.dtype == np.int32 and ptr.shape == (p.n_blocks + 1,)
    assert ptr[0] == 0 and ptr[-1] == p.n_tiles
    assert (np.diff(ptr) > 0).all(), "no empty blocks"
    assert np.array_equal(p.shapes, shapes)
    if p.n_tiles == 0:
        assert not ((shapes[:, 0] > 0) & (shapes[:, 1] > 0)).any()
        return
    g = tiles["gemm"]
    M, N = shapes[g, 0], shapes[g, 1]
    assert ((tiles["m0"] >= 0) & (tiles["m0"] < M)).all(), "tile starts outside C (rows)"
    assert ((tiles["n0"] >= 0) & (tiles["n0"] < N)).all(), "tile starts outside C (cols)"
    ktm = np.array([k.tm for k in p.kinds])
    ktn = np.array([k.tn for k in p.kinds])
    kth = np.array([k.threads for k in p.kinds])
    assert (tiles["tm"] == ktm[tiles["kind"]]).all() and (tiles["tn"] == ktn[tiles["kind"]]).all()
    # coverage: every element of every C in exactly one tile (2-D difference arrays)
    for i, (m, n, _) in enumerate(shapes):
        sel = tiles[g == i]
        if m == 0 or n == 0:
            assert sel.size == 0, f"GEMM {i} is empty but has tiles"
            continue
        d = np.zeros((m + 1, n + 1), dtype=np.int64)
        m1 = np.minimum(sel["m0"] + sel["tm"], m)
        n1 = np.minimum(sel["n0"] + sel["tn"], n)
        np.add.at(d, (sel["m0"], sel["n0"]), 1)
        np.add.at(d, (sel["m0"], n1), -1)
        np.add.at(d, (m1, sel["n0"]), -1)
        np.add.at(d, (m1, n1), 1)
        cover = d.cumsum(0).cumsum(1)[:m, :n]
        assert (cover == 1).all(), f"GEMM {i}: coverage {cover.min()}..{cover.max()}"
    # one block = one thread count; per-kind: one kind
    starts = ptr[:-1]
    th = kth[tiles["kind"]]
    assert (np.minimum.reduceat(th, starts) == np.maximum.reduceat(th, starts)).all()
    bkind = tiles["kind"][starts]
    if p.mode in ("per-kind", "grid-z"):
        kd = tiles["kind"]
        assert (np.minimum.reduceat(kd, starts) == np.maximum.reduceat(kd, starts)).all()
        runs = bkind[np.r_[True, bkind[1:] != bkind[:-1]]]
        assert len(runs) == len(set(runs.tolist())), "a kind's blocks are contiguous"
    # longest blocks first (within a kind's launch in per-kind mode); grid-z: launch order
    if p.mode != "grid-z":
        cost = tiles["tm"].astype(np.float64) * tiles["tn"] * shapes[g, 2]
        bcost = np.add.reduceat(cost, starts)
        same = bkind[1:] == bkind[:-1] if p.mode == "per-kind" else np.ones(len(bcost) - 1, bool)
        assert (bcost[1:][same] <= bcost[:-1][same]).all(), "blocks not in LPT order"
    else:
        assert p.n_blocks == p.n_tiles
        gx, gy, gz = p.grid
        k = p.kinds[0]
        assert gz == p.batch
        assert gx == -(-shapes[:, 0].max() // k.tm) and gy == -(-shapes[:, 1].max() // k.tn)
    for k in set(bkind.tolist()):
        assert p.kinds[k].name in p.occupancy


dims = st.one_of(st.sampled_from([0, 1, 16, 17, 48, 64, 256]), st.integers(0, 300))
batches = st.lists(st.tuples(dims, dims, dims), min_size=0, max_size=40)


@pytest.mark.parametrize("strategy,mode", STRATEGY_MODES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=batches, arch=st.sampled_from(["sm_90", "gfx90a"]),
       small_threshold=st.booleans())
def test_coverage_property(strategy, mode, shapes, arch, small_threshold):
    # a tiny threshold exercises the "threshold reached" paths and deep batching
    opts = {"tlp_threshold": 2048.0} if small_threshold else {}
    p = planner.plan(shapes, arch=arch, strategy=strategy, mode=mode, **opts)
    assert p.strategy == strategy and p.mode == mode
    check_plan(p, shapes)


@pytest.mark.parametrize("batching", ["threshold", "binary", "none"])
@pytest.mark.parametrize("mode", ["fused", "per-kind"])
@settings(max_examples=25, deadline=None)
@given(shapes=batches, theta=st.sampled_from([1, 64, 256, 1000]))
def test_coverage_coordinated_batching(batching, mode, shapes, theta):
    p = planner.plan(shapes, strategy="coordinated", mode=mode, batching=batching, theta=theta,
                     tlp_threshold=0.0)
    check_plan(p, shapes)


# --- Algorithm 1 (zhang2025) as the paper reads it (tlp_model="paper"), hand-checked --

@pytest.mark.parametrize("m,n,expected", [
    (48, 48, "small"),            # 32 and 64 do not divide 48
    (48, 64, "small-medium"),     # 16 | 48, 32 | 64; 32 does not divide 48
    (64, 48, "small"),            # tn 32 and 64 do not divide 48
    (96, 96, "medium"),           # 32 | 96, 64 does not
    (128, 32, "medium"),          # 32x64 and 64x64 need N >= 64
    (64, 128, "large"),
    (40, 40, "medium"),           # nothing divides 40: largest that fits
    (8, 8, "small"),              # nothing fits: smallest
    (16, 1000, "small-medium"),   # 16 does not divide 1000: largest that fits
])
def test_initial_scheme_eq10(m, n, expected):
    k = initial_kinds(np.array([[m, n, 64]]), ZHANG2025)
    assert ZK[k[0]] == expected


def test_one_small_gemm_shrinks_to_small():
    # far from filling 132 SMs: shrink large -> ... -> small, then nothing left to shrink
    p = planner.plan([[64, 64, 64]], arch="sm_90", tlp_model="paper")
    assert kinds_of(p) == ["small"] and p.n_tiles == 16
    assert p.tlp < p.tlp_threshold
    assert any("smallest tile" in s for s in p.notes)


def test_many_gemms_stay_large():
    p = planner.plan(np.tile([64, 64, 64], (2000, 1)), arch="sm_90", mode="fused")
    assert set(kinds_of(p)) == {"large"}
    assert p.n_tiles == 2000


def test_48_starts_and_stays_small_in_a_full_batch():
    p = planner.plan(np.tile([48, 48, 32], (3000, 1)), arch="gfx90a", tlp_model="paper")
    assert set(kinds_of(p)) == {"small"}


def test_workgroup_tlp_hand_computed():
    # 4 GEMMs 256x256, fused (every kind launches 256 threads), Eq. 3:
    # large 64 wg -> 16384, medium-large 128 -> 32768, medium 256 -> 65536 >= 60000: stop
    shapes = np.tile([256, 256, 32], (4, 1))
    p = planner.plan(shapes, strategy="workgroup-tlp", tlp_threshold=60000, tlp_model="paper")
    assert set(kinds_of(p)) == {"medium"} and p.tlp == 65536
    # per-kind: medium runs 128 threads -> 32768; small-medium 65536 >= 60000
    p = planner.plan(shapes, strategy="workgroup-tlp", mode="per-kind", tlp_threshold=60000,
                     tlp_model="paper")
    assert set(kinds_of(p)) == {"small-medium"} and p.tlp == 65536
    # threshold already met by the initial scheme: no shrinking
    p = planner.plan(shapes, strategy="workgroup-tlp", tlp_threshold=16384, tlp_model="paper")
    assert set(kinds_of(p)) == {"large"}


def test_shrinks_every_gemm_one_step_per_round():
    # GEMM 0 starts large, GEMM 1 medium (96x96); Eq. 3 fused, 256 threads per tile:
    # round 0: 1 + 9 = 10 wg; round 1: (ml, small-medium) 2 + 18 = 20 wg = 5120 >= 5000
    shapes = [[64, 64, 16], [96, 96, 16]]
    p = planner.plan(shapes, strategy="workgroup-tlp", tlp_threshold=5000, tlp_model="paper")
    assert kinds_of(p) == ["medium-large", "small-medium"] and p.tlp == 20 * 256


def fake_occupancy(active):
    def occ(arch, variant, model="exact", resources=None):
        return SimpleNamespace(active_workgroups=active, occupancy=0.1, limited_by="fake",
                               waves_per_workgroup=-(-variant.threads // arch.wave_size))
    return occ


def test_saturation_stops_and_undoes_the_last_shrink(monkeypatch):
    # 2 workgroups of 8 warps per SM: capacity 132 * 16 warps * 32 = 67584 < threshold.
    # 1024x1024 large: 256 wg, all resident -> 2048 warps -> 65536; medium-large: 512 wg
    # -> phi = 4096 * 132 / 256 = 2112 warps -> 67584 (up); medium: 1024 wg -> still
    # 2112 warps -> no gain: undone.
    monkeypatch.setattr(parallelism, "variant_occupancy", fake_occupancy(2))
    monkeypatch.setattr(parallelism, "_tables", {})
    p = planner.plan([[1024, 1024, 64]], arch="sm_90", use_cache=False, tlp_model="paper")
    assert set(kinds_of(p)) == {"medium-large"}
    assert p.tlp == 67584
    assert any("saturated" in s for s in p.notes)


def test_equal_tlp_below_capacity_keeps_shrinking(monkeypatch):
    # per-kind, 8 workgroups per SM: 256x256 large 16 wg x 8 warps = 128 warps,
    # medium-large 256, medium 64 x 4 = 256 (equal, device far from full: go on),
    # small-medium 512, small 1024 warps; still below the threshold
    monkeypatch.setattr(parallelism, "variant_occupancy", fake_occupancy(8))
    monkeypatch.setattr(parallelism, "_tables", {})
    p = planner.plan([[256, 256, 64]], arch="sm_90", mode="per-kind", use_cache=False,
                      tlp_model="paper")
    assert set(kinds_of(p)) == {"small"} and p.tlp == 1024 * 32


def test_phi_hand_computed():
    one = np.array
    assert parallelism.phi(one([100.]), one([8.]), one([8.]), 132) == 800     # all resident
    assert parallelism.phi(one([2000.]), one([8.]), one([4.]), 132) == 132 * 4 * 8  # capped
    # two kinds: demand 100/8 + 50/4 = 25 CUs on 10 CUs; 800 waves * 10/25
    assert parallelism.phi(one([100., 50.]), one([4., 8.]), one([8., 4.]), 10) == 320


@pytest.mark.parametrize("arch", ["sm_90", "gfx90a", "sm_70", "gfx1100"])
def test_threshold_is_derived_from_the_architecture(arch):
    a = get_arch(arch)
    cap = a.compute_units * a.max_waves_per_cu * a.wave_size
    p = planner.plan([[64, 64, 64]], arch=a, tlp_model="paper")
    assert p.tlp_threshold == cap * parallelism.TLP_FACTOR
    assert planner.plan([[64, 64, 64]], arch=a, tlp_factor=0.25,
                        tlp_model="paper").tlp_threshold == cap * 0.25
    c = planner.plan([[64, 64, 64]], arch=a, strategy="coordinated")
    assert c.tlp_threshold == cap * parallelism.LI2019_FACTOR
    # a part with more CUs gets a proportionally larger threshold
    big = planner.plan([[64, 64, 64]], arch=replace(a, compute_units=2 * a.compute_units),
                       tlp_model="paper")
    assert big.tlp_threshold == 2 * p.tlp_threshold


def test_factor_constant_is_read_at_call_time(monkeypatch):
    monkeypatch.setattr(parallelism, "TLP_FACTOR", 0.125)
    p = planner.plan([[64, 64, 64]], arch="gfx90a", use_cache=False, tlp_model="paper")
    assert p.tlp_threshold == 104 * 32 * 64 * 0.125


def test_tlp_never_exceeds_device_capacity():
    a = get_arch("sm_90")
    p = planner.plan(np.tile([1024, 1024, 64], (64, 1)), arch=a)
    assert p.tlp <= a.compute_units * a.max_waves_per_cu * a.wave_size


# --- li2019 --------------------------------------------------------------------------

LI_EXAMPLE = [[16, 32, 128], [64, 64, 64], [256, 256, 64]]


@pytest.mark.parametrize("arch,opts", [("sm_90", {"tlp_threshold": 65536}),
                                       ("sm_70", {}),   # 80 SMs x 2048 threads x 0.4
                                       ("v100", {})])
def test_li2019_worked_example(arch, opts):
    p = planner.plan(LI_EXAMPLE, arch=arch, strategy="coordinated", batching="none", **opts)
    assert p.tlp_threshold == 65536
    assert p.kinds[0].family == "li2019-256"
    assert kinds_of(p) == ["small", "medium", "medium"]
    assert p.tlp == 17920
    check_plan(p, LI_EXAMPLE)


def test_li2019_first_round_tlp():
    # all small: (2 + 16 + 256) tiles x 256 threads = 70144, not above 70144: stop there
    p = planner.plan(LI_EXAMPLE, strategy="coordinated", batching="none", tlp_threshold=70144)
    assert kinds_of(p) == ["small", "small", "small"] and p.tlp == 70144


def test_li2019_switches_to_128_threads():
    # 256-thread huge for 1024x1024 = 64 tiles -> 16384 > 10000: every queue is at its last
    # tile, so the 128-thread versions start again from small and grow: huge -> 8192
    p = planner.plan([[1024, 1024, 64]], strategy="coordinated", batching="none",
                     tlp_threshold=10000)
    assert p.kinds[0].family == "li2019-128"
    assert kinds_of(p) == ["huge"] and p.tlp == 8192


def test_threshold_batching_hand_computed():
    shapes = np.array([[64, 160, 64]])          # 16x16 tiles: 4 x 10 = 40 tiles, K = 64
    kinds = LI2019_256
    tiles = build_tiles(shapes, kinds, np.array([0]))
    n = np.array([40])
    # TLP ample: groups of ceil(256 / 64) = 4 tiles
    blk = threshold_batching(tiles, shapes[:, 2], n, 256, 256, threshold=0.0)
    assert np.bincount(blk).tolist() == [4] * 10
    # (unassigned + blocks) x 256 before group j: 40, 37, 34, ... ; threshold/2 = 34 * 256:
    # groups 0 and 1 are batched, then one tile per block
    blk = threshold_batching(tiles, shapes[:, 2], n, 256, 256, threshold=2 * 34 * 256)
    assert np.bincount(blk).tolist() == [4, 4] + [1] * 32


def test_binary_batching_hand_computed():
    ks = [100, 240, 16, 300, 32, 200]
    shapes = np.array([[16, 16, k] for k in ks])
    tiles = build_tiles(shapes, LI2019_256, np.zeros(6, dtype=np.int64))
    blk = binary_batching(tiles, shapes[:, 2], 256, [np.arange(6)])
    groups = {}
    for t, b in enumerate(blk):
        groups.setdefault(b, []).append(ks[tiles["gemm"][t]])
    assert sorted(sorted(g) for g in groups.values()) == [[16, 240], [32, 200], [100], [300]]


def test_coordinated_blocks_hold_several_tiles():
    shapes = np.tile([128, 128, 16], (200, 1))
    # 200 x 16 medium tiles x 256 = 819200 <= threshold; groups of 64 / 16 = 4 tiles while
    # (unassigned + blocks) x 256 > 409600
    p = planner.plan(shapes, strategy="coordinated", batching="threshold", theta=64,
                     tlp_threshold=819200)
    assert set(kinds_of(p)) == {"medium"}
    sizes = np.diff(p.block_ptr)
    assert sizes.max() == 4 and (sizes == 1).any()
    # after j groups U + B = 3200 - 3j; the first j with (3200 - 3j) * 256 <= 409600 is 534
    assert (sizes == 4).sum() == 534 and p.n_blocks == 3200 - 3 * 534
    check_plan(p, shapes)
    p = planner.plan(shapes, strategy="coordinated", batching="binary")
    assert np.diff(p.block_ptr).max() == 2
    check_plan(p, shapes)


def test_coordinated_auto_rule():
    small_k = planner.plan(np.tile([256, 256, 32], (100, 1)), strategy="coordinated")
    assert any("batching: threshold" in s for s in small_k.notes)
    big_k = planner.plan(np.tile([256, 256, 200], (400, 1)), strategy="coordinated")
    assert any("batching: binary" in s for s in big_k.notes)


# --- magma ---------------------------------------------------------------------------

@pytest.mark.parametrize("m,n,expected", [
    (48, 40, "V504"),    # exact fit, 1920 vs 3072 / 3072 / 3584
    (64, 56, "V518"),    # 3584 vs 7680 / 4096 / 4608
    (64, 48, "V512"),    # V510 3 x 1024 = V512 2 x 1536: tie -> larger tile
])
def test_magma_config_choice(m, n, expected):
    p = planner.plan([[m, n, 16]], strategy="magma")
    assert p.kinds[0].kind == expected and p.mode == "grid-z"


def test_magma_grid_and_real_tiles():
    shapes = [[100, 50, 10], [10, 200, 5], [0, 7, 3]]
    p = planner.plan(shapes, strategy="magma", config="V510")   # 64 x 16
    assert p.grid == (2, 13, 3)
    assert p.n_tiles == 2 * 4 + 1 * 13
    check_plan(p, shapes)


# --- edges, cache, errors ------------------------------------------------------------

@pytest.mark.parametrize("strategy,mode", STRATEGY_MODES)
def test_empty_batch_and_empty_gemms(strategy, mode):
    p = planner.plan(np.zeros((0, 3), dtype=np.int64), strategy=strategy, mode=mode)
    assert p.batch == 0 and p.n_tiles == 0 and p.n_blocks == 0
    assert p.block_ptr.tolist() == [0]
    assert planner.plan([], strategy=strategy, mode=mode).n_tiles == 0
    p = planner.plan([[0, 5, 5], [5, 0, 5], [5, 5, 0]], strategy=strategy, mode=mode)
    assert set(p.tiles["gemm"].tolist()) == {2}     # K == 0 still writes beta * C
    check_plan(p, [[0, 5, 5], [5, 0, 5], [5, 5, 0]])


def test_defaults(monkeypatch):
    p = planner.plan([[64, 64, 64]], use_cache=False)
    assert p.strategy == "wavefront-tlp" and p.mode == planner.DEFAULT_MODE
    assert p.arch.name == "sm_90" and p.dtype == np.float32
    monkeypatch.setenv("PORTGEMM_ARCH", "mi250x")
    p = planner.plan([[64, 64, 64]], dtype=np.float64)
    assert p.arch.name == "gfx90a" and p.arch.compute_units == 110 and p.dtype == np.float64
    assert planner.plan([[64, 64, 64]], strategy="magma").mode == "grid-z"
    assert planner.strategies()[:4] == ["wavefront-tlp", "workgroup-tlp", "coordinated", "magma"]


def test_cache_returns_the_same_object():
    planner.clear_cache()
    shapes = [[64, 32, 16], [17, 18, 19]]
    a = planner.plan(shapes, arch="sm_90")
    assert planner.plan(np.array(shapes, dtype=np.int32), arch=get_arch("sm_90")) is a
    assert planner.plan(shapes, arch="sm_90", dtype="float64") is not a
    assert planner.plan(shapes, arch="gfx90a") is not a
    assert planner.plan(shapes, arch="sm_90", mode="per-kind") is not a
    assert planner.plan(shapes, arch="sm_90", tlp_factor=0.3) is not a
    assert planner.plan(shapes, arch="h100") is a                # same name and SM count
    assert planner.plan(shapes, arch="sm_90", tlp_factor=None) is a   # None = default
    assert planner.plan([[64, 32, 16], [17, 18, 20]], arch="sm_90") is not a
    assert not a.tiles.flags.writeable and not a.shapes.flags.writeable
    # bounded LRU
    for i in range(planner.CACHE_SIZE + 1):
        planner.plan([[i + 1, 16, 16]], arch="sm_90")
    assert planner.cache_info()["size"] == planner.CACHE_SIZE
    assert planner.plan(shapes, arch="sm_90") is not a


@pytest.mark.parametrize("shapes,gemm", [
    ([[1, 2, 3], [4, -5, 6]], 1),
    ([[-1, 2, 3]], 0),
    ([[1, 2, 3], [1, 2, 3], [1.5, 2, 3]], 2),
    ([[1, 2, 2**31]], 0),
])
def test_bad_shapes_name_the_gemm(shapes, gemm):
    with pytest.raises(ValidationError) as e:
        planner.plan(shapes)
    assert e.value.gemm == gemm and f"GEMM {gemm}" in str(e.value)


@pytest.mark.parametrize("shapes", [[[1, 2]], [1, 2, 3], np.zeros((2, 3, 1)), [["a", "b", "c"]]])
def test_bad_shape_arrays(shapes):
    with pytest.raises(ValidationError):
        planner.plan(shapes)


def test_other_errors():
    with pytest.raises(DtypeError):
        planner.plan([[1, 2, 3]], dtype="complex64")
    with pytest.raises(DtypeError):
        planner.plan([[1, 2, 3]], dtype="int32")
    with pytest.raises(UnknownStrategy) as e:
        planner.plan([[1, 2, 3]], strategy="nope")
    assert "wavefront-tlp" in str(e.value) and "magma" in str(e.value)
    with pytest.raises(ValidationError):
        planner.plan([[1, 2, 3]], strategy="magma", mode="fused")
    with pytest.raises(ValidationError):
        planner.plan([[1, 2, 3]], mode="grid-z")
    with pytest.raises(ValidationError):
        planner.plan([[1, 2, 3]], tlp_factr=0.3)
    with pytest.raises(ValidationError):
        planner.plan([[1, 2, 3]], strategy="coordinated", batching="sometimes")
    with pytest.raises(ValidationError):
        planner.plan([[1, 2, 3]], strategy="magma", config="V999")
    with pytest.raises(UnknownArch):
        planner.plan([[1, 2, 3]], arch="sm_1")


def test_describe_mentions_the_plan():
    p = planner.plan([[256, 256, 64], [48, 48, 48]], arch="gfx90a")
    text = p.describe()
    assert "wavefront-tlp" in text and "gfx90a" in text and "threshold" in text


@pytest.mark.parametrize("kw", [dict(tlp_factor="x"), dict(tlp_factor=float("nan")),
                                dict(tlp_threshold=-1), dict(occupancy_model="foo"),
                                dict(arch=5), dict(strategy="coordinated", theta=-2)])
def test_bad_options_are_validation_errors(kw):
    with pytest.raises(ValidationError):
        planner.plan([(4, 4, 4)], **kw)


def test_per_kind_launch_layout_keeps_blocks_whole_and_the_plan_kind_order():
    from portgemm.backends.launch import per_kind_layout
    shapes = [(16, 16, 16)] * 3 + [(512, 512, 32)] * 2 + [(33, 70, 20)]
    p = planner.plan(shapes, arch="sm_90", mode="per-kind", use_cache=False)
    tiles, block_ptr, launches = per_kind_layout(p)
    first_use = list(dict.fromkeys(p.tiles["kind"][p.block_ptr[:-1]].tolist()))
    assert [k for k, _, _ in launches] == first_use
    for k, start, count in launches:  # each launch's blocks hold only its kind
        lo, hi = block_ptr[start], block_ptr[start + count]
        assert set(tiles["kind"][lo:hi].tolist()) == {k}
    assert sorted(map(tuple, tiles[["gemm", "m0", "n0"]].tolist())) == \
        sorted(map(tuple, p.tiles[["gemm", "m0", "n0"]].tolist()))


# --- the device rule (tlp_model="device", the default) and the cost model ------------

from portgemm.occupancy import ceilings as ceilings_mod  # noqa: E402
from portgemm.planner import cost_model, wavefront_tlp  # noqa: E402
from portgemm.planner.tiling import Request  # noqa: E402
from portgemm.tiles import LI2019_128, TileConfig  # noqa: E402

# a family with a 128x128 kind, as a larger catalogue would add (any tuple plugs in)
BIG = ZHANG2025 + (TileConfig("test-big", "128x128", 128, 128, 16, 256, 8, 8),)
FAMILIES_UNDER_TEST = {"zhang2025": ZHANG2025, "li2019-128": LI2019_128,
                       "li2019-256": LI2019_256, "zhang2025+128x128": BIG}


def device_plan(shapes, kinds, arch="sm_90", mode="fused", formula="wavefront", **options):
    req = Request(planner._shapes(shapes), "float32", planner.resolve_arch(arch), mode, options)
    return wavefront_tlp.algorithm1(req, f"{formula}-tlp", formula, kinds=kinds)


@pytest.mark.parametrize("family", list(FAMILIES_UNDER_TEST))
@pytest.mark.parametrize("arch", ["sm_90", "sm_80", "sm_70", "gfx90a", "gfx908", "gfx1100"])
@pytest.mark.parametrize("mode", ["fused", "per-kind"])
def test_device_threshold_never_above_capacity(family, arch, mode):
    """Coverage is checked by the property tests; here only the threshold."""
    a = get_arch(arch)
    cap = parallelism.device_threads(a)
    rng = np.random.default_rng(3)
    for batch in (1, 40, 300):
        shapes = np.stack([rng.integers(1, 700, batch), rng.integers(1, 700, batch),
                           rng.integers(0, 300, batch)], 1)
        for formula in ("wavefront", "workgroup"):
            for opts in ({}, {"tlp_factor": 1e6}):
                p = device_plan(shapes, FAMILIES_UNDER_TEST[family], arch, mode, formula, **opts)
                assert 0 < p.tlp_threshold <= cap
                if formula == "wavefront":
                    assert p.tlp <= p.tlp_threshold * (1 + 1e-9)   # counts what can be resident


def test_launch_capacity_and_resident_tlp_hand_computed():
    one = np.array
    # 132 SMs, 3 resident blocks each: 396 slots. 400 tiles of 256 threads: two waves
    assert parallelism.launch_capacity(one([400.]), one([256.]), one([3.]), 132) == \
        pytest.approx(396 * 256)
    assert parallelism.resident_tlp(one([400.]), one([256.]), one([3.]), 132) == 400 * 256 / 2
    # exactly one full wave reaches it; 128-thread tiles count 128, not their block's 256
    assert parallelism.resident_tlp(one([396.]), one([128.]), one([3.]), 132) == 396 * 128
    assert parallelism.launch_capacity(one([396.]), one([128.]), one([3.]), 132) == \
        pytest.approx(396 * 128)
    # a mix: 264 tiles of 128 threads (2 per SM) and 66 of 256 (1 per SM, active 2)
    # demand 264/4 + 66/2 = 99 SMs, all resident: TLP = 264*128 + 66*256 = capacity * 99/132
    tlp = parallelism.resident_tlp(one([264., 66.]), one([128., 256.]), one([4., 2.]), 132)
    capa = parallelism.launch_capacity(one([264., 66.]), one([128., 256.]), one([4., 2.]), 132)
    assert tlp == 264 * 128 + 66 * 256 and capa == pytest.approx(tlp * 132 / 99)


def test_device_rule_starts_from_the_largest_fitting_tile():
    # 1008 = 15.75 x 64: "divides" (Eq. 10) sent these to 16x16; the device rule starts
    # from 64x64 (fits) and the cost model keeps it: 16x16 reads 4x the bytes per FMA
    p = planner.plan(np.tile([1008, 1008, 512], (64, 1)), arch="sm_90", mode="fused")
    assert set(kinds_of(p)) == {"large"} and p.n_tiles == 64 * 16 * 16
    ref = planner.plan(np.tile([1000, 1000, 512], (64, 1)), arch="sm_90", mode="fused")
    assert set(kinds_of(ref)) == {"large"}
    per_flop = (p.predicted_ms / p.flops) / (ref.predicted_ms / ref.flops)
    assert 0.9 < per_flop < 1.1
    old = planner.plan(np.tile([1008, 1008, 512], (64, 1)), arch="sm_90", tlp_model="paper")
    assert set(kinds_of(old)) == {"small"} and old.predicted_ms > 2 * p.predicted_ms


def test_device_rule_shrinks_a_small_batch():
    # one 256x256x1024 GEMM: 16 large tiles on 132 SMs leave 116 idle; far below the
    # threshold, and the model predicts smaller tiles faster (more SMs share the K loop)
    p = planner.plan([[256, 256, 1024]], arch="sm_90")
    assert kinds_of(p)[0] in ("small", "small-medium", "medium")
    assert p.n_tiles > 16 and p.tlp < p.tlp_threshold
    start = [n for n in p.notes if n.startswith("cost model")][0]
    assert "kept" in start and not start.startswith("cost model: 0 smaller")
    large = device_plan([[256, 256, 1024]], (ZHANG2025[-1],))
    assert p.predicted_ms < large.predicted_ms


def test_device_rule_keeps_large_tiles_on_a_large_batch():
    p = planner.plan(np.tile([256, 256, 256], (4096, 1)), arch="sm_90", mode="fused")
    assert set(kinds_of(p)) == {"large"} and p.n_tiles == 4096 * 16


def test_wavefront_and_workgroup_tlp_differ_on_a_partial_wave():
    # 100 GEMMs 96x96x1024, fused on sm_90 (3 resident 256-thread blocks per SM: 396
    # slots). Largest fitting tile: 64x64, 2 x 2 = 4 tiles a GEMM, 400 tiles.
    # Eq. 3: 400 x 256 = 102,400 >= 396 x 256 = 101,376: "full", so workgroup-tlp keeps
    # them. Wavefront: 400 tiles need 2 waves (the second holds 4 tiles), 51,200 resident
    # threads per wave < 101,376: smaller tiles are weighed, and one round down, 32x64
    # (3 x 2 tiles a GEMM: 600 tiles, one wave of 2 per SM), is predicted fastest (the
    # search that weighed candidates one at a time stopped at 32x32, 900 tiles, 0.179 ms).
    shapes = np.tile([96, 96, 1024], (100, 1))
    wg = planner.plan(shapes, arch="sm_90", strategy="workgroup-tlp", mode="fused")
    wf = planner.plan(shapes, arch="sm_90", strategy="wavefront-tlp", mode="fused")
    assert set(kinds_of(wg)) == {"large"} and wg.tlp == 102400
    assert wg.tlp_threshold == pytest.approx(101376)
    assert set(kinds_of(wf)) == {"medium-large"} and wf.n_tiles == 600
    assert wf.predicted_ms < 0.17871416164102563
    assert wf.predicted_ms < wg.predicted_ms
    # the paper's reading cannot tell them apart here (phi saturates)
    assert kinds_of(planner.plan(shapes, tlp_model="paper")) == \
        kinds_of(planner.plan(shapes, strategy="workgroup-tlp", tlp_model="paper"))


@pytest.mark.parametrize("strategy,mode", STRATEGY_MODES[:4])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=batches, arch=st.sampled_from(["sm_90", "gfx90a"]))
def test_coverage_property_paper_rule(strategy, mode, shapes, arch):
    p = planner.plan(shapes, arch=arch, strategy=strategy, mode=mode, tlp_model="paper")
    check_plan(p, shapes)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=batches, fam=st.sampled_from(list(FAMILIES_UNDER_TEST)),
       mode=st.sampled_from(["fused", "per-kind"]))
def test_coverage_property_any_family(shapes, fam, mode):
    check_plan(device_plan(shapes, FAMILIES_UNDER_TEST[fam], mode=mode), shapes)


def test_family_is_a_parameter(monkeypatch):
    monkeypatch.setattr(wavefront_tlp, "FAMILY", BIG)
    p = planner.plan(np.tile([1024, 1024, 512], (64, 1)), arch="sm_90", use_cache=False, mode="fused")
    assert p.kinds == BIG and p.tiles_per_kind()    # plans with the larger catalogue
    check_plan(p, np.tile([1024, 1024, 512], (64, 1)))


@pytest.mark.parametrize("fam,dtype", [("portgemm", "float32"), ("portgemm-f64", "float64"),
                                       ("zhang2025", "float64")])
@pytest.mark.parametrize("mode", ["fused", "per-kind"])
def test_family_option_plans_with_that_family(fam, dtype, mode):
    shapes = np.array([[1024, 1024, 512]] * 8 + [[40, 33, 100]] * 8 + [[1, 1, 1]])
    p = planner.plan(shapes, dtype=dtype, arch="sm_90", family=fam, mode=mode)
    assert {k.family for k in p.kinds} == {fam}
    check_plan(p, shapes)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,batch", [((1024, 1024, 512), 64), ((40, 33, 100), 8),
                                         ((96, 96, 1024), 100), ((300, 20, 64), 500)])
def test_default_plan_is_the_faster_predicted_launch_structure(dtype, shape, batch):
    shapes = np.tile(shape, (batch, 1))
    # the launch structure of the unsplit plan (split-K: tests/test_split_k.py)
    p = planner.plan(shapes, dtype=dtype, arch="sm_90", use_cache=False, split_k=False)
    paper = planner.plan(shapes, dtype=dtype, arch="sm_90", mode="fused", use_cache=False)
    ours = planner.plan(shapes, dtype=dtype, arch="sm_90", mode="per-kind", use_cache=False,
                        family=wavefront_tlp.OUR_FAMILY[dtype])
    want = ours if ours.predicted_ms < paper.predicted_ms else paper
    assert (p.mode, p.kinds, p.predicted_ms) == (want.mode, want.kinds, want.predicted_ms)
    assert p.notes[-1].startswith("launch structure:")
    check_plan(p, shapes)


def test_naming_a_mode_family_or_the_paper_rule_keeps_that_plan():
    shapes = np.tile([1024, 1024, 512], (64, 1))    # our family wins here by the model
    assert planner.plan(shapes, arch="sm_90").kinds[0].family == "portgemm"
    for kw in (dict(mode="fused"), dict(mode="per-kind"), dict(family="zhang2025"),
               dict(tlp_model="paper")):
        assert planner.plan(shapes, arch="sm_90", **kw).kinds[0].family == "zhang2025", kw


def test_family_option_refuses_a_family_without_kernels_in_the_dtype():
    with pytest.raises(ValidationError, match="portgemm-f64"):
        planner.plan([[64, 64, 64]], dtype="float64", family="portgemm")
    with pytest.raises(ValidationError):
        planner.plan([[64, 64, 64]], family="magma")   # magma is its own strategy


def test_tlp_model_option():
    with pytest.raises(ValidationError):
        planner.plan([[64, 64, 64]], tlp_model="guess")
    assert "tlp_model" in planner.strategy_info("wavefront-tlp").options
    assert "tlp_model" in planner.strategy_info("workgroup-tlp").options


def _predict(shapes, kind="large", mode="fused", arch="sm_90"):
    k = [z.kind for z in ZHANG2025].index(kind)
    a = get_arch(arch)
    table = parallelism.kind_table(a, ZHANG2025, mode, "float32")
    kc = cost_model.kind_costs(a, ZHANG2025, table, "float32")
    shapes = np.asarray(shapes, dtype=np.int64)
    gm, gn = planner.tiling.tile_grid(shapes, ZHANG2025)
    return cost_model.predict_assignment(shapes, gm * gn, np.full(len(shapes), k), kc,
                                         mode == "per-kind")


@pytest.mark.parametrize("kind", ZK)
def test_cost_model_is_monotone(kind):
    base = _predict(np.tile([256, 256, 256], (64, 1)), kind)
    assert _predict(np.tile([256, 256, 512], (64, 1)), kind) > base          # more K
    assert _predict(np.tile([256, 256, 256], (512, 1)), kind) > base         # more GEMMs
    assert _predict(np.tile([512, 512, 256], (64, 1)), kind) > base          # larger C
    assert _predict(np.tile([256, 256, 256], (64, 1)), kind, "per-kind") > 0
    assert _predict(np.tile([256, 256, 256], (64, 1)), kind, arch="sm_80") > base  # slower part
    slow = replace(ceilings_mod.ceilings_for(get_arch("sm_90")), latency_s=1e-6,
                   smem_bytes_per_s_per_cu=1e11)
    a = get_arch("sm_90")
    kc = cost_model.kind_costs(a, ZHANG2025, parallelism.kind_table(a, ZHANG2025, "fused",
                                                                    "float32"), "float32", slow)
    shapes = np.tile([256, 256, 256], (64, 1))
    gm, gn = planner.tiling.tile_grid(shapes, ZHANG2025)
    k = np.full(64, ZK.index(kind))
    assert cost_model.predict_assignment(shapes, gm * gn, k, kc, False) > base


@pytest.mark.parametrize("strategy,mode", STRATEGY_MODES)
def test_predict_any_plan(strategy, mode):
    shapes = np.array([[100, 50, 10], [300, 200, 500], [17, 1000, 33], [0, 5, 5], [64, 64, 0]])
    p = planner.plan(shapes, strategy=strategy, mode=mode, use_cache=False)
    ms = cost_model.predict(p)
    assert np.isfinite(ms) and ms > 0
    if p.predicted_ms is not None:   # one tile per block: the planner's own figure
        assert ms == pytest.approx(p.predicted_ms, rel=1e-9)
    assert "predicted time" in p.describe() or p.predicted_ms is None
    assert cost_model.predict(planner.plan(np.zeros((0, 3)), strategy=strategy, mode=mode)) == 0


def test_ceilings_measured_then_modelled(tmp_path, monkeypatch):
    h100 = ceilings_mod.ceilings_for(get_arch("sm_90"))
    assert h100.origin == "measured" and h100.copy_bytes_per_s == 3.0e12
    assert h100.fp32_flops_per_s == 5.16e13 and h100.launch_s == 4.1e-6
    mi = ceilings_mod.ceilings_for(get_arch("gfx90a"))
    assert mi.origin == "modelled"
    # 104 CUs x 64 lanes x 2 x 1.7 GHz x SUSTAINED, twice (packed FMAs: test_amd_packed_fma);
    # a part with more CUs scales
    assert mi.fp32_flops_per_s == pytest.approx(2 * 104 * 64 * 2 * 1.7e9 * ceilings_mod.SUSTAINED)
    assert ceilings_mod.ceilings_for(get_arch("mi250x")).fp32_flops_per_s > mi.fp32_flops_per_s
    path = tmp_path / "c.json"
    path.write_text(ceilings_mod.PATH.read_text())
    entry = {f: 1.0 for f in ceilings_mod.FIELDS} | {"device": "fake"}
    monkeypatch.setattr(ceilings_mod, "PATH", path)
    ceilings_mod.write_measured("gfx90a", entry, path)
    try:
        got = ceilings_mod.ceilings_for(get_arch("gfx90a"))
        assert got.origin == "measured" and got.launch_s == 1.0
        with pytest.raises(ValueError):
            ceilings_mod.write_measured("gfx90a", {"launch_s": 1.0}, path)
    finally:
        monkeypatch.undo()
        ceilings_mod.reload()
    assert ceilings_mod.ceilings_for(get_arch("gfx90a")).origin == "modelled"


# --- the hit path (looked up from the arguments as given, before validation) ----------

def test_hit_path_returns_the_cached_plan_and_counts_it():
    planner.clear_cache()
    s = np.array([[64, 32, 16], [17, 18, 19]] * 50)
    a = planner.plan(s, arch="sm_90")
    hits = planner.cache_info()["hits"]
    assert planner.plan(s.copy(), arch="sm_90") is a                  # equal bytes
    assert planner.plan(np.asfortranarray(s), arch="sm_90") is a      # any layout
    assert planner.plan(s.astype(np.int32), arch="sm_90") is a        # the full key's hit
    assert planner.plan(s.astype(np.int32), arch="sm_90") is a        # then the hit path's
    assert planner.cache_info()["hits"] == hits + 4
    assert planner.plan(s, arch="sm_90", tlp_factor=1) is not a
    with pytest.raises(ValidationError):                              # a bool is no number
        planner.plan(s, arch="sm_90", tlp_factor=True)


def test_hit_path_never_returns_a_stale_plan(monkeypatch):
    planner.clear_cache()
    s = np.array([[300, 200, 64]] * 40)
    a = planner.plan(s)
    s[3, 0] = 301                                    # the caller's array changed in place
    b = planner.plan(s)
    assert b is not a and b.shapes[3, 0] == 301
    s[3, 0] = 300
    assert planner.plan(s) is a
    monkeypatch.setenv("PORTGEMM_ARCH", "gfx90a")    # arch=None reads the variable
    assert planner.plan(s).arch.name == "gfx90a"
    monkeypatch.delenv("PORTGEMM_ARCH")
    assert planner.plan(s) is a
    monkeypatch.setattr(parallelism, "TLP_FACTOR", parallelism.TLP_FACTOR * 0.5)
    assert planner.plan(s) is not a                  # a factor read at call time
    monkeypatch.undo()
    assert planner.plan(s) is a
    for i in range(planner.CACHE_SIZE):              # evicted from the LRU: planned again
        planner.plan(np.array([[i + 1, 16, 16]]))
    c = planner.plan(s)
    assert c is not a and c.n_tiles == a.n_tiles


def test_hit_path_sample_collisions_cost_a_probe_not_a_wrong_plan():
    planner.clear_cache()
    # 40 rows: the sample takes every third value, the M column only; these batches
    # differ in N alone, so they share one hit-path key
    batches = [np.array([[64, 16 * (i + 1), 64]] * 40) for i in range(5)]
    keys = {planner._fast_key(b, "float32", None, None, None, None, {}) for b in batches}
    assert len(keys) == 1
    plans = [planner.plan(b) for b in batches]
    for _ in range(2):
        for b, p in zip(batches, plans):
            assert planner.plan(b.copy()) is p and np.array_equal(p.shapes, b)
    planner.clear_cache()


def _fake_register(arch_name):
    """A compile that registers new figures for ``arch_name`` (the default provider's
    version moves, and so does the generation); returns the undo."""
    from portgemm.kernels import resources as kres
    from portgemm.occupancy import KernelResources
    v = "test-variant-that-no-plan-uses"
    kres.register(arch_name, v, KernelResources(registers=64, source="test"))

    def undo():
        kres._registered.pop((arch_name, v), None)
    return undo


class _Versioned:
    def __init__(self):
        self.v = 0

    def __call__(self, arch, launch):
        from portgemm.occupancy import KernelResources
        return KernelResources(registers=64 + 8 * self.v, source="test")

    def version(self, arch_name):
        return self.v


@pytest.mark.parametrize("change", ["ceilings", "tuned", "register", "provider", "factor"])
def test_hit_path_sees_every_input_read_at_call_time(change, monkeypatch):
    """Each input the full key reads at call time, changed between two calls with the
    same NumPy shapes: the hit path must not return the plan made before (for the
    default provider's figures, registered for another arch, the plan stays valid and
    comes back through the full key, as the same object)."""
    from portgemm.kernels import resources as kres
    from portgemm.occupancy import ceilings, tuned
    planner.clear_cache()
    # the registry's versions move in copies (the kind tables memoised under them go too)
    monkeypatch.setattr(kres, "_registered", dict(kres._registered))
    monkeypatch.setattr(kres, "_versions", dict(kres._versions))
    s = np.array([[300, 200, 64], [17, 18, 19]] * 20)
    prov = _Versioned() if change == "provider" else None
    a = planner.plan(s, arch="sm_90", resources=prov)
    assert planner.plan(s.copy(), arch="sm_90", resources=prov) is a
    undo = None
    if change == "ceilings":
        ceilings.reload()
    elif change == "tuned":
        tuned.reload()
    elif change == "register":
        undo = _fake_register("sm_80")
    elif change == "provider":
        prov.v = 1
    else:
        monkeypatch.setattr(parallelism, "TLP_FACTOR", parallelism.TLP_FACTOR * 0.5)
    try:
        b = planner.plan(s.copy(), arch="sm_90", resources=prov)
        if change == "register":   # another arch's figures: the same plan, via the full key
            assert b is a
            hits = planner.cache_info()["hits"]
            assert planner.plan(s.copy(), arch="sm_90") is a
            assert planner.cache_info()["hits"] == hits + 1
            undo()
            undo = _fake_register("sm_90")   # this arch's: replanned
            b = planner.plan(s.copy(), arch="sm_90")
        assert b is not a and np.array_equal(b.shapes, s)
        assert planner.plan(s.copy(), arch="sm_90", resources=prov) is b   # and kept
    finally:
        if undo is not None:
            undo()
        planner.clear_cache()
        parallelism._tables.clear()


def test_hit_path_entries_leave_with_their_plan():
    planner.clear_cache()
    s = np.array([[300, 200, 64]] * 40)
    a = planner.plan(s)
    planner.plan(s.astype(np.int32))                      # a second hit-path key, same plan
    assert sum(e.plan is a for e in planner._fast.values()) == 2
    for i in range(planner.CACHE_SIZE):                    # evicted from the LRU
        planner.plan(np.array([[i + 1, 16, 16]]))
    assert not any(e.plan is a for e in planner._fast.values())
    assert len(planner._fast) <= planner.CACHE_SIZE
    # one plan under ever new spellings (a new Arch object each call): bounded
    for _ in range(planner.FAST_SIZE + 10):
        planner.plan(s, arch=replace(get_arch("sm_90")))
    assert len(planner._fast) <= planner.FAST_SIZE
    assert sum(len(v) for v in planner._fast_of.values()) == len(planner._fast)
    planner.clear_cache()
