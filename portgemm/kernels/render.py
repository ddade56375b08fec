"""Variant -> kernel source: the one kernel source, specialised by a rendered prefix of
#defines (after the compat header). Also the host-side mirrors of the device structs."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..tiles import (FAMILIES, MFMA_FAMILIES, TF32_FAMILIES, WGMMA_FAMILIES, family_precision,
                     mma_products, wgmma_tf32)
from .variants import DTYPES, HALF_DTYPES, ITEMSIZE, SplitReduce, StageCopy, TileExpand, Variant

HERE = Path(__file__).parent

# Minimum resident blocks per compute unit for __launch_bounds__, by (family, kind or
# "fused", dtype), as measured on sm_90; anything else gets no hint. The zhang2025 fused
# kernel carries every kind's code and the compiler gives it 128 registers (2 blocks per
# SM); 3 caps float32 at 80 with no spill and measured faster. With no hint, ptxas gives
# float32 medium-large 64 registers and an 8-byte spill; 3 lets it keep 79 and no spill.
# float64 and the li2019 families spill under a cap. HIP and pre-sm_90 targets ignore
# it (compat.h). See bench/NOTES.md, "Register cap".
MIN_BLOCKS = {
    ("zhang2025", "fused", "float32"): 3,
    ("zhang2025", "medium-large", "float32"): 3,
    # 128 accumulators a thread: 2 blocks of 128 threads an SM leave 255 registers
    ("portgemm", "128x128/16x8", "float32"): 2,
    # 64 accumulators, 128 threads: 167 registers gave 3 blocks an SM with no hint; the
    # lean edge code (PG_LEAN, session 9) let ptxas take 175-199 in some ops (2 blocks);
    # capped at 3 (168) none spills on sm_90
    ("portgemm", "128x64/8x8", "float32"): 3,
    ("portgemm", "64x128/8x8", "float32"): 3,
    # 64x64/8x4 A B^T took 129 registers with the lean edge code (3 blocks an SM, 4 at
    # 128); capped at 4 it keeps 127, no spill on sm_90. On the k-major pipeline (KPIPE)
    # A B took 161 (3 blocks); capped at 4, 128 with no spill (A^T B^T too). A^T B keeps
    # no cap: 95 registers, 5 blocks, on the register path (REGISTER_BOUND_OPS)
    **{(fam, kind, "float32", op): 4 for fam, kind in (("portgemm", "64x64/8x4"),
                                                       ("tune", "64x64/8x4/k16"))
       for op in ("nn", "nt", "tt")},
    ("tune", "128x64/8x8/k8", "float32"): 3,
    ("tune", "64x128/8x8/k8", "float32"): 3,
    ("tune", "128x128/16x8/k8", "float32"): 2,
    # fp64 MMA 64x64 (four 32x32 warps): 166 registers give 3 blocks an SM; under a cap
    # of 128 (4 blocks, as its 48 KiB of shared memory allow), no spill on sm_90, and
    # 3-8 % faster on the H100 (kernel_bench "dmma-cap4"). sm_80 ignores it (compat.h).
    ("portgemm-f64", "64x64/w32x32", "float64"): 4,
    ("tune-f64", "64x64/w32x32/k8", "float64"): 4,
    # fp64 SIMT 64x64/8x4 on the k-major pipeline: 204 registers with no hint (2 blocks
    # an SM); capped at 3, 160-168 with no spill on sm_90 (every op)
    ("portgemm-f64", "64x64/8x4", "float64"): 3,
    ("tune-f64", "64x64/8x4/k8", "float64"): 3,
    # the 16-bit 128x128 MMA kind (8 warps, 64 accumulators a lane): 163 registers leave
    # one block an SM; capped at 2 (128 registers) it does not spill on sm_90. 128x64
    # (4 warps) capped at 4 blocks spilled 8-104 bytes there, so it keeps 3 (166).
    **{(fam, "128x128/w64x32", dt): 2
       for fam, dt in (("portgemm-f16", "float16"), ("portgemm-bf16", "bfloat16"))},
    # the 16-bit 32x32 MMA kind (4 warps, 20 KiB of shared memory): 127 registers with the
    # shifted word copies (SHIFT16) and no hint (4 blocks an SM; 96 and 5 before them);
    # capped at 6, 72-80 with no spill on sm_90 in any layout and op, and 1.13-1.14x the
    # uncapped kernel on the 1,024-GEMM batches of MaxMN 128 with K up to 256-512 (H100,
    # bench/NOTES.md session 15); capped at 8 (64 registers) those ran 0.7-0.9x
    **{(fam, "32x32/w16x16", dt): 6
       for fam, dt in (("portgemm-f16", "float16"), ("portgemm-bf16", "bfloat16"))},
    # the wgmma kinds (64 accumulators a thread, 123-152 registers with no hint): capped
    # at 128 registers, 128x128 (two warpgroups) keeps 2 resident blocks an SM and 64x128
    # (one) 4, as their 64 / 48 KiB of shared memory allow; no spill on sm_90a
    **{(fam, kind, dt): n for fam, dt in WGMMA_FAMILIES.items() if dt != "float32"
       for kind, n in (("64x128/g64x128", 4), ("128x128/g64x128", 2))},
    # 3xTF32 64x64 (four warps): with no hint ptxas aimed at 168 registers and spilled 4-8
    # bytes on sm_90; 3 blocks (170) does not spill there. sm_80 ignores it (compat.h)
    # and does not spill.
    ("portgemm-3xtf32", "64x64/w32x32", "float32"): 3,
    # wgmma-3xtf32 64x64: 142-188 registers with no hint; 3 blocks an SM (170), as its 68
    # KiB of shared memory allow, with no spill on sm_90a
    ("wgmma-3xtf32", "64x64/g64x64", "float32"): 3,
}


# fp64's SIMT kinds on the k-major pipeline (STAGES and KPIPE below), by family
F64_KPIPE_KINDS = {"portgemm-f64": ("64x64/8x4", "128x64/8x4", "64x128/4x8"),
                   "tune-f64": ("64x64/8x4/k8", "128x64/8x4/k8", "64x128/4x8/k8")}


# The 16-bit MMA kinds' copies of 2-byte aligned rows (an odd leading dimension: half the
# GEMMs of a random batch) where a slice lies inside its matrix: (chunk elements, least
# stored row length that takes them; chunk 0: element copies), by the keys of MIN_BLOCKS,
# SHIFT16_DEFAULT for the rest (kernels/vbatched_gemm.cu pg_copy_shift16).
SHIFT16_DEFAULT = (8, 0)
SHIFT16 = {}


# cp.async pipeline stages (sm_80+), same keys as MIN_BLOCKS; absent: 0, the register
# double buffer everywhere (the paper's kinds keep the kernel they were measured with).
# Measured on the H100 (bench/kernel_bench.py, bench/NOTES.md): fp64's 32x32 and 64x64
# kinds run 5-14 % faster on it. The fp32 kinds do not: the 128-thread 8x8 kinds and the
# small ones ran 0-25 % slower; 128x128/8x8 runs 10-25 % faster with it under a 2-block
# cap (128 registers), but the planner's cost model then prefers it to 64x128, which
# is still faster, and the default plan got 5 % slower ("cap128" in the bench).
STAGES = {
    # the MMA kinds: 4 stages of BK 8 (64x64: 48 KiB); 3 ran 2-10 % slower on the H100
    ("portgemm-f64", "32x32/w16x16", "float64"): 4,
    ("portgemm-f64", "64x32/w32x16", "float64"): 4,
    ("portgemm-f64", "64x64/w32x32", "float64"): 4,
    ("portgemm-f64", "32x32/4x4", "float64"): 3,
    ("portgemm-f64", "64x64/4x4", "float64"): 3,
    # the same two tiles among the tuning candidates, so `tune` times what runs
    ("tune-f64", "32x32/4x4/k8", "float64"): 3,
    ("tune-f64", "64x64/4x4/k16", "float64"): 3,
    # fp64's 8x4 / 4x8 kinds on the k-major pipeline (KPIPE below): 1.09-1.13x their
    # register path for 64x64/8x4 (128 threads, the fastest fp64 SIMT kind), 1.04-1.09x
    # for the 256-thread ones at the same blocks an SM (kernel_bench "f64reg", session 14)
    **{(fam, kind, "float64"): 3 for fam, kinds in F64_KPIPE_KINDS.items() for kind in kinds},
    ("tune-f64", "32x32/w16x16/k8", "float64"): 4,
    ("tune-f64", "64x32/w32x16/k8", "float64"): 4,
    ("tune-f64", "64x64/w32x32/k8", "float64"): 4,
    # 128x128/16x8: cuBLAS's grouped SIMT tile (4 stages of BK 8, 128 threads); 3 stages
    # timed the same on the H100 (kernel_bench "fat3": within 1 %)
    ("portgemm", "128x128/16x8", "float32"): 4,
    ("tune", "128x128/16x8/k8", "float32"): 4,
    # the 8x8 and 8x4 kinds on the k-major pipeline (KPIPE below): 3 stages, 4 for
    # 128x64/8x8; 1.02-1.29x their register path on the H100 (kernel_bench "kpipe3" /
    # "kpipe4", 13 cases), 3 and 4 stages within 2 % of each other elsewhere. Not
    # 32x32/4x4: 0.98-1.17x alone, but 0.88-0.97x in the default plans of the small
    # batches it runs (short_k, grid cells of MaxMN 128-256)
    **{(fam, kind, "float32"): st for fam, kinds in (
        ("portgemm", ("64x64/8x4", "64x128/8x8", "128x64/8x8")),
        ("tune", ("64x64/8x4/k16", "64x128/8x8/k8", "128x64/8x8/k8")))
       for kind, st in zip(kinds, (3, 3, 4))},
    # the 16-bit MMA kinds: 4 stages of BK 32 where 48 KiB allow (stages() drops to 3
    # for 128x64 and 2 for 128x128); not timed against fewer yet
    **{(fam, kind, dt): 4 for fam, dt in (("portgemm-f16", "float16"), ("portgemm-bf16", "bfloat16"))
       for kind in ("32x32/w16x16", "64x64/w32x32", "128x64/w64x32", "128x128/w64x32")},
    # the wgmma kinds (tiles.py): 4 stages of BK 32, 64x128's in 48 KiB (static), 128x128's
    # in 64 KiB (dynamic: PG_DYN_SMEM)
    **{(fam, kind, dt): 4 for fam, dt in WGMMA_FAMILIES.items() if dt != "float32"
       for kind in ("64x128/g64x128", "128x128/g64x128")},
    # wgmma-3xtf32: 3 stages of BK 32 (A padded as the TF32 kinds', B's k-major rows by 4
    # for the aligned windows) and the split stage of B (smem_elems_async): 64x64 in 70 KiB
    # (three blocks an SM), 64x128 in 110 (two), 128x128 in 137 (one)
    **{("wgmma-3xtf32", kind, "float32"): 3
       for kind in ("64x64/g64x64", "64x128/g64x128", "128x128/g64x128")},
    # the TF32 kinds: 4 stages of BK 16 where 48 KiB allow (stages() drops to 3 for
    # 128x64 and 2 for 128x128); not timed against fewer yet
    **{(fam, kind, "float32"): 4 for fam in TF32_FAMILIES
       for kind in ("32x32/w16x16", "64x64/w32x32", "128x64/w64x32", "128x128/w64x32")},
}


# Ops whose registers set their blocks an SM, which keep session 10's kernel: neither
# the pipeline (STAGES) nor the staged epilogue (STAGED_C). A^T B of 64x64/8x4 holds 95
# registers there (5 blocks an SM); it took 123 on the pipeline and 128 with the staged
# epilogue (sm_90: 4 blocks).
REGISTER_BOUND_OPS = {("portgemm", "64x64/8x4", "float32", "tn"),
                      ("tune", "64x64/8x4/k16", "float32", "tn")}


# A static __shared__ array may not exceed 48 KiB: fewer stages where more would. The
# wgmma kinds (sm_90a only) may go past it in dynamic shared memory, up to what sm_90
# lets one block opt into (DYNAMIC_SMEM_ARCH's max_shared_per_workgroup).
STATIC_SMEM_BYTES = 48 * 1024
DYNAMIC_SMEM_ARCH = "sm_90"


def _smem_limit(variant: Variant) -> int:
    if not _has_wgmma(variant):
        return STATIC_SMEM_BYTES
    from ..occupancy.archs import get_arch
    return get_arch(DYNAMIC_SMEM_ARCH).max_shared_per_workgroup - DYNAMIC_SMEM_SLACK


def _has_wgmma(variant: Variant) -> bool:
    return any(k.family in WGMMA_FAMILIES for k in variant.kinds)


def stages(variant: Variant) -> int:
    """cp.async stages of ``variant`` on sm_80+ (0: the register double buffer)."""
    if _key(variant) + (_op(variant),) in REGISTER_BOUND_OPS:
        return 0
    s = STAGES.get(_key(variant), 0)
    elem, limit = ITEMSIZE[variant.dtype], _smem_limit(variant)
    while s > 2 and smem_elems_async(variant.kinds, variant.dtype, s, wg_windows(variant)) * elem > limit:
        s -= 1
    return s


# Dynamic shared memory starts after the static variables, 16-byte aligned: a launch
# asks for the tiles' bytes plus this much, for the kernel to align them (PG_SMEM_DECL).
DYNAMIC_SMEM_SLACK = 1024 - 16


def dynamic_smem(variant) -> int:
    """Bytes of dynamic shared memory a launch of ``variant`` passes (PG_DYN_SMEM): the
    stages of a wgmma variant that exceed the static limit, plus DYNAMIC_SMEM_SLACK;
    0 for every other variant (a static array)."""
    if not isinstance(variant, Variant) or not _has_wgmma(variant):
        return 0
    tiles = smem_elems_async(variant.kinds, variant.dtype, stages(variant),
                             wg_windows(variant)) * ITEMSIZE[variant.dtype]
    return tiles + DYNAMIC_SMEM_SLACK if tiles > STATIC_SMEM_BYTES else 0


# Unroll count of the BK loop, same keys (an op after the dtype, as in MIN_BLOCKS, wins);
# absent: the vendor default (compat.h: full on CUDA, 4 on AMD). A full unroll lets the
# compiler hoist every k step's shared reads, which costs registers that a resident
# block more per SM is worth more than.
K_UNROLL: dict[tuple, int] = {
    # The fused kernel of our fp32 family holds 128x128/16x8 (128 accumulators) on the
    # register path for A^T B^T; fully unrolled it spilled 176 bytes on sm_80 (255
    # registers, NVRTC 13.0), unrolled 4 or 2 times 8-272 bytes in other ops. Not
    # unrolled: 254 registers, no spill. The default plan never runs this kernel (our
    # family runs per kind); not timed.
    ("portgemm", "fused", "float32", "tt"): 1,
}


def carry(variant: Variant) -> bool:
    """Whether ``variant`` carries the next tile's first k step (PG_CARRY): float32
    per-kind tile-list entry points of SIMT kinds, the ones persistent launches run
    (backends/persistent.py). Fused kernels spilled with it on sm_90 (228-804 bytes),
    float64 kinds on sm_90 (16-24 bytes, vendor matrix); MMA kinds stage through their
    own fragments (pg_tile_mma), which the carry does not know."""
    return (not variant.fused and variant.layout == "tile-list" and variant.dtype == "float32"
            and all(k.engine == "simt" for k in variant.kinds))


# Our own SIMT families (and their tuning candidates, so `tune` times what runs): the
# ones whose per-kind entry points take the lean edge code (PG_LEAN).
LEAN_FAMILIES = ("portgemm", "portgemm-f64", "tune", "tune-f64")


def lean(variant: Variant) -> bool:
    """Whether ``variant`` takes the lean edge code (PG_LEAN, bench/NOTES.md session 9):
    per-kind tile-list entry points of our own SIMT kinds. Their units and copies that
    lie inside the matrix skip the element checks, and the epilogue picks its loop by
    beta once. Fused, ragged and grid-z entry points and the paper's families render as
    before: under their register caps the extra paths spilled 4-32 bytes (sm_80, sm_90).
    So do the fp64 kinds on the cp.async pipeline: lean, 64x64/4x4 spilled 20 bytes on
    sm_80 and took 134 registers on sm_90 (one block an SM instead of two). The fp64
    kinds of the k-major pipeline (KPIPE) are lean."""
    return (not variant.fused and variant.layout == "tile-list"
            and all(k.engine == "simt" and k.family in LEAN_FAMILIES for k in variant.kinds)
            and not (variant.dtype == "float64" and stages(variant) > 0
                     and _key(variant) not in KPIPE))


# The lean variants whose register-path main loop loads the k steps inside the matrix
# from per-tile unit offsets with no checks and keeps its two stages interleaved
# (PG_LEAN_STEP, bench/NOTES.md session 10), by (family, kind, dtype): the fp32 kinds the
# short-K cells run (and their tuning candidates), where sm_90 SASS shows 10-30 % fewer
# non-FFMA instructions a k step at the same registers. Not 64x64/8x4 A^T B (LEAN_STEP_OFF,
# with the op): there the offsets took 127 registers on sm_90 (4 blocks an SM) where it
# had 95 (5), and capped at 5 blocks it spills (32 bytes; 28 without them). Not the other
# lean kinds: fp64 and the smaller fp32 kinds took more registers with it, and some lost
# a block an SM (sm_80, sm_90, gfx940).
LEAN_STEP = {
    *(("portgemm", k, "float32") for k in ("64x128/8x8", "128x64/8x8", "64x64/8x4",
                                            "128x128/16x8")),
    *(("tune", k, "float32") for k in ("64x128/8x8/k8", "128x64/8x8/k8", "64x64/8x4/k16",
                                        "128x128/16x8/k8")),
}
LEAN_STEP_OFF = {
    ("portgemm", "64x64/8x4", "float32", "tn"),
    ("tune", "64x64/8x4/k16", "float32", "tn"),
}


def lean_step(variant: Variant) -> bool:
    """Whether ``variant`` takes PG_LEAN_STEP (LEAN_STEP above)."""
    return (lean(variant) and _key(variant) in LEAN_STEP
            and _key(variant) + (_op(variant),) not in LEAN_STEP_OFF)


def _shape(k) -> tuple:
    return (k.tm, k.tn, k.tk, k.threads, k.rm, k.rn)


# The lean variants whose epilogue stages unaligned C through shared memory
# (PG_STAGED_C, bench/NOTES.md session 13), by (family, kind, dtype): our fp32 kinds
# (and their tuning candidates of the same shapes), 1.01-1.12x faster alone on the
# H100's short-K cells. Not 32x32/4x4 (0.95-1.00x with it), not fp64 (its 128x64/8x4 took
# 170-184 registers for 128-130, a block an SM less), nor REGISTER_BOUND_OPS; sm_80 keeps
# the old epilogue (compat.h: its 8x8 kinds took 14-28 more registers there).
STAGED_C = {
    *(("portgemm", k.kind, "float32") for k in FAMILIES["portgemm"]
      if k.engine == "simt" and k.kind != "32x32/4x4"),
    *(("tune", k.kind, "float32") for k in FAMILIES["tune"]
      if _shape(k) in {_shape(p) for p in FAMILIES["portgemm"] if p.kind != "32x32/4x4"}),
}


# ... and the wgmma kinds whose epilogue passes C through shared memory
# (pg_wgmma_store): every 128x128 one and 3xTF32's 64x128, 1.26-1.47x faster on the
# H100's large 16-bit grid cells (bench/NOTES.md, session 14). Not the 16-bit 64x128 nor
# 3xTF32's 64x64: under their register caps (4 and 3 blocks an SM) they spilled 8-24
# bytes with it on sm_90a.
WGMMA_STAGED_C = {*((fam, "128x128/g64x128", dt) for fam, dt in WGMMA_FAMILIES.items()),
                  ("wgmma-3xtf32", "64x128/g64x128", "float32")}


# The 16-bit wgmma kinds that stage rows not 16-byte aligned through aligned windows and a
# shift pass (PG_WG_WINDOWS, kernel: PgWgWindow, pg_wgmma_windows), by (family, kind,
# dtype). Empty: those rows take the 4-byte and element copies, 61-68 TFLOP/s on the H100
# against 338 aligned (bench/NOTES.md, session 8), so the planner weighs these kinds for
# aligned batches only (planner/alignment.aligned_batch). Compiled and checked on the CPU
# (session 20), not yet run on a GPU: bench/kernel_bench.py's config "wgwin" turns it on.
WGMMA_WINDOWS: set[tuple[str, str, str]] = set()
# every 16-bit wgmma kind's key: WGMMA_WINDOWS with the windows on for all of them
WGMMA_16BIT = frozenset((fam, k.kind, dt) for fam, dt in WGMMA_FAMILIES.items()
                        if dt != "float32" for k in FAMILIES[fam])


def wg_windows(variant: Variant) -> bool:
    """Whether ``variant`` takes PG_WG_WINDOWS (WGMMA_WINDOWS above)."""
    return (isinstance(variant, Variant) and not variant.fused and _has_wgmma(variant)
            and _key(variant) in WGMMA_WINDOWS)


def staged_c(variant: Variant) -> bool:
    """Whether ``variant`` takes PG_STAGED_C (STAGED_C, WGMMA_STAGED_C above)."""
    if _has_wgmma(variant):
        return _key(variant) in WGMMA_STAGED_C
    return (lean(variant) and _key(variant) in STAGED_C
            and _key(variant) + (_op(variant),) not in REGISTER_BOUND_OPS)


# The lean variants on the cp.async pipeline whose main loop stages A k-major by element
# copies and double-buffers the fragments (PG_KPIPE, bench/NOTES.md session 13), by
# (family, kind, dtype): the fp32 kinds with STAGES above. 128x128/16x8 ran 1.10-1.15x
# faster on it than on the x-major pipeline, whose step reads and copies sat between the
# barrier and the first FMA; the others 1.02-1.29x faster than on the register path.
# And fp64's 8x4 / 4x8 kinds (F64_KPIPE_KINDS, session 14).
# (B^T takes the register path: PG_PIPELINE; there the flag only keeps the kind's cap.)
KPIPE = {(fam, kind, "float32") for fam, kinds in (
    ("portgemm", ("64x64/8x4", "64x128/8x8", "128x64/8x8", "128x128/16x8")),
    ("tune", ("64x64/8x4/k16", "64x128/8x8/k8", "128x64/8x8/k8", "128x128/16x8/k8")))
    for kind in kinds} | {(fam, kind, "float64") for fam, kinds in F64_KPIPE_KINDS.items()
                          for kind in kinds}


def kpipe(variant: Variant) -> bool:
    """Whether ``variant`` takes PG_KPIPE (KPIPE above)."""
    return lean(variant) and _key(variant) in KPIPE and stages(variant) >= 2


def _key(variant: Variant) -> tuple[str, str, str]:
    what = "fused" if variant.fused else variant.kinds[0].kind
    return (variant.kinds[0].family, what, variant.dtype)


def _op(variant: Variant) -> str:
    return ("t" if variant.trans_a else "n") + ("t" if variant.trans_b else "n")


def min_blocks(variant: Variant) -> int:
    """The hint for ``variant``: an entry keyed with its op ("nn", "tn", ...) after the
    dtype wins over the entry without (a family's kinds on the cp.async path: the
    kernel applies their hint only there)."""
    key = _key(variant)
    return MIN_BLOCKS.get(key + (_op(variant),), MIN_BLOCKS.get(key, 0))


def shift16(variant: Variant) -> tuple[int, int]:
    """(chunk, least row length) of the 16-bit MMA kinds' shifted word copies of 2-byte
    rows (pg_copy_shift16; SHIFT16), (0, 0) for every other variant."""
    if variant.dtype not in HALF_DTYPES or not any(k.engine == "mma" for k in variant.kinds):
        return (0, 0)
    return SHIFT16.get(_key(variant), SHIFT16_DEFAULT)


def k_unroll(variant: Variant) -> int:
    """The BK loop's unroll count (0: the vendor default); an entry keyed with the op
    wins, as in min_blocks."""
    key = _key(variant)
    return K_UNROLL.get(key + (_op(variant),), K_UNROLL.get(key, 0))

SOURCE_FILE = HERE / "vbatched_gemm.cu"
COMPAT_FILE = HERE / "compat.h"

# Mirrors `struct PgGemm` (64 bytes, 8-byte aligned) and `struct PgTile` (16 bytes).
GEMM_DTYPE = np.dtype({
    "names": ["A", "B", "C", "lda", "ldb", "ldc", "M", "N", "K", "alpha", "beta"],
    "formats": ["<u8", "<u8", "<u8", "<i4", "<i4", "<i4", "<i4", "<i4", "<i4", "<f8", "<f8"],
    "offsets": [0, 8, 16, 24, 28, 32, 36, 40, 44, 48, 56],
    "itemsize": 64,
})
DEVICE_TILE_DTYPE = np.dtype([("gemm", "<i4"), ("m0", "<i4"), ("n0", "<i4"), ("kind", "<i4")])
# Mirrors `struct PgReduce` (48 bytes, 8-byte aligned): one split GEMM of the reduction.
REDUCE_DTYPE = np.dtype({
    "names": ["C", "W", "ldc", "M", "N", "s", "alpha", "beta"],
    "formats": ["<u8", "<u8", "<i4", "<i4", "<i4", "<i4", "<f8", "<f8"],
    "offsets": [0, 8, 16, 20, 24, 28, 32, 40],
    "itemsize": 48,
})


# Mirrors `struct PgStageRec` (32 bytes, 8-byte aligned): one staged operand of the
# alignment staging copy (backends/stage.py).
STAGE_DTYPE = np.dtype({
    "names": ["src", "dst", "src_ld", "dst_ld", "rows", "cols"],
    "formats": ["<u8", "<u8", "<i4", "<i4", "<i4", "<i4"],
    "offsets": [0, 8, 16, 20, 24, 28],
    "itemsize": 32,
})


def pad_elems(dtype: str) -> int:
    """Row padding of the shared tiles: 16 bytes, so rows stay 16-byte aligned."""
    return 16 // ITEMSIZE[dtype]


# Row padding of the MMA kinds' staged operands (PG_MMA_PAD in the kernel source): 4
# doubles, 8 of the 16-bit types.
MMA_PAD = 4


def mma_pad(dtype: str) -> int:
    return 8 if dtype in HALF_DTYPES else MMA_PAD


# The TF32 kinds' paddings (kernel: PgTf32Stage): x-major rows of tk + 4 floats, k-major
# rows of tm or tn + 8, each conflict-free for 4-byte fragment reads.
TF32_PAD = (4, 8)


def mma_stage_elems(k, dtype: str = "float64") -> int:
    """One stage of an MMA kind's A and B (kernel: PgMmaStage, PgTf32Stage), each the
    larger of its x-major (tm or tn rows of tk + pad) and k-major (tk rows of tm or tn +
    pad) layouts."""
    if _wgmma_16(k):    # PgWgStage: core matrices, no padding
        return k.tk * (k.tm + k.tn)
    px, pk = TF32_PAD if family_precision(k.family) != "ieee" else (mma_pad(dtype),) * 2
    if split_stage_elems(k):   # B's stage unpadded but for k-major rows' windows: only
        # the split reads it (pg_tile_wgmma)
        return max(k.tm * (k.tk + px), k.tk * (k.tm + pk)) + k.tk * (k.tn + 4)
    return sum(max(x * (k.tk + px), k.tk * (x + pk)) for x in (k.tm, k.tn))


def _wgmma_16(k) -> bool:
    """Whether kind ``k`` is a 16-bit wgmma kind (staged by PgWgStage)."""
    return k.family in WGMMA_FAMILIES and not wgmma_tf32(k.family)


def split_stage_elems(k) -> int:
    """Elements of a wgmma-3xtf32 kind's split B stage (big and small parts, K-major),
    0 for every other kind."""
    return 2 * k.tn * k.tk if wgmma_tf32(k.family) else 0


ENGINE_MFMA = 5
ENGINE_WGMMA = 6
WGMMA_DEFINE = "PG_WGMMA_KINDS"   # 1: some kind runs pg_tile_wgmma (sm_90a only)
# The wgmma kinds' shared-memory layout (kernel: PgWgStage): True the swizzled one (32-128
# byte swizzle), False wgmma's no-swizzle layout, 1.8-2x slower on the H100 and kept to
# measure against (tools/wgmma_timing.py --interleaved).
WGMMA_SWIZZLE = True


def engine_id(k, dtype: str) -> int:
    """The kernel's E of kind ``k`` (PG_KINDS): 0 SIMT (pg_tile), 1 fp64 MMA
    (pg_tile_mma), 2 16-bit MMA (pg_tile_mma16), 3 TF32 and 4 3xTF32 (pg_tile_tf32),
    5 AMD MFMA (pg_tile_mfma: the MFMA families' MMA kinds), 6 Hopper wgmma
    (pg_tile_wgmma: the wgmma families' kinds)."""
    if k.engine == "simt":
        return 0
    if k.family in WGMMA_FAMILIES:
        return ENGINE_WGMMA
    if k.family in TF32_FAMILIES:
        return 4 if mma_products(k.family) > 1 else 3
    if k.family in MFMA_FAMILIES:
        return ENGINE_MFMA
    return 2 if dtype in HALF_DTYPES else 1


def _stage_elems(k, p: int, dtype: str) -> int:
    """One register-path stage of kind ``k``'s A and B (padding ``p``)."""
    return mma_stage_elems(k, dtype) if k.engine == "mma" else k.tk * (k.tm + p) + k.tk * (k.tn + p)


def smem_elems(kinds, dtype: str = "float32") -> int:
    """Shared-memory elements an entry point declares on the register path: two stages
    of the A and B tiles of its largest kind."""
    p = pad_elems(dtype)
    return max(2 * _stage_elems(k, p, dtype) for k in kinds)


def smem_elems_async(kinds, dtype: str = "float32", stages: int = 0, windows: bool = False) -> int:
    """Shared-memory elements on the cp.async path (sm_80+) with ``stages`` stages: A's
    stage is k-major (BK rows of BM + pad, A^T) or x-major (BM rows of BK + pad, A), B's
    always k-major (B^T takes the register path); the larger of A's two. The register
    path's figure when there is no pipeline. ``windows`` (the 16-bit wgmma kinds,
    WGMMA_WINDOWS): at least what their windows' k loop takes (window_elems)."""
    if windows:
        return max([smem_elems_async(kinds, dtype, stages)] + [window_elems(k) for k in kinds])
    if stages < 2:
        return smem_elems(kinds, dtype)
    p = pad_elems(dtype)
    simt = [stages * (max(k.tk * (k.tm + p), k.tm * (k.tk + p)) + k.tk * (k.tn + p))
            for k in kinds if k.engine != "mma"]
    # a split stage follows the cp.async stages 1 KiB (256 fp32) aligned (pg_tile_wgmma)
    mma = [stages * mma_stage_elems(k, dtype) if not split_stage_elems(k) else
           -(-stages * mma_stage_elems(k, dtype) // 256) * 256 + split_stage_elems(k)
           for k in kinds if k.engine == "mma"]
    if not mma:
        return max(simt)
    # the MMA kinds pipeline B^T too, where the SIMT kinds of the same entry point take
    # the register path (kernel: PG_SMEM_TILE): cover that as well
    return max(simt + mma + [smem_elems(kinds, dtype)])


def window_elems(k) -> int:
    """Shared-memory elements of a 16-bit wgmma kind's windows (kernel: pg_wgmma_windows):
    two raw slots, each operand's stored rows of whole 16-byte units plus one (the larger
    of its two layouts), then two stages 1 KiB aligned."""
    raw = sum(max(x * (k.tk // 8 + 1), k.tk * (x // 8 + 1)) * 8 for x in (k.tm, k.tn))
    return -(-2 * raw // 512) * 512 + 2 * mma_stage_elems(k, "float16")


@dataclass(frozen=True)
class Rendered:
    source: str
    name: str
    threads: int
    dynamic_smem: int = 0   # bytes of dynamic shared memory every launch passes


@lru_cache(maxsize=None)
def _texts() -> tuple[str, str]:
    return COMPAT_FILE.read_text(), SOURCE_FILE.read_text()


def defines(variant: Variant | TileExpand | SplitReduce | StageCopy) -> dict[str, str]:
    if isinstance(variant, TileExpand):      # PG_T only for the shared struct declarations
        return {"PG_T": "float", "PG_NAME": variant.name, "PG_TILE_EXPAND": "1"}
    if isinstance(variant, SplitReduce):
        return {"PG_T": DTYPES[variant.dtype], "PG_NAME": variant.name, "PG_SPLIT_REDUCE": "1",
                "PG_REDUCE_THREADS": str(variant.threads), "PG_REDUCE_CHUNK": str(variant.chunk)}
    if isinstance(variant, StageCopy):
        return {"PG_T": DTYPES[variant.dtype], "PG_NAME": variant.name, "PG_STAGE_COPY": "1",
                "PG_STAGE_THREADS": str(variant.threads), "PG_STAGE_CHUNK": str(variant.chunk)}
    half = variant.dtype in HALF_DTYPES
    ids = [engine_id(k, variant.dtype) for k in variant.kinds]
    kinds = " ".join(f"X({i}, {k.tm}, {k.tn}, {k.tk}, {k.threads}, {k.rm}, {k.rn}, "
                     f"{e})" for i, (k, e) in enumerate(zip(variant.kinds, ids)))
    # only a variant with TF32 or MFMA kinds gets its define: every other renders as before
    tf32 = {"PG_TF32": "1"} if any(e in (3, 4) or wgmma_tf32(k.family)
                                   for k, e in zip(variant.kinds, ids)) else {}
    mfma = {"PG_MFMA_KINDS": "1"} if ENGINE_MFMA in ids else {}
    # (kernels/nvrtc.py compiles a source with this define for sm_90a)
    wgmma = {WGMMA_DEFINE: "1", "PG_WG_SWIZZLE": str(int(WGMMA_SWIZZLE))} \
        if ENGINE_WGMMA in ids else {}
    return {
        "PG_T": DTYPES[variant.dtype],
        "PG_HALF": str(int(half)),
        **({"PG_ACC": "float"} if half else {}),
        "PG_TRANS_A": str(int(variant.trans_a)),
        "PG_TRANS_B": str(int(variant.trans_b)),
        "PG_THREADS": str(variant.threads),
        "PG_MIN_BLOCKS": str(min_blocks(variant)),
        "PG_K_UNROLL": str(k_unroll(variant)),
        "PG_NAME": variant.name,
        "PG_GRIDZ": str(int(variant.layout == "grid-z")),
        "PG_RAGGED": str(int(variant.layout == "ragged")),
        "PG_SMEM_ELEMS": str(smem_elems(variant.kinds, variant.dtype)),
        "PG_STAGES": str(stages(variant)),
        "PG_SMEM_ELEMS_ASYNC": str(smem_elems_async(variant.kinds, variant.dtype, stages(variant),
                                                    wg_windows(variant))),
        "PG_PAD": str(pad_elems(variant.dtype)),
        "PG_MMA": str(int(any(k.engine == "mma" for k in variant.kinds))),
        "PG_KINDS(X)": kinds,
        "PG_CARRY": str(int(carry(variant))),
        # only a lean variant gets its define: every other renders as before
        **({"PG_LEAN": "1"} if lean(variant) else {}),
        **({"PG_LEAN_STEP": "1"} if lean_step(variant) else {}),
        **({"PG_KPIPE": "1"} if kpipe(variant) else {}),
        **({"PG_STAGED_C": "1"} if staged_c(variant) else {}),
        **({"PG_WG_WINDOWS": "1"} if wg_windows(variant) else {}),
        **({"PG_SHIFT16_CH": str(sh[0]), "PG_SHIFT16_MIN_CONT": str(sh[1])}
           if (sh := shift16(variant))[0] else {}),
        **tf32,
        **mfma,
        **wgmma,
        **({"PG_DYN_SMEM": "1"} if dynamic_smem(variant) else {}),
    }


@lru_cache(maxsize=None)
def render(variant: Variant | TileExpand | SplitReduce | StageCopy) -> Rendered:
    compat, body = _texts()
    prefix = "".join(f"#define {k} {v}\n" for k, v in defines(variant).items())
    source = f"// portgemm variant {variant.name}\n{compat}\n{prefix}\n{body}"
    return Rendered(source=source, name=variant.name, threads=variant.threads,
                    dynamic_smem=dynamic_smem(variant))
