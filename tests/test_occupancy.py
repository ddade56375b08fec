"""Occupancy model: hand-worked cases from docs/design.md §3 (exact) and zhang2025 Eqs. 5-9
(paper). Every expected number is worked out in the comment beside it, from the rules,
not from running the code."""
import dataclasses

import pytest

from portgemm.errors import ResourceError, UnknownArch
from portgemm.occupancy import (AMD_LIMITS, ARCHS, NVIDIA_LIMITS, Arch, KernelResources,
                                Occupancy, get_arch, occupancy)
from portgemm.occupancy import resources as resources_module


def occ(arch, threads, model="exact", **res):
    return occupancy(arch, threads, KernelResources(**res), model=model)


def check(o: Occupancy, wg, waves, frac, by):
    assert (o.active_workgroups, o.active_waves, o.limited_by) == (wg, waves, by)
    assert o.occupancy == pytest.approx(frac)


# --- the table -------------------------------------------------------------------------

def test_every_issue_arch_is_a_row():
    assert set(ARCHS) == {"gfx908", "gfx90a", "gfx940", "gfx942", "gfx1100",
                          "sm_70", "sm_80", "sm_86", "sm_89", "sm_90"}
    assert all(isinstance(a, Arch) and a.name == n for n, a in ARCHS.items())


@pytest.mark.parametrize("alias, name, family, cus", [
    ("gfx908", "gfx908", "cdna1", 120), ("CDNA1", "gfx908", "cdna1", 120),
    ("mi100", "gfx908", "cdna1", 120),
    ("cdna2", "gfx90a", "cdna2", 104), ("MI210", "gfx90a", "cdna2", 104),
    ("mi250x", "gfx90a", "cdna2", 110),          # one GCD of an MI250X
    ("gfx90a:sramecc+:xnack-", "gfx90a", "cdna2", 104),   # HIP's gcnArchName
    ("cdna3", "gfx942", "cdna3", 304), ("MI300X", "gfx942", "cdna3", 304),
    ("gfx940", "gfx940", "cdna3", 228),
    ("rdna3", "gfx1100", "rdna3", 48), ("GFX1100", "gfx1100", "rdna3", 48),  # 48 WGPs
    ("volta", "sm_70", "volta", 80), ("V100", "sm_70", "volta", 80),
    ("ampere", "sm_80", "ampere", 108), ("A100", "sm_80", "ampere", 108),
    ("a800", "sm_80", "ampere", 108), ("SM80", "sm_80", "ampere", 108),
    ("sm_86", "sm_86", "ampere", 82), ("rtx3090", "sm_86", "ampere", 82),
    ("ada", "sm_89", "ada", 128), ("sm_89", "sm_89", "ada", 128),
    ("hopper", "sm_90", "hopper", 132), ("H100", "sm_90", "hopper", 132),
    ("h200", "sm_90", "hopper", 132), ("sm_90a", "sm_90", "hopper", 132),
])
def test_aliases(alias, name, family, cus):
    a = get_arch(alias)
    assert (a.name, a.family, a.compute_units) == (name, family, cus)


def test_part_alias_sets_part_and_units_only():
    a, b = get_arch("mi250x"), get_arch("gfx90a")
    assert a.part.startswith("MI250X") and b.part == "MI210"
    assert dataclasses.replace(a, part=b.part, compute_units=b.compute_units) == b
    assert get_arch("h200").part == "H200"


def test_arch_passes_through_and_replace_works():
    a = dataclasses.replace(get_arch("sm_80"), compute_units=7, part="test")
    assert get_arch(a) is a
    assert occ(a, 256, registers=64).active_workgroups == 4


@pytest.mark.parametrize("bad", ["gfx1030", "sm_75", "", "mi999", "cdna9"])
def test_unknown_arch(bad):
    with pytest.raises(UnknownArch, match="unknown architecture"):
        get_arch(bad)
    with pytest.raises(UnknownArch):
        occ(bad, 64, registers=8)


@pytest.mark.parametrize("name, waves", [
    # MAXW per SIMD x 4 SIMDs: gfx908 10x4, gfx90a/94x 8x4, gfx1100 16x4 per WGP;
    # NVIDIA max warps per SM: 64 (sm_70/80/90), 48 (sm_86/89).
    ("gfx908", 40), ("gfx90a", 32), ("gfx940", 32), ("gfx942", 32), ("gfx1100", 64),
    ("sm_70", 64), ("sm_80", 64), ("sm_86", 48), ("sm_89", 48), ("sm_90", 64)])
def test_max_waves_per_cu(name, waves):
    assert get_arch(name).max_waves_per_cu == waves


def test_resources_reexported():
    assert KernelResources is resources_module.KernelResources


# --- AMD exact ---------------------------------------------------------------------------

def test_cdna2_waves_bind_and_tie_prefers_waves():
    # gfx90a, 256 threads: nW = 4. waves 8*4//4 = 8; barrier 16; vgpr 512//64 = 8/SIMD
    # -> 8*4//4 = 8; sgpr 40 <= 80 -> 10/SIMD -> 10*4//4 = 10; lds 8192 -> 65536//8192 = 8.
    # min 8 (waves, vgpr, lds tie; waves is first) -> 32 waves of 32.
    o = occ("gfx90a", 256, registers=64, sgprs=40, shared_bytes=8192)
    assert o.limits == {"waves": 8, "barrier": 16, "vgpr": 8, "agpr": None, "sgpr": 10, "lds": 8}
    check(o, 8, 32, 1.0, "waves")
    assert tuple(o.limits) == AMD_LIMITS


def test_cdna2_vgpr_limit():
    # 128 VGPRs: 512 // 128 = 4 waves/SIMD -> 4*4//4 = 4 workgroups of 4 waves = 16 of 32.
    check(occ("gfx90a", 256, registers=128), 4, 16, 0.5, "vgpr")


def test_cdna2_vgpr_granule_8():
    # 84 VGPRs -> alignTo(84, 8) = 88; 512 // 88 = 5 waves/SIMD -> 5*4//4 = 5 workgroups.
    check(occ("gfx90a", 256, registers=84), 5, 20, 20 / 32, "vgpr")


def test_agprs_unified_on_gfx90a():
    # 40 arch + 100 AGPRs: alignTo(40, 4) + 100 = 140 -> alignTo(140, 8) = 144;
    # 512 // 144 = 3 waves/SIMD -> 3*4//4 = 3 workgroups, 12 of 32 waves. No AGPR limit.
    o = occ("gfx90a", 256, registers=40, agprs=100)
    check(o, 3, 12, 12 / 32, "vgpr")
    assert o.limits["agpr"] is None


def test_agprs_unified_align_arch_part_to_4():
    # 61 arch + 67 AGPRs: alignTo(61, 4) = 64, + 67 = 131 -> alignTo(131, 8) = 136;
    # 512 // 136 = 3/SIMD -> 3*4//4 = 3. (Without the align: 128 -> 4.)
    check(occ("gfx90a", 256, registers=61, agprs=67), 3, 12, 12 / 32, "vgpr")


def test_agprs_split_on_gfx908():
    # gfx908: 256 arch + 256 AGPR files, granule 4. vgpr: 256 // 40 = 6/SIMD -> 6*4//4 = 6;
    # agpr: alignTo(100, 4) = 100, 256 // 100 = 2/SIMD -> 2*4//4 = 2 -> 8 of 40 waves.
    o = occ("gfx908", 256, registers=40, agprs=100)
    assert (o.limits["vgpr"], o.limits["agpr"]) == (6, 2)
    check(o, 2, 8, 8 / 40, "agpr")


def test_gfx908_vgpr_granule_4_and_tie_vgpr_before_agpr():
    # 62 arch -> alignTo 64 -> 256 // 64 = 4; 64 AGPRs -> 4: both 4*4//4 = 4, vgpr first.
    check(occ("gfx908", 256, registers=62, agprs=64), 4, 16, 16 / 40, "vgpr")


def test_gfx908_sgpr_limit():
    # 64 threads: nW = 1, no barrier limit. waves 10*4 = 40; vgpr 256 // 24 = 10 -> 40;
    # sgpr 90: > 88, <= 100 -> 8/SIMD -> 32 workgroups = 32 waves of 40.
    o = occ("gfx908", 64, registers=24, sgprs=90)
    assert o.limits["barrier"] is None
    check(o, 32, 32, 0.8, "sgpr")


@pytest.mark.parametrize("sgprs, per_simd", [(80, 10), (81, 9), (88, 9), (89, 8), (100, 8),
                                             (101, 7), (108, 7)])
def test_gfx908_sgpr_steps(sgprs, per_simd):
    # 64-thread workgroups, 8 VGPRs: the SGPR step is per SIMD, x4 SIMDs per CU.
    assert occ("gfx908", 64, registers=8, sgprs=sgprs).limits["sgpr"] == per_simd * 4


def test_gfx90a_sgpr_limit_only_above_100():
    # gfx90a MAXW 8: 102 SGPRs -> 7/SIMD -> 28 single-wave workgroups < 32 wave slots.
    check(occ("gfx90a", 64, registers=16, sgprs=102), 28, 28, 28 / 32, "sgpr")
    # 90 SGPRs -> 8/SIMD -> 32, tying the 32 wave slots: waves reported.
    check(occ("gfx90a", 64, registers=16, sgprs=90), 32, 32, 1.0, "waves")


def test_lds_limit_and_granule_512():
    # 20000 B -> alignTo(20000, 512) = 20480; 65536 // 20480 = 3 workgroups, 12 waves.
    check(occ("gfx90a", 256, registers=32, shared_bytes=20000), 3, 12, 12 / 32, "lds")
    # 13000 B -> 13312 (26 x 512); 65536 // 13312 = 4 (unaligned 13000 would give 5).
    check(occ("gfx90a", 256, registers=32, shared_bytes=13000), 4, 16, 0.5, "lds")


def test_no_lds_no_lds_limit():
    assert occ("gfx90a", 256, registers=32).limits["lds"] is None


def test_barrier_limit_gfx908():
    # 128 threads: nW = 2. waves 40 // 2 = 20; barrier 16; vgpr 256 // 16 = 16/SIMD
    # -> 16*4//2 = 32; sgpr 20 -> 10/SIMD -> 20. min 16 (barrier): 32 of 40 waves.
    check(occ("gfx908", 128, registers=16, sgprs=20), 16, 32, 0.8, "barrier")


def test_single_wave_workgroups_skip_barrier_limit():
    # 64 threads on gfx908: 40 workgroups of one wave fit, more than 16.
    check(occ("gfx908", 64, registers=16), 40, 40, 1.0, "waves")


def test_workgroup_waves_round_down_per_cu():
    # 192 threads: nW = 3; waves 32 // 3 = 10; vgpr 64 -> 8/SIMD -> 32 // 3 = 10.
    # 10 workgroups = 30 of 32 waves.
    check(occ("gfx90a", 192, registers=64), 10, 30, 30 / 32, "waves")


def test_cdna3_gfx942_and_gfx940_same_rules():
    # 80 VGPRs: alignTo(80, 8) = 80; 512 // 80 = 6/SIMD -> 6*4//4 = 6; 24 of 32 waves.
    for name in ("gfx942", "gfx940"):
        o = occ(name, 256, registers=80)
        assert o.arch == name
        check(o, 6, 24, 0.75, "vgpr")


def test_rdna3_vgpr_granule_24():
    # gfx1100 wave32, per WGP: 256 threads = 8 waves. waves 16*4 // 8 = 8; barrier 32;
    # vgpr 100 -> alignTo(100, 24) = 120; 1536 // 120 = 12/SIMD -> 12*4//8 = 6;
    # SGPRs never limit. 6 workgroups = 48 of 64 waves.
    o = occ("gfx1100", 256, registers=100, sgprs=106)
    assert o.waves_per_workgroup == 8 and o.limits["sgpr"] is None
    check(o, 6, 48, 0.75, "vgpr")


def test_rdna3_lds_128k_per_wgp():
    # 40960 B (80 x 512): 131072 // 40960 = 3; vgpr 32 -> 48 -> 1536 // 48 = 32/SIMD
    # -> 32*4//8 = 16; waves 8. 3 workgroups = 24 of 64 waves.
    check(occ("gfx1100", 256, registers=32, shared_bytes=40960), 3, 24, 24 / 64, "lds")


def test_rdna3_barrier_32_per_wgp():
    # 64 threads = 2 waves32: waves 64 // 2 = 32; barrier 32 -> tie, waves reported;
    # 8 VGPRs -> 24 -> 1536 // 24 = 64/SIMD -> 128. 32 workgroups = 64 waves.
    o = occ("gfx1100", 64, registers=8)
    assert o.limits["barrier"] == 32
    check(o, 32, 64, 1.0, "waves")


# --- NVIDIA exact --------------------------------------------------------------------------

def test_sm80_matches_cuda_calculator_256_threads_64_regs():
    # nW = 8; warps 64 // 8 = 8; blocks 32; regs 64*32 = 2048 per warp,
    # 16384 // 2048 = 8 warps per sub-partition x 4 = 32 warps -> 32 // 8 = 4;
    # smem 0 + 1024 reserved -> 167936 // 1024 = 164. 4 blocks, 32 warps, 50%
    # (the CUDA occupancy calculator says the same).
    o = occ("sm_80", 256, registers=64)
    assert o.limits == {"warps": 8, "blocks": 32, "registers": 4, "shared": 164}
    assert tuple(o.limits) == NVIDIA_LIMITS
    check(o, 4, 32, 0.5, "registers")


def test_sm80_255_regs_one_block():
    # 255*32 = 8160 -> 8192; 16384 // 8192 = 2 x 4 = 8 warps -> 1 block of 8 (12.5%),
    # as the CUDA calculator gives for 256 threads at 255 registers.
    check(occ("sm_80", 256, registers=255), 1, 8, 0.125, "registers")


def test_sm80_register_granule_256_per_warp():
    # 42 regs: 42*32 = 1344 -> 1536; 16384 // 1536 = 10 x 4 = 40 warps -> 40 // 8 = 5.
    check(occ("sm_80", 256, registers=42), 5, 40, 40 / 64, "registers")


def test_sm80_warps_bind_on_tie():
    # 32 regs: 1024 per warp, 16 x 4 = 64 warps -> 8 blocks; warps 64 // 8 = 8: tie.
    check(occ("sm_80", 256, registers=32), 8, 64, 1.0, "warps")


def test_sm80_block_limit():
    # 32 threads = 1 warp: warps 64; blocks 32; regs 64 // 1 = 64. 32 blocks = 32 warps.
    check(occ("sm_80", 32, registers=32), 32, 32, 0.5, "blocks")


def test_sm80_shared_limit_reserved_1k_granule_128():
    # 49152 + 1024 = 50176 (392 x 128); 167936 // 50176 = 3 blocks of 4 warps = 12/64.
    check(occ("sm_80", 128, registers=32, shared_bytes=48 * 1024), 3, 12, 12 / 64, "shared")
    # 41000 + 1024 = 42024 -> 42112 (329 x 128); 167936 // 42112 = 3 (unrounded: 3.99).
    check(occ("sm_80", 128, registers=32, shared_bytes=41000), 3, 12, 12 / 64, "shared")


def test_sm80_register_launch_check():
    # 1024 threads at 72 regs: 2304 per warp x 32 warps = 73728 > 65536 per block.
    with pytest.raises(ResourceError, match="no 1024-thread workgroup fits"):
        occ("sm_80", 1024, registers=72)


def test_sm70_volta():
    # 40 regs: 1280 per warp (5 x 256); 16384 // 1280 = 12 x 4 = 48 warps -> 48 // 8 = 6;
    # smem 12000, no reserve, granule 256 -> 12032; 98304 // 12032 = 8; warps 8; blocks 32.
    o = occ("sm_70", 256, registers=40, shared_bytes=12000)
    assert o.limits == {"warps": 8, "blocks": 32, "registers": 6, "shared": 8}
    check(o, 6, 48, 0.75, "registers")


def test_sm70_no_shared_no_limit():
    # sm_70 reserves nothing, so a block without shared memory has no shared limit.
    assert occ("sm_70", 256, registers=32).limits["shared"] is None


def test_sm86_warps_48():
    # warps 48 // 8 = 6; blocks 16; regs 32 -> 64 warps // 8 = 8; smem 1024 -> 100.
    check(occ("sm_86", 256, registers=32), 6, 48, 1.0, "warps")


def test_sm86_block_limit_16():
    # 64 threads = 2 warps: warps 48 // 2 = 24; blocks 16; regs 64 // 2 = 32 -> 16 blocks,
    # 32 of 48 warps.
    check(occ("sm_86", 64, registers=32), 16, 32, 32 / 48, "blocks")


def test_sm89_block_limit_24():
    # 32 threads = 1 warp: warps 48; blocks 24 -> 24 warps of 48.
    check(occ("sm_89", 32, registers=32), 24, 24, 0.5, "blocks")


def test_sm89_shared():
    # 30000 + 1024 = 31024 -> 31104 (243 x 128); 102400 // 31104 = 3 blocks = 12/48.
    check(occ("sm_89", 128, registers=32, shared_bytes=30000), 3, 12, 0.25, "shared")


def test_sm90_hopper_registers():
    # 168 regs: 5376 per warp (21 x 256); 16384 // 5376 = 3 x 4 = 12 warps -> 12 // 4 = 3.
    check(occ("sm_90", 128, registers=168), 3, 12, 12 / 64, "registers")


def test_sm90_calculator_1024_threads_32_regs():
    # 32 warps per block: warps 64 // 32 = 2; regs 16 x 4 = 64 // 32 = 2 -> 2 blocks, 100%.
    check(occ("sm_90", 1024, registers=32), 2, 64, 1.0, "warps")


def test_sm90_max_shared_per_block_fits_once():
    # 227 KiB + 1 KiB reserved = 228 KiB = all of the SM's shared memory: 1 block.
    check(occ("sm_90", 128, registers=32, shared_bytes=227 * 1024), 1, 4, 4 / 64, "shared")


# --- the paper's model (zhang2025 Eqs. 5-9) --------------------------------------------------

def test_paper_mi210_example():
    # 256 threads: ceil(256/64) = 4. Eq5 16*4 = 64; Eq6 4*floor(512/64) = 32;
    # Eq7 floor(800/40) = 20; Eq8 floor(65536/8192)*4 = 32; WF_C 32. WF = 20 (SGPR):
    # floor(20/4) = 5 workgroups, 20 waves, 20/32. (Exact: 8 workgroups, 100%.)
    o = occ("gfx90a", 256, "paper", registers=64, sgprs=40, shared_bytes=8192)
    assert o.wave_limits == {"waves": 32, "barrier": 64, "vgpr": 32, "agpr": None,
                             "sgpr": 20, "lds": 32}
    check(o, 5, 20, 0.625, "sgpr")
    check(occ("gfx90a", 256, registers=64, sgprs=40, shared_bytes=8192), 8, 32, 1.0, "waves")


def test_paper_ignores_agprs():
    # Eq6 sees only the 40 arch VGPRs: 4*floor(512/40) = 48 > WF_C 32 -> WF 32, 8 workgroups.
    # (Exact: 3 workgroups, see test_agprs_unified_on_gfx90a.)
    check(occ("gfx90a", 256, "paper", registers=40, agprs=100), 8, 32, 1.0, "waves")


def test_paper_no_vgpr_granule():
    # 84 VGPRs: 4*floor(512/84) = 24 waves -> 6 workgroups (exact: 5).
    check(occ("gfx90a", 256, "paper", registers=84), 6, 24, 0.75, "vgpr")


def test_paper_no_lds_granule():
    # 13000 B: floor(65536/13000) = 5, x4 = 20 waves -> 5 workgroups (exact: 4).
    check(occ("gfx90a", 256, "paper", registers=32, shared_bytes=13000), 5, 20, 20 / 32, "lds")


def test_paper_raw_waves_not_whole_workgroups():
    # 192 threads: 3 waves. Eq5 48, Eq6 4*8 = 32, WF_C 32 -> WF 32 (tie, waves first):
    # floor(32/3) = 10 workgroups but the paper counts 32 waves (exact: 30).
    check(occ("gfx90a", 192, "paper", registers=64), 10, 32, 1.0, "waves")


def test_paper_caps_single_wave_workgroups_at_16():
    # 64 threads: Eq5 16*1 = 16 even for one wave; Eq6 4*floor(512/16) = 128; WF_C 32.
    # WF 16 -> 16 workgroups, 50% (exact: 32 workgroups, no barrier for one wave).
    check(occ("gfx90a", 64, "paper", registers=16), 16, 16, 0.5, "barrier")
    check(occ("gfx90a", 64, registers=16), 32, 32, 1.0, "waves")


def test_paper_gfx908_sgpr_per_simd_term():
    # 64 threads, 24 VGPRs, 90 SGPRs: Eq5 16; Eq6 4*floor(256/24) = 40; Eq7 floor(800/90) = 8;
    # WF_C 40 -> WF 8: 8 workgroups, 8/40 (exact: 32, because the SGPR step is per SIMD).
    check(occ("gfx908", 64, "paper", registers=24, sgprs=90), 8, 8, 0.2, "sgpr")


def test_paper_gfx908_barrier_term():
    # 128 threads: Eq5 16*2 = 32; Eq6 4*floor(256/16) = 64; Eq7 800/20 = 40; WF_C 40 -> 32:
    # 16 workgroups, 32/40 (the exact model agrees here).
    check(occ("gfx908", 128, "paper", registers=16, sgprs=20), 16, 32, 0.8, "barrier")


def test_paper_gfx942():
    # Eq6 4*floor(512/80) = 24 -> 6 workgroups (exact agrees: 80 is a multiple of 8).
    check(occ("gfx942", 256, "paper", registers=80), 6, 24, 0.75, "vgpr")


def test_paper_rdna3():
    # gfx1100, 256 threads = 8 waves32. Eq5 32*8 = 256; Eq6 4*floor(1536/100) = 60;
    # no SGPR term; WF_C 64 -> WF 60: floor(60/8) = 7 workgroups, 60/64 (exact: 6, 75%).
    o = occ("gfx1100", 256, "paper", registers=100, sgprs=106)
    assert o.wave_limits["sgpr"] is None
    check(o, 7, 60, 60 / 64, "vgpr")


def test_paper_rdna3_lds():
    # 40960 B: floor(131072/40960) = 3, x8 = 24 waves -> 3 workgroups.
    check(occ("gfx1100", 256, "paper", registers=32, shared_bytes=40960), 3, 24, 24 / 64, "lds")


def test_paper_sm80_registers():
    # NVIDIA mapping: 4 sub-partitions x floor(512 regs per lane / 64) = 32 warps;
    # Eq5 32 blocks x 8 = 256; WF_C 64; no shared -> WF 32: 4 blocks, 50% (exact agrees).
    o = occ("sm_80", 256, "paper", registers=64)
    assert o.wave_limits == {"warps": 64, "blocks": 256, "registers": 32, "shared": None}
    check(o, 4, 32, 0.5, "registers")


def test_paper_sm80_no_register_granule():
    # 42 regs: 4*floor(512/42) = 48 warps -> 6 blocks (exact: 5).
    check(occ("sm_80", 256, "paper", registers=42), 6, 48, 0.75, "registers")


def test_paper_sm80_shared_without_reserve():
    # 41000 B: floor(167936/41000) = 4, x4 warps = 16 -> 4 blocks (exact: 3).
    check(occ("sm_80", 128, "paper", registers=32, shared_bytes=41000), 4, 16, 0.25, "shared")


def test_paper_sm70():
    # Eq6 4*floor(512/40) = 48; Eq8 floor(98304/12000) = 8, x8 = 64; Eq5 256; WF_C 64
    # -> 48 warps = 6 blocks.
    check(occ("sm_70", 256, "paper", registers=40, shared_bytes=12000), 6, 48, 0.75, "registers")


def test_paper_sm86_blocks():
    # 64 threads = 2 warps: Eq5 16*2 = 32 warps; Eq6 4*16 = 64; WF_C 48 -> 32: 16 blocks.
    check(occ("sm_86", 64, "paper", registers=32), 16, 32, 32 / 48, "blocks")


def test_paper_sm89_warps():
    # 256 threads: Eq5 24*8 = 192; Eq6 4*floor(512/32) = 64; WF_C 48 -> 48: 6 blocks, 100%.
    check(occ("sm_89", 256, "paper", registers=32), 6, 48, 1.0, "warps")


def test_paper_sm90():
    # 168 regs: 4*floor(512/168) = 12 warps -> 3 blocks (exact agrees: 168 = 21*8).
    check(occ("sm_90", 128, "paper", registers=168), 3, 12, 12 / 64, "registers")


# --- result shape ----------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["exact", "paper"])
@pytest.mark.parametrize("name", sorted(ARCHS))
def test_result_invariants(name, model):
    a = get_arch(name)
    o = occ(name, 256, model, registers=32)
    names = AMD_LIMITS if a.vendor == "amd" else NVIDIA_LIMITS
    assert tuple(o.limits) == names and tuple(o.wave_limits) == names
    assert o.limits[o.limited_by] == o.active_workgroups
    assert o.active_workgroups == min(v for v in o.limits.values() if v is not None)
    assert o.max_waves == a.max_waves_per_cu and 0 < o.occupancy <= 1
    assert o.as_dict()["limited_by"] == o.limited_by
    assert o.model == model and o.arch == a.name and o.threads == 256


def test_exact_waves_are_whole_workgroups():
    o = occ("gfx90a", 192, registers=64)
    assert o.active_waves == o.active_workgroups * o.waves_per_workgroup


def test_unknown_model():
    with pytest.raises(ValueError, match="unknown occupancy model"):
        occ("gfx90a", 64, "magic", registers=8)


# --- impossible resources ------------------------------------------------------------------

@pytest.mark.parametrize("model", ["exact", "paper"])
@pytest.mark.parametrize("arch, threads, res, match", [
    ("gfx90a", 1025, dict(registers=8), "1025 threads"),
    ("sm_80", 0, dict(registers=8), "0 threads"),
    ("sm_80", 64, dict(registers=256), "256 registers"),
    ("gfx90a", 64, dict(registers=513), "513 VGPRs"),
    ("gfx1100", 64, dict(registers=513), "513 VGPRs"),
    ("gfx90a", 64, dict(registers=300, agprs=256), "unified"),     # 300 + 256 > 512
    ("gfx908", 64, dict(registers=300), "each file holds 256"),
    ("gfx1100", 64, dict(registers=8, agprs=4), "no AGPRs"),
    ("sm_80", 64, dict(registers=8, sgprs=40), "SGPRs/AGPRs"),
    ("gfx90a", 64, dict(registers=8, shared_bytes=65537), "65537 bytes"),
    ("gfx1100", 64, dict(registers=8, shared_bytes=65537), "65537 bytes"),
    ("sm_70", 64, dict(registers=8, shared_bytes=96 * 1024 + 1), "98305 bytes"),
    ("sm_80", 64, dict(registers=8, shared_bytes=163 * 1024 + 1), "166913 bytes"),
    ("sm_86", 64, dict(registers=8, shared_bytes=99 * 1024 + 1), "101377 bytes"),
    ("sm_89", 64, dict(registers=8, shared_bytes=99 * 1024 + 1), "101377 bytes"),
    ("sm_90", 64, dict(registers=8, shared_bytes=227 * 1024 + 1), "232449 bytes"),
    ("sm_90", 64, dict(registers=-1), "negative"),
])
def test_resource_errors(arch, threads, res, match, model):
    with pytest.raises(ResourceError, match=match) as e:
        occ(arch, threads, model, **res)
    assert "\n" not in str(e.value)


def test_largest_legal_values_pass():
    occ("gfx90a", 1024, registers=8, shared_bytes=65536)
    occ("sm_80", 1024, registers=32, shared_bytes=163 * 1024)
    occ("sm_70", 64, registers=255, shared_bytes=96 * 1024)
    occ("gfx90a", 64, registers=256, agprs=256)       # 256 + 256 = the 512 unified file


def test_no_workgroup_fits_amd_1024_threads_many_vgprs():
    # 1024 threads = 16 waves need 4 per SIMD; 200 VGPRs -> 512 // 200 = 2/SIMD -> 8 // 16 = 0.
    with pytest.raises(ResourceError, match="limited by vgpr"):
        occ("gfx90a", 1024, registers=200)


# --- the MFMA kinds' compiled figures (clang 15's remarks in the vendor matrix) ------------
# (arch, kind, arch VGPRs, AGPRs, SGPRs, LLVM's register term in waves/SIMD), from
# `tools/vendor_matrix.py --family mfma-f16 --family mfma-bf16 --family mfma-f64`
# (bench/results/2026-11-24-mfma-compiled/vendor_matrix.txt, clang's columns). On gfx908
# the two files limit separately; on gfx90a / gfx940 one file holds
# alignTo(VGPRs, 4) + AGPRs in granules of 8.
MFMA_CELLS = [
    ("gfx908", "f16 64x64/w32x32", 58, 20, 58, 4),       # 256 // 60
    ("gfx908", "f16 128x128/w64x64", 97, 68, 58, 2),     # 256 // 100; AGPRs alone: 3
    ("gfx90a", "f16 64x64/w32x32", 56, 20, 58, 6),       # 512 // alignTo(76, 8)
    ("gfx90a", "f16 128x128/w64x64", 100, 68, 58, 3),    # 512 // 168
    ("gfx940", "f64 128x64/w64x32", 96, 72, 60, 3),      # 512 // 168
    ("gfx940", "f64 32x32/w16x16", 36, 10, 42, 8),       # 512 // 48 = 10, capped at 8
]


@pytest.mark.parametrize("arch,kind,vgprs,agprs,sgprs,llvm", MFMA_CELLS)
def test_mfma_kinds_register_term_matches_llvm(arch, kind, vgprs, agprs, sgprs, llvm):
    o = occ(arch, 256, registers=vgprs, agprs=agprs, sgprs=sgprs)
    regs = min(o.wave_limits[k] for k in ("waves", "vgpr", "agpr", "sgpr")
               if o.wave_limits[k] is not None)
    assert regs / 4 == llvm, kind


def test_gfx908_agprs_bind_alone_when_they_are_the_larger_file():
    # 40 arch VGPRs, 130 AGPRs (the note's .vgpr_count is then max = 130, which gives the
    # same answer): only gfx908's AGPR file limits, 256 // 132 = 1 wave per SIMD
    o = occ("gfx908", 256, registers=40, agprs=130, sgprs=40)
    assert o.limited_by == "agpr" and o.active_waves == 4
    assert occ("gfx908", 256, registers=130, agprs=130, sgprs=40).active_waves == 4
