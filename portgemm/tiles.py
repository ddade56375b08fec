"""The tile catalogue, as data.

A tile config says what one workgroup computes: a ``tm x tn`` block of C, stepping
through K by ``tk``, with ``threads`` threads, on one of two engines:

- ``simt`` (every family but the MMA kinds): each thread holds an ``rm x rn`` register
  micro-tile of FMAs, so ``rm * rn * threads == tm * tn``;
- ``mma`` (warp-level matrix multiply-accumulate: fp64 DMMA m8n8k4, or float16 /
  bfloat16 m16n8k16 with fp32 accumulators, on sm_80+): each warp of 32 threads holds
  an ``rm x rn`` sub-tile of C as fragments (8x8 fp64, 16x8 16-bit), so
  ``(tm / rm) * (tn / rn) * 32 == threads`` (AMD's MFMA families: a 64-lane wave per
  sub-tile of 16x16 blocks, ``mma_lanes``). They are named ``<tm>x<tn>/w<rm>x<rn>``
  (``w``: a warp's sub-tile, not a thread's). The architectures that run them are data
  (occupancy/archs.py ``FP64_MMA``, ``HALF_MMA``); elsewhere the planner does not offer
  them.

Families:
- ``zhang2025``: Table 3 of the paper we implement (five tiles, 128/256 threads, Tk 16).
- ``li2019-128`` / ``li2019-256``: li2019 Table 2, the 128- and 256-thread versions (BK 8).
- ``magma``: MAGMA's sgemm vbatched configs V504/V510/V512/V518 (DIM_X 16, DIM_Y 8,
  128 threads, BLK_K 16; micro-tile BLK_M/16 x BLK_N/8).
- ``portgemm`` (fp32) and ``portgemm-f64``: our own kinds, named ``<tm>x<tn>/<rm>x<rn>``
  (see PORTGEMM below); ``portgemm-f16`` and ``portgemm-bf16``: the float16 and bfloat16
  kinds (PORTGEMM_HALF below), the only families those dtypes run on NVIDIA;
- ``mfma-f16``, ``mfma-bf16``, ``mfma-f64``: AMD's matrix-core (MFMA) kinds, built for
  the archs of FAMILY_ARCHS only (the 16-bit dtypes' families on AMD).
- ``portgemm-tf32`` and ``portgemm-3xtf32``: float32 on tensor cores (TF32 m16n8k8),
  what ``precision="tf32"`` / ``"3xtf32"`` plan with (TF32_FAMILIES below).
- ``wgmma-f16``, ``wgmma-bf16``: Hopper's warpgroup MMA kinds (wgmma.mma_async, A and B
  from shared memory), named ``<tm>x<tn>/g<rm>x<rn>`` (``g``: a warpgroup's sub-tile),
  built for sm_90 only (FAMILY_ARCHS), weighed there beside the 16-bit families.
- ``tune`` (fp32) and ``tune-f64``: the candidates ``python -m portgemm tune`` times on
  a device, named ``<tm>x<tn>/<rm>x<rn>/k<tk>``; the planner uses the tuned subset.

How the kernel lays a micro-tile out (kernels/vbatched_gemm.cu): ``rm`` contiguous rows,
and ``rn`` columns in groups of 16 bytes spread across the tile.
"""
from __future__ import annotations

from dataclasses import dataclass


ENGINES = ("simt", "mma")
MMA_WARP = 32               # lanes sharing one MMA (a warp; half a wave on AMD)
MMA_SHAPE = (8, 8, 4)       # m, n, k of the fp64 MMA fragment (kernels/compat.h)
MMA_SHAPE_HALF = (16, 8, 16)   # m, n, k of the float16 / bfloat16 MMA fragment
HALF_FAMILIES = {"portgemm-f16": "float16", "portgemm-bf16": "bfloat16"}
# AMD's matrix-core families (MFMA, kernels/compat.h): 64-lane waves of 16x16 blocks,
# 16x16x16 for the 16-bit dtypes (fp32 accumulators), 16x16x4 for fp64. Built only for
# the archs of FAMILY_ARCHS (compiled and modelled there; never executed here).
MFMA_FAMILIES = {"mfma-f16": "float16", "mfma-bf16": "bfloat16", "mfma-f64": "float64"}
MFMA_WAVE = 64              # lanes sharing one MFMA (a CDNA wave)
MFMA_SHAPE_HALF = (16, 16, 16)
MFMA_SHAPE_F64 = (16, 16, 4)
# Families built for some archs only (absent: every arch): the MFMA ones where the
# instructions exist. gfx908 has fp16 and bf16 MFMA (bf16 at half the fp16 rate, as two
# 16x16x8bf16) but no fp64 MFMA; gfx90a and gfx94x have all three.
_MFMA_16BIT_ARCHS = ("gfx908", "gfx90a", "gfx940", "gfx941", "gfx942")
FAMILY_ARCHS = {"mfma-f16": _MFMA_16BIT_ARCHS, "mfma-bf16": _MFMA_16BIT_ARCHS,
                "mfma-f64": ("gfx90a", "gfx940", "gfx941", "gfx942")}


# Hopper's warpgroup MMA families (wgmma.mma_async, kernels/compat.h): a warpgroup of 128
# threads per 64 x 128 sub-tile of m64n128k16 steps, A and B read from shared memory by
# the tensor cores; sm_90a only, so built for sm_90 alone (kernels/nvrtc.py compiles them
# for sm_90a), where the planner weighs them beside the dtype's HALF_FAMILIES kinds.
# wgmma-3xtf32: float32 as 3xTF32 (precision "3xtf32"), m64n128k8 / m64n64k8 TF32 wgmmas.
WGMMA_FAMILIES = {"wgmma-f16": "float16", "wgmma-bf16": "bfloat16", "wgmma-3xtf32": "float32"}
WGMMA_GROUP = 128           # lanes sharing one wgmma (a warpgroup)
WGMMA_SHAPE = (64, 8, 16)   # m, n, k granularity of a wgmma (n: any multiple of 8 to 256)
WGMMA_SHAPE_TF32 = (64, 8, 8)
FAMILY_ARCHS.update({f: ("sm_90",) for f in WGMMA_FAMILIES})
# Families whose kinds a plan of another family also weighs, where they are built
# (FAMILY_ARCHS): the wgmma kinds on sm_90. The cost model's rate per engine decides per
# GEMM which kind runs (planner/wavefront_tlp.py).
WEIGHED_WITH = {"portgemm-f16": ("wgmma-f16",), "portgemm-bf16": ("wgmma-bf16",),
                "portgemm-3xtf32": ("wgmma-3xtf32",)}
# Partners weighed for any batch, not only for one of aligned rows (planner/alignment.py
# aligned_batch): wgmma-3xtf32 copies its operands as the TF32 kinds do (PgTf32Stage),
# so unaligned rows cost it what they cost its planning family's kinds.
ANY_ROWS = frozenset({"wgmma-3xtf32"})


def family_builds_for(family: str, arch: str | None) -> bool:
    """Whether ``family``'s kernels are built for the arch named ``arch`` (None: the
    portable catalogue, the families every target builds)."""
    archs = FAMILY_ARCHS.get(family)
    return archs is None or arch in archs


def weighed_families(family: str, arch: str | None, aligned: bool = True) -> tuple[str, ...]:
    """``family`` and the families of WEIGHED_WITH built for the arch named ``arch``
    (where the batch's rows are not ``aligned``, only those of ANY_ROWS)."""
    return (family,) + tuple(f for f in WEIGHED_WITH.get(family, ())
                             if family_builds_for(f, arch) and (aligned or f in ANY_ROWS))


_PARTNERS = frozenset(f for fams in WEIGHED_WITH.values() for f in fams)


def aligned_rows_only(family: str) -> bool:
    """Whether plans weigh ``family`` only for batches of aligned rows (a WEIGHED_WITH
    partner not in ANY_ROWS): its kind factors are measured on such sizes alone."""
    return family in _PARTNERS and family not in ANY_ROWS


def without_superseded(kinds) -> tuple:
    """``kinds`` less each kind whose tile shape (tm x tn) a kind of a WEIGHED_WITH partner
    family among them also has: the wgmma 128x128 tile supersedes the mma.sync one. It
    measured 1.24-1.37x faster on aligned rows (bench/NOTES.md session 8), and the cost
    model, which charges both tiles the same loads at DRAM bandwidth, cannot tell them
    apart on large GEMMs: there its figures differ by the first stage's loads alone."""
    taken = {(k.tm, k.tn) for k in kinds if k.family in _PARTNERS}
    return tuple(k for k in kinds if k.family in _PARTNERS or (k.tm, k.tn) not in taken)

MMA_SHAPE_TF32 = (16, 8, 8)    # m, n, k of the TF32 MMA fragment (fp32 precision modes)
# float32's tensor-core families, by the precision mode they compute (planner: plan(...,
# precision=)); their MMA kinds round A and B to TF32 (3xtf32: as two TF32 parts).
TF32_FAMILIES = {"portgemm-tf32": "tf32", "portgemm-3xtf32": "3xtf32"}
PRECISIONS = ("ieee", "tf32", "3xtf32")
# The precision mode of every family that computes float32 on tensor cores: the planning
# families (TF32_FAMILIES) and the wgmma family weighed with 3xtf32's.
FAMILY_PRECISION = {**TF32_FAMILIES, "wgmma-3xtf32": "3xtf32"}
# TF32 MMAs a 3xtf32 product takes per TF32 one (a_small b_big, a_big b_small, a_big b_big)
MMA_PRODUCTS = {f: 3 for f, p in FAMILY_PRECISION.items() if p == "3xtf32"}


# Bytes per element by dtype name (bfloat16 has no numpy dtype unless ml_dtypes is loaded).
ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}


def mma_shape(family: str) -> tuple[int, int, int]:
    """The MMA fragment (m, n, k) a family's MMA kinds are built from."""
    if family in MFMA_FAMILIES:
        return MFMA_SHAPE_F64 if MFMA_FAMILIES[family] == "float64" else MFMA_SHAPE_HALF
    if family in TF32_FAMILIES:
        return MMA_SHAPE_TF32
    if family in WGMMA_FAMILIES:
        return WGMMA_SHAPE_TF32 if wgmma_tf32(family) else WGMMA_SHAPE
    return MMA_SHAPE_HALF if family in HALF_FAMILIES else MMA_SHAPE


def mma_lanes(family: str) -> int:
    """Lanes that share one MMA of a family's MMA kinds: a warp (32), or an AMD wave (64)
    for the MFMA families."""
    if family in WGMMA_FAMILIES:
        return WGMMA_GROUP
    return MFMA_WAVE if family in MFMA_FAMILIES else MMA_WARP


def wgmma_tf32(family: str) -> bool:
    """Whether ``family`` is a wgmma family of float32 (TF32 wgmmas: wgmma-3xtf32), not a
    16-bit one."""
    return WGMMA_FAMILIES.get(family) == "float32"


def family_precision(family: str) -> str:
    """The fp32 precision mode a family computes: "ieee" but for FAMILY_PRECISION's."""
    return FAMILY_PRECISION.get(family, "ieee")


def mma_products(family: str) -> int:
    """MMAs a family's MMA kinds issue per fragment product (3xtf32: 3, else 1)."""
    return MMA_PRODUCTS.get(family, 1)


@dataclass(frozen=True)
class TileConfig:
    family: str
    kind: str
    tm: int
    tn: int
    tk: int
    threads: int
    rm: int
    rn: int
    engine: str = "simt"

    def __post_init__(self):
        if self.engine not in ENGINES:
            raise ValueError(f"{self.name}: engine must be one of {', '.join(ENGINES)}")
        if self.tm % self.rm or self.tn % self.rn:
            raise ValueError(f"{self.name}: micro-tile does not divide the tile")
        if self.engine == "mma":
            lanes = mma_lanes(self.family)
            if (self.tm // self.rm) * (self.tn // self.rn) * lanes != self.threads:
                raise ValueError(f"{self.name}: one warp (wave) of {lanes} per rm x rn sub-tile")
            shape = mma_shape(self.family)
            if self.rm % shape[0] or self.rn % shape[1] or self.tk % shape[2]:
                raise ValueError(f"{self.name}: sub-tile and tk must be whole fragments "
                                 f"of {'x'.join(map(str, shape))}")
        elif self.rm * self.rn * self.threads != self.tm * self.tn:
            raise ValueError(f"{self.name}: rm*rn*threads != tm*tn")

    @property
    def accumulators(self) -> int:
        """Accumulators (elements of C) one thread holds."""
        return self.rm * self.rn // (self.lanes if self.engine == "mma" else 1)

    @property
    def operands_held(self) -> int:
        """Elements of A and B one thread holds per k: its micro-tile's column of A and
        row of B (SIMT), or its share of one MMA step's fragments of its warp's sub-tile
        (MMA: one element per 8x8x4 fp64 fragment, 8 + 4 per 16x8x16 16-bit one, 4 + 2
        per 16x8x8 TF32 one, twice that for 3xtf32's two parts)."""
        if self.engine == "mma":
            m, n, k = mma_shape(self.family)
            w, parts = self.lanes, 2 if mma_products(self.family) > 1 else 1
            return parts * ((self.rm // m) * (m * k // w) + (self.rn // n) * (n * k // w))
        return self.rm + self.rn

    @property
    def reads_per_k(self) -> float:
        """Shared-memory elements one thread reads per k: its micro-tile's row and
        column (SIMT), or its share of the warp's fragments of A and B (MMA)."""
        return (self.rm + self.rn) / (self.lanes if self.engine == "mma" else 1)

    @property
    def lanes(self) -> int:
        """Lanes of one MMA (an MMA kind's warp or wave): tiles.mma_lanes."""
        return mma_lanes(self.family)

    @property
    def name(self) -> str:
        return f"{self.family}.{self.kind}"

    @property
    def area(self) -> int:
        return self.tm * self.tn

    @property
    def ident(self) -> str:
        """A C identifier fragment naming this config."""
        return f"{self.family}_{self.kind}".replace("-", "_").replace(".", "_").replace("/", "_")


def _family(family: str, rows) -> tuple[TileConfig, ...]:
    return tuple(TileConfig(family, *row) for row in rows)


#            kind            tm   tn  tk  threads rm  rn
ZHANG2025 = _family("zhang2025", [
    ("small",         16,  16, 16, 128,  2, 1),
    ("small-medium",  16,  32, 16, 128,  2, 2),
    ("medium",        32,  32, 16, 128,  4, 2),
    ("medium-large",  32,  64, 16, 256,  4, 2),
    ("large",         64,  64, 16, 256,  4, 4),
])

# li2019 Table 2 sub-tiles are given as rows x cols.
LI2019_128 = _family("li2019-128", [
    ("small",   16,  16, 8, 128,  2, 1),
    ("medium",  32,  32, 8, 128,  4, 2),
    ("large",   64,  64, 8, 128,  8, 4),
    ("tall",   128,  64, 8, 128,  8, 8),
    ("wide",    64, 128, 8, 128,  8, 8),
    ("huge",   128, 128, 8, 128, 16, 8),
])
LI2019_256 = _family("li2019-256", [
    ("small",   16,  16, 8, 256,  1, 1),
    ("medium",  32,  32, 8, 256,  2, 2),
    ("large",   64,  64, 8, 256,  4, 4),
    ("tall",   128,  64, 8, 256,  8, 4),
    ("wide",    64, 128, 8, 256,  8, 4),
    ("huge",   128, 128, 8, 256,  8, 8),
])

MAGMA = _family("magma", [
    ("V504",  48, 40, 16, 128, 3, 5),
    ("V510",  64, 16, 16, 128, 4, 2),
    ("V512",  64, 24, 16, 128, 4, 3),
    ("V518",  64, 56, 16, 128, 4, 7),
])

# Our own kinds, small -> large. Why these:
# - 16-byte global loads need every thread to move whole 16-byte units each k step
#   (tm * tk and tk * tn multiples of 4 * threads for fp32), and so do the swizzled
#   shared stores (tm, tn powers of two >= 32);
# - the 128-wide tiles take tk 8 (one float4 of A and of B per thread and step for
#   128x128), the smaller ones tk 16, so a k step always stages 1-2 units per thread;
# - micro-tiles of 8 rows x 8 columns give 64 FMAs per 4 LDS.128 (fp32), 4x4 keeps the
#   32x32 kind at 64 threads so small GEMMs still fill the device;
# - 128x128/16x8 is cuBLAS's grouped SIMT tile (128 threads, 128 accumulators each, BK 8):
#   128 FMAs per 6 LDS.128, on sm_80+ with 4 cp.async stages and 2 blocks per SM
#   (kernels/render.py); the fastest of ours on large uniform GEMMs on the H100 (16 x
#   1024^2 x 256: 0.93x cuBLAS grouped, 64x128/8x8 0.80x), slower on ragged batches;
# - fp64 has its own kinds (PORTGEMM_F64): 8x8 doubles are 128 accumulator registers,
#   and with the staged loads the 8x8 kinds reach 234-255 registers on sm_80/sm_90 and
#   spill in the fused kernel (NVRTC 13.0), so fp64 keeps 32 accumulators per thread;
#   128x128 would then need 512 threads, whose 128-register cap spills, so it stops at
#   128x64 / 64x128; its 32x32 kind takes tk 8 (with tk 16 its nt variant spilled 16
#   bytes on sm_80 at 168 registers).
#            kind           tm   tn  tk  threads rm  rn
PORTGEMM = _family("portgemm", [
    ("32x32/4x4",    32,  32, 16,  64,  4, 4),
    ("64x64/8x4",    64,  64, 16, 128,  8, 4),
    ("128x64/8x8",  128,  64,  8, 128,  8, 8),
    ("64x128/8x8",   64, 128,  8, 128,  8, 8),
    ("128x128/8x8", 128, 128,  8, 256,  8, 8),
    ("128x128/16x8", 128, 128, 8, 128, 16, 8),
])
#
# fp64's MMA kinds (engine "mma", tm x tn / w<warp sub-tile>): cuBLAS's grouped fp64 runs
# a 64x64 DMMA tile of four 32x32 warps (BK 16, 4 stages); ours takes BK 8 so that four
# cp.async stages fit the kernel's 48 KiB of static shared memory; 64x32/w32x16 and
# 32x32/w16x16 keep four warps on tiles a half and a quarter the size, for small GEMMs.
# Measured on the H100 (bench/kernel_bench.py --extra, bench/NOTES.md): 128x64/w32x32
# (8 warps), 64x64/w32x16 (8 warps), 128x64/w64x32 and 64x128/w32x64 (4 warps, 234-254
# registers) were 3-25 % slower than 64x64/w32x32 on every case, and the last two spill
# in the AMD emulation. The SIMT 64x64/8x4 (128 threads, 32 accumulators a thread, on
# the k-major cp.async pipeline) ran 1.3-1.6x the 256-thread SIMT kinds on the H100 and
# 0.88-1.44x cuBLAS's grouped DMMA kernel (bench/NOTES.md, session 14); 8x8 micro-tiles
# (128x64, 64x128, 128 threads, 250 registers) were 0.85-1.0x it.
#            kind           tm   tn  tk  threads rm  rn  engine
PORTGEMM_F64 = _family("portgemm-f64", [
    ("32x32/4x4",    32,  32,  8,  64,  4, 4),
    ("64x64/4x4",    64,  64, 16, 256,  4, 4),
    ("64x64/8x4",    64,  64,  8, 128,  8, 4),
    ("128x64/8x4",  128,  64,  8, 256,  8, 4),
    ("64x128/4x8",   64, 128,  8, 256,  4, 8),
    ("32x32/w16x16", 32,  32,  8, 128, 16, 16, "mma"),
    ("64x32/w32x16", 64,  32,  8, 128, 32, 16, "mma"),
    ("64x64/w32x32", 64,  64,  8, 128, 32, 32, "mma"),
])

# Autotuning candidates (``python -m portgemm tune``, portgemm/tuning/): the space the
# sweep times on the device, one family per dtype; the tuned family the planner then
# uses is a subset (occupancy/tuned/<arch>.json). Named <tm>x<tn>/<rm>x<rn>/k<tk>
# (threads = tm tn / (rm rn)). Each obeys the kernel's static rules: TX x TY = threads;
# rn a multiple of 4 (fp32) / 2 (fp64) so B reads and C writes are 16 bytes; tm tk and
# tk tn multiples of 16 bytes x threads so both operands stage in whole 16-byte units;
# tm, tn powers of two >= 32 for the swizzled stores; two stages of A and B within 48 KB
# of static shared memory (so no fp64 128-row tile with tk 16); and each compiles
# without spills for sm_80, sm_90, gfx908, gfx90a and gfx940 (tools/vendor_matrix.py):
# with tk 16, the 8x8 micro-tiles at 64 and 128 threads (64x64, 128x64, 64x128) spilled
# 8-112 bytes in the tn variant on gfx908/gfx90a (hiprtc, ROCm 5.2), so those take tk 8.
# fp64 stops at 32 accumulators per thread (see PORTGEMM_F64 above). The candidates run
# one launch per kind only (PER_KIND_ONLY): one fused kernel holding a dozen kinds needs
# every register the target has and spills.
#            kind                tm   tn  tk  threads rm  rn
TUNE = _family("tune", [
    ("32x32/4x4/k8",      32,  32,  8,  64,  4, 4),
    ("32x32/4x4/k16",     32,  32, 16,  64,  4, 4),
    ("64x32/4x4/k16",     64,  32, 16, 128,  4, 4),
    ("32x64/4x4/k16",     32,  64, 16, 128,  4, 4),
    ("64x64/4x4/k16",     64,  64, 16, 256,  4, 4),
    ("64x64/8x4/k16",     64,  64, 16, 128,  8, 4),
    ("64x64/8x8/k8",      64,  64,  8,  64,  8, 8),
    ("128x64/8x4/k16",   128,  64, 16, 256,  8, 4),
    ("64x128/8x4/k16",    64, 128, 16, 256,  8, 4),
    ("128x64/8x8/k8",    128,  64,  8, 128,  8, 8),
    ("64x128/8x8/k8",     64, 128,  8, 128,  8, 8),
    ("128x128/8x8/k8",   128, 128,  8, 256,  8, 8),
    ("128x128/8x8/k16",  128, 128, 16, 256,  8, 8),
    ("128x128/16x8/k8",  128, 128,  8, 128, 16, 8),
])
TUNE_F64 = _family("tune-f64", [
    ("32x32/4x4/k8",      32,  32,  8,  64,  4, 4),
    ("32x32/4x2/k8",      32,  32,  8, 128,  4, 2),
    ("64x32/4x4/k8",      64,  32,  8, 128,  4, 4),
    ("32x64/4x4/k8",      32,  64,  8, 128,  4, 4),
    ("64x64/4x4/k8",      64,  64,  8, 256,  4, 4),
    ("64x64/4x4/k16",     64,  64, 16, 256,  4, 4),
    ("64x64/8x4/k8",      64,  64,  8, 128,  8, 4),
    ("64x64/4x8/k8",      64,  64,  8, 128,  4, 8),
    ("64x64/8x4/k16",     64,  64, 16, 128,  8, 4),
    ("128x64/8x4/k8",    128,  64,  8, 256,  8, 4),
    ("64x128/4x8/k8",     64, 128,  8, 256,  4, 8),
    ("128x32/8x4/k8",    128,  32,  8, 128,  8, 4),
    # the MMA kinds of PORTGEMM_F64 (engine "mma", w: a warp's sub-tile)
    ("32x32/w16x16/k8",   32,  32,  8, 128, 16, 16, "mma"),
    ("64x32/w32x16/k8",   64,  32,  8, 128, 32, 16, "mma"),
    ("64x64/w32x32/k8",   64,  64,  8, 128, 32, 32, "mma"),
])
PER_KIND_ONLY = ("tune", "tune-f64")

# float16 and bfloat16 (one family each, the same kinds): the tensor-core kinds, warps of
# m16n8k16 fragments with fp32 accumulators, BK 32 (two MMA steps a stage), staged by
# cp.async; and one SIMT kind (16-bit loads, fp32 FMAs) for GEMMs too small to fill an
# MMA tile, which the planner picks by the cost model's two rates, not by a size.
# 64x64/w32x32: four warps of 2x4 fragments (32 accumulators a lane), as cuBLAS's
# smaller half tiles; 128x64/w64x32 four warps of 4x4 (64 accumulators); 128x128/w64x32
# eight warps of 4x4 (256 threads); 32x32/w16x16 four warps of 1x2 for small GEMMs.
#            kind             tm   tn  tk  threads rm  rn  engine
_HALF_KINDS = [
    ("32x32/4x4",      32,  32, 16,  64,  4,  4),
    ("32x32/w16x16",   32,  32, 32, 128, 16, 16, "mma"),
    ("64x64/w32x32",   64,  64, 32, 128, 32, 32, "mma"),
    ("128x64/w64x32", 128,  64, 32, 128, 64, 32, "mma"),
    ("128x128/w64x32", 128, 128, 32, 256, 64, 32, "mma"),
]
PORTGEMM_F16 = _family("portgemm-f16", _HALF_KINDS)
PORTGEMM_BF16 = _family("portgemm-bf16", _HALF_KINDS)

# The wgmma kinds (WGMMA_FAMILIES; g: a warpgroup's sub-tile, 64 x 128 fp32 accumulators,
# 64 registers a thread), BK 32 (two k16 wgmmas a stage), 4 cp.async stages
# (kernels/render.py STAGES): 64x128/g64x128 (one warpgroup, 128 threads) in 48 KiB of
# static shared memory, 128x128/g64x128 (two warpgroups, 256 threads) in 64 KiB of
# dynamic shared memory (2 blocks an SM). On aligned rows the 128x128 kind supersedes the
# mma.sync one (without_superseded). BK 64 (3 stages) measured 1.12-1.16x faster on large
# GEMMs but spills 4-8 bytes under the 128-register cap (bench/NOTES.md session 10).
#            kind               tm   tn  tk  threads rm   rn  engine
_WGMMA_KINDS = [
    ("64x128/g64x128",   64, 128, 32, 128, 64, 128, "mma"),
    ("128x128/g64x128", 128, 128, 32, 256, 64, 128, "mma"),
]
WGMMA_F16 = _family("wgmma-f16", _WGMMA_KINDS)
WGMMA_BF16 = _family("wgmma-bf16", _WGMMA_KINDS)
# 3xTF32 on wgmma (pg_tile_wgmma's fp32 form): the same warpgroup tiles and a 64x64 one
# (m64n64k8, 32 accumulators: the grid's many GEMMs below 128 rows or columns), BK 32
# (one 128-byte row of fp32 a split stage), operands staged as the TF32 kinds' (any
# leading dimension), B split once per block into a K-major stage, A into wgmma's A
# registers. On sm_90 the 64x64 tile supersedes the mma.sync one (without_superseded).
WGMMA_3XTF32 = _family("wgmma-3xtf32", _WGMMA_KINDS + [("64x64/g64x64", 64, 64, 32, 128, 64, 64, "mma")])

# AMD's MFMA kinds (MFMA_FAMILIES; 256 threads = 4 waves of 64, w: a wave's sub-tile of
# 16x16 MFMA blocks), staged like the MMA kinds (register double buffer: AMD has no
# cp.async). Chosen from compiled register counts and the occupancy model, not timed
# (no AMD GPU here): 64x64/w32x32 holds 16 fp32 accumulators a lane, 128x64/w64x32 32,
# 128x128/w64x64 64 (in AGPRs on gfx908, whose MFMA accumulates there only); the 16-bit
# kinds take BK 32 (two MFMA steps a stage) but 128x128 BK 16, whose two stages would
# otherwise need 40 KiB of the CU's 64 KiB of LDS (one workgroup a CU); fp64 takes BK 8
# (two 16x16x4 steps) so that 64x64 stays at 24 KiB. Each family keeps one SIMT kind (the
# 16-bit families' and fp64's 32x32/4x4) for GEMMs too small to fill a 16x16 block, which
# the planner picks by the cost model's two rates.
#            kind             tm   tn  tk  threads rm  rn  engine
_MFMA_HALF_KINDS = [
    ("32x32/4x4",       32,  32, 16,  64,  4,  4),
    ("32x32/w16x16",    32,  32, 32, 256, 16, 16, "mma"),
    ("64x64/w32x32",    64,  64, 32, 256, 32, 32, "mma"),
    ("128x64/w64x32",  128,  64, 32, 256, 64, 32, "mma"),
    ("128x128/w64x64", 128, 128, 16, 256, 64, 64, "mma"),
]
MFMA_F16 = _family("mfma-f16", _MFMA_HALF_KINDS)
MFMA_BF16 = _family("mfma-bf16", _MFMA_HALF_KINDS)
MFMA_F64 = _family("mfma-f64", [
    ("32x32/4x4",       32,  32,  8,  64,  4,  4),
    ("32x32/w16x16",    32,  32,  8, 256, 16, 16, "mma"),
    ("64x64/w32x32",    64,  64,  8, 256, 32, 32, "mma"),
    ("128x64/w64x32",  128,  64,  8, 256, 64, 32, "mma"),
])

# float32 on the tensor cores (precision "tf32" and "3xtf32", one family each, the same
# kinds): warps of 16x8x8 TF32 fragments with fp32 accumulators, BK 16 (two MMA steps a
# stage) so that two to four cp.async stages of fp32 operands fit the kernel's 48 KiB of
# static shared memory (BK 32 would leave 128x128 one stage); and the fp32 SIMT kind
# 32x32/4x4 (IEEE fp32, as precise as either mode) for GEMMs too small to fill an MMA
# tile, which the planner picks by the cost model's rates per engine, not by a size.
# 32x32/w16x16: four warps of 1x2 fragments; 64x64/w32x32: four of 2x4 (32 accumulators
# a lane); 128x64/w64x32: four of 4x4 (64); 128x128/w64x32: eight of 4x4.
#            kind             tm   tn  tk  threads rm  rn  engine
_TF32_KINDS = [
    ("32x32/4x4",      32,  32, 16,  64,  4,  4),
    ("32x32/w16x16",   32,  32, 16, 128, 16, 16, "mma"),
    ("64x64/w32x32",   64,  64, 16, 128, 32, 32, "mma"),
    ("128x64/w64x32", 128,  64, 16, 128, 64, 32, "mma"),
    ("128x128/w64x32", 128, 128, 16, 256, 64, 32, "mma"),
]
PORTGEMM_TF32 = _family("portgemm-tf32", _TF32_KINDS)
# 3xtf32 holds twice the operand registers (two parts each) and an MMA step's sums: its
# 128x64 kind spilled 4-8 bytes on sm_80 (tn, tt; NVRTC 13.0) and under a 2-block cap
# took 238-255 registers on sm_90, so that family keeps the other kinds only.
PORTGEMM_3XTF32 = _family("portgemm-3xtf32", [k for k in _TF32_KINDS if k[0] != "128x64/w64x32"])

# The dtype each of our families is made for; the paper's families serve float32 and
# float64 (family_dtypes), never the 16-bit dtypes, which have their own families.
FAMILY_DTYPES = {"portgemm": ("float32",), "portgemm-f64": ("float64",),
                 "tune": ("float32",), "tune-f64": ("float64",),
                 **{f: (d,) for f, d in HALF_FAMILIES.items()},
                 **{f: (d,) for f, d in MFMA_FAMILIES.items()},
                 **{f: (d,) for f, d in WGMMA_FAMILIES.items()},
                 **{f: ("float32",) for f in TF32_FAMILIES}}
PAPER_DTYPES = ("float32", "float64")


def family_dtypes(name: str) -> tuple[str, ...]:
    """The dtypes a family's kernels exist in."""
    return FAMILY_DTYPES.get(name, PAPER_DTYPES)

FAMILIES: dict[str, tuple[TileConfig, ...]] = {
    "zhang2025": ZHANG2025,
    "li2019-128": LI2019_128,
    "li2019-256": LI2019_256,
    "magma": MAGMA,
    "portgemm": PORTGEMM,
    "portgemm-f64": PORTGEMM_F64,
    "tune": TUNE,
    "tune-f64": TUNE_F64,
    "portgemm-f16": PORTGEMM_F16,
    "portgemm-bf16": PORTGEMM_BF16,
    "mfma-f16": MFMA_F16,
    "mfma-bf16": MFMA_BF16,
    "mfma-f64": MFMA_F64,
    "portgemm-tf32": PORTGEMM_TF32,
    "portgemm-3xtf32": PORTGEMM_3XTF32,
    "wgmma-f16": WGMMA_F16,
    "wgmma-bf16": WGMMA_BF16,
    "wgmma-3xtf32": WGMMA_3XTF32,
}

CATALOGUE: dict[str, TileConfig] = {t.name: t for fam in FAMILIES.values() for t in fam}


def family(name: str) -> tuple[TileConfig, ...]:
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown tile family {name!r}; known: {', '.join(FAMILIES)}") from None


def tile(name: str) -> TileConfig:
    """Look a config up by ``family.kind``."""
    try:
        return CATALOGUE[name]
    except KeyError:
        raise KeyError(f"unknown tile {name!r}") from None
