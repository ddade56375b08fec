"""The fp32 precision modes "tf32" and "3xtf32" on the CPU: the TF32 rounding, the NumPy
backend's semantics of each mode, their plans and typed errors, and the kernel's TF32
staging layout (conflict-free fragment reads, shared memory within the static limit).

Tolerances (NumPy backend, float64 reference over the fp32 inputs, elementwise; u32 =
2^-24, M = |alpha| |A| |B| + |beta| |C0|):
  "tf32" tiles multiply the TF32-rounded inputs in fp32: against the float64 product of
  the ROUNDED inputs they are fp32 sums, |C - ref~| <= 2 (K + 2) u32 M~; against the
  unrounded product each input adds 2^-11 (TF32's unit roundoff), so the error exceeds
  the fp32 bound by orders of magnitude (checked: the mode really rounds).
  "3xtf32" and "ieee" tiles are fp32 sums: |C - ref| <= 2 (K + 2) u32 M.
"""
from __future__ import annotations

import numpy as np
import pytest

import portgemm
from portgemm.errors import PrecisionError, PrecisionUnavailable, PortgemmError
from portgemm.grouped import gemm_grouped, gemm_grouped_general
from portgemm.kernels import render
from portgemm.kernels.variants import catalogue_variants, is_tf32
from portgemm.occupancy import ceilings, get_arch
from portgemm.occupancy.archs import TF32_MMA
from portgemm.planner.cost_model import kind_costs
from portgemm.planner.parallelism import kind_table
from portgemm.precision import round_tf32
from portgemm.tiles import FAMILIES, TF32_FAMILIES, family_precision, weighed_families

U32 = 2.0 ** -24
SHAPES = np.array([[300, 200, 100], [17, 9, 33], [64, 64, 64], [5, 130, 0], [129, 65, 70]])
OPS = [(False, False), (False, True), (True, False), (True, True)]


# ---- the rounding -----------------------------------------------------------------------

def test_round_tf32_is_round_to_nearest_ties_away():
    one = np.float32(1.0)
    ulp = 2.0 ** -10                          # TF32's spacing at 1
    x = np.array([1 + ulp / 2, 1 + ulp / 4, 1 + 3 * ulp / 4, -(1 + ulp / 2), 1 + ulp * 1.5,
                  np.float32(3.4028235e38), np.inf, -np.inf, 0.0, -0.0], np.float32)
    want = np.array([1 + ulp, 1, 1 + ulp, -(1 + ulp), 1 + 2 * ulp, np.inf, np.inf, -np.inf,
                     0.0, -0.0], np.float32)
    got = round_tf32(x)
    assert np.array_equal(got, want), got
    assert np.signbit(got[-1])
    assert np.isnan(round_tf32(np.array([np.nan], np.float32)))[0]
    assert round_tf32(one) == one


def test_round_tf32_keeps_eleven_bits():
    x = np.random.default_rng(3).standard_normal(10_000).astype(np.float32) * 1e3
    r = round_tf32(x)
    assert not (r.view(np.uint32) & 0x1FFF).any()                    # 13 low bits cleared
    assert (np.abs(r.astype(np.float64) - x) <= 2.0 ** -11 * np.abs(x)).all()
    assert r.shape == x.shape and r.dtype == np.float32


# ---- the NumPy backend computes each mode ------------------------------------------------

def _batch(rng, shapes, ta, tb, dtype=np.float32):
    A = [rng.standard_normal((k, m) if ta else (m, k)).astype(dtype) for m, n, k in shapes]
    B = [rng.standard_normal((n, k) if tb else (k, n)).astype(dtype) for m, n, k in shapes]
    C0 = [rng.standard_normal((m, n)).astype(dtype) for m, n, k in shapes]
    return A, B, C0


def _check(C, A, B, C0, alpha, beta, ta, tb, rounded):
    for i, (c, a, b, c0) in enumerate(zip(C, A, B, C0)):
        a = (a.T if ta else a)
        b = (b.T if tb else b)
        if rounded:
            a, b = round_tf32(a), round_tf32(b)
        a, b = a.astype(np.float64), b.astype(np.float64)
        ref = alpha[i] * (a @ b) + (beta[i] * c0 if beta[i] else 0.0)
        mag = abs(alpha[i]) * (np.abs(a) @ np.abs(b)) + (abs(beta[i]) * np.abs(c0) if beta[i] else 0.0)
        tol = 2 * (a.shape[1] + 2) * U32 * mag + 1e-30
        assert np.isfinite(c).all(), i
        assert (np.abs(c - ref) <= tol).all(), (i, np.abs(c - ref).max())


@pytest.mark.parametrize("precision", ["ieee", "tf32", "3xtf32"])
@pytest.mark.parametrize("op", OPS, ids=lambda t: ("t" if t[0] else "n") + ("t" if t[1] else "n"))
def test_numpy_backend_computes_the_mode(precision, op):
    ta, tb = op
    rng = np.random.default_rng(11)
    A, B, C0 = _batch(rng, SHAPES, ta, tb)
    alpha = np.array([1.5, -1.0, 0.0, 2.0, 0.5])
    beta = np.array([0.0, 0.5, 1.0, 0.0, -2.0])
    C = [np.where(b == 0, np.nan, c).astype(np.float32) for c, b in zip(C0, beta)]  # beta 0: C unread
    portgemm.gemm_vbatched(A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb,
                           backend="numpy", precision=precision)
    # every GEMM here is large enough for the tensor-core kinds except tiny ones, which
    # may go to the (IEEE) SIMT kind: check each tile's kind
    p = portgemm.plan(SHAPES, "float32", precision=precision)
    mma = {i for i, k in enumerate(p.kinds) if k.engine == "mma"}
    by_gemm = {int(t["gemm"]): int(t["kind"]) in mma for t in p.tiles}
    for i in range(len(SHAPES)):
        rounded = precision == "tf32" and by_gemm.get(i, False)
        _check(C[i:i + 1], A[i:i + 1], B[i:i + 1], C0[i:i + 1], alpha[i:i + 1], beta[i:i + 1],
               ta, tb, rounded)


def test_tf32_really_rounds_and_3xtf32_does_not():
    rng = np.random.default_rng(5)
    A, B, _ = _batch(rng, [(256, 256, 256)], False, False)
    ref = A[0].astype(np.float64) @ B[0]
    err = {}
    for prec in ("ieee", "tf32", "3xtf32"):
        C = [np.full((256, 256), np.nan, np.float32)]
        portgemm.gemm_vbatched(A, B, C, backend="numpy", precision=prec)
        err[prec] = np.abs(C[0] - ref).max() / np.abs(ref).max()
    assert err["tf32"] > 2.0 ** -14 > 2.0 ** -18 > err["3xtf32"]
    assert err["ieee"] < 2.0 ** -18


@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
@pytest.mark.parametrize("device_offs", [False, True])
def test_packed_entry_points_take_the_mode(precision, device_offs):
    rng = np.random.default_rng(2)
    G, K, N, T = 4, 150, 70, 300
    ends = np.array([40, 40, 200, 290])
    A = rng.standard_normal((T, K)).astype(np.float32)
    B = rng.standard_normal((G, K, N)).astype(np.float32)
    C = np.full((T, N), np.nan, np.float32)
    gemm_grouped(A, B, C, ends, backend="numpy", precision=precision, device_offs=device_offs)
    starts = np.concatenate([[0], ends[:-1]])
    for g, (s, e) in enumerate(zip(starts, ends)):
        if s == e:
            continue                         # an empty group
        a, b = (round_tf32(A[s:e]), round_tf32(B[g])) if precision == "tf32" else (A[s:e], B[g])
        ref = a.astype(np.float64) @ b
        assert np.abs(C[s:e] - ref).max() <= 2 * (K + 2) * U32 * (np.abs(a) @ np.abs(b)).max() + 1e-30
    assert np.isnan(C[ends[-1]:]).all()     # rows past the last group: untouched
    sizes = np.array([[30, 20, 40], [7, 9, 3]])
    Af = rng.standard_normal(30 * 40 + 7 * 3).astype(np.float32)
    Bf = rng.standard_normal(40 * 20 + 3 * 9).astype(np.float32)
    Cf = np.full(30 * 20 + 7 * 9, np.nan, np.float32)
    gemm_grouped_general(Af, Bf, Cf, sizes, [0, 1200], [0, 800], [0, 600], [40, 3], [20, 9],
                         [20, 9], backend="numpy", precision=precision)
    assert np.isfinite(Cf).all()


# ---- plans ---------------------------------------------------------------------------------

def test_ieee_is_the_default_plan():
    assert portgemm.plan(SHAPES, "float32", "sm_90", precision="ieee") is \
        portgemm.plan(SHAPES, "float32", "sm_90")
    assert portgemm.plan(SHAPES, "float32", "sm_90").precision == "ieee"
    assert portgemm.plan(SHAPES, "float64", "sm_90", precision=None).precision == "ieee"


@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
@pytest.mark.parametrize("arch", sorted(TF32_MMA))
def test_mode_plans(precision, arch):
    p = portgemm.plan(SHAPES, "float32", arch, precision=precision)
    assert p.precision == precision
    assert p.mode == "per-kind" and p.split is None
    # the mode's family, and on sm_90 the wgmma family weighed with 3xtf32's
    assert {k.family for k in p.kinds} == set(weighed_families(
        dict((v, f) for f, v in TF32_FAMILIES.items())[precision], arch, aligned=False))
    assert {family_precision(k.family) for k in p.kinds} == {precision}
    assert f"precision={precision}" in repr(p) and f"precision={precision}" in p.describe()
    others = {portgemm.plan(SHAPES, "float32", arch, precision=q) for q in ("ieee", "tf32", "3xtf32")}
    assert len(others) == 3            # the mode is part of the plan cache's key
    assert portgemm.plan(SHAPES, "float32", arch, precision=precision) is p


def test_cost_model_rate_is_per_engine():
    """Tiny GEMMs go to the SIMT kind by the cost model's rates per engine: the MMA
    kinds price at the TF32 rate (a third of it for 3xtf32's three products), the SIMT
    kind at the fp32 one; with the TF32 rate made tiny every GEMM goes to SIMT, with it
    huge a large batch goes to the tensor cores."""
    arch = get_arch("sm_90")
    c = ceilings.ceilings_for(arch)
    for fam, div in (("portgemm-tf32", 1), ("portgemm-3xtf32", 3)):
        kinds = FAMILIES[fam]
        kc = kind_costs(arch, kinds, kind_table(arch, kinds, "per-kind", "float32"), "float32")
        for k, r in zip(kinds, kc.kind_flops):
            assert r == (c.tf32_mma_flops_per_s / div if k.engine == "mma" else c.fp32_flops_per_s)
    entry = {f: getattr(c, f) for f in ceilings.FIELDS}
    shapes = np.array([[8, 8, 8]] * 200 + [[512, 512, 512]] * 64)
    try:
        ceilings.use_in_memory("sm_90", {**entry, "tf32_mma_flops_per_s": 1e9})
        slow = portgemm.plan(shapes, "float32", "sm_90", precision="tf32", use_cache=False)
        ceilings.use_in_memory("sm_90", {**entry, "tf32_mma_flops_per_s": 1e16})
        fast = portgemm.plan(shapes, "float32", "sm_90", precision="tf32", use_cache=False)
    finally:
        ceilings.reload()
    assert set(slow.tiles_per_kind()) == {"32x32/4x4"}
    assert any(k.engine == "mma" and k.kind in fast.tiles_per_kind() for k in fast.kinds)


def test_ceilings_know_tf32():
    assert ceilings.ceilings_for(get_arch("sm_90")).tf32_mma_flops_per_s == 101.6e12   # measured
    a100 = ceilings.ceilings_for(get_arch("sm_80"))
    assert a100.tf32_mma_flops_per_s == a100.half_mma_flops_per_s * ceilings.TF32_OF_HALF > 0
    for name in ("gfx90a", "sm_70", "sm_86"):
        assert ceilings.ceilings_for(get_arch(name)).tf32_mma_flops_per_s == 0.0


# ---- typed errors --------------------------------------------------------------------------

@pytest.mark.parametrize("kw,err", [
    (dict(precision="fp16"), PrecisionError),
    (dict(precision=3), PrecisionError),
    (dict(precision="TF32"), PrecisionError),
    (dict(dtype="float64", precision="tf32"), PrecisionError),
    (dict(dtype="float16", precision="3xtf32"), PrecisionError),
    (dict(arch="gfx90a", precision="tf32"), PrecisionUnavailable),
    (dict(arch="sm_70", precision="3xtf32"), PrecisionUnavailable),
    (dict(arch="sm_86", precision="tf32"), PrecisionUnavailable),
    (dict(precision="tf32", strategy="magma"), PrecisionError),
    (dict(precision="tf32", family="portgemm"), PrecisionError),
    (dict(precision="3xtf32", split_k=True), PrecisionError),
    (dict(precision="tf32", mode="fused"), PrecisionError),
    (dict(family="portgemm-tf32"), PrecisionError),
])
def test_bad_requests_are_typed_errors(kw, err):
    kw = {"dtype": "float32", "arch": "sm_90", **kw}
    with pytest.raises(err) as e:
        portgemm.plan(SHAPES, **kw)
    assert isinstance(e.value, ValueError) and isinstance(e.value, PortgemmError)


def test_entry_points_refuse_before_writing():
    rng = np.random.default_rng(0)
    A, B, C0 = _batch(rng, SHAPES[:2], False, False, np.float64)
    C = [c.copy() for c in C0]
    with pytest.raises(PrecisionError):
        portgemm.gemm_vbatched(A, B, C, backend="numpy", precision="tf32")   # float64
    with pytest.raises(PrecisionError):
        portgemm.gemm_vbatched(A, B, C, backend="numpy", precision="half")
    assert all(np.array_equal(c, c0) for c, c0 in zip(C, C0))
    a, b = np.ones((10, 4)), np.ones((2, 4, 3))
    c = np.zeros((10, 3))
    for dev in (False, True):
        with pytest.raises(PrecisionError):
            gemm_grouped(a, b, c, [5, 10], backend="numpy", precision="tf32", device_offs=dev)
    with pytest.raises(PrecisionError):
        gemm_grouped_general(np.ones(8), np.ones(8), np.zeros(8), [[2, 2, 2]], [0], [0], [0],
                             2, 2, 2, backend="numpy", precision="3xtf32")
    assert not c.any()


# ---- the kernel's TF32 staging ---------------------------------------------------------------

def _tf32_kinds():
    return [k for fam in TF32_FAMILIES for k in FAMILIES[fam] if k.engine == "mma"]


@pytest.mark.parametrize("k", _tf32_kinds(), ids=lambda k: k.name)
def test_fragment_reads_are_conflict_free(k):
    """The kernel's fragment reads (PgTf32Stage, PgMmaTf32): lane l = 4 g + t reads
    x-major (x0 + g) S + k0 + t, k-major (k0 + t) S + x0 + g, 4-byte words; 32 banks of
    4 bytes. Every read of every fragment register must hit 32 distinct banks."""
    px, pk = render.TF32_PAD
    lanes = np.arange(32)
    g, t = lanes >> 2, lanes & 3
    for x in (k.tm, k.tn):
        s_x, s_k = k.tk + px, x + pk            # x-major (k contiguous) and k-major rows
        for x0 in range(0, x, 8):
            for k0 in range(0, k.tk, 4):
                xm = (x0 + g) * s_x + k0 + t
                km = (k0 + t) * s_k + x0 + g
                assert len(set(xm % 32)) == 32, (x, x0, k0, "x-major")
                assert len(set(km % 32)) == 32, (x, x0, k0, "k-major")
        assert (s_x * 4) % 16 == 0 and (s_k * 4) % 16 == 0     # rows stay 16-byte aligned


def test_tf32_variants_fit_static_shared_memory():
    vs = [v for v in catalogue_variants(("float32",), OPS) if is_tf32(v)]
    assert vs and all(v.layout == "tile-list" and not v.fused for v in vs)
    for v in vs:
        st = render.stages(v)
        elems = render.smem_elems_async(v.kinds, "float32", st)
        assert elems * 4 <= render.STATIC_SMEM_BYTES, v.name
        if v.kinds[0].engine == "mma":
            assert st >= 2, v.name
            d = render.defines(v)
            assert d["PG_TF32"] == "1" and d["PG_KINDS(X)"].endswith(
                f"{4 if '3xtf32' in v.name else 3})")
    # no other variant is rendered with the TF32 define: their kernels compile as before
    assert not any("PG_TF32" in render.defines(v) for v in catalogue_variants() if not is_tf32(v))


def test_vendor_matrix_builds_tf32_for_nvidia_only():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import vendor_matrix
    v = next(v for v in catalogue_variants(("float32",)) if is_tf32(v))
    assert vendor_matrix.builds_for(v, "sm_80") and vendor_matrix.builds_for(v, "sm_90")
    assert not vendor_matrix.builds_for(v, "gfx90a")
    assert any(is_tf32(r) for r in vendor_matrix.ragged_variants())


def test_ragged_candidates_skip_the_spilling_entry_point():
    from portgemm.grouped.ragged_kind import RAGGED_SPILLS, candidate_kinds, choose_kind
    for p in ("tf32", "3xtf32"):
        kinds = candidate_kinds("float32", None, p)
        assert kinds and {k.family for k in kinds} == {f"portgemm-{p}"}
        assert not RAGGED_SPILLS & {k.name for k in kinds}
    k = choose_kind(get_arch("sm_90"), 8, 4096, 512, 512, "float32", "3xtf32")
    assert k.family == "portgemm-3xtf32" and k.name not in RAGGED_SPILLS


def test_3xtf32_weighs_the_wgmma_kinds_for_unaligned_rows_too():
    """wgmma-3xtf32 stages its operands as the TF32 kinds do (tiles.ANY_ROWS), so unlike
    the 16-bit wgmma kinds it is weighed for a batch whose rows are not 16-byte aligned:
    large GEMMs of odd K and N take its tiles on sm_90, and sm_80 never sees them."""
    from portgemm.planner.alignment import aligned_batch
    shapes = np.tile([1021, 1023, 511], (64, 1))
    assert not aligned_batch(shapes, "float32")
    p = portgemm.plan(shapes, "float32", "sm_90", precision="3xtf32")
    assert "wgmma-3xtf32" in {k.family for k in p.kinds if k.kind in p.tiles_per_kind()}
    q = portgemm.plan(shapes, "float32", "sm_80", precision="3xtf32")
    assert {k.family for k in q.kinds} == {"portgemm-3xtf32"}
    half = portgemm.plan(shapes, "float16", "sm_90")    # 16-bit: aligned batches only
    assert not any(k.family.startswith("wgmma") for k in half.kinds)
