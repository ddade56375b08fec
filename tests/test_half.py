"""float16 and bfloat16 without a GPU: the numpy backend (the reference that proves a plan
right) against a float64 reference, the catalogue's 16-bit families, what the kernel
source is rendered with, the planner's choices (its own family, per kind, never split;
SIMT vs tensor cores by the cost model's two rates) and the typed errors.

Tolerance, from the formats (the same as tests/test_gpu_half.py): the inputs are exact
in float64, each product of two 16-bit values is exact in fp32, the K-term sum and alpha,
beta are fp32 (unit roundoff 2^-24, K + 2 roundings), and the result is rounded once to
the output format (u = 2^-11 float16, 2^-8 bfloat16; below the smallest normal an
absolute half-spacing of its subnormals, tiny = 2^-25 / 2^-134):

    |C - ref| <= 2 (u |ref| + tiny + (K + 2) 2^-24 (|alpha| |A| |B| + |beta| |C0|))
"""
from __future__ import annotations

import numpy as np
import pytest

from test_vendor_matrix_report import vm  # noqa: F401 (tools/vendor_matrix.py as a fixture)

import portgemm
from portgemm import planner
from portgemm.errors import DtypeError, ValidationError
from portgemm.kernels import render
from portgemm.kernels.variants import HALF_DTYPES, SplitReduce, Variant, catalogue_variants
from portgemm.occupancy import get_arch
from portgemm.occupancy.archs import HALF_MMA, HALF_MMA_NOT_BUILT, has_half_mma
from portgemm.occupancy.ceilings import MMA_EMULATION, ceilings_for
from portgemm.tiles import FAMILIES, HALF_FAMILIES, MMA_SHAPE_HALF, MMA_WARP, TileConfig

ml_dtypes = pytest.importorskip("ml_dtypes")
NP = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
UNIT = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
TINY = {"float16": 2.0 ** -25, "bfloat16": 2.0 ** -134}
TRANS = [(False, False), (False, True), (True, False), (True, True)]
EDGE = [(1, 1, 1), (7, 9, 17), (16, 8, 16), (33, 65, 31), (129, 127, 70), (64, 64, 0),
        (100, 3, 5)]


def rand(rng, rows, cols, dtype, odd):
    """A (rows, cols) view with an odd leading dimension when ``odd``."""
    ld = cols + (1 if cols % 2 == 0 else 2) if odd else cols
    buf = np.zeros((max(rows, 1), max(ld, 1)), NP[dtype])
    buf[:rows, :cols] = rng.standard_normal((rows, cols)).astype(NP[dtype])
    return buf[:rows, :cols]


def batch(rng, shapes, dtype, ta, tb, odd):
    n = len(shapes)
    alpha = rng.uniform(-2, 2, n)
    alpha[::4] = 0.0                              # alpha == 0: C = beta C, A and B unread
    beta = np.where(np.arange(n) % 2 == 0, 0.0, rng.uniform(-2, 2, n))
    A = [rand(rng, *((k, m) if ta else (m, k)), dtype, odd) for m, n_, k in shapes]
    B = [rand(rng, *((n_, k) if tb else (k, n_)), dtype, odd) for m, n_, k in shapes]
    C = [rand(rng, m, n_, dtype, odd) for m, n_, k in shapes]
    for c, b in zip(C, beta):
        if b == 0:
            c[...] = np.nan                       # must be overwritten, never read
    return A, B, C, alpha, beta


def check(got, A, B, C0, alpha, beta, ta, tb, dtype):
    for i, (g, a, b, c0) in enumerate(zip(got, A, B, C0)):
        a = a.astype(np.float64).T if ta else a.astype(np.float64)
        b = b.astype(np.float64).T if tb else b.astype(np.float64)
        c0 = c0.astype(np.float64)
        ref = alpha[i] * (a @ b) + (beta[i] * c0 if beta[i] != 0 else 0.0)
        mag = abs(alpha[i]) * (np.abs(a) @ np.abs(b)) + (abs(beta[i]) * np.abs(c0)
                                                          if beta[i] != 0 else 0.0)
        tol = 2 * (UNIT[dtype] * np.abs(ref) + TINY[dtype] + (a.shape[1] + 2) * 2.0 ** -24 * mag)
        g = g.astype(np.float64)
        assert np.all(np.isfinite(g)), f"GEMM {i}: non-finite"
        assert np.all(np.abs(g - ref) <= tol), (i, float(np.max(np.abs(g - ref) - tol)))


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("trans", TRANS, ids=lambda t: ("t" if t[0] else "n") + ("t" if t[1] else "n"))
@pytest.mark.parametrize("odd", [False, True], ids=["tight", "odd-ld"])
def test_numpy_backend_against_float64(dtype, trans, odd):
    ta, tb = trans
    rng = np.random.default_rng(hash((dtype, ta, tb, odd)) % 2**32)
    A, B, C, alpha, beta = batch(rng, EDGE, dtype, ta, tb, odd)
    C0 = [c.copy() for c in C]
    portgemm.gemm_vbatched(A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb,
                           backend="numpy")
    assert all(c.dtype == NP[dtype] for c in C)
    check(C, A, B, C0, alpha, beta, ta, tb, dtype)


@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_scalar_alpha_beta_and_a_3d_stack(dtype):
    rng = np.random.default_rng(7)
    A = rng.standard_normal((5, 20, 12)).astype(NP[dtype])
    B = rng.standard_normal((5, 12, 9)).astype(NP[dtype])
    C = rng.standard_normal((5, 20, 9)).astype(NP[dtype])
    C0 = C.copy()
    portgemm.gemm_vbatched(A, B, C, alpha=0.5, beta=-1.25, backend="numpy")
    check(list(C), list(A), list(B), list(C0), [0.5] * 5, [-1.25] * 5, False, False, dtype)


def test_mixed_and_unsupported_dtypes_are_typed_errors():
    f16 = np.ones((4, 4), np.float16)
    bf16 = np.ones((4, 4), NP["bfloat16"])
    f32 = np.ones((4, 4), np.float32)
    for A, B, C in ((f16, bf16, f16), (bf16, f16, bf16), (f16, f16, f32), (f32, bf16, f32)):
        with pytest.raises(DtypeError, match="mixed dtypes"):
            portgemm.gemm_vbatched([A], [B], [C.copy()], backend="numpy")
    i16 = np.ones((4, 4), np.int16)
    with pytest.raises(DtypeError, match="unsupported"):
        portgemm.gemm_vbatched([i16], [i16], [i16.copy()], backend="numpy")


def test_bfloat16_without_ml_dtypes_is_a_typed_error(monkeypatch):
    import sys

    from portgemm import arrays
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)   # import fails
    with pytest.raises(DtypeError, match="ml_dtypes"):
        arrays.bfloat16_dtype()
    with pytest.raises(DtypeError, match="ml_dtypes"):
        arrays.numpy_dtype("bfloat16")


# ---- catalogue, render -------------------------------------------------------------------

def test_half_families_hold_the_same_kinds_one_per_dtype():
    assert HALF_FAMILIES == {"portgemm-f16": "float16", "portgemm-bf16": "bfloat16"}
    f16, bf16 = FAMILIES["portgemm-f16"], FAMILIES["portgemm-bf16"]
    assert [k.kind for k in f16] == [k.kind for k in bf16]
    assert [k.engine for k in f16].count("simt") == 1     # the tiny-GEMM fallback
    for k in f16:
        if k.engine == "mma":
            m, n, kk = MMA_SHAPE_HALF
            assert k.rm % m == 0 and k.rn % n == 0 and k.tk % kk == 0
            assert (k.tm // k.rm) * (k.tn // k.rn) * MMA_WARP == k.threads
            assert 128 <= k.threads <= 256 and k.tk == 32
            assert k.accumulators == k.rm * k.rn // MMA_WARP


def test_half_mma_shape_rule():
    with pytest.raises(ValueError, match="16x8x16"):
        TileConfig("portgemm-f16", "x", 64, 64, 8, 128, 32, 32, "mma")   # tk 8 < 16


def test_half_variants_in_the_catalogue_are_per_kind_only():
    vs = [v for v in catalogue_variants() if v.dtype in HALF_DTYPES]
    assert len(vs) == 2 * len(FAMILIES["portgemm-f16"])
    assert not any(v.fused for v in vs)
    assert all(k.family == {"float16": "portgemm-f16", "bfloat16": "portgemm-bf16"}[v.dtype]
               for v in vs for k in v.kinds)
    with pytest.raises(ValueError):
        SplitReduce("float16")


@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_render_defines(dtype):
    fam = {"float16": "portgemm-f16", "bfloat16": "portgemm-bf16"}[dtype]
    for k in FAMILIES[fam]:
        d = render.defines(Variant((k,), dtype))
        assert d["PG_T"] == {"float16": "PgHalf", "bfloat16": "PgBf16"}[dtype]
        assert d["PG_ACC"] == "float" and d["PG_HALF"] == "1"
        assert d["PG_PAD"] == "8"                      # 16 bytes of 2-byte elements
        assert d["PG_KINDS(X)"].endswith(", 2)" if k.engine == "mma" else ", 0)")
        st = render.stages(Variant((k,), dtype))
        assert render.smem_elems_async((k,), dtype, st) * 2 <= render.STATIC_SMEM_BYTES
    f32 = render.defines(Variant((FAMILIES["portgemm"][0],), "float32"))
    assert f32["PG_HALF"] == "0" and "PG_ACC" not in f32


def test_the_128x128_kind_keeps_its_register_cap_in_every_entry_point():
    """The 16-bit 128x128 kind runs 2 blocks an SM (128 registers) in its tile-list and
    its ragged entry points alike (the ragged one calls its tile function, so it fits)."""
    for fam, dtype in HALF_FAMILIES.items():
        k = next(k for k in FAMILIES[fam] if k.kind == "128x128/w64x32")
        for layout in ("tile-list", "ragged"):
            for ta, tb in TRANS:
                assert render.defines(Variant((k,), dtype, layout, ta, tb))["PG_MIN_BLOCKS"] == "2"


def test_vendor_matrix_compiles_the_16bit_ragged_entry_points(vm):
    """A packed 16-bit call with device offsets runs a ragged entry point of any kind
    of its family, in any transpose: the matrix compiles (and spill-checks) them all."""
    got = {(v.dtype, v.kinds[0].kind, v.trans_a, v.trans_b) for v in vm.ragged_variants()}
    for fam, dtype in HALF_FAMILIES.items():
        for k in FAMILIES[fam]:
            for ta, tb in TRANS:
                assert (dtype, k.kind, ta, tb) in got
    assert all(vm.must_not_spill(v) for v in vm.ragged_variants())


# ---- archs, ceilings, planner --------------------------------------------------------------

def test_half_mma_archs_and_rates_are_data():
    assert HALF_MMA == {"sm_80", "sm_90"}
    assert has_half_mma("h100") and not has_half_mma("sm_70")
    for amd in ("gfx908", "gfx90a", "gfx940"):   # AMD: the MFMA families (test_mfma_kinds.py)
        assert not has_half_mma(amd) and amd not in HALF_MMA_NOT_BUILT
    for name in ("sm_80", "sm_90"):
        c = ceilings_for(get_arch(name))
        assert c.mma_flops_per_s("float16") == c.mma_flops_per_s("bfloat16") > \
            4 * c.flops_per_s("float16")
        assert c.flops_per_s("float16") == c.fp32_flops_per_s   # SIMT kind: fp32 math
    c = ceilings_for(get_arch("gfx90a"))
    assert c.mma_flops_per_s("float16") == c.fp32_flops_per_s * MMA_EMULATION


@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_planner_runs_the_half_family_per_kind(dtype):
    rng = np.random.default_rng(3)
    shapes = rng.integers(1, 600, (200, 3))
    p = planner.plan(shapes, dtype, "sm_90")
    assert p.mode == "per-kind" and p.split is None
    assert {k.family for k in p.kinds} == {{"float16": "portgemm-f16",
                                            "bfloat16": "portgemm-bf16"}[dtype]}
    assert p.dtype.name == dtype
    engines = {p.kinds[int(i)].engine for i in np.unique(p.tiles["kind"])}
    assert "mma" in engines                      # large GEMMs go to the tensor cores


def test_tiny_gemms_go_to_simt_only_where_the_model_says():
    # many 4x4x4 GEMMs: an MMA tile would compute 32x32 for 16 outputs; the cost model's
    # rates decide, so on an arch without tensor cores for 16 bits (sm_70: emulated MMA)
    # every GEMM takes the SIMT kind
    tiny = np.tile([[4, 4, 4]], (64, 1))
    big = np.tile([[512, 512, 512]], (8, 1))
    p = planner.plan(np.vstack([tiny, big]), "float16", "sm_70")
    assert {p.kinds[int(i)].engine for i in np.unique(p.tiles["kind"])} == {"simt"}
    q = planner.plan(big, "float16", "sm_90")
    assert {q.kinds[int(i)].engine for i in np.unique(q.tiles["kind"])} == {"mma"}


def test_half_dtypes_are_refused_on_amd_without_mfma():
    for dt in HALF_DTYPES:   # gfx908 / gfx90a / gfx940 plan them on MFMA (test_mfma_kinds.py)
        with pytest.raises(DtypeError, match="no kernels for gfx1100"):
            planner.plan([[64, 64, 64]], dt, "gfx1100")


def test_half_plan_options_that_cannot_apply_are_typed_errors():
    s = [[64, 64, 64]]
    with pytest.raises(DtypeError, match="default strategy"):
        planner.plan(s, "float16", strategy="magma")
    with pytest.raises(ValidationError, match="per-kind"):
        planner.plan(s, "bfloat16", mode="fused")
    with pytest.raises(ValidationError, match="never splits"):
        planner.plan(s, "float16", split_k=True)
    with pytest.raises(ValidationError, match="family"):
        planner.plan(s, "float16", family="portgemm")
    assert planner.plan(s, "float16", mode="per-kind", family="portgemm-f16").mode == "per-kind"


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("device_offs", [None, True], ids=["host-offs", "device-offs"])
def test_packed_ragged_api(dtype, device_offs):
    from portgemm.grouped import gemm_grouped
    rng = np.random.default_rng(11)
    G, K, N, T = 4, 40, 24, 53
    offs = np.array([10, 10, 37, 50])              # an empty group; rows 50.. untouched
    A = rng.standard_normal((T, K)).astype(NP[dtype])
    B = rng.standard_normal((G, K, N)).astype(NP[dtype])
    C = np.full((T, N), np.nan, NP[dtype])
    C[50:] = 3.0
    alpha = np.array([1.0, 2.0, -0.5, 0.0])
    gemm_grouped(A, B, C, offs, alpha=alpha, beta=0.0, backend="numpy", device_offs=device_offs)
    starts = np.concatenate([[0], offs[:-1]])
    check([C[s:e] for s, e in zip(starts, offs)], [A[s:e] for s, e in zip(starts, offs)],
          list(B), [np.zeros((e - s, N), NP[dtype]) for s, e in zip(starts, offs)],
          alpha, np.zeros(G), False, False, dtype)
    assert np.all(C[50:].astype(np.float64) == 3.0)
