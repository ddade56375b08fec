"""The exact occupancy rules (docs/design.md §3), one small function per limit.

Each limit function answers one question: how many workgroups of this kernel could
one compute unit hold if only this resource counted (not capped by the others)?
``None`` means the resource sets no limit. The result carries every limit and the one
that binds, like ``cuda_occupancy.h``. AMD rules follow LLVM AMDGPU (gfx9 CDNA,
gfx11 RDNA3 in WGP mode); NVIDIA rules follow ``cuda_occupancy.h`` (default cache
preference, no clusters).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..errors import ResourceError
from .archs import Arch, get_arch
from .resources import KernelResources


@dataclass(frozen=True)
class Occupancy:
    arch: str                   # arch name
    model: str                  # "exact" | "paper"
    threads: int                # per workgroup
    waves_per_workgroup: int
    limits: dict                # limit name -> workgroups per CU it allows (None: no limit)
    wave_limits: dict           # limit name -> waves per CU it allows (paper: the raw WF term)
    limited_by: str
    active_workgroups: int      # per compute unit
    active_waves: int           # per compute unit (warps per SM on NVIDIA)
    max_waves: int              # per compute unit
    occupancy: float            # active_waves / max_waves

    def as_dict(self) -> dict:
        return asdict(self)


def align_to(x: int, granule: int) -> int:
    return -(-x // granule) * granule


def waves_per_workgroup(arch: Arch, threads: int) -> int:
    return -(-threads // arch.wave_size)


# --- AMD: per-SIMD wave counts, turned into workgroups per CU ------------------------

def _workgroups(arch: Arch, waves_per_simd: int, nw: int) -> int:
    # A CU holds waves_per_simd waves on each of its SIMDs; a workgroup needs nw of them.
    return waves_per_simd * arch.rules.simds // nw


def amd_waves_limit(arch: Arch, nw: int, res: KernelResources) -> int:
    return _workgroups(arch, arch.rules.waves_per_simd, nw)


def amd_barrier_limit(arch: Arch, nw: int, res: KernelResources) -> int | None:
    # Single-wave workgroups need no barrier slot.
    return arch.rules.barriers if nw > 1 else None


def _waves_by_vgprs(arch: Arch, vgprs: int) -> int:
    r = arch.rules
    return r.vgpr_file // align_to(max(vgprs, 1), r.vgpr_granule)


def amd_vgpr_limit(arch: Arch, nw: int, res: KernelResources) -> int:
    # Unified file (gfx90a/94x): AGPRs follow the arch VGPRs, aligned to 4.
    v = res.registers
    if arch.rules.agprs == "unified":
        v = align_to(v, 4) + res.agprs
    return _workgroups(arch, _waves_by_vgprs(arch, v), nw)


def amd_agpr_limit(arch: Arch, nw: int, res: KernelResources) -> int | None:
    # Only gfx908 has a separate AGPR file; using max(arch, agpr) is this and the
    # VGPR limit taken together.
    if arch.rules.agprs != "split" or res.agprs == 0:
        return None
    return _workgroups(arch, _waves_by_vgprs(arch, res.agprs), nw)


def amd_sgpr_limit(arch: Arch, nw: int, res: KernelResources) -> int | None:
    table = arch.rules.sgpr_waves
    if table is None:
        return None
    waves = next(w for top, w in table if res.sgprs <= top)
    return _workgroups(arch, waves, nw)


def amd_lds_limit(arch: Arch, nw: int, res: KernelResources) -> int | None:
    if res.shared_bytes == 0:
        return None
    return arch.shared_per_cu // align_to(res.shared_bytes, arch.rules.lds_granule)


# --- NVIDIA: cuda_occupancy.h, blocks per SM ------------------------------------------

def nv_warps_limit(arch: Arch, nw: int, res: KernelResources) -> int:
    return arch.max_waves_per_cu // nw


def nv_blocks_limit(arch: Arch, nw: int, res: KernelResources) -> int:
    return arch.rules.max_blocks


def nv_registers_limit(arch: Arch, nw: int, res: KernelResources) -> int | None:
    r = arch.rules
    if res.registers == 0:
        return None
    per_warp = align_to(res.registers * arch.wave_size, r.reg_granule)
    # The launch check assumes warps spread over all sub-partitions at once.
    if per_warp * align_to(nw, r.sub_partitions) > r.regs_per_block:
        return 0
    # Registers live in the sub-partitions: whole warps per sub-partition, times 4.
    warps = (r.regs_per_sm // r.sub_partitions) // per_warp * r.sub_partitions
    return warps // nw


def nv_shared_limit(arch: Arch, nw: int, res: KernelResources) -> int | None:
    r = arch.rules
    # From sm_80 on CUDA reserves 1 KiB per block, even for blocks using none.
    total = res.shared_bytes + r.smem_reserved
    if total == 0:
        return None
    return arch.shared_per_cu // align_to(total, r.smem_granule)


# Limits in tie-break order: when two allow the same number of workgroups,
# ``limited_by`` names the earlier one. The hardware caps come first because no cut in
# registers or shared memory can lift occupancy past them.
LIMIT_FUNCTIONS = {
    "amd": {"waves": amd_waves_limit, "barrier": amd_barrier_limit,
            "vgpr": amd_vgpr_limit, "agpr": amd_agpr_limit,
            "sgpr": amd_sgpr_limit, "lds": amd_lds_limit},
    "nvidia": {"warps": nv_warps_limit, "blocks": nv_blocks_limit,
               "registers": nv_registers_limit, "shared": nv_shared_limit},
}
AMD_LIMITS = tuple(LIMIT_FUNCTIONS["amd"])        # waves barrier vgpr agpr sgpr lds
NVIDIA_LIMITS = tuple(LIMIT_FUNCTIONS["nvidia"])  # warps blocks registers shared


# --- impossible resources ------------------------------------------------------------

def _fail(arch: Arch, what: str):
    raise ResourceError(f"{arch.name}: {what}")


def check_common(arch: Arch, threads: int, res: KernelResources) -> None:
    if isinstance(threads, bool) or not isinstance(threads, int):
        _fail(arch, f"threads must be an int, not {type(threads).__name__}")
    if not 1 <= threads <= arch.max_threads_per_workgroup:
        _fail(arch, f"{threads} threads per workgroup; allowed 1..{arch.max_threads_per_workgroup}")
    for field in ("registers", "shared_bytes", "sgprs", "agprs", "spill_bytes"):
        if getattr(res, field) < 0:
            _fail(arch, f"{field} = {getattr(res, field)} is negative")
    if res.shared_bytes > arch.max_shared_per_workgroup:
        _fail(arch, f"{res.shared_bytes} bytes of shared memory per workgroup; "
                    f"the maximum is {arch.max_shared_per_workgroup}")


# SGPRs one wave can hold, reserved ones included: 102 addressable + VCC, FLAT_SCRATCH
# and XNACK_MASK on gfx9 (LLVM getAddressableNumSGPRs + getNumExtraSGPRs); gfx10+ has
# 106 addressable + VCC, the same total.
AMD_MAX_SGPRS = 108


def check_amd(arch: Arch, res: KernelResources) -> None:
    r = arch.rules
    if res.registers > 512:
        _fail(arch, f"{res.registers} VGPRs per thread; AMD allows at most 512")
    if res.sgprs > AMD_MAX_SGPRS:
        _fail(arch, f"{res.sgprs} SGPRs per wave; a wave holds at most {AMD_MAX_SGPRS} "
                    f"(including VCC, FLAT_SCRATCH, XNACK_MASK)")
    if r.agprs == "none" and res.agprs:
        _fail(arch, f"{res.agprs} AGPRs, but {arch.family} has no AGPRs")
    if r.agprs == "split" and max(res.registers, res.agprs) > r.vgpr_file:
        _fail(arch, f"{res.registers} VGPRs + {res.agprs} AGPRs; each file holds {r.vgpr_file}")
    if r.agprs == "unified" and align_to(res.registers, 4) + res.agprs > r.vgpr_file:
        _fail(arch, f"{res.registers} VGPRs + {res.agprs} AGPRs exceed the "
                    f"{r.vgpr_file}-register unified file")


def check_nvidia(arch: Arch, res: KernelResources) -> None:
    if res.registers > arch.rules.max_regs:
        _fail(arch, f"{res.registers} registers per thread; at most {arch.rules.max_regs}")
    if res.sgprs or res.agprs:
        _fail(arch, "SGPRs/AGPRs given for an NVIDIA arch (AMD figures?)")


VENDOR_CHECKS = {"amd": check_amd, "nvidia": check_nvidia}


def check_resources(arch: Arch, threads: int, res: KernelResources) -> None:
    """Raise ResourceError where no workgroup of this kind could ever launch."""
    check_common(arch, threads, res)
    VENDOR_CHECKS[arch.vendor](arch, res)


# --- the result ------------------------------------------------------------------------

def binding(limits: dict) -> str:
    """The smallest limit; ties go to the earliest name (dicts keep LIMITS order)."""
    live = {k: v for k, v in limits.items() if v is not None}
    return min(live, key=lambda k: live[k])


def build(arch: Arch, model: str, threads: int, nw: int, limits: dict, wave_limits: dict,
          by: str | None = None, active_waves: int | None = None) -> Occupancy:
    """Assemble an Occupancy; no whole workgroup fitting is a ResourceError."""
    by = by or binding(limits)
    wgs = limits[by]
    if wgs <= 0:
        raise ResourceError(f"{arch.name}: no {threads}-thread workgroup fits on a "
                            f"{arch.unit} (limited by {by})")
    waves = wgs * nw if active_waves is None else active_waves
    return Occupancy(arch=arch.name, model=model, threads=threads, waves_per_workgroup=nw,
                     limits=limits, wave_limits=wave_limits, limited_by=by,
                     active_workgroups=wgs, active_waves=waves,
                     max_waves=arch.max_waves_per_cu,
                     occupancy=waves / arch.max_waves_per_cu)


def exact_occupancy(arch: Arch | str, threads: int, res: KernelResources) -> Occupancy:
    arch = get_arch(arch)
    check_resources(arch, threads, res)
    nw = waves_per_workgroup(arch, threads)
    limits = {name: fn(arch, nw, res) for name, fn in LIMIT_FUNCTIONS[arch.vendor].items()}
    waves = {k: None if v is None else v * nw for k, v in limits.items()}
    return build(arch, "exact", threads, nw, limits, waves)


def occupancy(arch: Arch | str, threads: int, res: KernelResources,
              model: str = "exact") -> Occupancy:
    """Workgroups (and waves) of one kernel resident per compute unit.

    ``model="exact"``: the hardware's rules (default). ``model="paper"``: zhang2025
    Eqs. 5-9, an approximation kept to show the difference."""
    from .paper_model import paper_occupancy  # it builds on this module
    models = {"exact": exact_occupancy, "paper": paper_occupancy}
    try:
        fn = models[model]
    except KeyError:
        raise ValueError(f"unknown occupancy model {model!r}; known: {', '.join(models)}") from None
    return fn(arch, threads, res)


MODELS = ("exact", "paper")
