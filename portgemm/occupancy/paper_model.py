"""zhang2025 §4.2.1, Eqs. (5)-(9): the paper's wavefront estimate, as a selectable model.

    WF_wg = 16 * ceil(WI_wg / 64)                       (5)  workgroup cap, in waves
    WF_V  = 4 * floor(VGPR_max / (VGPR_used * 64))      (6)  VGPR_max: one SIMD's file
    WF_S  = floor(SGPR_max / SGPR_used)                 (7)
    WF_L  = floor(LDS_max / LDS_used) * ceil(WI_wg / 64) (8)
    WF    = min(WF_wg, WF_V, WF_S, WF_L, WF_C)           (9)  WF_C: max waves per CU

It approximates the exact rules (``model.py``): no allocation granules, no AGPRs, no
reserved shared memory, the workgroup cap applied to single-wave workgroups too, the
SGPR term a per-SIMD count (800 // SGPRs, the SIMD's SGPR file) compared unscaled with
per-CU terms, and the minimum taken over raw wave counts rather than whole workgroups.
We keep all of that as printed; ``active_waves`` is the paper's WF and
``active_workgroups`` is floor(WF / waves per workgroup).

Written for MI210; on other archs each constant takes that arch's value:
- AMD: 16 -> the arch's workgroup (barrier) cap (32 per RDNA3 WGP); 64 -> wave size;
  4 SIMDs -> SIMDs per compute unit; VGPR_max/64 -> the SIMD's VGPRs per lane (256 on
  gfx908, 512 on gfx90a/94x, 1536 on gfx1100 wave32); LDS_max -> LDS per CU (WGP);
  no SGPR term where SGPRs never limit (RDNA).
- NVIDIA: CU -> SM; wavefront -> warp (32 threads); 16 -> max resident blocks per SM;
  SIMD -> SM sub-partition (4 per SM, each with a quarter of the register file), so
  VGPR_max/64 -> 65536 / 4 / 32 = 512 registers per lane of a sub-partition; LDS_max ->
  shared memory per SM; WF_C -> max warps per SM; no SGPR term (scalar values live in
  the same registers, already counted).
"""
from __future__ import annotations

from .archs import Arch, get_arch
from .model import build, binding, check_resources, waves_per_workgroup
from .resources import KernelResources


def wf_c(arch: Arch, nw: int, res: KernelResources) -> int:
    """WF_C: most waves one compute unit holds."""
    return arch.max_waves_per_cu


def wf_wg(arch: Arch, nw: int, res: KernelResources) -> int:
    """Eq. 5: the workgroup cap times waves per workgroup (even for one wave)."""
    cap = arch.rules.barriers if arch.vendor == "amd" else arch.rules.max_blocks
    return cap * nw


def wf_v(arch: Arch, nw: int, res: KernelResources) -> int | None:
    """Eq. 6: SIMDs x floor(registers per lane of one SIMD / registers per thread)."""
    if res.registers == 0:
        return None
    r = arch.rules
    if arch.vendor == "amd":
        return r.simds * (r.vgpr_file // res.registers)
    per_lane = r.regs_per_sm // r.sub_partitions // arch.wave_size
    return r.sub_partitions * (per_lane // res.registers)


def wf_s(arch: Arch, nw: int, res: KernelResources) -> int | None:
    """Eq. 7: floor(SGPR file / SGPRs per wave); AMD gfx9 only."""
    if arch.vendor != "amd" or arch.rules.sgpr_waves is None or res.sgprs == 0:
        return None
    return arch.rules.sgpr_file // res.sgprs


def wf_l(arch: Arch, nw: int, res: KernelResources) -> int | None:
    """Eq. 8: whole workgroups by LDS, times waves per workgroup."""
    if res.shared_bytes == 0:
        return None
    return arch.shared_per_cu // res.shared_bytes * nw


# The paper's terms under the exact model's limit names, in its tie-break order.
TERMS = {
    "amd": {"waves": wf_c, "barrier": wf_wg, "vgpr": wf_v, "agpr": None,
            "sgpr": wf_s, "lds": wf_l},
    "nvidia": {"warps": wf_c, "blocks": wf_wg, "registers": wf_v, "shared": wf_l},
}


def paper_occupancy(arch: Arch | str, threads: int, res: KernelResources):
    arch = get_arch(arch)
    check_resources(arch, threads, res)
    nw = waves_per_workgroup(arch, threads)
    waves = {name: fn(arch, nw, res) if fn else None
             for name, fn in TERMS[arch.vendor].items()}
    limits = {k: None if v is None else v // nw for k, v in waves.items()}
    by = binding(waves)  # Eq. 9: the minimum over raw wave counts
    return build(arch, "paper", threads, nw, limits, waves, by=by, active_waves=waves[by])
