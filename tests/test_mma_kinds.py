"""The fp64 MMA kinds as data (no GPU): their catalogue rules, the architectures that run
them, their compute rate in the ceilings and the cost model, what the kernel source is
rendered with, and that the default planner takes them where (and only where) the arch
has fp64 matrix units."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm
from portgemm.kernels import render
from portgemm.kernels.variants import Variant, catalogue_variants
from portgemm.occupancy import get_arch
from portgemm.occupancy.__main__ import tile_shape
from portgemm.occupancy.archs import FP64_MMA, has_fp64_mma
from portgemm.occupancy.ceilings import MMA_EMULATION, ceilings_for
from portgemm.planner.cost_model import kind_costs
from portgemm.planner.parallelism import kind_table
from portgemm.tiles import FAMILIES, MMA_WARP, TileConfig

MMA = [k for k in FAMILIES["portgemm-f64"] if k.engine == "mma"]


def test_the_f64_family_and_its_tuning_space_hold_the_mma_kinds():
    assert [k.kind for k in MMA] == ["32x32/w16x16", "64x32/w32x16", "64x64/w32x32"]
    tune = {k.kind for k in FAMILIES["tune-f64"] if k.engine == "mma"}
    assert tune == {k.kind + f"/k{k.tk}" for k in MMA}
    for fam, kinds in FAMILIES.items():   # only fp64, 16-bit, TF32, MFMA, wgmma families have MMA kinds
        if fam not in ("portgemm-f64", "tune-f64", "portgemm-f16", "portgemm-bf16",
                       "portgemm-tf32", "portgemm-3xtf32", "mfma-f16", "mfma-bf16", "mfma-f64",
                       "wgmma-f16", "wgmma-bf16", "wgmma-3xtf32"):
            assert all(k.engine == "simt" for k in kinds), fam


@pytest.mark.parametrize("k", MMA, ids=lambda k: k.kind)
def test_mma_kind_shape_rules(k):
    assert k.kind.split("/")[1] == f"w{k.rm}x{k.rn}"
    assert (k.tm // k.rm) * (k.tn // k.rn) * MMA_WARP == k.threads
    assert k.accumulators == k.rm * k.rn // MMA_WARP
    assert k.reads_per_k == (k.rm + k.rn) / MMA_WARP
    assert k.operands_held == k.rm // 8 + k.rn // 8


def test_bad_mma_configs_are_rejected():
    with pytest.raises(ValueError, match="one warp"):
        TileConfig("x", "a", 64, 64, 8, 64, 32, 32, "mma")
    with pytest.raises(ValueError, match="whole fragments"):
        TileConfig("x", "b", 64, 64, 6, 128, 32, 32, "mma")
    with pytest.raises(ValueError, match="whole fragments"):
        TileConfig("x", "c", 60, 64, 8, 128, 30, 32, "mma")
    with pytest.raises(ValueError, match="engine"):
        TileConfig("x", "d", 64, 64, 8, 128, 32, 32, "tensor")
    # the SIMT rule still holds for SIMT kinds
    with pytest.raises(ValueError, match="rm\\*rn\\*threads"):
        TileConfig("x", "e", 64, 64, 8, 128, 32, 32)


def test_fp64_mma_archs_are_data():
    assert FP64_MMA == {"sm_80", "sm_90"}
    for name in ("sm_80", "sm_90", "a100", "h100"):
        assert has_fp64_mma(name)
    for name in ("sm_70", "sm_86", "sm_89", "gfx908", "gfx90a", "gfx940", "gfx942", "gfx1100"):
        assert not has_fp64_mma(get_arch(name)), name


def test_mma_rate_in_the_ceilings():
    h100 = ceilings_for(get_arch("sm_90"))
    assert h100.origin == "measured"
    assert h100.mma_flops_per_s("float64") == pytest.approx(59.4e12)   # cuBLAS DGEMM
    a100 = ceilings_for(get_arch("sm_80"))
    assert a100.mma_flops_per_s("float64") == pytest.approx(2.0 * a100.fp64_flops_per_s)
    for name in ("sm_86", "gfx90a", "gfx908"):   # the shuffle emulation's modelled rate
        c = ceilings_for(get_arch(name))
        assert c.fp64_mma_flops_per_s == 0.0
        assert c.mma_flops_per_s("float64") == pytest.approx(MMA_EMULATION * c.fp64_flops_per_s)


@pytest.mark.parametrize("arch", ["sm_90", "gfx90a"])
def test_cost_model_prices_each_kind_at_its_engines_rate(arch):
    a = get_arch(arch)
    kinds = FAMILIES["portgemm-f64"]
    kc = kind_costs(a, kinds, kind_table(a, kinds, "per-kind", "float64"), "float64")
    c = ceilings_for(a)
    want = [c.mma_flops_per_s("float64") if k.engine == "mma" else c.fp64_flops_per_s
            for k in kinds]
    assert kc.kind_flops.tolist() == pytest.approx(want)
    assert kc.flops_per_s == pytest.approx(max(want))
    mma = np.array([k.engine == "mma" for k in kinds])
    # a warp's fragments are shared by its lanes: far fewer shared bytes per k step
    assert np.all(kc.s_bytes[mma] <= kc.s_bytes[~mma].min())


def _batch(seed=9, b=256, mn=512, k=256):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(16, mn + 1, b), rng.integers(16, mn + 1, b),
                     rng.integers(16, k + 1, b)], 1)


def test_default_fp64_plan_takes_the_mma_kinds_only_where_the_arch_has_them():
    names = {k.kind for k in MMA}
    on = portgemm.plan(_batch(), "float64", arch="sm_90").tiles_per_kind()
    assert sum(n for kind, n in on.items() if kind in names) > 0.9 * sum(on.values())
    for arch in ("gfx90a", "sm_86", "sm_70"):
        p = portgemm.plan(_batch(), "float64", arch=arch)
        used = [k for k, n in zip(p.kinds, p.tile_counts()) if n]
        # (gfx90a runs fp64 on its own MFMA kinds instead: test_mfma_kinds.py)
        assert not [k for k in used if k.family == "portgemm-f64" and k.kind in names], arch


def test_render_marks_the_engine_and_fits_static_shared_memory():
    for k in MMA:
        for ta in (False, True):
            for tb in (False, True):
                v = Variant((k,), "float64", "tile-list", ta, tb)
                d = render.defines(v)
                assert d["PG_MMA"] == "1"
                assert d["PG_KINDS(X)"].endswith(", 1)")
                assert render.stages(v) == 4
                assert int(d["PG_SMEM_ELEMS_ASYNC"]) * 8 <= render.STATIC_SMEM_BYTES
                assert int(d["PG_SMEM_ELEMS_ASYNC"]) >= 4 * render.mma_stage_elems(k)
    simt = Variant((FAMILIES["portgemm-f64"][0],), "float64")
    assert render.defines(simt)["PG_MMA"] == "0"
    assert render.defines(simt)["PG_KINDS(X)"].endswith(", 0)")
    # the fused fp64 kernel carries SIMT and MMA kinds: its shared array covers both
    fused = [v for v in catalogue_variants(dtypes=("float64",)) if v.fused
             and v.kinds[0].family == "portgemm-f64"]
    assert fused and render.defines(fused[0])["PG_MMA"] == "1"


def test_occupancy_cli_names_the_engine():
    k = next(k for k in MMA if k.kind == "64x64/w32x32")
    assert tile_shape(Variant((k,), "float64")) == "64x64 k8 w32x32"
    assert tile_shape(Variant((FAMILIES["portgemm-f64"][0],), "float64")) == "32x32 k8 4x4"
