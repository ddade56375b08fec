"""zhang2025 Algorithm 1 with the wavefront-aware TLP (Eq. 4): the default planner.

Algorithm 1 as printed loops ``while TLP_new >= TLP_threshold`` and adds to
``total_workgroup`` without ever subtracting the tiles it replaced. We implement what
the text (§4.2.2 and the paragraph after Algorithm 1) describes instead: start from the
largest tile that divides each GEMM (Eq. 10), recompute the totals from scratch each
round, and shrink every GEMM one step (large -> medium-large -> medium -> small-medium
-> small) while TLP is *below* the threshold. Two more stops, ours: nothing left to
shrink, and a round that does not raise TLP while the device is saturated (the CU
demand already exceeds the CUs, so phi caps at what the device can hold and smaller
tiles add no active waves; that round is undone). An unsaturated round that merely
keeps TLP equal (per-kind mode: twice the tiles at half the threads) goes on.

Everything is vectorised over GEMMs: a kind index per GEMM and a (batch, kinds) table
of tile counts.
"""
from __future__ import annotations

import numpy as np

from ..tiles import ZHANG2025
from . import register
from .parallelism import cu_demand, kind_table, tlp_threshold, wavefront_tlp, workgroup_tlp
from .tiling import (build_tiles, gemm_lpt_order, kind_counts, make_plan, notes_for_shapes,
                     single_tile_blocks, tile_grid)

FAMILY = ZHANG2025
assert all(a.area <= b.area for a, b in zip(FAMILY, FAMILY[1:])), "family must run small -> large"

OPTIONS = ("tlp_factor", "tlp_threshold", "occupancy_model")


def initial_kinds(shapes: np.ndarray, kinds, grid=None) -> np.ndarray:
    """Eq. 10 per GEMM: the largest tile with tm | M and tn | N; if none divides, the
    largest with tm <= M and tn <= N; if none fits, the smallest. (Eq. 10's Tk | K
    condition is moot: every tile of the family has the same Tk, and the kernel
    guards a ragged last K step.) ``kinds`` run small -> large; ``grid`` is
    tile_grid(shapes, kinds) if the caller has it."""
    tm = np.array([k.tm for k in kinds], dtype=np.int64)
    tn = np.array([k.tn for k in kinds], dtype=np.int64)
    gm, gn = tile_grid(shapes, kinds) if grid is None else grid
    M, N = shapes[:, 0:1], shapes[:, 1:2]
    fits = (tm <= M) & (tn <= N)
    divides = (gm * tm == M) & (gn * tn == N)          # exact tiling; with fits: tm | M
    idx = np.arange(len(kinds))
    # one argmax: dividing beats fitting beats neither, then the larger (fitting) tile;
    # where nothing fits, -idx makes the smallest win
    key = np.where(fits, idx + len(kinds) * (1 + divides), -idx)
    return key.argmax(axis=1)


def algorithm1(req, strategy: str, tlp_model: str):
    """The shared loop; ``tlp_model`` "wavefront" (Eq. 4) or "workgroup" (Eq. 3)."""
    arch, shapes = req.arch, req.shapes
    threshold = req.options.get("tlp_threshold")
    if threshold is None:
        threshold = tlp_threshold(arch, req.options.get("tlp_factor"))
    threshold = float(threshold)
    table = kind_table(arch, FAMILY, req.mode, req.dtype, req.option("occupancy_model", "exact"),
                       resources=req.resources)
    n_k = len(FAMILY)

    def tlp(kidx):
        """(TLP, saturated): saturated when the CU demand fills every CU."""
        n_wg = kind_counts(counts, kidx, n_k)
        if tlp_model == "wavefront":
            return (wavefront_tlp(n_wg, table.waves, table.active, arch),
                    cu_demand(n_wg, table.active) >= arch.compute_units)
        return workgroup_tlp(n_wg, table.threads), False   # Eq. 3 has no capacity

    notes = notes_for_shapes(shapes)
    grid = tile_grid(shapes, FAMILY)
    counts = grid[0] * grid[1]
    live = counts[:, 0] > 0
    kidx = initial_kinds(shapes, FAMILY, grid)
    t, _ = tlp(kidx)
    rounds = 0
    while t < threshold and req.batch:
        can = live & (kidx > 0)
        if not can.any():
            notes.append("threshold not reached: every GEMM already at the smallest tile")
            break
        trial = kidx - can
        t_trial, saturated = tlp(trial)
        # relative tolerance: saturated phi is CUs x a x w up to rounding
        if saturated and not t_trial > t * (1 + 1e-9):
            notes.append("threshold not reached: saturated at capacity "
                         "(smaller tiles add no active wavefronts; last shrink undone)")
            break
        kidx, t = trial, t_trial
        rounds += 1
    notes.append(f"{rounds} shrink round(s) after the initial scheme (Eq. 10)")

    # One tile per block, longest tiles first (all tiles of a GEMM cost the same).
    tm = np.array([k.tm for k in FAMILY], dtype=np.int64)
    tn = np.array([k.tn for k in FAMILY], dtype=np.int64)
    cost = (tm[kidx] * tn[kidx] * shapes[:, 2]).astype(np.float64)
    if req.mode == "per-kind":  # one launch per kind: kinds contiguous, heaviest first
        n_tiles = counts[np.arange(req.batch), kidx]
        order = gemm_lpt_order(cost, kidx, cost * n_tiles)
    else:
        order = gemm_lpt_order(cost)
    tiles = build_tiles(shapes, FAMILY, kidx, gemm_order=order)
    model = ("wavefront (zhang2025 Eq. 4, phi by occupancy)" if tlp_model == "wavefront"
             else "workgroup (zhang2025 Eq. 3)")
    return make_plan(req, strategy, FAMILY, tiles, single_tile_blocks(tiles.shape[0]), t,
                     threshold, model, table.occupancy, notes)


@register("wavefront-tlp", modes=("fused", "per-kind"), options=OPTIONS)
def plan_wavefront(req):
    return algorithm1(req, "wavefront-tlp", "wavefront")
