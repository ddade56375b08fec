"""The Hopper wgmma kinds (tiles.WGMMA_FAMILIES) without a GPU: family data, the arch they
are built for, rendering and the NVRTC target, compiled figures where NVRTC is installed,
the planner weighing them (aligned batches on sm_90 only), device-offsets calls and the
measured rate. tests/test_gpu_wgmma.py runs them."""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from portgemm import planner
from portgemm.errors import CompileError, ValidationError
from portgemm.grouped.ragged_kind import candidate_families, choose_kind
from portgemm.kernels import nvrtc, render
from portgemm.kernels.variants import Variant, catalogue_variants
from portgemm.occupancy import ceilings, get_arch
from portgemm.occupancy.archs import WGMMA, has_wgmma
from portgemm.planner.alignment import aligned_batch
from portgemm.tiles import (FAMILIES, FAMILY_ARCHS, HALF_FAMILIES, WEIGHED_WITH, WGMMA_FAMILIES,
                            family_builds_for, weighed_families)

SM90 = get_arch("sm_90")
FAMILY = {d: f for f, d in WGMMA_FAMILIES.items()}
HALF = {d: f for f, d in HALF_FAMILIES.items()}


def test_families_are_warpgroup_kinds_of_64_accumulators():
    assert WGMMA_FAMILIES == {"wgmma-f16": "float16", "wgmma-bf16": "bfloat16",
                              "wgmma-3xtf32": "float32"}
    for fam in ("wgmma-f16", "wgmma-3xtf32"):    # the same tiles in every wgmma family
        assert FAMILIES[fam] == tuple(
            type(k)(fam, *[getattr(k, f) for f in ("kind", "tm", "tn", "tk", "threads",
                                                    "rm", "rn", "engine")])
            for k in FAMILIES["wgmma-bf16"])
    for fam, dtype in WGMMA_FAMILIES.items():
        for k in FAMILIES[fam]:
            assert k.engine == "mma" and k.lanes == 128 and (k.rm, k.rn) == (64, 128)
            assert k.accumulators == 64 and k.threads == 128 * (k.tm // 64) * (k.tn // 128)
            assert k.tk == 32 and render.engine_id(k, dtype) == render.ENGINE_WGMMA == 6


def test_built_for_sm_90_only():
    assert WGMMA == {"sm_90"} and has_wgmma(SM90) and not has_wgmma("sm_80")
    for fam in WGMMA_FAMILIES:
        assert FAMILY_ARCHS[fam] == ("sm_90",)
        assert family_builds_for(fam, "sm_90") and not family_builds_for(fam, "sm_80")
        assert not family_builds_for(fam, None)       # not in the portable catalogue
    names = {v.name for v in catalogue_variants(arch="sm_90")}
    assert {v.name for v in catalogue_variants(arch="sm_80")}.isdisjoint(
        n for n in names if "wgmma" in n)
    wg = [v for v in catalogue_variants(arch="sm_90") if v.kinds[0].family in WGMMA_FAMILIES]
    assert len(wg) == 6 and all(not v.fused and v.dtype == WGMMA_FAMILIES[v.kinds[0].family]
                                for v in wg)          # per kind only
    assert weighed_families("portgemm-f16", "sm_90") == ("portgemm-f16", "wgmma-f16")
    assert weighed_families("portgemm-f16", "sm_80") == ("portgemm-f16",)
    assert set(WEIGHED_WITH) == set(HALF_FAMILIES) | {"portgemm-3xtf32"}
    # the 16-bit partners only for aligned rows, wgmma-3xtf32 for any (tiles.ANY_ROWS)
    assert weighed_families("portgemm-f16", "sm_90", aligned=False) == ("portgemm-f16",)
    assert weighed_families("portgemm-3xtf32", "sm_90", aligned=False) == (
        "portgemm-3xtf32", "wgmma-3xtf32")
    assert weighed_families("portgemm-3xtf32", "sm_80") == ("portgemm-3xtf32",)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_render_defines_stages_and_caps(dtype):
    big, small = (next(k for k in FAMILIES[FAMILY[dtype]] if k.tm == tm) for tm in (128, 64))
    for k, st, cap in ((big, 4, 2), (small, 4, 4)):
        v = Variant((k,), dtype, "tile-list", False, True)
        d = render.defines(v)
        assert d["PG_WGMMA_KINDS"] == "1" and d["PG_WG_SWIZZLE"] == "1" and d["PG_HALF"] == "1"
        assert ", 6)" in d["PG_KINDS(X)"] and d["PG_MMA"] == "1"
        assert int(d["PG_STAGES"]) == st and int(d["PG_MIN_BLOCKS"]) == cap
        # unpadded stages: 64x128's within the static 48 KiB, 128x128's (64 KiB) dynamic
        assert int(d["PG_SMEM_ELEMS_ASYNC"]) == st * k.tk * (k.tm + k.tn)
        dynamic = int(d["PG_SMEM_ELEMS_ASYNC"]) * 2 > render.STATIC_SMEM_BYTES
        assert dynamic == (k is big) and (d.get("PG_DYN_SMEM") == "1") == dynamic
    # other variants render without the wgmma defines
    d = render.defines(Variant((FAMILIES[HALF[dtype]][-1],), dtype))
    assert "PG_WGMMA_KINDS" not in d and "PG_WG_SWIZZLE" not in d


def test_nvrtc_targets_sm_90a_for_wgmma_sources_only():
    k = FAMILIES["wgmma-f16"][0]
    src = render.render(Variant((k,), "float16")).source
    assert nvrtc.target_arch(src, "sm_90") == "sm_90a"
    assert nvrtc.target_arch(src, "sm_80") == "sm_80"      # never built there (its #error)
    other = render.render(Variant((FAMILIES["portgemm-f16"][-1],), "float16")).source
    assert nvrtc.target_arch(other, "sm_90") == "sm_90"


def _nvrtc_or_skip():
    try:
        nvrtc.version()
    except Exception as e:  # noqa: BLE001 - no NVRTC here
        pytest.skip(f"NVRTC not installed: {e}")


@pytest.mark.parametrize("layout", ["tile-list", "ragged"])
def test_compiled_for_sm_90a_without_spills(layout):
    _nvrtc_or_skip()
    for k in FAMILIES["wgmma-bf16"]:
        for ta, tb in ((False, False), (True, True)):
            r = render.render(Variant((k,), "bfloat16", layout, ta, tb))
            _, res = nvrtc.compile(r.source, r.name, "sm_90")
            assert res.spill_bytes == 0 and res.registers <= 128, (r.name, res)
            assert "sm_90a" in res.source


def test_compiling_for_another_arch_is_a_compile_error():
    _nvrtc_or_skip()
    r = render.render(Variant((FAMILIES["wgmma-f16"][0],), "float16"))
    with pytest.raises(CompileError, match="sm_90a only"):
        nvrtc.compile(r.source, r.name, "sm_80", refresh=True)


def _used(p):
    return {k.name for k, n in zip(p.kinds, p.tile_counts()) if n}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_planner_weighs_wgmma_for_aligned_batches_on_sm_90(dtype):
    big = np.tile([[1024, 1024, 1024]], (16, 1))
    used = _used(planner.plan(big, dtype, "sm_90"))
    assert used and all(n.startswith(FAMILY[dtype] + ".") for n in used)
    # not on sm_80, nor for a batch whose rows are not 16-byte aligned (K, N odd)
    assert not any("wgmma" in n for n in _used(planner.plan(big, dtype, "sm_80")))
    odd = np.tile([[1024, 1023, 1023]], (16, 1))
    assert not aligned_batch(odd, dtype) and aligned_batch(big, dtype)
    assert not any("wgmma" in n for n in _used(planner.plan(odd, dtype, "sm_90")))
    # tiny GEMMs stay on the mma.sync / SIMT kinds by the cost model
    tiny = np.tile([[32, 32, 32]], (64, 1))
    assert not any("wgmma" in n for n in _used(planner.plan(tiny, dtype, "sm_90")))


def test_aligned_batch_weighs_work_and_declared_rows():
    s = np.array([[1024, 1024, 1024], [8, 8, 9]])
    assert aligned_batch(s, "float16")                     # 99.9 % of the work aligned
    assert not aligned_batch(s[::-1] * [1, 1, 1] + [[0, 0, 0], [0, 0, 1]], "float16")
    rows = np.array([[True, False], [True, True]])
    assert not aligned_batch(s, "float16", rows)
    assert aligned_batch(np.zeros((0, 3)), "float16")


def test_the_family_option_stays_the_16bit_family():
    with pytest.raises(ValidationError, match="portgemm-f16"):
        planner.plan([[256, 256, 256]], "float16", "sm_90", family="wgmma-f16")


def test_device_offsets_calls_weigh_wgmma_where_aligned():
    assert candidate_families("bfloat16", SM90) == ("portgemm-bf16", "wgmma-bf16")
    assert candidate_families("bfloat16", SM90, aligned=False) == ("portgemm-bf16",)
    assert candidate_families("bfloat16") == ("portgemm-bf16",)
    # Mixtral-8x7B's up projection over 8 experts; its K odd: not weighed
    assert choose_kind(SM90, 8, 8192, 14336, 4096, "bfloat16").family == "wgmma-bf16"
    assert choose_kind(SM90, 8, 8192, 14336, 4095, "bfloat16").family == "portgemm-bf16"
    assert choose_kind(get_arch("sm_80"), 8, 8192, 14336, 4096, "bfloat16").family == \
        "portgemm-bf16"


def test_rate_is_the_measured_one_and_falls_back_to_mma_sync():
    c = ceilings.ceilings_for(SM90)
    k = FAMILIES["wgmma-bf16"][1]
    assert c.wgmma_flops_per_s > c.half_mma_flops_per_s > 0
    assert c.kind_flops_per_s(k, "bfloat16") == c.wgmma_flops_per_s
    assert c.kind_flops_per_s(FAMILIES["portgemm-bf16"][-1], "bfloat16") == c.half_mma_flops_per_s
    import dataclasses
    none = dataclasses.replace(c, wgmma_flops_per_s=0.0)
    assert none.kind_flops_per_s(k, "bfloat16") == c.half_mma_flops_per_s
    assert ceilings.ceilings_for(get_arch("sm_80")).wgmma_flops_per_s == 0.0


def test_occupancy_cli_lists_the_kinds_on_sm_90():
    from portgemm.occupancy.__main__ import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--arch", "sm_90"]) == 0
    assert "wgmma_bf16_128x128_g64x128" in out.getvalue()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--arch", "sm_80"]) == 0
    assert "wgmma" not in out.getvalue()


def test_a_wgmma_tile_supersedes_the_mma_sync_tile_of_its_shape():
    """tiles.without_superseded: the wgmma kinds' tile shapes leave the 16-bit family's
    kinds of the same shape out, and nothing else; the planner's weighed kinds (aligned
    batches on sm_90) follow it."""
    from portgemm.tiles import without_superseded
    for dtype in ("float16", "bfloat16"):
        mine, theirs = FAMILIES[HALF[dtype]], FAMILIES[FAMILY[dtype]]
        left = without_superseded(mine + theirs)
        shapes = {(k.tm, k.tn) for k in theirs}
        assert set(theirs) <= set(left)
        assert {k for k in mine if k not in left} == {k for k in mine if (k.tm, k.tn) in shapes}
        assert without_superseded(mine) == mine
        kinds = _used(planner.plan(np.tile([[2048, 2048, 2048]], (8, 1)), dtype, "sm_90"))
        assert kinds == {f"{FAMILY[dtype]}.128x128/g64x128"}
