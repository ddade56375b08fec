"""A Plan: the flat tile list a planner produced for one shape list, packed once.

Make one with ``portgemm.plan(shapes, dtype, arch, strategy)``; run it with
``plan.run(A, B, C)`` or, for repeated calls on the same arrays, ``plan.bind(...)()``.

``plan.tiles`` is a structured array ordered by block: the tiles of thread block ``b``
are ``tiles[block_ptr[b]:block_ptr[b + 1]]``. All tiles of one block need the same
thread count (so a fused kernel's extra threads may leave at once); in "per-kind" mode
they are also of one kind. Only li2019's batching puts several tiles in a block. Every
element of every C lies in exactly one tile (edge tiles may extend past M/N; the kernel
guards them). A one-tile-per-block plan (every strategy but
li2019's) keeps only ``plan.layout``, its tiles GEMM by GEMM (tile_layout.py, O(batch)):
``tiles`` and ``block_ptr`` are expanded from it on first read, and the GPU backends
expand it on the device, so planning and first calls never write a record per tile.

Split-K (planner/split_k.py): the default plan may carry ``plan.split``, a SplitK: GEMM i
split into ``split.splits[i]`` slices of K, each a *virtual GEMM* of an ordinary inner
plan (``split.plan``) that writes a workspace, then a deterministic reduction into C.
Such a plan's own tiles, kinds and occupancy are the unsplit tiling (what a backend
that does not know split-K runs, correctly); ``predicted_ms`` is the split call's.
The paper's strategies never split, nor does ``plan(..., split_k=False)``.

Alignment staging (planner/staging.py): a 16-bit plan may carry ``plan.staging``, a
Staging: the operands whose rows are not 16-byte aligned are first copied, in one launch,
into a workspace with leading dimensions rounded up to 16 bytes, and an inner plan
(``staging.plan``, planned as if those rows were aligned) runs on the copies. Its own
tiles are the direct plan's (what a backend that does not know staging runs, correctly);
``predicted_ms`` is the staged call's. Such a plan never splits K (the 16-bit dtypes do
not), and ``plan(..., staging=False)`` never stages.

``Plan.run`` and ``Plan.bind`` are ``portgemm.run`` and ``portgemm.bind`` as methods,
attached by api.py (the layer above), so this module imports nothing from it.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from tabulate import tabulate

from .tile_layout import TILE_DTYPE, TileLayout
from .tiles import TileConfig, family_precision

if TYPE_CHECKING:
    from .occupancy.archs import Arch

__all__ = ["TILE_DTYPE", "Plan", "SplitK", "Staging", "TileLayout"]


class _FromLayout:
    """A Plan field that, when the planner gave None for it and a layout instead, is
    expanded from ``plan.layout`` on first read and kept (read-only). As a dataclass
    field default it raises AttributeError on the class, so the field stays required
    (dataclasses' rule for descriptor-typed fields)."""

    def __set_name__(self, owner, name):
        self.slot = "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            raise AttributeError(self.slot[1:])
        value = obj.__dict__.get(self.slot)
        if value is None:
            value = obj.__dict__[self.slot] = obj._from_layout(self.slot[1:])
        return value

    def __set__(self, obj, value):
        obj.__dict__[self.slot] = value


@dataclass(frozen=True, eq=False, repr=False)
class Plan:
    """The tiles of one batch of GEMM shapes on one architecture, ready to run.

    ``repr(plan)`` is one line; ``plan.describe()`` is the full account (tiles per kind,
    TLP against the threshold and what that means, predicted occupancy, notes, spill
    warnings).

    ``run(A, B, C, alpha=1, beta=0, trans_a=False, trans_b=False, backend=None)``
    computes C_i = alpha_i op(A_i) op(B_i) + beta_i C_i in place and returns C. A, B, C
    must have the shapes and dtype the plan was made for. beta_i = 0 never reads C_i
    (NaN or Inf there do not propagate); alpha_i = 0 never reads A_i or B_i (C_i =
    beta_i C_i); K = 0 gives C_i = beta_i C_i.

    Raises (all PortgemmError subclasses, naming the offending GEMM where there is one):
    ShapeMismatch (shapes differ from the plan's, or A, B, C disagree), DtypeError
    (also a TypeError), LayoutError (strides the kernels cannot use, C overlapping an
    input), ValidationError (other bad arguments; also ValueError), DeviceUnavailable
    (the backend cannot run here), CompileError, DeviceError. When validation fails,
    nothing is written to any C.
    """

    strategy: str
    arch: "Arch"
    dtype: np.dtype
    shapes: np.ndarray              # (batch, 3) int64: M, N, K of op(A) @ op(B)
    kinds: tuple[TileConfig, ...]   # tile.kind indexes this tuple
    # TILE_DTYPE, ordered by block; None with a layout: expanded from it on first read
    tiles: np.ndarray = _FromLayout()
    block_ptr: np.ndarray = _FromLayout()   # int32, n_blocks + 1 (None: as tiles)
    mode: str                       # "fused" | "per-kind" | "grid-z"
    tlp: float                      # the strategy's TLP of the final scheme
    tlp_threshold: float
    tlp_model: str                  # which TLP formula ``tlp`` is
    occupancy: dict                 # kind name -> Occupancy predicted for its launch
    grid: tuple[int, int, int] | None = None   # grid-z launches only
    notes: tuple[str, ...] = ()
    # the planner's cost model (planner/cost_model.py) for one call; None: not predicted
    predicted_ms: float | None = None
    # one tile per block, per GEMM (tile_layout.py): what tiles and block_ptr expand
    # from; None when the planner gave the list itself (li2019's batching)
    layout: TileLayout | None = None
    # split-K (planner/split_k.py): what split-aware backends run instead; None: unsplit
    split: "SplitK | None" = None
    # alignment staging (planner/staging.py): what staging-aware backends run; None: direct
    staging: "Staging | None" = None

    def __post_init__(self):
        if self.__dict__.get("_tiles") is not None:
            # a list given outright is the plan (a test's tampering too)
            object.__setattr__(self, "layout", None)
        elif self.layout is None:
            raise ValueError("a Plan needs tiles or a layout")

    def _copy_with(self, **fields) -> "Plan":
        """A copy with ``fields`` replaced, the tile list left unexpanded (a dataclass
        replace would read, and so expand, every field)."""
        new = copy.copy(self)
        for k, v in fields.items():
            object.__setattr__(new, k, v)
        return new

    def with_split(self, split: "SplitK") -> "Plan":
        """This plan carrying ``split`` (its predicted time the split call's, its reason
        among the notes)."""
        return self._copy_with(split=split, predicted_ms=split.predicted_ms,
                               notes=self.notes + (split.reason,))

    def with_staging(self, staging: "Staging") -> "Plan":
        """This plan carrying ``staging`` (its predicted time the staged call's, its
        reason among the notes)."""
        return self._copy_with(staging=staging, predicted_ms=staging.predicted_ms,
                               notes=self.notes + (staging.reason,))

    def with_notes(self, *notes: str) -> "Plan":
        return self._copy_with(notes=self.notes + tuple(notes))

    def _from_layout(self, name: str) -> np.ndarray:
        n = self.layout.n_tiles
        out = self.layout.tiles() if name == "tiles" else np.arange(n + 1, dtype=np.int32)
        out.flags.writeable = False
        return out

    @property
    def precision(self) -> str:
        """The fp32 precision mode this plan computes (portgemm/precision.py): its tile
        family's, "ieee" for every family but tiles.TF32_FAMILIES."""
        for k in self.kinds:
            p = family_precision(k.family)
            if p != "ieee":
                return p
        return "ieee"

    @property
    def batch(self) -> int:
        return int(self.shapes.shape[0])

    @property
    def n_tiles(self) -> int:
        if self.layout is not None:
            return self.layout.n_tiles
        return int(self.tiles.shape[0])

    @property
    def n_blocks(self) -> int:
        if self.layout is not None:
            return self.layout.n_tiles   # one tile per block
        return int(self.block_ptr.shape[0]) - 1

    def tile_counts(self) -> np.ndarray:
        """Tiles per kind, in ``kinds`` order (int64; from the layout when there is one)."""
        if self.layout is not None:
            return self.layout.tiles_per_kind(len(self.kinds))
        return np.bincount(self.tiles["kind"], minlength=len(self.kinds))

    def _block_counts(self) -> np.ndarray:
        """Blocks per kind (a block's kind is its first tile's)."""
        if self.layout is not None:
            return self.layout.tiles_per_kind(len(self.kinds))
        return np.bincount(self.tiles["kind"][self.block_ptr[:-1]], minlength=len(self.kinds))

    @property
    def flops(self) -> int:
        s = self.shapes
        return int(2 * (s[:, 0] * s[:, 1] * s[:, 2]).sum())

    def tiles_per_kind(self) -> dict[str, int]:
        counts = self.tile_counts()
        return {k.kind: int(c) for k, c in zip(self.kinds, counts) if c}

    def predicted_occupancy(self) -> float:
        """Block-weighted mean of the per-kind predicted occupancy."""
        if self.n_tiles == 0 or not self.occupancy:
            return 0.0
        counts = self._block_counts()
        occ = [self.occupancy[k.name].occupancy if k.name in self.occupancy else 0.0
               for k in self.kinds]
        return float(np.dot(counts, occ) / max(1, counts.sum()))

    def __repr__(self) -> str:
        per_kind = ", ".join(f"{k} {n}" for k, n in self.tiles_per_kind().items())
        prec = self.precision
        return (f"<Plan {self.strategy} {self.mode} arch={self.arch.name} dtype={self.dtype}"
                f"{'' if prec == 'ieee' else ' precision=' + prec} "
                f"batch={self.batch} tiles={self.n_tiles}"
                f"{f' ({per_kind})' if per_kind else ''} blocks={self.n_blocks}"
                f"{f' split-K={self.split.split_gemms.size}' if self.split is not None else ''}"
                f"{f' staged={self.staging.n_staged}' if self.staging is not None else ''}>")

    def tlp_verdict(self) -> str:
        """What TLP against the threshold means for this plan's strategy, in words."""
        why = [n.split(": ", 1)[1] for n in self.notes if n.startswith("threshold not reached")]
        if self.strategy == "magma":
            return "magma uses one config for the batch; the threshold plays no part"
        if self.strategy == "coordinated":  # li2019 grows tiles while TLP is above it
            return ("at or below li2019's threshold: tiles grown as far as it allows"
                    if self.tlp <= self.tlp_threshold else
                    "above li2019's threshold: every GEMM already at its largest tile")
        if self.tlp >= self.tlp_threshold:
            return "threshold reached: no smaller tiles needed"
        if why and why[0].startswith("saturated"):
            return ("below the threshold, not an error: the device is full (at this kernel's "
                    "occupancy it holds no more wavefronts at once), so smaller tiles would "
                    "add no parallelism")
        if why and why[0].startswith("cost model"):
            return ("below the threshold, not an error: the cost model predicts no smaller "
                    "tiles faster for this batch")
        if why and "smallest tile" in why[0]:
            return ("below the threshold, not an error: every GEMM is already at the "
                    "smallest tile; the batch has too little work to reach it")
        return "below the threshold"

    def spills(self) -> dict[str, int]:
        """Variant name -> bytes spilled per thread, for the variants this plan launches
        that spill on its arch (recorded or compiled figures of the NN variants; {} when
        none spills or only estimates are known)."""
        from .kernels.resources import lookup
        from .kernels.variants import variants_for
        used = set(self.tiles_per_kind())
        kinds = self.kinds if self.mode == "fused" else \
            tuple(k for k in self.kinds if k.kind in used)
        out = {}
        for v in variants_for(kinds, self.mode, self.dtype.name):
            res = lookup(self.arch, v)
            if res.spill_bytes:
                out[v.name] = int(res.spill_bytes)
        return out

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
                f"{'' if self.precision == 'ieee' else 'precision=' + self.precision + ' '}mode={self.mode} batch={self.batch} tiles={self.n_tiles} blocks={self.n_blocks}\n"
                f"TLP ({self.tlp_model}) {self.tlp:,.0f} vs threshold {self.tlp_threshold:,.0f}: "
                f"{self.tlp_verdict()}\npredicted occupancy {self.predicted_occupancy():.0%}"
                + ("" if self.predicted_ms is None else
                   f", predicted time {self.predicted_ms:.4g} ms (planner/cost_model.py)"))
        table = tabulate(rows, headers=["kind", "tile", "threads", "tiles", "occupancy", "limited by"])
        if self.split is not None:
            table += "\n" + self.split.describe()
        if self.staging is not None:
            table += "\n" + self.staging.describe()
        extra = "".join(f"\nnote: {n}" for n in self.notes)
        extra += "".join(f"\nwarning: {w}" for w in self.spill_warnings())
        return f"{head}\n{table}{extra}"

    def spill_warnings(self) -> list[str]:
        """One line per spilling variant of ``spills()``: what describe() and the main job print."""
        return [f"{name} spills {b:,} bytes on {self.arch.name} (compiler's report); it may "
                f"run slower than its occupancy suggests (another strategy, mode or float32 "
                f"may avoid it)" for name, b in self.spills().items()]


@dataclass(frozen=True, eq=False, repr=False)
class SplitK:
    """How a plan splits K (planner/split_k.py), read-only.

    GEMM i runs as ``splits[i]`` virtual GEMMs over K slices of ``slice_k[i]`` (the last
    takes the rest; splits[i] = 1: the GEMM itself, slice_k[i] = K_i), in GEMM order:
    virtual GEMM ``first[i] + j`` is slice j of GEMM i, row ``first[i] + j`` of
    ``plan.shapes``. A split GEMM's slices write the workspace from element
    ``workspace_offset[i]`` on (slice j at + j M_i N_i, leading dimension N_i; -1 where
    not split); ``workspace_elems`` in all. Then one reduction launch over the split
    GEMMs.
    """

    splits: np.ndarray              # (batch,) int64
    slice_k: np.ndarray             # (batch,) int64
    plan: Plan                      # the virtual GEMMs' plan (never split itself)
    predicted_ms: float             # virtual GEMMs + reduction
    unsplit_ms: float               # the unsplit plan's prediction
    reduce_ms: float                # the reduction's share of predicted_ms
    reason: str = ""

    def __post_init__(self):
        s = np.ascontiguousarray(self.splits, dtype=np.int64)
        shapes = self.plan.shapes
        first = np.cumsum(s) - s
        mn = shapes[first, 0] * shapes[first, 1] if s.size else np.zeros(0, np.int64)
        size = np.where(s > 1, s * mn, 0)
        offset = np.where(s > 1, np.cumsum(size) - size, -1)
        for name, value in (("splits", s), ("first", first), ("workspace_offset", offset),
                            ("slice_k", np.ascontiguousarray(self.slice_k, dtype=np.int64))):
            value.flags.writeable = False
            object.__setattr__(self, name, value)
        object.__setattr__(self, "workspace_elems", int(size.sum()))

    @property
    def split_gemms(self) -> np.ndarray:
        """Indices of the GEMMs split more than once, ascending."""
        return np.flatnonzero(self.splits > 1)

    def describe(self) -> str:
        g = self.split_gemms
        shown = ", ".join(f"{int(i)}: {int(self.splits[i])} x {int(self.slice_k[i])}"
                          for i in g[:8]) + (", ..." if g.size > 8 else "")
        return (f"split-K: {g.size} GEMM(s) split (GEMM: slices x K slice: {shown}); "
                f"{self.plan.batch} virtual GEMMs, {self.plan.n_tiles} tiles "
                f"({', '.join(f'{k} {n}' for k, n in self.plan.tiles_per_kind().items())}, "
                f"{self.plan.mode}); workspace {self.workspace_elems:,} elements; predicted "
                f"{self.predicted_ms:.4g} ms (reduction {self.reduce_ms:.4g}) vs "
                f"{self.unsplit_ms:.4g} ms unsplit")


def staged_ld(cols, itemsize: int):
    """The leading dimension (elements) of a staged copy of rows of ``cols`` elements:
    rounded up to 16 bytes, so every row starts 16-byte aligned (int or int64 array)."""
    v = 16 // itemsize
    return -(-cols // v) * v


def staged_span(shapes: np.ndarray, itemsize: int) -> np.ndarray:
    """(batch, 2) int64: the elements a staged copy of A and of B spans, the larger of
    its two orientations (the transpose flags are known only at run time)."""
    s = np.asarray(shapes, dtype=np.int64)
    M, N, K = s[:, 0], s[:, 1], s[:, 2]
    return np.stack([np.maximum(M * staged_ld(K, itemsize), K * staged_ld(M, itemsize)),
                     np.maximum(K * staged_ld(N, itemsize), N * staged_ld(K, itemsize))], axis=1)


@dataclass(frozen=True, eq=False, repr=False)
class Staging:
    """How a plan stages unaligned operands (planner/staging.py), read-only.

    ``reserved[i, x]`` (x = 0: A, 1: B): operand x of GEMM i may be staged; it is, at run
    time, where its rows are not 16-byte aligned there (its leading dimension or base
    address; alpha_i != 0 and a non-empty matrix). Its copy lies at workspace element
    ``offset[i, x]`` (-1 where not reserved; a multiple of 16 bytes) with leading
    dimension ``staged_ld`` of its stored columns. The transpose flags are known only at
    run time, so each reservation holds either orientation (the larger of rows x
    staged_ld(cols) over the two); ``workspace_elems`` in all. ``plan``: the inner plan
    over the same shapes, planned as if the reserved operands' rows were aligned.
    """

    reserved: np.ndarray            # (batch, 2) bool
    plan: Plan                      # the inner plan (never split, never staged)
    predicted_ms: float             # copy + inner plan
    direct_ms: float                # the direct plan's prediction
    copy_ms: float                  # the copy's share of predicted_ms
    reason: str = ""

    def __post_init__(self):
        r = np.ascontiguousarray(self.reserved, dtype=bool).reshape(-1, 2)
        isz = self.plan.dtype.itemsize
        size = np.where(r, staged_ld(staged_span(self.plan.shapes, isz), isz), 0).ravel()
        offset = np.where(r.ravel(), np.cumsum(size) - size, -1).reshape(-1, 2)
        for name, value in (("reserved", r), ("offset", offset)):
            value.flags.writeable = False
            object.__setattr__(self, name, value)
        object.__setattr__(self, "workspace_elems", int(size.sum()))

    @property
    def n_staged(self) -> int:
        """Operands reserved for staging (A and B counted apart)."""
        return int(self.reserved.sum())

    def describe(self) -> str:
        per = self.reserved.sum(axis=0)
        return (f"staging: {int(per[0])} A and {int(per[1])} B operand(s) copied to 16-byte "
                f"aligned rows first (workspace {self.workspace_elems:,} elements); inner plan "
                f"{self.plan.n_tiles} tiles ({', '.join(f'{k} {n}' for k, n in self.plan.tiles_per_kind().items())}); "
                f"predicted {self.predicted_ms:.4g} ms (copy {self.copy_ms:.4g}) vs "
                f"{self.direct_ms:.4g} ms direct")
