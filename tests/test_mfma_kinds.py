"""AMD's MFMA kinds (tiles.MFMA_FAMILIES) on the CPU: catalogue, rendering, the vendor
matrix's cells, the compilers' AGPR figures, the planner's 16-bit plans on AMD and the
cost model's rate per engine. Compiled and modelled only: no AMD GPU runs them here."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import portgemm  # noqa: F401  (the default resources provider)
from portgemm import planner
from portgemm.errors import CompileError, DtypeError, PortgemmError, ValidationError
from portgemm.kernels.render import defines, render
from portgemm.kernels.variants import Variant, catalogue_variants
from portgemm.occupancy import get_arch
from portgemm.occupancy.archs import MFMA, has_mfma
from portgemm.occupancy.ceilings import MMA_EMULATION, ceilings_for
from portgemm.planner.cost_model import kind_costs
from portgemm.planner.parallelism import kind_table
from portgemm.tiles import FAMILIES, FAMILY_ARCHS, MFMA_FAMILIES, TileConfig, family_builds_for

ROOT = Path(__file__).resolve().parents[1]
MFMA_ARCHS = ("gfx908", "gfx90a", "gfx940")


def _vendor_matrix():
    spec = importlib.util.spec_from_file_location("vendor_matrix", ROOT / "tools" / "vendor_matrix.py")
    vm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vm)
    return vm


def _families(variants) -> set:
    return {k.family for v in variants for k in v.kinds}


# ---- catalogue ------------------------------------------------------------------------------

def test_mfma_families_are_built_for_their_archs_only():
    assert not _families(catalogue_variants()) & set(MFMA_FAMILIES)   # the portable catalogue
    for arch in ("sm_80", "sm_90", "gfx1100"):
        assert not _families(catalogue_variants(arch=arch)) & set(MFMA_FAMILIES), arch
    assert set(MFMA_FAMILIES) <= _families(catalogue_variants(arch="gfx90a"))
    assert set(MFMA_FAMILIES) <= _families(catalogue_variants(arch="gfx940"))
    g908 = _families(catalogue_variants(arch="gfx908"))
    assert {"mfma-f16", "mfma-bf16"} <= g908 and "mfma-f64" not in g908
    assert not family_builds_for("mfma-f64", "gfx908") and family_builds_for("portgemm", "gfx908")
    for dt, archs in MFMA.items():       # the archs table reads the same one list
        fam = next(f for f, d in MFMA_FAMILIES.items() if d == dt)
        assert archs == {a for a in FAMILY_ARCHS[fam] if a != "gfx941"}


def test_mfma_kinds_are_four_waves_per_kind_only():
    for fam, dtype in MFMA_FAMILIES.items():
        kinds = FAMILIES[fam]
        assert {k.engine for k in kinds} == {"simt", "mma"}     # one SIMT kind for tiny GEMMs
        for k in kinds:
            if k.engine == "mma":
                assert k.threads == 256 and k.lanes == 64
                assert k.accumulators == k.rm * k.rn // 64
        vs = [v for v in catalogue_variants(arch="gfx90a") if v.kinds[0].family == fam]
        assert vs and not any(v.fused for v in vs) and {v.dtype for v in vs} == {dtype}
    with pytest.raises(ValueError, match="wave"):   # 32-lane warps do not tile an MFMA kind
        TileConfig("mfma-f16", "bad", 64, 64, 32, 128, 32, 32, "mma")


def test_render_marks_mfma_kinds_and_only_them():
    k = next(k for k in FAMILIES["mfma-bf16"] if k.kind == "64x64/w32x32")
    d = defines(Variant((k,), "bfloat16"))
    assert d["PG_MFMA_KINDS"] == "1" and d["PG_KINDS(X)"].endswith(", 5)")
    assert d["PG_HALF"] == "1" and d["PG_ACC"] == "float"
    simt = FAMILIES["mfma-bf16"][0]
    assert "PG_MFMA_KINDS" not in defines(Variant((simt,), "bfloat16"))
    for v in catalogue_variants():          # every other variant renders as before
        assert "PG_MFMA_KINDS" not in defines(v)
    f64 = next(k for k in FAMILIES["mfma-f64"] if k.engine == "mma")
    assert defines(Variant((f64,), "float64"))["PG_KINDS(X)"].endswith(", 5)")


def test_mfma_kind_does_not_compile_for_nvidia():
    from portgemm.kernels import nvrtc
    try:
        nvrtc.version()
    except PortgemmError as e:
        pytest.skip(f"no NVRTC here: {e}")
    k = next(k for k in FAMILIES["mfma-f16"] if k.engine == "mma")
    r = render(Variant((k,), "float16"))
    with pytest.raises(CompileError, match="MFMA kinds"):
        nvrtc.compile(r.source, r.name, "sm_90")


# ---- the compilers' figures: AGPRs from the code object -------------------------------------

def _clang_or_skip():
    from portgemm.kernels import clang_amd
    try:
        clang_amd.toolchain()
    except PortgemmError as e:
        pytest.skip(f"no clang for AMD here: {e}")
    return clang_amd


@pytest.mark.parametrize("arch", MFMA_ARCHS)
def test_agprs_come_from_the_code_object(arch):
    """The MFMA accumulators of 128x128/w64x64 (64 floats a lane) sit in AGPRs (gfx908's
    MFMA writes AGPRs only); the code object's .agpr_count says how many, as LLVM's
    remark does, and the model's waves per SIMD match LLVM's register term."""
    clang_amd = _clang_or_skip()
    from portgemm.occupancy import occupancy
    k = next(k for k in FAMILIES["mfma-f16"] if k.kind == "128x128/w64x64")
    r = render(Variant((k,), "float16"))
    c = clang_amd.compile(r.source, r.name, arch)
    res = c.resources
    assert res.agprs == c.remark["AGPRs"] >= 64
    assert res.spill_bytes == 0 and c.remark["ScratchSize [bytes/lane]"] == 0
    if arch == "gfx908":     # max(arch, agpr) in the note; the remark has the arch count
        assert res.registers >= c.remark["VGPRs"]
    else:                    # unified: alignTo(arch, 4) + agpr in the note
        assert res.registers == -(-c.remark["VGPRs"] // 4) * 4
    o = occupancy(arch, k.threads, res)
    waves_per_simd = min(v for name, v in o.wave_limits.items()
                         if name in ("waves", "vgpr", "agpr", "sgpr") and v is not None) / 4
    assert waves_per_simd >= c.remark["Occupancy [waves/SIMD]"]   # LDS may bind below
    vm = _vendor_matrix()
    assert vm._model(arch, k.threads, res)["reg_per_simd"] == waves_per_simd


# ---- the vendor matrix's cells -------------------------------------------------------------

def test_vendor_matrix_builds_mfma_on_amd_and_mma_sync_on_nvidia():
    vm = _vendor_matrix()
    variants = vm.matrix_variants()
    mfma = [v for v in variants if isinstance(v, Variant) and v.layout == "tile-list"
            and v.kinds[0].family in MFMA_FAMILIES]
    # every kind in all four transposes, all of them held to "no spill"
    assert len(mfma) == 4 * sum(len(FAMILIES[f]) for f in MFMA_FAMILIES)
    assert all(vm.must_not_spill(v) for v in mfma)
    for v in mfma:
        f64 = v.dtype == "float64"
        assert vm.builds_for(v, "gfx90a") and vm.builds_for(v, "gfx940")
        assert vm.builds_for(v, "gfx908") != f64
        assert not vm.builds_for(v, "sm_80") and not vm.builds_for(v, "sm_90")
    half = [v for v in variants if isinstance(v, Variant) and v.kinds[0].family == "portgemm-f16"]
    assert half and all(vm.builds_for(v, "sm_90") and not vm.builds_for(v, "gfx90a") for v in half)
    f32 = next(v for v in variants if isinstance(v, Variant) and v.dtype == "float32")
    assert all(vm.builds_for(f32, a) for a in vm.ARCHS)


def test_recorded_figures_cover_the_mfma_variants():
    from portgemm.kernels import resources
    for arch in MFMA_ARCHS:
        for v in catalogue_variants(arch=arch):
            if v.kinds[0].family not in MFMA_FAMILIES:
                continue
            res = resources.recorded(arch, v.name)
            assert res is not None, (arch, v.name)
            assert res.spill_bytes == 0, (arch, v.name)
            if v.kinds[0].engine == "mma":
                assert res.agprs > 0, (arch, v.name)


# ---- planner and cost model ---------------------------------------------------------------

@pytest.mark.parametrize("arch", MFMA_ARCHS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_amd_plans_the_16bit_dtypes_on_mfma(arch, dtype):
    rng = np.random.default_rng(7)
    shapes = rng.integers(1, 700, (300, 3))
    p = planner.plan(shapes, dtype, arch)
    assert p.mode == "per-kind" and p.split is None and p.dtype.name == dtype
    assert {k.family for k in p.kinds} == {f"mfma-{'f16' if dtype == 'float16' else 'bf16'}"}
    used = {p.kinds[int(i)].engine for i in np.unique(p.tiles["kind"])}
    assert "mma" in used                              # large GEMMs go to the matrix cores


def test_amd_16bit_refusals_are_typed_and_name_the_arch():
    for dt in ("float16", "bfloat16"):
        with pytest.raises(DtypeError, match="gfx1100"):
            planner.plan([[64, 64, 64]], dt, "gfx1100")
    with pytest.raises(ValidationError, match="mfma-f16"):
        planner.plan([[64, 64, 64]], "float16", "gfx90a", family="portgemm-f16")
    with pytest.raises(ValidationError, match="per-kind"):
        planner.plan([[64, 64, 64]], "bfloat16", "gfx908", mode="fused")
    # NVIDIA keeps its own family (with its wgmma kinds on sm_90, tiles.WEIGHED_WITH)
    assert {k.family for k in planner.plan([[64, 64, 64]], "float16", "sm_90").kinds} == \
        {"portgemm-f16", "wgmma-f16"}


def test_mfma_rates_are_per_engine_and_per_dtype():
    g908, g90a, g940 = (ceilings_for(get_arch(a)) for a in MFMA_ARCHS)
    # spec ratios (ceilings.json) to the unpacked fp32 vector rate: MI100 fp16 8x, bf16
    # 4x; MI210 8x; MI300 16x. gfx908's SIMT fp32 rate is that rate; gfx90a's and
    # gfx940's is twice it (packed FMAs, tests/test_amd_packed_fma.py)
    assert g908.mfma_flops_per_s("float16") == pytest.approx(8 * g908.fp32_flops_per_s)
    assert g908.mfma_flops_per_s("bfloat16") == pytest.approx(4 * g908.fp32_flops_per_s)
    assert g908.mfma_flops_per_s("float64") == 0.0                  # no fp64 MFMA on gfx908
    assert g90a.mfma_flops_per_s("bfloat16") == pytest.approx(8 / 2 * g90a.fp32_flops_per_s)
    assert g90a.mfma_flops_per_s("float64") == pytest.approx(2 * g90a.fp64_flops_per_s)
    assert g940.mfma_flops_per_s("float16") == pytest.approx(16 / 2 * g940.fp32_flops_per_s)
    for c in (g908, g90a, g940):     # the NVIDIA MMA kinds stay emulated on AMD
        assert c.mma_flops_per_s("float64") == pytest.approx(MMA_EMULATION * c.fp64_flops_per_s)
    assert ceilings_for(get_arch("sm_90")).mfma_flops_per_s("float16") == 0.0
    assert not has_mfma("sm_90", "float16") and has_mfma("mi300x", "float64")


@pytest.mark.parametrize("fam,dtype", [("mfma-bf16", "bfloat16"), ("mfma-f64", "float64")])
def test_cost_model_prices_mfma_kinds_at_the_mfma_rate(fam, dtype):
    a = get_arch("gfx90a")
    kinds = FAMILIES[fam]
    kc = kind_costs(a, kinds, kind_table(a, kinds, "per-kind", dtype), dtype)
    c = ceilings_for(a)
    want = [c.mfma_flops_per_s(dtype) if k.engine == "mma" else c.flops_per_s(dtype) for k in kinds]
    assert kc.kind_flops.tolist() == pytest.approx(want)
    # the DMMA kinds of portgemm-f64 on the same arch: still their emulation's rate
    f64 = FAMILIES["portgemm-f64"]
    kc = kind_costs(a, f64, kind_table(a, f64, "per-kind", "float64"), "float64")
    assert max(kc.kind_flops) == pytest.approx(c.fp64_flops_per_s)


@pytest.mark.parametrize("arch", ["gfx90a", "gfx940"])
def test_default_fp64_plan_weighs_the_mfma_family_where_the_arch_has_it(arch):
    rng = np.random.default_rng(11)
    shapes = np.stack([rng.integers(16, 513, 256)] * 2 + [rng.integers(16, 513, 256)], 1)
    p = planner.plan(shapes, "float64", arch)
    assert {k.family for k in p.kinds} == {"mfma-f64"} and p.mode == "per-kind"
    used = {p.kinds[int(i)].engine for i in np.unique(p.tiles["kind"])}
    assert "mma" in used
    # named explicitly, the DMMA family still plans (its MMA kinds emulated, so unused)
    q = planner.plan(shapes, "float64", arch, mode="per-kind", family="portgemm-f64")
    assert q.predicted_ms > p.predicted_ms
    # gfx908 has no fp64 MFMA: its default is what it was
    r = planner.plan(shapes, "float64", "gfx908")
    assert "mfma-f64" not in {k.family for k in r.kinds}


UNIT = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float64": 2.0 ** -53}


@pytest.mark.parametrize("arch", MFMA_ARCHS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_an_amd_plan_runs_on_the_numpy_reference(monkeypatch, arch, dtype):
    """Planned for an AMD arch (its MFMA families where it has them), the reference
    executor covers every element once: beta = 0 over NaN C, edges that are not whole
    16x16 blocks. Result rounded once to the dtype from fp32 sums (fp64: fp64)."""
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    from portgemm.arrays import numpy_dtype as np_dtype
    monkeypatch.setenv("PORTGEMM_ARCH", arch)
    nd = np_dtype(dtype)
    rng = np.random.default_rng(13)
    dims = [(130, 70, 40), (5, 9, 200), (300, 33, 129), (64, 64, 64), (1, 1, 1)]
    A = [rng.standard_normal((m, k)).astype(nd) for m, k, _ in dims]
    B = [rng.standard_normal((k, n)).astype(nd) for _, k, n in dims]
    C = [np.full((m, n), np.nan, nd) for m, _, n in dims]
    portgemm.gemm_vbatched(A, B, C, alpha=1.0, beta=0.0, backend="numpy")
    acc = 2.0 ** -53 if dtype == "float64" else 2.0 ** -24
    for a, b, c in zip(A, B, C):
        a, b = a.astype(np.float64), b.astype(np.float64)
        ref, mag = a @ b, np.abs(a) @ np.abs(b)
        tol = 2 * UNIT[dtype] * np.abs(ref) + (a.shape[1] + 2) * acc * mag + 1e-300
        assert np.all(np.abs(c.astype(np.float64) - ref) <= tol)


def test_device_offsets_calls_weigh_the_mfma_families_on_amd():
    """A packed (ragged-M) call on an MFMA arch picks its kind among the MFMA family (16
    bits, and fp64 on gfx90a/gfx940 beside the paper's kinds), as the planner does; the
    portable candidates (what NVIDIA weighs) are unchanged."""
    from portgemm.grouped.ragged_kind import candidate_families, choose_kind, predicted_seconds
    assert candidate_families("float16") == ("portgemm-f16",)
    assert candidate_families("float64") == ("zhang2025", "portgemm-f64")
    for arch in MFMA_ARCHS:
        a = get_arch(arch)
        for dt in ("float16", "bfloat16"):
            fams = {k.family for k, _ in predicted_seconds(a, 64, 4096, 256, 256, dt)}
            assert fams == {f"mfma-{'f16' if dt == 'float16' else 'bf16'}"}
            assert choose_kind(a, 64, 4096, 256, 256, dt).engine == "mma"
        f64 = set(candidate_families("float64", a))
        assert f64 == ({"zhang2025", "portgemm-f64"} if arch == "gfx908" else {"zhang2025", "mfma-f64"})
    assert candidate_families("float16", get_arch("sm_90")) == ("portgemm-f16", "wgmma-f16")
    assert candidate_families("float16", get_arch("sm_80")) == ("portgemm-f16",)


def test_vendor_matrix_compiles_the_mfma_ragged_entry_points():
    vm = _vendor_matrix()
    ragged = [v for v in vm.ragged_variants() if v.kinds[0].family in MFMA_FAMILIES]
    assert len(ragged) == 4 * sum(len(FAMILIES[f]) for f in MFMA_FAMILIES)
    assert all(vm.must_not_spill(v) for v in ragged)
    assert not any(vm.builds_for(v, "sm_90") for v in ragged)


@pytest.mark.parametrize("device_offs", [None, True], ids=["host-offs", "device-offs"])
def test_amd_packed_16bit_call_on_the_numpy_reference(monkeypatch, device_offs):
    from portgemm.grouped import gemm_grouped
    monkeypatch.setenv("PORTGEMM_ARCH", "gfx90a")
    rng = np.random.default_rng(17)
    G, K, N, T = 4, 40, 24, 53
    offs = np.array([10, 10, 37, 50])              # an empty group; rows 50.. untouched
    A = rng.standard_normal((T, K)).astype(np.float16)
    B = rng.standard_normal((G, K, N)).astype(np.float16)
    C = np.full((T, N), np.nan, np.float16)
    C[50:] = 3.0
    gemm_grouped(A, B, C, offs, beta=0.0, backend="numpy", device_offs=device_offs)
    for g, (s, e) in enumerate(zip(np.concatenate([[0], offs[:-1]]), offs)):
        a, b = A[s:e].astype(np.float64), B[g].astype(np.float64)
        tol = 2 * UNIT["float16"] * np.abs(a @ b) + (K + 2) * 2.0 ** -24 * (np.abs(a) @ np.abs(b))
        assert np.all(np.abs(C[s:e].astype(np.float64) - a @ b) <= tol)
    assert np.all(C[50:].astype(np.float64) == 3.0)
