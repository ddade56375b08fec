"""Packed fp32 FMAs on CDNA (marker ``toolchain``; skipped without the AMD toolchain or
LLVM's disassembler): the SIMT kinds' main loops are read from the real code objects
(portgemm/kernels/amd_isa.py). On gfx90a and gfx940 every fp32 FMA there is the packed
``v_pk_fma_f32`` (two accumulators of a thread's micro-tile per instruction), which is
what lets the cost model count those archs' packed fp32 rate (ceilings.json
``fp32_packed``); gfx908 has no packed fp32, so its loops are scalar, at the rate the
model gives it."""
from __future__ import annotations

import pytest

from portgemm.errors import DeviceUnavailable
from portgemm.kernels import amd_isa, offline
from portgemm.kernels.variants import catalogue_variants
from portgemm.occupancy import get_arch
from portgemm.occupancy.ceilings import ceilings_for

pytestmark = pytest.mark.toolchain

try:
    amd_isa.objdump()
except DeviceUnavailable as e:
    pytest.skip(str(e), allow_module_level=True)

# our fp32 SIMT kinds, the paper's fused kernel and a 16-bit family's SIMT kind (fp32
# arithmetic), in two transpose pairs (the loops read A by rows or by columns)
NAMES = [*(f"pg_f32_{t}_portgemm_{k}" for t in ("nn", "tt")
           for k in ("32x32_4x4", "64x64_8x4", "128x64_8x8", "64x128_8x8", "128x128_8x8",
                     "128x128_16x8")),
         "pg_f32_nn_fused_zhang2025", "pg_bf16_nn_portgemm_bf16_32x32_4x4"]
VARIANTS = {v.name: v for v in catalogue_variants(
    dtypes=("float32", "bfloat16"), trans=((False, False), (True, True)))}


def loop_of(name, arch):
    if not offline.available(arch):
        pytest.skip(f"no compiler for {arch} here (.ci/install_rocm.sh)")
    code, _ = offline.compile_variant(VARIANTS[name], arch)
    return amd_isa.main_loop_fma(code, arch)


@pytest.mark.parametrize("arch", ["gfx90a", "gfx940"])
@pytest.mark.parametrize("name", NAMES)
def test_simt_loops_issue_only_packed_fp32_fmas(name, arch):
    mix = loop_of(name, arch)
    assert mix.packed > 0 and mix.scalar == 0, (name, arch, mix)


@pytest.mark.parametrize("name", NAMES[:1] + NAMES[5:6])
def test_gfx908_has_no_packed_fp32(name):
    mix = loop_of(name, "gfx908")
    assert mix.packed == 0 and mix.scalar > 0, mix


def test_the_model_counts_the_packed_rate_where_the_loops_issue_it():
    from portgemm.occupancy.ceilings import SUSTAINED, _load
    for a, packed in (("gfx908", 1), ("gfx90a", 2), ("gfx940", 2)):
        spec, c = _load()["specs"][a], ceilings_for(get_arch(a))
        lanes = get_arch(a).compute_units * spec["fp32_fma_per_clk_per_cu"]
        vector = lanes * 2 * spec["clock_hz"] * SUSTAINED     # one FMA a lane and clock
        assert c.fp32_flops_per_s == pytest.approx(packed * vector), a
        # fp64 has no packed form, and the MFMA ratios are to the unpacked rate
        assert c.fp64_flops_per_s == pytest.approx(spec["fp64_ratio"] * vector), a
        assert c.mfma_f16_flops_per_s == pytest.approx(spec["mfma_f16_ratio"] * vector), a


def test_basic_blocks_split_at_labels_and_branches():
    text = """
0000000000001000 <k>:
        s_mov_b32 s0, 0
.LBB0_1:
        v_pk_fma_f32 v[0:1], v[2:3], v[4:5], v[0:1]
        v_fmac_f32_e32 v6, v7, v8
        s_cbranch_scc1 .LBB0_1
        v_fma_f32 v1, v2, v3, v4
        s_endpgm
"""
    blocks = amd_isa.basic_blocks(text)
    assert blocks == [["s_mov_b32"], ["v_pk_fma_f32", "v_fmac_f32", "s_cbranch_scc1"],
                      ["v_fma_f32", "s_endpgm"]]
    mix = amd_isa.FmaMix(1, 1)
    assert mix.packed_share == pytest.approx(2 / 3)
