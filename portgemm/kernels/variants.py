"""A kernel variant: what one compiled entry point of the kernel source computes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..tiles import (FAMILIES, HALF_FAMILIES, ITEMSIZE, MFMA_FAMILIES, PER_KIND_ONLY, TF32_FAMILIES,
                     WGMMA_FAMILIES, TileConfig, family_builds_for, family_dtypes)

# numpy dtype name -> the kernel's element type (PG_T; the 16-bit ones are compat.h's
# storage structs) and the short name in entry points.
DTYPES = {"float32": "float", "float64": "double", "float16": "PgHalf", "bfloat16": "PgBf16"}
SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}
HALF_DTYPES = ("float16", "bfloat16")   # stored in 16 bits, computed in fp32


# Execution modes. "fused": the paper's multi-thread kernel, one launch, every kind of a
# family in one entry point with max(threads) per block (extra threads leave at once).
# "per-kind": one launch per tile kind, each with its own block size and registers.
# "grid-z": MAGMA's layout, one config, grid (tiles_m, tiles_n, batch), early exit.
MODES = ("fused", "per-kind", "grid-z")

# Entry-point layouts. "tile-list": blocks run a flat tile list through block pointers;
# "grid-z": MAGMA's grid; "ragged": ragged M with the group ends on the device, each block
# finding its group and tile from them (backends/ragged.py).
LAYOUTS = ("tile-list", "grid-z", "ragged")

# gridDim.y / gridDim.z limit on both vendors: grid-z launches split z into chunks of it.
GRID_YZ_MAX = 65535


@dataclass(frozen=True)
class Variant:
    kinds: tuple[TileConfig, ...]
    dtype: str = "float32"
    layout: str = "tile-list"  # "tile-list" (flat tile list), "grid-z" or "ragged"
    trans_a: bool = False
    trans_b: bool = False

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"unsupported dtype {self.dtype!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"unknown layout {self.layout!r}")
        if self.layout != "tile-list" and len(self.kinds) != 1:
            raise ValueError(f"{self.layout} variants hold exactly one tile config")

    @property
    def threads(self) -> int:
        return max(k.threads for k in self.kinds)

    @property
    def fused(self) -> bool:
        return len(self.kinds) > 1

    @property
    def name(self) -> str:
        d = SHORT[self.dtype]
        op = ("t" if self.trans_a else "n") + ("t" if self.trans_b else "n")
        if self.layout == "grid-z":
            what = "gridz_" + self.kinds[0].ident
        elif self.layout == "ragged":
            what = "ragged_" + self.kinds[0].ident
        elif self.fused:
            fam = self.kinds[0].family
            what = "fused_" + fam.replace("-", "_")
            if self.kinds != FAMILIES.get(fam):  # a subset or mix: name its kinds
                what += "_" + "_".join(k.ident for k in self.kinds)
        else:
            what = self.kinds[0].ident
        return f"pg_{d}_{op}_{what}"


@dataclass(frozen=True)
class TileExpand:
    """The tile-list expansion entry point (PG_TILE_EXPAND): writes a one-tile-per-block
    plan's tile list and block pointers on the device from its per-GEMM layout
    (backends/expand.py). Independent of the element type."""
    threads = 256  # its __launch_bounds__
    name = "pg_tile_expand"


@dataclass(frozen=True)
class SplitReduce:
    """The split-K reduction entry point (PG_SPLIT_REDUCE): C_i = alpha_i sum_j W_ij +
    beta_i C_i over the split GEMMs' workspace slices, j in order (backends/split.py
    builds its table and emulates it). Each block takes ``chunk`` consecutive elements
    of one GEMM's M x N, each thread every ``threads``-th of them."""
    dtype: str = "float32"
    threads = 256  # its __launch_bounds__
    chunk = 1024   # elements per block

    def __post_init__(self):
        if self.dtype not in DTYPES or self.dtype in HALF_DTYPES:
            raise ValueError(f"unsupported dtype {self.dtype!r} (the 16-bit dtypes never split K)")

    @property
    def name(self) -> str:
        return f"pg_{SHORT[self.dtype]}_split_reduce"


@dataclass(frozen=True)
class StageCopy:
    """The alignment staging copy (PG_STAGE_COPY): each staged operand copied to rows of
    16-byte aligned stride (backends/stage.py builds its table and emulates it). Each
    block takes ``chunk`` 16-byte units of one operand's copy, each thread every
    ``threads``-th of them. Only the bits move: one entry point per element size, named
    by it (the 16-bit dtypes share one)."""
    dtype: str = "float16"
    threads = 256  # its __launch_bounds__
    chunk = 1024   # 16-byte units per block

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"unsupported dtype {self.dtype!r}")
        # one entry point per element size: the same bits for float16 and bfloat16
        object.__setattr__(self, "dtype", {"bfloat16": "float16"}.get(self.dtype, self.dtype))

    @property
    def name(self) -> str:
        return f"pg_stage_copy_{8 * ITEMSIZE[self.dtype]}bit"


def variants_for(kinds: tuple[TileConfig, ...], mode: str, dtype: str,
                 trans_a: bool = False, trans_b: bool = False) -> tuple[Variant, ...]:
    """The variants a plan's kinds need in one execution mode."""
    dtype = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if mode == "fused":
        return (Variant(tuple(kinds), dtype, "tile-list", trans_a, trans_b),)
    if mode == "per-kind":
        return tuple(Variant((k,), dtype, "tile-list", trans_a, trans_b) for k in kinds)
    if mode == "grid-z":
        return tuple(Variant((k,), dtype, "grid-z", trans_a, trans_b) for k in kinds)
    raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")


def catalogue_variants(dtypes=tuple(DTYPES), trans=((False, False),),
                       arch: str | None = None) -> list[Variant]:
    """Every variant the catalogue defines: per-kind for each tile, a fused kernel for
    each tile-list family (but tiles.PER_KIND_ONLY), grid-z for MAGMA's configs; each
    family only in its dtypes (tiles.family_dtypes). ``arch`` (a name): the variants
    built for it, the arch-specific families (tiles.FAMILY_ARCHS: AMD's MFMA kinds, the
    wgmma kinds on sm_90)
    included where they exist; None: the portable catalogue every target builds."""
    out = []
    for dtype in dtypes:
        for ta, tb in trans:
            for fam, kinds in FAMILIES.items():
                if dtype not in family_dtypes(fam) or not family_builds_for(fam, arch):
                    continue
                if fam == "magma":
                    out += variants_for(kinds, "grid-z", dtype, ta, tb)
                    continue
                out += variants_for(kinds, "per-kind", dtype, ta, tb)
                # no fused kernel: see tiles.PER_KIND_ONLY; the 16-bit, TF32, MFMA and
                # wgmma families run per kind only (planner), so a fused kernel would be
                # compiled for nothing
                if fam not in PER_KIND_ONLY and fam not in HALF_FAMILIES \
                        and fam not in TF32_FAMILIES and fam not in MFMA_FAMILIES \
                        and fam not in WGMMA_FAMILIES:
                    out += variants_for(kinds, "fused", dtype, ta, tb)
    return out


def is_tf32(variant) -> bool:
    """Whether ``variant`` runs TF32 kinds (tiles.TF32_FAMILIES): built for NVIDIA sm_80+
    only (the vendor matrix; AMD compiles them to compat.h's emulation, never planned)."""
    return any(k.family in TF32_FAMILIES for k in getattr(variant, "kinds", ()))
