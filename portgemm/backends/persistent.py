"""Persistent per-kind launches (no GPU library here).

A per-kind launch whose blocks outnumber the workgroups the device holds at once runs
as exactly that many blocks (its kind's resident workgroups per compute unit, from the
plan's occupancy figures, times the compute units), each over a contiguous run of the
launch's blocks: the kernel's flat-tile-list entry already runs every tile between
two block pointers, so only the block pointers change. The runs are balanced by each
tile's K steps (plus one for its prologue and epilogue), cut where the running sum
crosses each block's share, so no block is more than about one tile longer than the
mean. A block running several tiles of one kind prefetches the next tile's first k step
during the current one's last (vbatched_gemm.cu, PgCarry), which a block per tile
cannot.

The plan's launches keep their order (heaviest kind first) and their tiles; a launch
that fits in one wave stays one tile run per block.
"""
from __future__ import annotations

import os

import numpy as np

# Set to "0" to launch every plan a block per tile run as planned (benchmarks compare).
ENV = "PORTGEMM_PERSISTENT"


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def resident_blocks(plan, kind_index: int) -> int:
    """Workgroups of the plan's kind ``kind_index`` the device holds at once (0 when
    the plan carries no occupancy figure for it)."""
    k = plan.kinds[kind_index]
    occ = plan.occupancy.get(k.name)
    if occ is None:
        return 0
    return int(occ.active_workgroups) * int(plan.arch.compute_units)


def tile_weights(plan, gemm: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """Each tile's weight: its K steps with its kind, plus one (prologue and epilogue)."""
    tk = np.array([k.tk for k in plan.kinds], dtype=np.int64)
    K = plan.shapes[gemm, 2]
    return -(-K // tk[kind]) + 1


def balanced_cuts(weights: np.ndarray, blocks: int) -> np.ndarray:
    """Cut points 0 = c_0 < c_1 < ... < c_blocks = len(weights): block j runs items
    [c_j, c_j+1), each a share of the total weight to within about one item (an item
    goes to the block its midpoint falls in). Needs len(weights) >= blocks >= 1."""
    n = weights.shape[0]
    w = weights.astype(np.float64)
    cum = np.cumsum(w)
    targets = cum[-1] * np.arange(1, blocks) / blocks
    cuts = np.searchsorted(cum - 0.5 * w, targets)
    # no empty block: c_j - j must stay within [0, n - blocks] and non-decreasing
    j = np.arange(1, blocks)
    slack = np.maximum.accumulate(np.clip(cuts - j, 0, n - blocks))
    return np.concatenate([[0], slack + j, [n]]).astype(np.int64)


def persistent_launches(plan, block_ptr: np.ndarray, launches, weights: np.ndarray):
    """(block pointers, launches) for the per-kind ``launches`` [(variant index, first
    block, blocks)] over ``block_ptr`` (tiles of block b: block_ptr[b] .. block_ptr[b+1])
    with per-tile ``weights``: each launch with more blocks than its kind's resident
    workgroups becomes that many blocks over contiguous runs of its blocks; None when
    no launch does (the plan's own pointers and launches stand)."""
    tile_cum = np.concatenate([[0], np.cumsum(weights, dtype=np.int64)])
    bw = np.diff(tile_cum[block_ptr])            # weight of each planned block
    ptrs, out, changed, base, end = [], [], False, 0, 0
    for which, first, n in launches:
        if first != end:                         # launches must tile the blocks in order
            return None
        slots = resident_blocks(plan, which)
        if 0 < slots < n:
            cuts = first + balanced_cuts(bw[first:first + n], slots)
            changed, grid = True, slots
        else:
            cuts, grid = np.arange(first, first + n + 1), n
        ptrs.append(block_ptr[cuts[:-1]])
        out.append((which, base, grid))
        base, end = base + grid, first + n
    if not changed:
        return None
    ptrs.append(block_ptr[end:end + 1])
    return np.concatenate(ptrs).astype(np.int32), out
