"""zhang2025 Algorithm 1, two readings: the default planner.

``tlp_model="device"`` (the default): **a TLP rule that binds, and tile choice by cost.**
Start from the largest tile that fits each GEMM (tm <= M and tn <= N; the smallest
where none fits; an equal-area tie goes to the tile that divides). The threshold is
what the device holds for this launch (parallelism.launch_capacity: CUs x resident
workgroups per CU by the kernel's occupancy x the threads of the tiles), never above
the device's capacity; the wavefront TLP counts each tile's own threads resident per
wave, averaged over whole waves (parallelism.resident_tlp), so a partial last wave
leaves it below the threshold. If the start's TLP reaches the threshold, the start
stands. TLP below it is the signal to consider smaller tiles; the pipeline latency
model (cost_model.py) decides among the candidates, all priced at once
(level_search.py): the start; per GEMM the tile of least predicted work (tiles x time
per tile, so padding counts); per GEMM the least work among tiles no longer than tau,
for tau = longest tile / 2, / 4, ... (the longest tiles shrink first, shortening the
critical path and the last wave); and every GEMM one step smaller, repeatedly
(Algorithm 1's rounds), from the start and from the least-work tiles. The candidate of
least predicted time wins (a tie keeps the start). Divisibility only breaks ties of
equal predicted work. ``tlp_factor`` scales the threshold (default 1), capped at the
device's capacity; ``tlp_threshold`` replaces it.

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
per GEMM and (kinds, batch) tables of tile counts and predicted tile times; the device
rule prices 3 x max(kinds, MAX_CAPS + 1) candidates with a fixed number of NumPy calls,
then re-prices tile by tile the few whose launch has two waves and whose lower bound
beats the best (cost_model: the second wave holds the shortest tiles).

Split-K is decided after this rule, by planner/split_k.py: it reruns the rule on the
GEMMs' K slices and keeps the split plan where the cost model predicts it faster.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..errors import ValidationError
from ..memo import kept_for
from ..occupancy.archs import has_mfma
from ..occupancy.tuned import tuned_family
from ..tiles import (FAMILIES, ZHANG2025, aligned_rows_only, family_dtypes,
                     weighed_families, without_superseded)
from . import register
from ..occupancy.vector_path import SWITCH_MARGIN
from .alignment import aligned_batch, share_of
from .classes import batch_classes
from .cost_model import (BatchModel, batch_depth, kind_costs, longest_tile_bound,
                         predict_assignment, predict_gemms, predict_rows, resource_bound,
                         rows_context, start_stage_times)
from .level_search import (DENSE_COLUMNS, LADDERS, MAX_CAPS, cap_aggregates, cap_events,
                           count_le, dense_cap_aggregates, dense_rounds, family_keys,
                           first_kind, level_kinds, nudges, typed_rounds)
from .parallelism import (cu_demand, device_threads, kind_table, launch_capacity,
                          resident_tlp_and_capacity, tlp_threshold, wavefront_tlp,
                          workgroup_tlp)
from .scratch import buffer, buffers, planning
from .tiling import (PlanToBuild, gemm_lpt_order, kind_counts, make_plan, notes_for_shapes,
                     per_gemm_tiles, tile_counts, tile_grid, tile_layout)

FAMILY = ZHANG2025
assert all(a.area <= b.area for a, b in zip(FAMILY, FAMILY[1:])), "family must run small -> large"

OPTIONS = ("tlp_factor", "tlp_threshold", "occupancy_model", "tlp_model", "family", "tuned")
TLP_MODELS = ("device", "paper")
DEFAULT_TLP_MODEL = "device"
DEVICE_FACTOR = 1.0   # device rule: threshold = launch capacity x this (tlp_factor overrides)
# What a tile a GEMM may not take costs in the rule's tables: the largest float. x +
# OUT_OF_REACH is OUT_OF_REACH for every x below its half ulp (~1e292 seconds), so two
# such entries compare equal and every allowed entry compares below them, as with inf;
# unlike inf, 0 x OUT_OF_REACH is 0, so the penalty is one product of the mask.
OUT_OF_REACH = float(np.finfo(np.float64).max)


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
    predicted = predict_assignment(shapes, counts, kidx,
                                   kind_costs(arch, kinds, table, req.dtype,
                                              share=share_of(req, kinds),
                                              depth=batch_depth(arch, req.shapes)),
                                   req.mode == "per-kind") if live.any() else 0.0
    return kidx, t, threshold, notes, predicted


class BatchTables:
    """What the device rule and its bound (least_possible) read of one batch under one
    family, built once and shared by both: the rows M, N, K (float64), the live GEMMs,
    the (kind, GEMM) tile counts, which tiles are allowed (they fit, or are of the
    smallest area; ``penalty``: 0 where allowed, OUT_OF_REACH where not) and which
    divide, the start (the largest fitting tile per GEMM; for non-nested kinds from a
    table per (M, N) bucket where the bucket decides it) and the K steps (per GEMM, or
    per kind and GEMM where the tk differ; ``steps_live``: 0 for the GEMMs with no
    tiles)."""

    def __init__(self, shapes: np.ndarray, kinds, rows: "BatchTables | None" = None,
                 classes=None, full: np.ndarray | None = None):
        fk = self.fk = family_keys(tuple(kinds))
        # classes (classes.BatchClasses): ``shapes`` are its representatives, one column
        # per class, and ``full`` the batch itself (its floors are summed over it)
        cls = classes if rows is None else rows.classes
        self.classes = cls
        self.weights = None if cls is None else cls.weights
        self.inverse = None if cls is None else cls.inverse
        self.shapes = shapes
        self._full = full if rows is None else rows._full
        self.bucket = None   # (batch,) which tile heights and widths fit (non-nested kinds)
        # rows: another family's tables of the same batch, whose rows (M, N, K as
        # float64), live GEMMs and batch sums this one shares
        B, n_k = shapes.shape[0], fk["n"]
        slot = self.slot = 0 if rows is None else rows.slot + 1
        # (kinds, batch) tables in buffers kept between plans (scratch.py)
        qm, qn, gm, gn, counts, steps, steps_live = buffers(("tables", slot), (n_k, B),
                                                            np.float64, 7)
        allowed, mask, self.not_allowed, self._divides_buf = buffers(
            ("masks", slot), (n_k, B), np.bool_, 4)
        if rows is None:
            s = buffer(("rows", slot), (3, B))
            s[...] = shapes.T
        else:
            s = (rows.M, rows.N, rows.K)
        M, N, K = self.M, self.N, self.K = s[0], s[1], s[2]
        self._sums = [] if rows is None else rows._sums   # filled by floor() on first use
        inv = fk["inv"]   # reciprocals of power-of-two edges: the same quotients, faster
        if inv is None:
            self._qm = np.divide(M, fk["tm_c"], out=qm)
            self._qn = np.divide(N, fk["tn_c"], out=qn)
        else:
            self._qm = np.multiply(M, inv["tm_c"], out=qm)
            self._qn = np.multiply(N, inv["tn_c"], out=qn)
        self._gm = np.ceil(qm, out=gm)
        self._gn = np.ceil(qn, out=gn)
        self.counts = np.multiply(gm, gn, out=counts)           # (kinds, batch)
        self.live = np.minimum(M, N) > 0 if rows is None else rows.live   # M > 0 and N > 0
        if fk["nested"]:   # fitting kinds are a prefix: count them per dimension
            fit = np.minimum(count_le(fk["tm"], shapes[:, 0]), count_le(fk["tn"], shapes[:, 1]))
            self._start = np.maximum(fit - 1, 0)               # the largest fitting tile
            self.allowed = np.less_equal(fk["idx_c"], self._start, out=allowed)  # fits, or
        else:                                                                   # the smallest
            self._start = None
            if fk["start_of_bucket"] is not None:   # the bucket decides the start
                self.bucket = (count_le(fk["m_edges"], shapes[:, 0]) * (len(fk["n_edges"]) + 1)
                               + count_le(fk["n_edges"], shapes[:, 1]))
                self._start = fk["start_of_bucket"].take(self.bucket)
            self.allowed = np.less_equal(fk["tm_c"], M, out=allowed)
            allowed &= np.less_equal(fk["tn_c"], N, out=mask)
            allowed[fk["rank0_rows"]] = True   # whole rows: an OR with a column costs ~20 us
        np.logical_not(allowed, out=self.not_allowed)
        # not_allowed x OUT_OF_REACH: added to a (kinds, batch) table of seconds or work,
        # it keeps the allowed entries and lifts the rest above all of them (two fast
        # passes; a masked copy, copyto(where=), costs several times more)
        self.penalty = np.multiply(self.not_allowed, OUT_OF_REACH,
                                   out=buffer(("penalty", slot), (n_k, B), batch=B))
        if fk["one_tk"]:   # a GEMM's steps are the same for every kind: one row
            steps, steps_live = steps[:1], steps_live[:1]
        if inv is None:
            np.divide(K, fk["tk"][:1, None] if fk["one_tk"] else fk["tk_c"], out=steps)
        else:
            np.multiply(K, inv["tk1"] if fk["one_tk"] else inv["tk_c"], out=steps)
        self.steps = np.ceil(steps, out=steps)[0] if fk["one_tk"] else np.ceil(steps, out=steps)
        # steps are finite and >= 0: x 1 or x 0 is where(live, steps, 0) exactly
        self.steps_live = np.multiply(self.steps, self.live,
                                      out=steps_live[0] if fk["one_tk"] else steps_live)
        self._mask = mask
        self._divides = None

    def grid_rows(self, kind: int):
        """Kind ``kind``'s rows (M / tm, N / tn, their ceilings, K steps, tile counts, K)
        for alignment.share_for's ``grid``: GEMM by GEMM (None where the columns are
        classes). The quotients are share_for's: x (1 / edge) for a power of two, else
        x / edge."""
        if self.classes is not None:
            return None
        steps = self.steps if self.steps.ndim == 1 else self.steps[kind]
        return (self._qm[kind], self._qn[kind], self._gm[kind], self._gn[kind], steps,
                self.counts[kind], self.K)

    @property
    def divides(self) -> np.ndarray:
        """(kinds, batch): the tile divides M and N (exact tiling); on first use (only the
        rule needs it, not the bound)."""
        if self._divides is None:
            d = np.equal(self._gm, self._qm, out=self._divides_buf)
            d &= np.equal(self._gn, self._qn, out=self._mask)
            self._divides = d
        return self._divides

    @property
    def start(self) -> np.ndarray:
        """(batch,) the largest fitting tile (equal areas: the one that divides)."""
        if self._start is None:
            # keys are distinct per kind and multiples of n_k apart, so the greatest
            # key's kind is its remainder; (key + 1) x allowed - 1 is -1 where not allowed
            n_k, shape = self.fk["n"], self.allowed.shape
            key = np.multiply(self.divides, n_k, out=buffer(("key", self.slot), shape,
                                                             np.int64, shape[1]))
            key += self.fk["start_key1_c"]
            key *= self.allowed
            key -= 1
            self._start = key.max(axis=0) % n_k
        return self._start

    def floor(self, kc) -> float:
        """Whole-batch floors (cost_model.floors, on the rows already converted): the
        batch's sums are read once and shared with the other family's tables."""
        if not self._sums:
            if self.classes is None:
                M, N, K = self.M, self.N, self.K
            else:   # the whole batch's rows, as without classes
                M, N, K = self._full.T.astype(np.float64)
            MN = M * N   # the same products, in the same order, as M * K + K * N + M * N
            self._sums[:] = [float((M * K + K * N + MN).sum()), float((MN * K).sum())]
        elems, fmas = self._sums
        return max(kc.elem * elems / kc.ceil.copy_bytes_per_s, 2.0 * fmas / kc.flops_per_s)


def device_rule(req, tlp_formula: str, kinds, table, tabs=None):
    """The device rule (module docstring). Returns (kidx, TLP, threshold, notes,
    predicted seconds).

    How it is fast enough for a plan-cache miss every step (MoE batches of new
    shapes): the (kind, GEMM) tables (tile counts, fits, divides, tile time, work) are
    built kind-major, each row a whole batch, so broadcasts run long inner loops; every
    candidate of the three ladders (level_search.py) is priced from one bincount per
    aggregate over their (kind, GEMM) events and one cost_model.predict_rows call, so
    the NumPy calls of a plan do not grow with the batch or with the levels; the winner's
    kind per GEMM is built last, once."""
    arch = req.arch
    tabs = BatchTables(req.shapes, kinds) if tabs is None else tabs
    fk, live = tabs.fk, tabs.live
    counts, allowed, start, divides = tabs.counts, tabs.allowed, tabs.start, tabs.divides
    # B: the tables' columns (GEMMs, or classes of GEMMs: tabs.classes)
    n_k, rank, B = fk["n"], fk["rank"], counts.shape[1]
    inverse = tabs.inverse
    depth = batch_depth(arch, req.shapes)   # for kind factors measured per depth
    kc = kind_costs(arch, kinds, table, req.dtype, share=share_of(req, kinds), depth=depth)
    # the ladders of candidates are built from the tile times without the measured path
    # efficiencies (occupancy/vector_path.py), which only price them: the candidates are
    # those of the model the ladders were tuned on (levels at powers of two of the
    # longest start tile), and an efficiency changes which of them wins, not which exist
    # (scaling one kind's tiles moved the levels, and the search then missed plans it
    # priced better; bench/NOTES.md, session 7)
    kc_ladder = kind_costs(arch, kinds, table, req.dtype, depth=depth)
    per_kind = req.mode == "per-kind"

    given = req.options.get("tlp_threshold")
    factor = float(req.option("tlp_factor", DEVICE_FACTOR))
    device_cap = float(device_threads(arch))

    def gate(n_wg):
        """(TLP, threshold) of an assignment with n_wg tiles per kind."""
        if tlp_formula == "wavefront":
            t, capacity = resident_tlp_and_capacity(n_wg, table.tile_threads, table.active,
                                                    arch.compute_units)
            if given is not None:
                return t, float(given)
            return t, min(device_cap, factor * capacity)
        t = workgroup_tlp(n_wg, table.threads)
        if given is not None:
            return t, float(given)
        return t, min(device_cap, factor * launch_capacity(n_wg, table.tile_threads, table.active,
                                                    arch.compute_units))

    def each(kidx):
        """A kind per column -> a kind per GEMM."""
        return kidx if inverse is None else kidx.take(inverse)

    priced = {}   # (costs, kind per column) -> tile_by_tile's seconds, for this rule

    def tile_by_tile(kidx, kc=kc):
        """The seconds of a kind per column, its GEMMs priced one by one in launch order
        (cost_model.predict_gemms: what BatchModel.predict gives; it differs from the
        aggregates' price for launches of two waves only). Each tiling is priced once:
        the ladders' levels often repeat one (8 GEMMs: 13 re-pricings of 2 tilings),
        and a tiling's price depends on nothing else of this rule."""
        key = (id(kc), kidx.dtype.char, kidx.tobytes())   # kc and kc_ladder outlive it
        hit = priced.get(key)
        if hit is None:
            hit = priced[key] = _tile_by_tile(kidx, kc)
        return hit

    def _tile_by_tile(kidx, kc):
        c = counts.reshape(-1).take(kidx * B + cols)
        st = steps if fk["one_tk"] else steps.reshape(-1).take(kidx * B + cols)
        if inverse is not None:
            c, st = c.take(inverse), st.take(inverse)
        K = req.shapes[:, 2].astype(np.float64)
        return predict_gemms(kc, each(kidx), c, st, K, per_kind, floor)[0]

    notes = []
    cols = np.arange(B)
    steps, steps_live = tabs.steps, tabs.steps_live
    cs, T, work, T_allowed, c_w, cs_w = buffers("rule", counts.shape, np.float64, 6)
    np.multiply(counts, steps, out=cs)
    if tabs.weights is not None:   # what a column adds to the sums: its class's GEMMs
        counts_w = np.multiply(counts, tabs.weights, out=c_w)
        cs_w = np.multiply(cs, tabs.weights, out=cs_w)
    else:
        counts_w, cs_w = counts, cs
    start_at = start * B + cols   # each column's start in the flat (kinds, batch) tables
    start_counts = counts_w.reshape(-1).take(start_at)
    n0 = np.bincount(start, weights=start_counts, minlength=n_k)
    g0 = gate(n0)
    if not B or not live.any():
        return (each(start), *g0, notes, 0.0)

    floor = tabs.floor(kc)
    if g0[0] >= g0[1] * (1 - 1e-9):   # the largest fitting tiles fill the device: kept
        steps_start = steps_live if fk["one_tk"] else steps_live.reshape(-1).take(start_at)
        Mx0 = np.zeros(n_k)
        np.maximum.at(Mx0, start, steps_start)
        S0 = np.bincount(start, weights=cs_w.reshape(-1).take(start_at), minlength=n_k)
        s0, _, two = predict_rows(kc, n0[None], S0[None], Mx0[None], per_kind, floor, lower=True)
        s0 = tile_by_tile(start) if two[0] else float(s0[0])
        notes.append(f"cost model: the largest fitting tiles reach the TLP threshold, kept; "
                     f"predicted {s0 * 1e3:.4g} ms")
        return each(start), *g0, notes, s0

    # tile times at the start's sharing (the context in which alternatives are weighed)
    pe_k, step_k = start_stage_times(kc_ladder, n0.tolist(), per_kind)
    np.multiply(steps, np.array(step_k)[:, None], out=T)
    T += np.array(pe_k)[:, None]                                         # (kinds, batch)
    # for equal predicted work, the one that divides, then the larger: a relative
    # nudge far below any real gap
    dk = divides.any(axis=1)
    nudge0, _, d = nudges(tuple(kinds), int(fk["order_key"][dk].max()) if dk.any() else -1)
    # each entry's nudge: n0 + divides x (n1 - n0) is n1 or n0 exactly (n1 - n0 is
    # exact for two numbers this close, and so is the sum), in two unmasked passes
    nudge = np.multiply(divides, d, out=T_allowed)
    nudge += nudge0
    np.multiply(counts, T, out=work)
    work *= nudge
    work += tabs.penalty                                  # not allowed: out of reach
    np.add(T, tabs.penalty, out=T_allowed)
    T_fast = T_allowed.min(axis=0)                         # each GEMM's fastest tile
    fastest = first_kind(T_allowed == T_fast, fk)
    least = first_kind(work == work.min(axis=0), fk)
    # maxima over the live columns: tile times are positive and finite, so x 1 keeps a
    # live one and x 0 puts the others below every live one (some column is live)
    t_fast = float((T_fast * live).max())    # below this cap every GEMM is at its fastest
    t_long = float((T.reshape(-1).take(start_at) * live).max())
    n_caps = MAX_CAPS                         # the longest tiles shrink first
    for j in range(1, MAX_CAPS + 1):
        if t_long / 2.0 ** j < t_fast:
            n_caps = j
            break
    n_levels = max(n_caps + 1, n_k)
    mn = (tabs.shapes[:, 0], tabs.shapes[:, 1])
    # the one-kind candidates (below) need per-kind totals of the batch: typed_rounds
    # has them from its small (type, kind) tables
    one_kind = kc_ladder.factor is not None
    totals = None
    if B <= DENSE_COLUMNS:   # few columns: summed column by column (level_search.py)
        (r_n, r_s, r_m), round_kinds = dense_rounds(fk, mn, start, least, counts_w, cs_w,
                                                    steps_live, n_levels, tabs.bucket)
    else:
        (r_n, r_s, r_m), round_kinds, *totals = typed_rounds(
            fk, mn, start, least, counts_w, cs_w, steps_live, n_levels,
            None if fk["one_tk"] or B < 512 else np.multiply(tabs.K, live), tabs.bucket,
            totals=one_kind)
        totals = totals[0] if totals else None
    lo, hi = cap_events(work, T, allowed, fk["idx_c"] == fastest, t_long, n_caps, n_levels)
    c_n, c_s, c_m = (dense_cap_aggregates if B <= DENSE_COLUMNS else cap_aggregates)(
        lo, hi, counts_w, cs_w, steps_live, n_levels)
    # where measured factors correct the kinds' tile times (a tuned family, the device's
    # kind factors: cost_model.measured_factor), each kind on every GEMM, fitting or not,
    # is a candidate too: on the H100 one fp64 MMA kind alone beat the ladders' mixes of
    # launches by 5-15 % (bench/NOTES.md, session 8), and the corrected model prices it
    one = one_kind_rows(counts_w, cs_w, steps_live, fk, totals) if one_kind else None
    n_all = np.concatenate([r_n, c_n] + ([one[0]] if one else []))

    def kinds_at(row):
        ladder, level = divmod(row, n_levels)
        if row == 0:
            return start
        if ladder < 2:
            return round_kinds(row)
        if ladder == 2:
            return level_kinds(lo, hi, level, fk, start, live)
        return np.full(B, level, dtype=start.dtype)   # one kind on every GEMM

    first = 0
    S_all = np.concatenate([r_s, c_s] + ([one[1]] if one else []))
    M_all = np.concatenate([r_m, c_m] + ([one[2]] if one else []))

    # the candidates' waves, sharing and unscaled stage times: the same for kc and
    # kc_ladder (kind_costs: they differ in their factors only)
    context = rows_context(kc, n_all, per_kind)

    def choose(kc):
        """(best row, seconds per row, rows with a launch of two waves) of the
        candidates priced with ``kc``."""
        s_all, s_low, two = predict_rows(kc, n_all, S_all, M_all, per_kind, floor, lower=True,
                                         context=context)
        s_all = s_all.tolist()
        # the start (round 0 from it) first, then every level in turn; a candidate wins
        # only by a predicted time clearly below the best so far (ties keep the larger
        # tiles)
        best = first
        for row, sec in enumerate(s_all):
            if sec < s_all[best] * (1 - 1e-9):
                best = row
        if two.any():
            # launches of two waves: the aggregates priced them by the waves formula;
            # re-price tile by tile the best, the start and every candidate whose lower
            # bound beats the best's new price (the rest cannot win: inf below)
            is_two = two.tolist()   # read row by row: Python bools, not NumPy scalars
            exact = {best: tile_by_tile(kinds_at(best), kc) if is_two[best] else s_all[best]}
            bar = exact[best] * (1 + 1e-9)
            for row in [first, *np.flatnonzero(two & (s_low < bar)).tolist()]:
                if row not in exact and is_two[row]:
                    exact[row] = tile_by_tile(kinds_at(row), kc)
            s_all = [exact.get(row, math.inf) if is_two[row] else sec
                     for row, sec in enumerate(s_all)]
            best = first
            for row, sec in enumerate(s_all):
                if sec < s_all[best] * (1 - 1e-9):
                    best = row
        return best, s_all, two

    best, s_all, two = choose(kc)
    scaled = None if kc is kc_ladder else kc.factor != (
        1.0 if kc_ladder.factor is None else kc_ladder.factor)
    if scaled is not None and (n_all[best] * scaled).any():
        # the measured path efficiencies move a choice only by more than their fit's
        # error (vector_path.SWITCH_MARGIN): the candidate the model without them picks
        # stays unless the figures price another clearly faster. (They only shorten
        # tiles: a best without tiles of the kinds they scale is the best without them
        # too, which spares the second pricing.)
        held, _, _ = choose(kc_ladder)
        if held != best:
            if s_all[held] == math.inf:   # a two-wave candidate not re-priced above
                s_all[held] = tile_by_tile(kinds_at(held), kc)
            if s_all[best] > s_all[held] * (1 - SWITCH_MARGIN):
                best = held
    kidx = kinds_at(best)
    ladder, level = divmod(best, n_levels)
    t, th = gate(n_all[best])
    start_s = s_all[first]
    what = ("the largest fitting tiles" if best == first else
            f"{kinds[level].kind} on every GEMM" if ladder == len(LADDERS) else
            f"{LADDERS[ladder]}, level {level}")
    notes.append(f"cost model: {len(s_all)} tilings weighed at once (3 ladders of {n_levels} "
                 f"levels{', each kind alone' if one else ''}), kept {what}; predicted {s_all[best] * 1e3:.4g} ms (largest "
                 f"fitting tiles: {start_s * 1e3:.4g} ms)")
    if t < th * (1 - 1e-9):
        # every live column at the smallest area: no tiles of a larger kind in the row
        if not n_all[best][rank > 0].any():
            notes.append("threshold not reached: every GEMM already at the smallest tile")
        else:
            notes.append("threshold not reached: cost model predicts no smaller tiles faster "
                         "(TLP below the threshold only signals that smaller tiles may help)")
    return each(kidx), t, th, notes, s_all[best]


def one_kind_rows(counts_w, cs_w, steps_live, fk, totals=None):
    """(tiles, tiles x K steps, most K steps of a live GEMM), each (kinds, kinds): row k
    puts every GEMM on kind k (predict_rows' aggregates of those n_k candidates).
    ``totals``: those three per kind where the caller has them (typed_rounds, summed in
    another order): taken where every sum stays below 2**53, so that each partial sum
    of these non-negative integers is exact in any order."""
    n_k = fk["n"]
    eye = np.eye(n_k)
    if totals is not None and max(float(totals[0].max()), float(totals[1].max())) < 2.0**53:
        return eye * totals[0], eye * totals[1], eye * totals[2]
    most = steps_live.max(axis=1) if steps_live.ndim == 2 else np.full(n_k, steps_live.max())
    if most.shape[0] != n_k:   # one row of steps for every kind (one tk)
        most = np.full(n_k, most[0])
    return eye * counts_w.sum(axis=1), eye * cs_w.sum(axis=1), eye * most


RULES = {"device": device_rule, "paper": paper_rule}
MODEL_NAMES = {
    ("device", "wavefront"): "wavefront, device rule (tile threads resident per wave vs this "
                             "launch's capacity)",
    ("device", "workgroup"): "workgroup, device rule (Eq. 3: tiles x block threads vs this "
                             "launch's capacity)",
    ("paper", "wavefront"): "wavefront (zhang2025 Eq. 4, phi by occupancy)",
    ("paper", "workgroup"): "workgroup (zhang2025 Eq. 3)",
}


def family_option(name, dtype: str):
    """The kinds of the ``family`` option (None: FAMILY, the paper's Table 3): a tile-list
    family of tiles.FAMILIES whose kernels exist in ``dtype``."""
    if name is None:
        return FAMILY
    kinds = FAMILIES.get(name) if isinstance(name, str) else None
    hit = _sorted_families.get((name, dtype)) if kinds is not None else None
    if hit is not None and hit[0] is kinds:   # one tuple per family: memos find it by id
        return hit[1]
    usable = [f for f in FAMILIES if f != "magma" and dtype in family_dtypes(f)]
    if name not in usable:
        raise ValidationError(f"family must be one of {', '.join(usable)} for {dtype}, "
                              f"got {name!r}")
    out = tuple(sorted(kinds, key=lambda k: k.area))   # the rule runs small -> large
    _sorted_families[(name, dtype)] = (kinds, out)
    return out


_sorted_families: dict = {}   # (name, dtype) -> (FAMILIES[name], its kinds small -> large)


# What the default plan weighs when the caller names neither family nor mode (device
# rule only): the paper's kinds in the requested default mode, and our larger kinds
# (tiles.py) one launch per kind; the cost model's faster prediction wins.
OUR_FAMILY = {"float32": "portgemm", "float64": "portgemm-f64"}
# ... where the arch runs fp64 on AMD matrix cores (gfx90a / gfx94x: occupancy/archs.py
# MFMA), the MFMA family stands in for portgemm-f64, whose MMA kinds are only emulated
# there: the cost model predicts it 1.2-2x faster over random batches (bench/NOTES.md,
# Session 7; modelled, never measured).
AMD_MFMA_FAMILY = {"float64": "mfma-f64"}


def our_family(dtype: str, arch) -> str:
    """OUR_FAMILY's entry for ``dtype`` on ``arch`` (an Arch)."""
    if dtype in AMD_MFMA_FAMILY and has_mfma(arch, dtype):
        return AMD_MFMA_FAMILY[dtype]
    return OUR_FAMILY[dtype]


def algorithm1(req, strategy: str, tlp_formula: str, kinds=None):
    """:func:`plan_with`, its tables in this thread's kept buffers (scratch.planning)."""
    with planning():
        return plan_with(req, strategy, tlp_formula, kinds)


def plan_with(req, strategy: str, tlp_formula: str, kinds=None):
    """Plan with ``tlp_formula`` "wavefront" or "workgroup" under the request's
    ``tlp_model`` rule. Under the device rule with neither ``family`` nor a mode named,
    two launch structures are weighed and the one the cost model predicts faster is
    returned: the paper's family (FAMILY) in the strategy's default mode, and our
    family (OUR_FAMILY, 32x32 to 128x128 tiles) one launch per kind. Only the winner's
    plan is built (its GEMM order and tile layout): the loser costs its rule alone, or
    only its lower bound (least_possible) where that already exceeds the winner's
    prediction."""
    auto = (kinds is None and req.options.get("family") is None and not req.mode_given
            and req.option("tlp_model", DEFAULT_TLP_MODEL) == "device"
            and req.dtype in OUR_FAMILY)
    use_tuned = req.option("tuned", True)
    if use_tuned not in (True, False):
        raise ValidationError(f"tuned must be True or False, got {use_tuned!r}")
    if not auto:
        return _build(req, strategy, tlp_formula, _choose(req, tlp_formula, kinds))
    # a tuned family for this device (occupancy/tuned.py: ours plus the sweep's additions)
    # stands in for ours, unless tuned=False
    tuned = tuned_family(req.arch.name, req.dtype) if use_tuned else None
    name = "tuned" if tuned else our_family(req.dtype, req.arch)
    ours_req = dataclasses.replace(req, mode="per-kind", options={
        **req.options, "family": our_family(req.dtype, req.arch)})
    kinds, ours_kinds = _kinds(req, kinds), _kinds(ours_req, tuned.kinds if tuned else None)
    # both families' tables over the batch's classes where they pay (classes.py)
    cls = batch_classes(req.shapes, kinds + ours_kinds)
    tabs_p = BatchTables(req.shapes if cls is None else cls.shapes, kinds, classes=cls,
                         full=req.shapes)
    tabs_o = BatchTables(tabs_p.shapes, ours_kinds, tabs_p)
    # the batch's depth (kind factors per depth) from the tables' rows where they are
    # the batch's own (every later ask finds it kept)
    batch_depth(req.arch, req.shapes, (tabs_p.M, tabs_p.N, tabs_p.K) if cls is None else None)
    after = (f"tuned: {tuned.path}",) if tuned else ()
    paper = f"{FAMILY[0].family} {req.mode}"
    # The structure with the lower bound is planned first; the other is planned only if
    # its bound leaves it a chance (ties go to the paper's kinds), so a batch whose
    # winner is clear pays for one rule and a bound.
    # Both bounds include the longest tile (cost_model.longest_tile_bound: tight for small
    # batches, whose few tiles leave the device idle), so more small batches plan one
    # structure only; the plan is the same (a structure skipped cannot win), and its note
    # quotes the bound ("at least ... ms: not planned"). A replan inside another plan
    # (split-K's slices, Request.inner) plans first the structure its parent plan chose,
    # bounding only the other.
    parent = req.inner if isinstance(req.inner, str) else None
    ours_first = (True if parent == ours_kinds[0].family else
                  False if parent == kinds[0].family else None)
    # ours is weighed against the paper's kinds as they are priced: without the device's
    # measured kind factors, which the paper's fused launch has none of (like_for_like)
    lo, alike = like_for_like(ours_req, ours_kinds, {k.engine for k in kinds}, tabs_o.floor) \
        if req.dtype in LIKE_FOR_LIKE else (1.0, lambda choice, against: choice.predicted * 1e3)
    if ours_first is not False:
        lb_p = least_possible(req, kinds, tabs_p)
    if ours_first is not True:
        lb_o = least_possible(ours_req, ours_kinds, tabs_o) * lo
    if ours_first if ours_first is not None else lb_o < lb_p:
        ours = _choose(ours_req, tlp_formula, ours_kinds, tabs_o)
        o_ms, o_cmp = ours.predicted * 1e3, alike(ours, lb_p * 1e3 / (1 + 1e-6))
        if lb_p * 1e3 > o_cmp * (1 + 1e-6):
            return _build(ours_req, strategy, tlp_formula, ours, (
                f"launch structure: {name} per-kind predicted {o_ms:.4g} ms"
                f"{unfactored(o_cmp, lb_p * 1e3 > o_ms * (1 + 1e-6), ' (', ')')}, faster than "
                f"{paper} can be (at least {lb_p * 1e3:.4g} ms: not planned)",) + after)
        chosen = _choose(req, tlp_formula, kinds, tabs_p)
    else:
        chosen = _choose(req, tlp_formula, kinds, tabs_p)
        p_ms = chosen.predicted * 1e3
        if lb_o * 1e3 >= p_ms * (1 + 1e-6):
            return _build(req, strategy, tlp_formula, chosen, (
                f"launch structure: {paper} predicted {p_ms:.4g} ms, faster than {name} "
                f"per-kind can be (at least {lb_o * 1e3:.4g} ms: not planned)",) + after)
        ours = _choose(ours_req, tlp_formula, ours_kinds, tabs_o)
    p_ms, o_ms = chosen.predicted * 1e3, ours.predicted * 1e3
    o_cmp = alike(ours, p_ms)
    if o_cmp < p_ms:
        return _build(ours_req, strategy, tlp_formula, ours, (
            f"launch structure: {name} per-kind predicted {o_ms:.4g} ms"
            f"{unfactored(o_cmp, o_ms < p_ms, ' (', ')')}, faster than {paper} "
            f"({p_ms:.4g} ms)",) + after)
    return _build(req, strategy, tlp_formula, chosen, (
        f"launch structure: {paper} predicted {p_ms:.4g} ms, no "
        f"slower than {name} per-kind ({o_ms:.4g} ms{unfactored(o_cmp, o_ms >= p_ms, '; ')})",)
        + after)


# dtypes whose launch-structure choice weighs ours without the measured kind factors
# (like_for_like): fp32, where the factored choice was measured worse (session 8). fp64
# keeps the factored choice its own session measured (bench/fp64_default.py); like for
# like would move plans of its non-default configurations that no one has timed.
LIKE_FOR_LIKE = ("float32",)


def like_for_like(req, kinds, engines, floor=None):
    """(lo, price): ``price(choice, against)``, the milliseconds of ``choice`` (a _Choice of
    ``kinds``) predicted without the device's measured kind factors of its kinds on
    ``engines`` (those of the paper's family), exact where that decides whether it is
    below ``against`` (ms), else a figure on the same side of it; ``lo``: the least ratio
    of that price to the factored one, for a lower bound. The paper's family runs fused,
    where no factor was measured (a fused kernel's tiles run with other figures), so our
    kinds of its engine are weighed against it with the model both are priced by, and
    the factors choose among our kinds; kinds of another engine (fp64's MMA kinds) keep
    theirs, which correct how the model prices that engine. On the H100, fp32
    (bench/NOTES.md, session 8): the 32x32 kind's factor (0.92) alone moved two small
    batches from the paper's fused tiles to ours, measured 6-8 % slower. ``floor``: the
    batch's floors of a KindCosts (BatchTables.floor: cost_model.floors' number) where
    the caller has them."""
    def factored(choice, against):
        return choice.predicted * 1e3
    table = kind_table(req.arch, kinds, req.mode, req.dtype,
                       req.option("occupancy_model", "exact"), resources=req.resources)
    depth = batch_depth(req.arch, req.shapes)
    with_f = kind_costs(req.arch, kinds, table, req.dtype, depth=depth)
    if with_f.factor is None:
        return 1.0, factored
    without = kind_costs(req.arch, kinds, table, req.dtype, depth=depth, kind_factors=False)
    kf, lo, hi = _device_factors(with_f, without, kinds, engines)
    if kf is None:
        return 1.0, factored

    priced = {}   # id(choice) -> (choice, its price): plan_with may ask twice

    def price(choice, against):
        o_ms = choice.predicted * 1e3
        if o_ms * hi < against or o_ms * lo >= against:   # decided without pricing it
            return o_ms * hi if o_ms * hi < against else o_ms * lo
        hit = priced.get(id(choice))
        if hit is None or hit[0] is not choice:
            hit = priced[id(choice)] = (choice, exact(choice, o_ms))
        return hit[1]

    def exact(choice, o_ms):
        kc = kind_costs(req.arch, kinds, table, req.dtype, share=share_of(req, kinds),
                        depth=depth)
        plain = kept_for(_plain_memo, kc, (id(kc), kf.tobytes()), 64,
                         lambda: dataclasses.replace(kc, factor=kc.factor / kf))
        # one model of the batch for both prices: the factors change no floor
        model = BatchModel(req.shapes, tile_counts(req.shapes, kinds), kc, True,
                           None if floor is None else floor(kc))
        t = model.predict(choice.kidx)[0]
        return o_ms * model.predict(choice.kidx, plain)[0] / t if t > 0 else o_ms
    return lo, price


def _device_factors(with_f, without, kinds, engines):
    """like_for_like's (kf, lo, hi): the device's kind factors of ``kinds`` on
    ``engines`` (1 elsewhere; kf None where all are 1) and the least and greatest ratio
    of a price without them to one with them; memoised per pair of KindCosts (shared and
    read-only) and engines."""
    def make():
        kf = with_f.factor / (1.0 if without.factor is None else without.factor)
        kf = np.where([k.engine in engines for k in kinds], kf, 1.0)
        if (kf == 1.0).all():
            return None, 1.0, 1.0
        # tile times scale by 1 / kf, launches and floors not: the price lies between
        return kf, min(1.0, 1.0 / float(kf.max())), max(1.0, 1.0 / float(kf.min()))
    key = (id(with_f), id(without), frozenset(engines))
    hit = _factors_memo.get(key)
    if hit is None or hit[0] is not with_f or hit[1] is not without:
        if len(_factors_memo) >= 64:
            _factors_memo.clear()
        hit = _factors_memo[key] = (with_f, without, make())
    return hit[2]


_factors_memo: dict = {}   # like_for_like's device factors per pair of KindCosts
_plain_memo: dict = {}     # a KindCosts without the device's kind factors, per KindCosts


def unfactored(o_cmp: float, same: bool, before: str, after: str = "") -> str:
    """The like-for-like price in a launch-structure note, where it decided otherwise
    than the factored one would have (else nothing: the note reads as before)."""
    return "" if same else f"{before}{o_cmp:.4g} ms without the measured kind factors{after}"


def least_possible(req, kinds, tabs: BatchTables) -> float:
    """A lower bound on the seconds the cost model predicts for any tiling the device
    rule can choose for ``kinds`` in the request's mode: every GEMM at its allowed kind
    of least *resource time* (cost_model.resource_bound). A few passes over the batch's
    tables, which the rule then reuses; it lets algorithm1 skip planning a structure
    that cannot win. Also bound by the longest tile (cost_model.longest_tile_bound:
    tighter for small batches, whose few tiles leave the device idle)."""
    if not tabs.live.any():
        return 0.0
    table = kind_table(req.arch, kinds, req.mode, req.dtype,
                       req.option("occupancy_model", "exact"), resources=req.resources)
    depth = batch_depth(req.arch, req.shapes)
    # the vector share from these tables' tile grids (the batch's own, GEMM by GEMM),
    # on the large batches' path
    grid = (tabs.grid_rows if tabs.shapes is req.shapes and req.batch > DENSE_COLUMNS
            else None)
    kc = kind_costs(req.arch, kinds, table, req.dtype, share=share_of(req, kinds, grid),
                    depth=depth)
    # the rule's one-kind candidates may put a GEMM on a tile that does not fit it
    one_kind = kind_costs(req.arch, kinds, table, req.dtype, depth=depth).factor is not None
    penalty, per_kind = 0.0 if one_kind else tabs.penalty, req.mode == "per-kind"
    # the longest tile only where it can be the bound's largest term: from the large
    # batches' path on (DENSE_COLUMNS), first a cap that shows it is not
    capped = tabs.counts.shape[1] > DENSE_COLUMNS
    return resource_bound(kc, tabs.counts, tabs.steps, penalty, per_kind, tabs.floor(kc),
                          tabs.inverse, lambda above: longest_tile_bound(
                              kc, tabs.steps, penalty, tabs.live, per_kind,
                              above if capped else None, tabs.fk["free"]))


@dataclasses.dataclass(frozen=True)
class _Choice:
    """What a rule chose for one family and mode, before any plan is built."""
    kinds: tuple
    table: object
    rule: str
    kidx: np.ndarray
    tlp: float
    threshold: float
    notes: list
    predicted: float    # seconds


def _kinds(req, kinds=None) -> tuple:
    """``kinds`` as a tuple, or the ``family`` option's (else FAMILY) with the kinds of
    the families weighed with it on the request's arch (tiles.weighed_families: the wgmma
    kinds beside the 16-bit and 3xtf32 families on sm_90, tiles.without_superseded), the
    16-bit ones where the batch's rows are aligned (aligned_batch, tiles.ANY_ROWS)."""
    if kinds is not None:
        return tuple(kinds)
    name = req.options.get("family")
    fams = weighed_families(name, req.arch.name)
    # the batch's alignment (a pass over it) only where a partner needs aligned rows
    if any(aligned_rows_only(f) for f in fams[1:]) \
            and not aligned_batch(req.shapes, req.dtype, req.aligned):
        fams = weighed_families(name, req.arch.name, aligned=False)
    if len(fams) == 1:
        return family_option(name, req.dtype)
    key = (fams, req.dtype)
    hit = _weighed.get(key)
    if hit is None:
        kinds = without_superseded([k for f in fams for k in family_option(f, req.dtype)])
        hit = _weighed[key] = tuple(sorted(kinds, key=lambda k: k.area))
    return hit


_weighed: dict = {}   # (families, dtype) -> their kinds, small -> large


def _choose(req, tlp_formula: str, kinds=None, tabs=None) -> _Choice:
    """The rule's choice for ``kinds`` (default: the ``family`` option, else FAMILY;
    any tuple of TileConfig, small -> large); ``tabs``: the batch's BatchTables for them,
    if the caller has them."""
    kinds = _kinds(req, kinds)
    rule = req.option("tlp_model", DEFAULT_TLP_MODEL)
    if rule not in RULES:
        raise ValidationError(f"tlp_model must be one of {', '.join(TLP_MODELS)}, got {rule!r}")
    table = kind_table(req.arch, kinds, req.mode, req.dtype,
                       req.option("occupancy_model", "exact"), resources=req.resources)
    # looked up by name at call time, so bench/plan_time.py can time the rule on its own
    if rule == "device":
        kidx, t, threshold, rule_notes, predicted = device_rule(req, tlp_formula, kinds, table,
                                                                tabs)
    else:
        kidx, t, threshold, rule_notes, predicted = paper_rule(req, tlp_formula, kinds, table)
    return _Choice(kinds, table, rule, kidx, t, threshold, rule_notes, predicted)


def _build(req, strategy: str, tlp_formula: str, c: _Choice, more_notes: tuple = ()):
    """The plan of a choice: one tile per block, longest tiles first (all tiles of a
    GEMM cost the same). An inner replan's (Request.inner) is built when asked
    (tiling.PlanToBuild): split-K builds only the candidate it keeps."""
    if req.inner:
        return PlanToBuild(c.predicted * 1e3, lambda: _build_now(req, strategy, tlp_formula,
                                                                   c, more_notes))
    return _build_now(req, strategy, tlp_formula, c, more_notes)


def _build_now(req, strategy: str, tlp_formula: str, c: _Choice, more_notes: tuple = ()):
    shapes, kinds, kidx = req.shapes, c.kinds, c.kidx
    notes = notes_for_shapes(shapes) + list(c.notes) + list(more_notes)
    # each GEMM's tile and tile grid, once: for the order and for the layout
    tm, tn, gm, gn = per_gemm_tiles(shapes, kinds, kidx)
    cost = tm * tn * shapes[:, 2]   # integers (< 2**45): the order of their float64 values
    if req.mode == "per-kind":  # one launch per kind: kinds contiguous, heaviest first
        # each GEMM's own tile count (its kind only, not the whole (GEMM, kind) grid);
        # inside a kind, tm x tn is one number, so K orders its GEMMs as their cost
        # does, in a key of fewer bits (often one 16-bit counting sort)
        order = gemm_lpt_order(shapes[:, 2], kidx, cost.astype(np.float64) * (gm * gn))
    else:
        order = gemm_lpt_order(cost)
    layout = tile_layout(shapes, kinds, kidx, gemm_order=order,   # the list: on first read
                         per_gemm=(tm, tn, gm, gn))
    return make_plan(req, strategy, kinds, layout, None, c.tlp, c.threshold,
                     MODEL_NAMES[(c.rule, tlp_formula)], c.table.occupancy, notes,
                     predicted_ms=c.predicted * 1e3)


@register("wavefront-tlp", modes=("fused", "per-kind"), options=OPTIONS)
def plan_wavefront(req):
    return algorithm1(req, "wavefront-tlp", "wavefront")
