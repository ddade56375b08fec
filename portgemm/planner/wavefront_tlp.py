"""zhang2025 Algorithm 1, two readings: the default planner.

``tlp_model="device"`` (the default): **a TLP rule that binds, and tile choice by cost.**
Start from the largest tile that fits each GEMM (tm <= M and tn <= N; the smallest
where none fits; an equal-area tie goes to the tile that divides). The threshold is
what the device holds for this launch (parallelism.launch_capacity: CUs x resident
workgroups per CU by the kernel's occupancy x the threads of the tiles), never above
the device's capacity; the wavefront TLP counts each tile's own threads resident per
wave, averaged over whole waves (parallelism.resident_tlp), so a partial last wave
leaves it below the threshold. TLP below the threshold is the signal to consider
smaller tiles; the pipeline latency model (cost_model.py) decides. Candidates, in
turn: per GEMM the tile of least predicted work (tiles x time per tile, so padding
counts); every GEMM one step smaller, repeatedly (Algorithm 1's rounds); per GEMM the
least work among tiles no longer than tau, for tau = longest tile / 2, / 4, ... (the
longest tiles shrink first, shortening the critical path and the last wave). A
candidate replaces the best so far when the model predicts the whole launch faster;
before each, the search stops if the best so far reaches the threshold. Divisibility
only breaks ties of equal predicted work. ``tlp_factor`` scales the threshold (default
1), capped at the device's capacity; ``tlp_threshold`` replaces it.

``tlp_model="paper"``: the loop as the paper describes it, kept to show the
difference (today's plans before the device rule, byte for byte). Algorithm 1 as
printed loops ``while TLP_new >= TLP_threshold`` and adds to ``total_workgroup``
without ever subtracting the tiles it replaced. We implement what the text (§4.2.2 and
the paragraph after Algorithm 1) describes instead: start from the largest tile that
divides each GEMM (Eq. 10), recompute the totals from scratch each round, and shrink
every GEMM one step (large -> medium-large -> medium -> small-medium -> small) while
TLP is *below* the threshold (CUs x max waves per CU x wave size x TLP_FACTOR). Two
more stops, ours: nothing left to shrink, and a round that does not raise TLP while the
device is saturated (the CU demand already exceeds the CUs, so phi caps at what the
device can hold and smaller tiles add no active waves; that round is undone). An
unsaturated round that merely keeps TLP equal (per-kind mode: twice the tiles at half
the threads) goes on. Eq. 4's phi charges every workgroup its launch's waves.

Both readings exist for both TLP formulas (``workgroup-tlp`` uses Eq. 3, tiles x block
threads, with the same thresholds). Everything is vectorised over GEMMs: a kind index
per GEMM and (batch, kinds) tables of tile counts and predicted tile times; the device
rule evaluates at most ``kinds + MAX_CAPS`` candidates.

Split-K: not yet (no split-K kernels exist). The hook: a split-K kind would join the
family as a tile whose time the cost model gives with ceil(K / (splits tk)) steps plus
a reduction, and whose count is tiles x splits; the candidate search needs no change.
"""
from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from ..tiles import ZHANG2025
from . import register
from .cost_model import BatchModel, kind_costs, predict_assignment
from .parallelism import (cu_demand, device_threads, kind_table, launch_capacity, resident_tlp,
                          tlp_threshold, wavefront_tlp, workgroup_tlp)
from .tiling import (build_tiles, gemm_lpt_order, kind_counts, make_plan, notes_for_shapes,
                     single_tile_blocks, tile_grid)

FAMILY = ZHANG2025
assert all(a.area <= b.area for a, b in zip(FAMILY, FAMILY[1:])), "family must run small -> large"

OPTIONS = ("tlp_factor", "tlp_threshold", "occupancy_model", "tlp_model")
TLP_MODELS = ("device", "paper")
DEFAULT_TLP_MODEL = "device"
MAX_CAPS = 8          # tau = longest tile / 2**j, j = 1..MAX_CAPS
DEVICE_FACTOR = 1.0   # device rule: threshold = launch capacity x this (tlp_factor overrides)


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


def paper_rule(req, tlp_formula: str, kinds, table):
    """The paper's loop; ``tlp_formula`` "wavefront" (Eq. 4) or "workgroup" (Eq. 3).
    Returns (kidx, TLP, threshold, notes, predicted seconds)."""
    arch, shapes = req.arch, req.shapes
    threshold = req.options.get("tlp_threshold")
    if threshold is None:
        threshold = tlp_threshold(arch, req.options.get("tlp_factor"))
    threshold = float(threshold)
    n_k = len(kinds)

    def tlp(kidx):
        """(TLP, saturated): saturated when the CU demand fills every CU."""
        n_wg = kind_counts(counts, kidx, n_k)
        if tlp_formula == "wavefront":
            return (wavefront_tlp(n_wg, table.waves, table.active, arch),
                    cu_demand(n_wg, table.active) >= arch.compute_units)
        return workgroup_tlp(n_wg, table.threads), False   # Eq. 3 has no capacity

    notes = []
    grid = tile_grid(shapes, kinds)
    counts = grid[0] * grid[1]
    live = counts[:, 0] > 0
    kidx = initial_kinds(shapes, kinds, grid)
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
    predicted = predict_assignment(shapes, counts, kidx, kind_costs(arch, kinds, table, req.dtype),
                                   req.mode == "per-kind") if live.any() else 0.0
    return kidx, t, threshold, notes, predicted


def _area_keys(kinds):
    """(dense area rank per kind, index per kind): equal areas share a rank."""
    area = np.array([k.area for k in kinds], dtype=np.int64)
    return np.unique(area, return_inverse=True)[1].astype(np.int64), np.arange(len(kinds))


def device_rule(req, tlp_formula: str, kinds, table):
    """The device rule (module docstring). Returns (kidx, TLP, threshold, notes,
    predicted seconds)."""
    arch, shapes = req.arch, req.shapes
    n_k = len(kinds)
    kc = kind_costs(arch, kinds, table, req.dtype)
    per_kind = req.mode == "per-kind"
    gm, gn = tile_grid(shapes, kinds)
    counts = gm * gn
    rows = np.arange(req.batch)
    tm = np.array([k.tm for k in kinds], dtype=np.int64)
    tn = np.array([k.tn for k in kinds], dtype=np.int64)
    M, N = shapes[:, 0:1], shapes[:, 1:2]
    rank, idx = _area_keys(kinds)
    divides = (gm * tm == M) & (gn * tn == N)
    allowed = ((tm <= M) & (tn <= N)) | (rank == 0)      # fits, or among the smallest
    live = counts[:, 0] > 0

    given = req.options.get("tlp_threshold")
    factor = float(req.option("tlp_factor", DEVICE_FACTOR))
    device_cap = float(device_threads(arch))

    def gate(n_wg):
        """(TLP, threshold) of an assignment with n_wg tiles per kind."""
        if tlp_formula == "wavefront":
            t = resident_tlp(n_wg, table.tile_threads, table.active, arch.compute_units)
        else:
            t = workgroup_tlp(n_wg, table.threads)
        if given is not None:
            return t, float(given)
        return t, min(device_cap, factor * launch_capacity(n_wg, table.tile_threads, table.active,
                                                    arch.compute_units))

    notes = []
    # largest fitting (equal areas: the one that divides); then, for equal predicted
    # work, the one that divides, then the larger: a relative nudge far below any real gap
    start = np.where(allowed, rank * (2 * n_k) + divides * n_k + idx, -1).argmax(axis=1)
    if not req.batch or not live.any():
        return (start, *gate(kind_counts(counts, start, n_k)), notes, 0.0)
    model = BatchModel(shapes, counts, kc, per_kind)
    best = start
    best_s, best_n = model.predict(start)
    start_s = best_s
    T = model.tile_times(start)
    key = divides * (n_k * n_k) + rank * n_k + idx
    work = np.where(allowed, counts * T * (1 + 1e-10 * (1 - key / key.max())), np.inf)
    fastest = np.where(allowed, T, np.inf).argmin(axis=1)
    t_fast = float(T[rows, fastest][live].max())   # below this cap every GEMM is at its fastest
    t_long = float(T[rows, start][live].max())

    def capped(tau):
        """Least work among tiles no longer than tau (none: the fastest tile)."""
        sc = np.where(T <= tau, work, np.inf)
        trial = sc.argmin(axis=1)
        none = np.isinf(sc[rows, trial])
        trial[none] = fastest[none]
        return trial

    def shrink(kidx):
        """Every GEMM one step smaller (the next smaller allowed tile), where it can."""
        below = allowed & (rank < rank[kidx][:, None])
        j = np.where(below, rank * n_k + idx, -1).argmax(axis=1)
        return np.where(below[rows, j], j, kidx)

    def candidates():
        yield work.argmin(axis=1)                 # least predicted work per GEMM
        k = best
        for _ in range(n_k - 1):                  # Algorithm 1's rounds, judged by the model
            nk = shrink(k)
            if np.array_equal(nk, k):
                break
            k = nk
            yield k
        for j in range(1, MAX_CAPS + 1):          # the longest tiles shrink first
            tau = t_long / 2.0 ** j
            yield capped(tau)
            if tau < t_fast:
                break

    tried = kept = 0
    reached = False
    for trial in candidates():
        t, th = gate(best_n)
        if t >= th * (1 - 1e-9):
            reached = True
            break
        if np.array_equal(trial, best):
            continue
        tried += 1
        s, n = model.predict(trial)
        if s < best_s * (1 - 1e-9):
            best, best_s, best_n = trial, s, n
            kept += 1
    t, th = gate(best_n)
    notes.append(f"cost model: {tried} smaller tiling(s) weighed, {kept} kept; predicted "
                 f"{best_s * 1e3:.4g} ms (largest fitting tiles: {start_s * 1e3:.4g} ms)")
    if not reached and t < th * (1 - 1e-9):
        if (rank[best][live] == 0).all():
            notes.append("threshold not reached: every GEMM already at the smallest tile")
        else:
            notes.append("threshold not reached: cost model predicts no smaller tiles faster "
                         "(TLP below the threshold only signals that smaller tiles may help)")
    return best, t, th, notes, best_s


RULES = {"device": device_rule, "paper": paper_rule}
MODEL_NAMES = {
    ("device", "wavefront"): "wavefront, device rule (tile threads resident per wave vs this "
                             "launch's capacity)",
    ("device", "workgroup"): "workgroup, device rule (Eq. 3: tiles x block threads vs this "
                             "launch's capacity)",
    ("paper", "wavefront"): "wavefront (zhang2025 Eq. 4, phi by occupancy)",
    ("paper", "workgroup"): "workgroup (zhang2025 Eq. 3)",
}


def algorithm1(req, strategy: str, tlp_formula: str, kinds=None):
    """Plan with ``tlp_formula`` "wavefront" or "workgroup" under the request's
    ``tlp_model`` rule; ``kinds`` (default FAMILY) is any tuple of TileConfig, small ->
    large."""
    from dataclasses import replace
    kinds = FAMILY if kinds is None else tuple(kinds)
    rule = req.option("tlp_model", DEFAULT_TLP_MODEL)
    if rule not in RULES:
        raise ValidationError(f"tlp_model must be one of {', '.join(TLP_MODELS)}, got {rule!r}")
    arch, shapes = req.arch, req.shapes
    table = kind_table(arch, kinds, req.mode, req.dtype, req.option("occupancy_model", "exact"),
                       resources=req.resources)
    kidx, t, threshold, rule_notes, predicted = RULES[rule](req, tlp_formula, kinds, table)
    notes = notes_for_shapes(shapes) + rule_notes

    # One tile per block, longest tiles first (all tiles of a GEMM cost the same).
    tm = np.array([k.tm for k in kinds], dtype=np.int64)
    tn = np.array([k.tn for k in kinds], dtype=np.int64)
    cost = (tm[kidx] * tn[kidx] * shapes[:, 2]).astype(np.float64)
    if req.mode == "per-kind":  # one launch per kind: kinds contiguous, heaviest first
        gm, gn = tile_grid(shapes, kinds)
        n_tiles = (gm * gn)[np.arange(req.batch), kidx]
        order = gemm_lpt_order(cost, kidx, cost * n_tiles)
    else:
        order = gemm_lpt_order(cost)
    tiles = build_tiles(shapes, kinds, kidx, gemm_order=order)
    plan = make_plan(req, strategy, kinds, tiles, single_tile_blocks(tiles.shape[0]), t,
                     threshold, MODEL_NAMES[(rule, tlp_formula)], table.occupancy, notes)
    return replace(plan, predicted_ms=predicted * 1e3)


@register("wavefront-tlp", modes=("fused", "per-kind"), options=OPTIONS)
def plan_wavefront(req):
    return algorithm1(req, "wavefront-tlp", "wavefront")
