"""Measured per-kind factors (ceilings.json ``kind_factors``): the data, the cost model
that scales a kind's tile time by them, the device rule's one-kind candidates they
enable, the command that measures them (on the numpy backend with a fake timer) and,
on a GPU (marker ``gpu``), the default fp64 plans they give.

Which kind wins where is asserted on shapes chosen for the reason the kind should win
(tiny GEMMs: the smallest MMA tile; large ones: the largest), not on the bench grid."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import portgemm
from portgemm.occupancy import ceilings, get_arch
from portgemm.occupancy.ceilings import ceilings_for, kind_factors
from portgemm.planner.cost_model import kind_costs
from portgemm.planner.parallelism import kind_table
from portgemm.planner.tiling import Request
from portgemm.planner.wavefront_tlp import BatchTables, device_rule, least_possible
from portgemm.tiles import FAMILIES

F64 = FAMILIES["portgemm-f64"]
MMA = {k.kind for k in F64 if k.engine == "mma"}
H100 = get_arch("sm_90")


@pytest.fixture
def restore_ceilings():
    yield
    ceilings.reload()


def without_factors():
    """Plan with the H100's measured ceilings minus the kind factors (this process)."""
    row = dict(ceilings._load()["measured"]["sm_90"])
    row.pop(ceilings.KIND_FACTORS)
    ceilings.use_in_memory("sm_90", row)


def batch(seed, b, lo, hi, k_hi):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(lo, hi, b), rng.integers(lo, hi, b),
                     rng.integers(16, k_hi, b)], 1).astype(np.int64)


# --- the data ------------------------------------------------------------------------

def test_the_h100_has_a_measured_factor_for_every_fp64_kind():
    c = ceilings_for(H100)
    f = c.kind_factors_of(F64)
    assert f is not None and f.shape == (len(F64),)
    assert ((f > 0.3) & (f < 1.5)).all()        # a correction, not a new model
    raw = json.loads(ceilings.PATH.read_text())["measured"]["sm_90"]
    assert raw[ceilings.KIND_FACTORS] == {k.name: pytest.approx(x) for k, x in zip(F64, f)}
    assert "portgemm.tuning.kind_factors" in raw[ceilings.KIND_FACTORS + "_source"]
    # the small MMA kinds are the ones the model priced furthest off
    by = dict(zip((k.kind for k in F64), f))
    assert by["32x32/w16x16"] < by["64x32/w32x16"] < by["64x64/w32x32"]


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "gfx90a", "gfx942"])
def test_other_archs_have_none(arch):
    c = ceilings_for(get_arch(arch))
    assert c.kind_factors == () and c.kind_factors_of(F64) is None


def test_a_family_is_corrected_whole_or_not_at_all():
    c = ceilings_for(H100)
    assert c.kind_factors_of(FAMILIES["portgemm"]) is None            # fp32: not measured
    assert c.kind_factors_of(F64[4:]).shape == (3,)                    # all measured
    assert c.kind_factors_of(F64[:1] + FAMILIES["portgemm"][:1]) is None   # one is not
    assert c.kind_factors_of(()) is None


@pytest.mark.parametrize("bad", [{"portgemm-f64.nope": 0.5}, {"portgemm-f64.32x32/4x4": 0.0},
                                 {"portgemm-f64.32x32/4x4": True},
                                 {"portgemm-f64.32x32/4x4": float("nan")}, ["x"]])
def test_the_reader_refuses_bad_factors(bad):
    with pytest.raises(ValueError):
        kind_factors(bad, "sm_90")


def test_the_reader_sorts_and_keeps_good_ones():
    got = kind_factors({"portgemm-f64.64x64/w32x32": 0.9, "portgemm-f64.32x32/4x4": 2})
    assert got == (("portgemm-f64.32x32/4x4", 2.0), ("portgemm-f64.64x64/w32x32", 0.9))
    assert kind_factors(None) == () and kind_factors({}) == ()


def test_writing_ceilings_keeps_the_factors(tmp_path):
    path = tmp_path / "ceilings.json"
    shutil.copy(ceilings.PATH, path)
    try:
        entry = {f: 1.0 for f in ceilings.FIELDS}
        ceilings.write_measured("sm_90", entry, path)
        row = json.loads(path.read_text())["measured"]["sm_90"]
        assert row[ceilings.KIND_FACTORS]["portgemm-f64.64x64/w32x32"] > 0
        assert row["fp64_mma_flops_per_s"] > 0 and row["copy_bytes_per_s"] == 1.0
        ceilings.write_kind_factors("sm_90", {"portgemm-f64.32x32/4x4": 0.5}, "test", path)
        row = json.loads(path.read_text())["measured"]["sm_90"]
        assert row[ceilings.KIND_FACTORS] == {"portgemm-f64.32x32/4x4": 0.5}
        assert row[ceilings.KIND_FACTORS + "_source"] == "test"
        with pytest.raises(ValueError, match="measure them first"):
            ceilings.write_kind_factors("gfx90a", {"portgemm-f64.32x32/4x4": 0.5}, "t", path)
        with pytest.raises(ValueError, match="unknown kind"):
            ceilings.write_kind_factors("sm_90", {"nope": 0.5}, "t", path)
    finally:
        ceilings.reload()


# --- the cost model ------------------------------------------------------------------

def test_the_cost_model_scales_per_kind_launches_by_them():
    kc = kind_costs(H100, F64, kind_table(H100, F64, "per-kind", "float64"), "float64")
    np.testing.assert_allclose(kc.factor, ceilings_for(H100).kind_factors_of(F64))
    # a fused kernel's tiles were not measured: the model's own time
    fused = kind_costs(H100, F64, kind_table(H100, F64, "fused", "float64"), "float64")
    assert fused.factor is None
    for arch in ("sm_80", "gfx90a"):
        a = get_arch(arch)
        assert kind_costs(a, F64, kind_table(a, F64, "per-kind", "float64"),
                          "float64").factor is None
    fp32 = FAMILIES["portgemm"]
    assert kind_costs(H100, fp32, kind_table(H100, fp32, "per-kind", "float32"),
                      "float32").factor is None


# --- which kind wins where -----------------------------------------------------------

def test_tiny_gemms_take_the_smallest_mma_kind_alone():
    p = portgemm.plan(batch(1, 2048, 8, 33, 129), "float64", arch="sm_90")
    assert p.tiles_per_kind().keys() == {"32x32/w16x16"}


def test_large_gemms_take_the_largest_mma_kind_alone():
    p = portgemm.plan(np.tile([1024, 1024, 1024], (8, 1)), "float64", arch="sm_90")
    assert p.tiles_per_kind().keys() == {"64x64/w32x32"}


def test_one_mma_kind_on_every_gemm_beats_a_mix_of_launches(restore_ceilings):
    """M, N from 16 to 512: about one GEMM in five is narrower than 64, where the
    ladders can only give them smaller tiles (one more launch each). With the factors
    the rule weighs the 64x64 kind on every GEMM too, and keeps it; without them the
    plan is the ladders' mix, as before."""
    s = batch(8, 256, 16, 513, 257)
    assert (s[:, :2].min(axis=1) < 64).sum() > 40
    p = portgemm.plan(s, "float64", arch="sm_90")
    assert p.tiles_per_kind().keys() == {"64x64/w32x32"}
    assert any("64x64/w32x32 on every GEMM" in n for n in p.notes)
    assert any("each kind alone" in n for n in p.notes)
    without_factors()
    q = portgemm.plan(s, "float64", arch="sm_90")
    assert len(q.tiles_per_kind()) > 1
    assert not any("each kind alone" in n for n in q.notes)


def test_other_archs_and_dtypes_weigh_no_one_kind_candidates():
    s = batch(8, 256, 16, 513, 257)
    for arch, dtype in (("sm_80", "float64"), ("gfx90a", "float64"), ("sm_90", "float32")):
        p = portgemm.plan(s, dtype, arch=arch)
        assert not any("each kind alone" in n for n in p.notes), (arch, dtype)


@pytest.mark.parametrize("seed", range(4))
def test_the_bound_stays_below_every_candidate(seed):
    """least_possible lets plan_with skip a structure; with one-kind candidates (a tile
    that does not fit a GEMM allowed) it must still be at most what the rule returns."""
    s = batch(seed, 300, 1, 700, 700)
    req = Request(s, "float64", H100, "per-kind", {"family": "portgemm-f64"})
    table = kind_table(H100, F64, "per-kind", "float64")
    tabs = BatchTables(s, F64)
    lb = least_possible(req, F64, tabs)
    *_, predicted = device_rule(req, "wavefront", F64, table, BatchTables(s, F64))
    assert 0 < lb <= predicted * (1 + 1e-12)


def test_a_one_kind_plan_computes_every_gemm():
    """Tiles larger than their GEMM (64x64 on M = 20): the numpy backend runs the plan's
    tiles and must give float64-exact results over NaN-poisoned C."""
    s = batch(8, 48, 16, 512, 256)
    assert (s[:, :2].min(axis=1) < 64).any()
    p = portgemm.plan(s, "float64", arch="sm_90")
    assert p.tiles_per_kind().keys() == {"64x64/w32x32"}
    rng = np.random.default_rng(3)
    A = [rng.random((m, k)) - 0.5 for m, _, k in s]
    B = [rng.random((k, n)) - 0.5 for _, n, k in s]
    C = [np.full((m, n), np.nan) for m, n, _ in s]
    p.run(A, B, C, backend="numpy")
    for a, b, c in zip(A, B, C):
        ref = a @ b
        assert np.linalg.norm(c - ref) <= 1e-12 * np.linalg.norm(ref)


# --- the command ---------------------------------------------------------------------

def test_the_command_fits_and_writes_factors(tmp_path, monkeypatch, capsys):
    from portgemm.tuning import kind_factors as cmd
    from portgemm.tuning import space
    from portgemm.tuning.model import predicted_seconds
    monkeypatch.setattr(space, "sizes", lambda cus, dtype, quick=False: [
        space.Size(32, 32, 16, 3), space.Size(64, 64, 40, 2)])
    half = {k.name: 0.5 + 0.05 * i for i, k in enumerate(F64)}

    def timer(dev, bound):   # the model's time times a known factor per kind
        k = bound.plan.kinds[0]
        return 1e3 * predicted_seconds(bound.plan.shapes, k, "float64", H100, half[k.name])

    path = tmp_path / "ceilings.json"
    shutil.copy(ceilings.PATH, path)
    out = tmp_path / "kf.json"
    args = cmd.parser().parse_args(["--backend", "numpy", "--out", str(out), "--write",
                                    "--ceilings", str(path)])
    try:
        assert cmd.run(args, timer=timer) == 0
    finally:
        ceilings.reload()
    text = capsys.readouterr().out
    assert "portgemm-f64" in text and "wrote 7 kind factors" in text
    got = json.loads(path.read_text())["measured"]["sm_90"][ceilings.KIND_FACTORS]
    assert got == {n: pytest.approx(f, rel=1e-3) for n, f in half.items()}
    table = json.loads(out.read_text())
    assert table["factors"].keys() == half.keys() and len(table["sizes"]) == 2
    # host timings never go into the package's file
    args = cmd.parser().parse_args(["--backend", "numpy", "--write"])
    assert cmd.run(args, timer=timer) == 2


# --- on a GPU ------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("seed,lo,hi,k_hi", [(8, 16, 513, 257), (1, 8, 33, 129),
                                             (8, 16, 300, 128), (5, 1, 130, 40)])
def test_default_fp64_plans_on_the_device(seed, lo, hi, k_hi):
    """The default fp64 plan (one kind on every GEMM where the factors choose it, tiles
    wider than their GEMM included) against float64, C NaN-poisoned."""
    from conftest import backend_or_skip
    be = backend_or_skip("cuda")
    cp = be.cp
    s = batch(seed, 200, lo, hi, k_hi)
    p = portgemm.plan(s, "float64", arch=be.arch())
    rng = np.random.default_rng(seed)
    A = [rng.random((m, k)) - 0.5 for m, _, k in s]
    B = [rng.random((k, n)) - 0.5 for _, n, k in s]
    dA, dB = [cp.asarray(a) for a in A], [cp.asarray(b) for b in B]
    dC = [cp.full((m, n), cp.nan) for m, n, _ in s]
    p.run(dA, dB, dC, backend=be)
    worst = max(float(np.linalg.norm(cp.asnumpy(c) - a @ b) / max(np.linalg.norm(a @ b), 1e-300))
                for a, b, c in zip(A, B, dC))
    assert worst < 1e-12, (p.tiles_per_kind(), worst)


@pytest.mark.gpu
@pytest.mark.parametrize("seed,lo,hi,k_hi", [(8, 16, 1025, 513), (1, 8, 33, 129),
                                             (3, 16, 513, 129), (5, 1, 130, 40)])
def test_default_fp32_plans_on_the_device(seed, lo, hi, k_hi):
    """The default fp32 plan (with the fp32 kind factors where measured: per-kind
    launches of our family, or the paper's fused launch) against float64, C
    NaN-poisoned."""
    from conftest import backend_or_skip
    be = backend_or_skip("cuda")
    cp = be.cp
    s = batch(seed, 200, lo, hi, k_hi)
    p = portgemm.plan(s, "float32", arch=be.arch())
    rng = np.random.default_rng(seed)
    A = [(rng.random((m, k)) - 0.5).astype(np.float32) for m, _, k in s]
    B = [(rng.random((k, n)) - 0.5).astype(np.float32) for _, n, k in s]
    dA, dB = [cp.asarray(a) for a in A], [cp.asarray(b) for b in B]
    dC = [cp.full((m, n), cp.nan, dtype=cp.float32) for m, n, _ in s]
    p.run(dA, dB, dC, backend=be)
    worst = max(float(np.linalg.norm(cp.asnumpy(c) - a.astype(np.float64) @ b) /
                      max(np.linalg.norm(a.astype(np.float64) @ b), 1e-300))
                for a, b, c in zip(A, B, dC))
    assert worst < 1e-5, (p.tiles_per_kind(), worst)
