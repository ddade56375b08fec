"""The architecture table, as data: one row per arch, the facts the occupancy model reads.

Sources: LLVM AMDGPU (``AMDGPUBaseInfo.cpp``: waves per EU, VGPR file and granule,
SGPR table, LDS, barriers) and NVIDIA's ``cuda_occupancy.h`` plus the CUDA programming
guide's compute-capability table (warps, blocks, registers, shared memory). The rules
that use these numbers live in ``model.py``; docs/design.md §3 states them.

"Compute unit" is the block that the waves of one workgroup share: the CU on CDNA,
the SM on NVIDIA, and the WGP (two CUs, four SIMD32, 128 KiB LDS) on RDNA3, because
gfx1100 kernels compile in WGP mode by default and LLVM then accounts LDS, barriers
and waves per WGP. ``Arch.unit`` names it.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from ..errors import UnknownArch
from ..tiles import FAMILY_ARCHS, MFMA_FAMILIES, WGMMA_FAMILIES

KiB = 1024


@dataclass(frozen=True)
class AmdRules:
    """Per-SIMD limits of an AMD compute unit (LLVM AMDGPU names in brackets)."""

    simds: int                 # SIMDs per compute unit [getEUsPerCU]
    waves_per_simd: int        # [getMaxWavesPerEU]
    vgpr_file: int             # VGPRs per lane in one SIMD [getTotalNumVGPRs]
    vgpr_granule: int          # [getVGPRAllocGranule]
    agprs: str                 # "split": own 256 file (gfx908); "unified": after the
                               # arch VGPRs in one file (gfx90a/94x); "none" (RDNA)
    sgpr_waves: tuple | None   # ((max SGPRs, waves per SIMD), ...); None: never limit
    sgpr_file: int             # SGPRs per SIMD [getTotalNumSGPRs]; the paper's Eq. 7
    barriers: int              # workgroups of > 1 wave per compute unit [getMaxWorkGroupsPerCU]
    lds_granule: int = 512     # LDS allocation granule in bytes


@dataclass(frozen=True)
class NvidiaRules:
    """Per-SM limits, as ``cuda_occupancy.h`` reads them from cudaDeviceProp."""

    max_blocks: int            # maxBlocksPerMultiProcessor
    smem_granule: int          # shared memory allocation granule (bytes)
    smem_reserved: int         # reservedSharedMemPerBlock (CUDA's own use per block)
    sub_partitions: int = 4    # SM sub-partitions; each owns a quarter of the registers
    regs_per_sm: int = 64 * KiB
    regs_per_block: int = 64 * KiB
    reg_granule: int = 256     # registers allocated per warp in units of this
    max_regs: int = 255        # registers per thread


@dataclass(frozen=True)
class Arch:
    name: str                       # "gfx90a", "sm_90"
    vendor: str                     # "amd" | "nvidia"
    family: str                     # "cdna2", "hopper"
    part: str                       # the default (or aliased) product, "MI210"
    compute_units: int              # of ``part``: CUs, SMs, or WGPs (see ``unit``)
    unit: str                       # "CU" | "SM" | "WGP"
    wave_size: int                  # 64 | 32
    max_waves_per_cu: int           # resident waves (warps) per compute unit
    max_threads_per_workgroup: int  # 1024 everywhere here
    max_shared_per_workgroup: int   # bytes: LDS per workgroup / opt-in smem per block
    shared_per_cu: int              # bytes of LDS per CU/WGP, shared memory per SM
    rules: AmdRules | NvidiaRules   # the vendor's per-limit data

    def as_dict(self) -> dict:
        from dataclasses import asdict
        return asdict(self)


# --- rows ---------------------------------------------------------------------------

# gfx9 waves per SIMD by SGPRs per wave (incl. VCC, FLAT_SCRATCH, XNACK_MASK):
# 800 SGPRs per SIMD, 16-register granule, at most 10 waves.
GFX9_SGPR_WAVES = ((80, 10), (88, 9), (100, 8), (math.inf, 7))


def _amd(name, family, part, cus, *, waves_per_simd, vgpr_file, vgpr_granule, agprs,
         lds=64 * KiB, unit="CU", wave=64, barriers=16, sgpr_waves=GFX9_SGPR_WAVES,
         simds=4):
    rules = AmdRules(simds=simds, waves_per_simd=waves_per_simd, vgpr_file=vgpr_file,
                     vgpr_granule=vgpr_granule, agprs=agprs, sgpr_waves=sgpr_waves,
                     sgpr_file=800, barriers=barriers)
    # A workgroup may address at most 64 KiB of LDS on every arch here.
    return Arch(name, "amd", family, part, cus, unit, wave, simds * waves_per_simd,
                1024, 64 * KiB, lds, rules)


def _nv(name, family, part, sms, *, max_warps, max_blocks, smem_per_sm, smem_per_block,
        smem_granule=128, smem_reserved=1 * KiB):
    rules = NvidiaRules(max_blocks=max_blocks, smem_granule=smem_granule,
                        smem_reserved=smem_reserved)
    return Arch(name, "nvidia", family, part, sms, "SM", 32, max_warps, 1024,
                smem_per_block, smem_per_sm, rules)


_ROWS = (
    # CDNA: wave64, 4 SIMDs per CU, 64 KiB LDS per CU.
    _amd("gfx908", "cdna1", "MI100", 120,
         waves_per_simd=10, vgpr_file=256, vgpr_granule=4, agprs="split"),
    _amd("gfx90a", "cdna2", "MI210", 104,
         waves_per_simd=8, vgpr_file=512, vgpr_granule=8, agprs="unified"),
    # gfx940: early MI300 silicon, same rules as gfx942 (the vendor CI compiles for it).
    _amd("gfx940", "cdna3", "MI300A-class (early cdna3)", 228,
         waves_per_simd=8, vgpr_file=512, vgpr_granule=8, agprs="unified"),
    _amd("gfx942", "cdna3", "MI300X", 304,
         waves_per_simd=8, vgpr_file=512, vgpr_granule=8, agprs="unified"),
    # RDNA3, wave32, WGP mode: the unit is the WGP (2 CUs, 4 SIMD32, 128 KiB LDS,
    # 32 barriers); 1.5x VGPR file. SGPRs never limit occupancy on gfx10+.
    _amd("gfx1100", "rdna3", "RX 7900 XTX (96 CUs = 48 WGPs)", 48,
         waves_per_simd=16, vgpr_file=1536, vgpr_granule=24, agprs="none",
         lds=128 * KiB, unit="WGP", wave=32, barriers=32, sgpr_waves=None),
    # NVIDIA: sm_70 allocates shared memory in 256-byte units and reserves none.
    _nv("sm_70", "volta", "V100", 80, max_warps=64, max_blocks=32,
        smem_per_sm=96 * KiB, smem_per_block=96 * KiB, smem_granule=256, smem_reserved=0),
    _nv("sm_80", "ampere", "A100", 108, max_warps=64, max_blocks=32,
        smem_per_sm=164 * KiB, smem_per_block=163 * KiB),
    _nv("sm_86", "ampere", "RTX 3090", 82, max_warps=48, max_blocks=16,
        smem_per_sm=100 * KiB, smem_per_block=99 * KiB),
    _nv("sm_89", "ada", "RTX 4090", 128, max_warps=48, max_blocks=24,
        smem_per_sm=100 * KiB, smem_per_block=99 * KiB),
    _nv("sm_90", "hopper", "H100 SXM", 132, max_warps=64, max_blocks=32,
        smem_per_sm=228 * KiB, smem_per_block=227 * KiB),
)

ARCHS: dict[str, Arch] = {a.name: a for a in _ROWS}

# Where the kernel's fp64 MMA kinds (tiles.py, engine "mma") run on matrix units
# (kernels/compat.h: DMMA m8n8k4). sm_86 and sm_89 have DMMA but at 1/64 of the fp32
# rate, so no; sm_70 and gfx908 have no fp64 matrix unit; gfx90a and gfx94x run fp64 on
# MFMA in their own family (MFMA below), not these kinds. Elsewhere these kinds compile
# to a shuffle emulation (correct, slow) and the planner does not offer them.
FP64_MMA = frozenset({"sm_80", "sm_90"})


# Where the float16 / bfloat16 MMA kinds (tiles.HALF_FAMILIES, mma.sync m16n8k16 with
# fp32 accumulators, kernels/compat.h) run on tensor cores: sm_80 and sm_90, the NVIDIA
# targets of the vendor matrix. Pre-sm_80 NVIDIA compiles the kinds to compat.h's shuffle
# emulation, which the planner prices at its rate (the SIMT kind wins). AMD runs the
# 16-bit dtypes in its own families instead (MFMA below).
HALF_MMA = frozenset({"sm_80", "sm_90"})

# AMD matrix cores (MFMA, kernels/compat.h; tiles.MFMA_FAMILIES): dtype -> the archs of
# this table whose MFMA kinds are built, compiled and modelled (never executed here: no
# AMD GPU); tiles.FAMILY_ARCHS is the one list. gfx908 has fp16 and bf16 (16x16x8bf16,
# half the fp16 rate) but no fp64 MFMA; gfx90a and gfx94x have fp16, bf16_1k and fp64.
MFMA = {dtype: frozenset(a for a in FAMILY_ARCHS[fam] if a in ARCHS)
        for fam, dtype in MFMA_FAMILIES.items()}
# Why an AMD arch has no 16-bit kernels (the planner's typed error names it).
HALF_MMA_NOT_BUILT = {
    "gfx1100": "RDNA3 has WMMA, not MFMA, and no 16-bit kernels are built for it",
}


# Hopper's warpgroup MMA (wgmma.mma_async, kernels/compat.h; tiles.WGMMA_FAMILIES): the
# archs whose wgmma kinds are built (sm_90, compiled for sm_90a), where the planner weighs
# them beside the 16-bit MMA kinds; tiles.FAMILY_ARCHS is the one list.
WGMMA = frozenset(a for fam in WGMMA_FAMILIES for a in FAMILY_ARCHS[fam] if a in ARCHS)


def has_wgmma(arch) -> bool:
    """Whether ``arch`` (an Arch or its name) runs the wgmma kinds."""
    return (arch.name if isinstance(arch, Arch) else get_arch(arch).name) in WGMMA


def has_mfma(arch, dtype: str) -> bool:
    """Whether ``arch`` (an Arch or its name) has MFMA kinds for ``dtype``."""
    name = arch.name if isinstance(arch, Arch) else get_arch(arch).name
    return name in MFMA.get(dtype, ())


# Where the fp32 precision modes "tf32" and "3xtf32" run (tiles.TF32_FAMILIES, mma.sync
# m16n8k8 .tf32, kernels/compat.h): sm_80 and sm_90, the NVIDIA targets of the vendor
# matrix. sm_86 and sm_89 have TF32 tensor cores at about their fp32 SIMT rate (spec
# sheets), so nothing to gain; sm_70 and AMD have none (CDNA's xf32 MFMA is gfx940+ only
# and not wired). plan(..., precision="tf32") elsewhere is a PrecisionUnavailable.
TF32_MMA = frozenset({"sm_80", "sm_90"})


def has_tf32_mma(arch) -> bool:
    """Whether ``arch`` (an Arch or its name) runs the TF32 kinds on tensor cores."""
    return (arch.name if isinstance(arch, Arch) else get_arch(arch).name) in TF32_MMA


def has_half_mma(arch) -> bool:
    """Whether ``arch`` (an Arch or its name) runs the 16-bit MMA kinds on tensor cores."""
    return (arch.name if isinstance(arch, Arch) else get_arch(arch).name) in HALF_MMA


def has_fp64_mma(arch) -> bool:
    """Whether ``arch`` (an Arch or its name) runs the fp64 MMA kinds on matrix units."""
    return (arch.name if isinstance(arch, Arch) else get_arch(arch).name) in FP64_MMA

# Family names -> arch.
FAMILY_ALIASES = {
    "cdna1": "gfx908", "cdna2": "gfx90a", "cdna3": "gfx942", "rdna3": "gfx1100",
    "volta": "sm_70", "ampere": "sm_80", "ada": "sm_89", "hopper": "sm_90",
}

# Product names -> (arch, part, compute units). Multi-die MI250/MI250X count one GCD:
# each is a device of its own.
PARTS = {
    "mi100": ("gfx908", "MI100", 120),
    "mi210": ("gfx90a", "MI210", 104),
    "mi250": ("gfx90a", "MI250 (per GCD)", 104),
    "mi250x": ("gfx90a", "MI250X (per GCD)", 110),
    "mi300a": ("gfx942", "MI300A", 228),
    "mi300x": ("gfx942", "MI300X", 304),
    "rx7900xtx": ("gfx1100", "RX 7900 XTX (96 CUs = 48 WGPs)", 48),
    "v100": ("sm_70", "V100", 80),
    "a100": ("sm_80", "A100", 108),
    "a800": ("sm_80", "A800", 108),
    "rtx3090": ("sm_86", "RTX 3090", 82),
    "rtx4090": ("sm_89", "RTX 4090", 128),
    "h100": ("sm_90", "H100 SXM", 132),
    "h200": ("sm_90", "H200", 132),
}


def _normalise(name: str) -> str:
    """Lower case, target features dropped ("gfx90a:sramecc+:xnack-"), "sm90"/"sm_90a"
    -> "sm_90", spaces and dashes dropped from product names ("RX 7900-XTX")."""
    key = name.strip().lower().split(":")[0]
    m = re.fullmatch(r"sm_?(\d+)a?", key)
    if m:
        return f"sm_{m.group(1)}"
    return re.sub(r"[\s\-_]", "", key) if key not in ARCHS else key


def get_arch(name: str | Arch) -> Arch:
    """The Arch for an arch name, family or product (case-insensitive); a product
    sets its own compute-unit count. An Arch is returned as it is."""
    if isinstance(name, Arch):
        return name
    if not isinstance(name, str):
        raise UnknownArch(f"architecture must be a name, not {type(name).__name__}")
    key = _normalise(name)
    if key in ARCHS:
        return ARCHS[key]
    if key in FAMILY_ALIASES:
        return ARCHS[FAMILY_ALIASES[key]]
    if key in PARTS:
        arch, part, cus = PARTS[key]
        return replace(ARCHS[arch], part=part, compute_units=cus)
    raise UnknownArch(f"unknown architecture {name!r}; known: {', '.join(known_names())}")


def known_names() -> list[str]:
    """Every name get_arch accepts (arch names, families, products)."""
    return [*ARCHS, *FAMILY_ALIASES, *PARTS]
