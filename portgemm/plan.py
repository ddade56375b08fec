"""A Plan: the flat tile list a planner produced for one shape list, packed once.

``plan.tiles`` is a structured array ordered by block: the tiles of thread block ``b``
are ``tiles[block_ptr[b]:block_ptr[b + 1]]``. All tiles of one block need the same
thread count (so a fused kernel's extra threads may leave at once); in "per-kind" mode
they are also of one kind. Only li2019's batching puts several tiles in a block. Every
element of every C lies in exactly one tile (edge tiles may extend past M/N; the kernel
guards them). No strategy splits K.

``Plan.run`` and ``Plan.bind`` are ``portgemm.run`` and ``portgemm.bind`` as methods,
attached by api.py (the layer above), so this module imports nothing from it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from tabulate import tabulate

from .tiles import TileConfig

if TYPE_CHECKING:
    from .occupancy.archs import Arch

TILE_DTYPE = np.dtype([("gemm", "<i4"), ("m0", "<i4"), ("n0", "<i4"),
                       ("tm", "<i4"), ("tn", "<i4"), ("kind", "<i4")])


@dataclass(eq=False)
class Plan:
    strategy: str
    arch: "Arch"
    dtype: np.dtype
    shapes: np.ndarray              # (batch, 3) int64: M, N, K of op(A) @ op(B)
    kinds: tuple[TileConfig, ...]   # tile.kind indexes this tuple
    tiles: np.ndarray               # TILE_DTYPE, ordered by block
    block_ptr: np.ndarray           # int32, n_blocks + 1
    mode: str                       # "fused" | "per-kind" | "grid-z"
    tlp: float                      # the strategy's TLP of the final scheme
    tlp_threshold: float
    tlp_model: str                  # which TLP formula ``tlp`` is
    occupancy: dict                 # kind name -> Occupancy predicted for its launch
    grid: tuple[int, int, int] | None = None   # grid-z launches only
    notes: tuple[str, ...] = ()
    _device: dict = field(default_factory=dict, repr=False)  # backends' per-plan state

    @property
    def batch(self) -> int:
        return int(self.shapes.shape[0])

    @property
    def n_tiles(self) -> int:
        return int(self.tiles.shape[0])

    @property
    def n_blocks(self) -> int:
        return int(self.block_ptr.shape[0]) - 1

    @property
    def flops(self) -> int:
        s = self.shapes
        return int(2 * (s[:, 0] * s[:, 1] * s[:, 2]).sum())

    def tiles_per_kind(self) -> dict[str, int]:
        counts = np.bincount(self.tiles["kind"], minlength=len(self.kinds))
        return {k.kind: int(c) for k, c in zip(self.kinds, counts) if c}

    def predicted_occupancy(self) -> float:
        """Block-weighted mean of the per-kind predicted occupancy."""
        if self.n_tiles == 0 or not self.occupancy:
            return 0.0
        first = self.tiles["kind"][self.block_ptr[:-1]]
        counts = np.bincount(first, minlength=len(self.kinds))
        occ = [self.occupancy[k.name].occupancy if k.name in self.occupancy else 0.0
               for k in self.kinds]
        return float(np.dot(counts, occ) / max(1, counts.sum()))

    def describe(self) -> str:
        rows = []
        per_kind = self.tiles_per_kind()
        for k in self.kinds:
            if k.kind not in per_kind:
                continue
            o = self.occupancy.get(k.name)
            rows.append([k.kind, f"{k.tm}x{k.tn}x{k.tk}", k.threads, per_kind[k.kind],
                         f"{o.occupancy:.0%}" if o else "-", o.limited_by if o else "-"])
        head = (f"plan: strategy={self.strategy} arch={self.arch.name} dtype={self.dtype} "
                f"mode={self.mode} batch={self.batch} tiles={self.n_tiles} blocks={self.n_blocks}\n"
                f"TLP ({self.tlp_model}) {self.tlp:,.0f} vs threshold {self.tlp_threshold:,.0f}; "
                f"predicted occupancy {self.predicted_occupancy():.0%}")
        table = tabulate(rows, headers=["kind", "tile", "threads", "tiles", "occupancy", "limited by"])
        extra = "".join(f"\nnote: {n}" for n in self.notes)
        return f"{head}\n{table}{extra}"
