"""Persistent per-kind launches (no GPU library here).

A per-kind launch whose blocks outnumber the workgroups the device holds at once runs
as exactly that many blocks G (its kind's resident workgroups per compute unit, from
the plan's occupancy figures, times the compute units), block j running the planned
blocks j, j + G, j + 2G, ... one after the other (round robin). The plan orders a
kind's blocks longest first, so each round of G holds blocks of about one length
(close to LPT), and the tiles running at once stay neighbours in the plan's order, as
with a block per planned block: tiles of one GEMM share its operands in L2. (Giving
each block a contiguous run of the list instead, balanced by K steps, measured 5-40 %
slower on the H100: the tiles running at once then span the whole batch.) The
kernel's flat-tile-list entry runs every tile between two block pointers, so the
tile list is reordered (block j's tiles contiguous) and only the pointers change. A
block running several tiles of one kind prefetches the next tile's first k step during
the current one's last (vbatched_gemm.cu, PgCarry), which a block per tile cannot.

The plan's launches keep their order (heaviest kind first); a launch that fits in one
wave stays one block per planned block.

Measured on the H100 (bench/NOTES.md, "Session 5: persistent grid"): plans of several
kinds' launches, which CUDA runs side by side, ran 1-9 % faster persistent (geomean
+2.9 % over 11 fp32 cases); a plan of one kind's launch ran 0-4 % slower in most cases
(the block scheduler balances a lone launch's random tile lengths better than a fixed
round robin), so only plans of at least MIN_LAUNCHES launches go persistent.
"""
from __future__ import annotations

import os

import numpy as np

# Blocks per resident workgroup of a persistent launch: "0" launches every plan a
# block per planned block, "2" twice the resident blocks (two rounds of persistent
# blocks, so the hardware's block scheduler balances the second); benchmarks compare.
ENV = "PORTGEMM_PERSISTENT"


# Launches (kinds with tiles) a per-kind plan needs before its launches go persistent.
MIN_LAUNCHES = 2


def rounds() -> int:
    try:
        return max(0, int(os.environ.get(ENV, "1")))
    except ValueError:
        return 1


def enabled() -> bool:
    return rounds() > 0


def resident_blocks(plan, kind_index: int) -> int:
    """Workgroups of the plan's kind ``kind_index`` the device holds at once (0 when
    the plan carries no occupancy figure for it, or for an MMA kind: its launches stay a
    block per planned block, persistent MMA launches not having been measured)."""
    k = plan.kinds[kind_index]
    occ = plan.occupancy.get(k.name)
    if occ is None or k.engine != "simt":
        return 0
    return int(occ.active_workgroups) * int(plan.arch.compute_units) * rounds()


def round_robin(n: int, blocks: int) -> np.ndarray:
    """The order of n planned blocks when ``blocks`` blocks take them round robin: block
    j's (j, j + blocks, ...) first, then block j + 1's."""
    rounds = -(-n // blocks)
    order = np.arange(rounds * blocks).reshape(rounds, blocks).T.ravel()
    return order[order < n]


def persistent_launches(plan, block_ptr: np.ndarray, launches):
    """(tile order, block pointers, launches) for the per-kind ``launches`` [(variant
    index, first block, blocks)] over ``block_ptr`` (tiles of planned block b:
    block_ptr[b] .. block_ptr[b + 1]): each launch with more blocks than its kind's
    resident workgroups becomes that many blocks, round robin; the tile list is to be
    taken in ``tile order``. None when no launch changes (the plan's own list, pointers
    and launches stand)."""
    sizes = np.diff(block_ptr)
    border, grids, out, changed, end = [], [], [], False, 0
    for which, first, n in launches:
        if first != end:                         # launches must tile the blocks in order
            return None
        slots = resident_blocks(plan, which)
        if 0 < slots < n:
            order = first + round_robin(n, slots)
            per_block = np.bincount(np.arange(n) % slots, minlength=slots)
            changed, grid = True, slots
        else:
            order, per_block, grid = np.arange(first, first + n), np.ones(n, np.int64), n
        border.append(order)
        grids.append(per_block)
        out.append((which, end if not out else out[-1][1] + out[-1][2], grid))
        end = first + n
    if not changed:
        return None
    border = np.concatenate(border)
    # tiles of the planned blocks in their new order
    counts = sizes[border]
    if sizes.shape[0] == block_ptr[-1]:          # a tile per planned block
        tile_order = border
    else:
        starts = block_ptr[:-1][border]
        offs = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        tile_order = np.arange(int(counts.sum())) + offs
    # new block j holds per_block[j] consecutive planned blocks of the new order
    planned_cum = np.concatenate([[0], np.cumsum(counts)])
    new_cuts = np.concatenate([[0], np.cumsum(np.concatenate(grids))])
    return tile_order, planned_cum[new_cuts].astype(np.int32), out
