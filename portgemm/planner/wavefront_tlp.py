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

Split-K is decided after this rule, by planner/split_k.py: it reruns the rule on the
GEMMs' K slices and keeps the split plan where the cost model predicts it faster.
"""
from __future__ import annotations

import dataclasses
import math
from functools import lru_cache

import numpy as np

from ..errors import ValidationError
from ..occupancy.tuned import tuned_family
from ..tiles import FAMILIES, FAMILY_DTYPES, ZHANG2025
from . import register
from .cost_model import kind_costs, predict_assignment, predict_rows, start_stage_times
from .parallelism import (cu_demand, device_threads, kind_table, launch_capacity, resident_tlp,
                          tlp_threshold, wavefront_tlp, workgroup_tlp)
from .tiling import (cdiv_array, gemm_lpt_order, kind_counts, kind_edges, make_plan,
                     notes_for_shapes, tile_grid, tile_layout)

FAMILY = ZHANG2025
assert all(a.area <= b.area for a, b in zip(FAMILY, FAMILY[1:])), "family must run small -> large"

OPTIONS = ("tlp_factor", "tlp_threshold", "occupancy_model", "tlp_model", "family", "tuned")
TLP_MODELS = ("device", "paper")
DEFAULT_TLP_MODEL = "device"
MAX_CAPS = 8          # tau = longest tile / 2**j, j = 1..MAX_CAPS
# Families of up to this many kinds price their rounds over GEMM types (kinds^2 x
# 2^kinds of them: 16,384 at 8); larger ones per GEMM.
MAX_TYPED_KINDS = 8
DEVICE_FACTOR = 1.0   # device rule: threshold = launch capacity x this (tlp_factor overrides)
# Passes that build (candidates x batch) temporaries sweep the batch in chunks of at most
# this many GEMMs: larger temporaries are fresh pages every call (the allocator hands big
# blocks back to the system when they are freed, and faults them in again), which costs
# more than the arithmetic on them. The chunks' sums are of integers, so exact in any
# order.
CHUNK = 2048


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


@lru_cache(maxsize=64)
def _family_keys(kinds: tuple):
    """Per-family constants of the device rule (memoised per kind tuple): tm, tn, tk as
    float rows; the dense area rank (equal areas share one); the start's key (larger
    rank, then divides, then larger index); the shrink order's key; whether a shrink is
    simply "one kind down" (distinct areas, tm and tn never shrinking as tiles grow, so
    every tile no larger than one that fits also fits); whether every kind has one tk."""
    n = len(kinds)
    tm = np.array([k.tm for k in kinds], dtype=np.float64)
    tn = np.array([k.tn for k in kinds], dtype=np.float64)
    tk = np.array([k.tk for k in kinds], dtype=np.float64)
    area = np.array([k.area for k in kinds], dtype=np.int64)
    rank = np.unique(area, return_inverse=True)[1].astype(np.int64).reshape(-1)
    idx = np.arange(n)
    simple = bool((rank == idx).all() and (np.diff(tm) >= 0).all() and (np.diff(tn) >= 0).all())
    col = lambda a: a[:, None]  # noqa: E731  (a kind column against a batch row)
    return {"kinds": kinds, "tm": tm, "tn": tn, "tk": tk, "rank": rank, "idx": idx, "n": n,
            "tm_c": col(tm), "tn_c": col(tn), "tk_c": col(tk), "idx_c": col(idx),
            "start_key_c": col(rank * (2 * n) + idx), "order_key": rank * n + idx,
            "rank0_c": col(rank == 0), "simple": simple, "one_tk": bool((tk == tk[0]).all()),
            "bits": np.left_shift(1, idx).astype(np.int64)}


def _shrink_table(fk, allowed):
    """(kinds, batch): for kind k and GEMM i, the next smaller allowed kind (largest
    (rank, index) of a strictly smaller rank), k itself where there is none."""
    rank, n = fk["rank"], fk["n"]
    out = np.empty(allowed.shape, dtype=np.int64)
    below = np.full(allowed.shape[1], -1, dtype=np.int64)
    order = np.lexsort((fk["idx"], rank))
    pos = 0
    while pos < n:                       # rank groups, smallest first
        r = rank[order[pos]]
        group = [int(k) for k in order[pos:] if rank[k] == r]
        for k in group:
            out[k] = np.where(below >= 0, below, k)
        for k in group:                  # ascending index: the larger index wins
            below = np.where(allowed[k], k, below)
        pos += len(group)
    return out


# From this many GEMMs on, _argmin_kinds walks the kinds' rows instead of numpy's argmin
# along the short axis (which copies the table to make that axis contiguous).
_ROW_ARGMIN_MIN = 4096


def _argmin_kinds(v: np.ndarray) -> np.ndarray:
    """v.argmin(axis=0) of a (kinds, batch) table (the first least on ties); for large
    batches as a few passes over whole rows."""
    if v.shape[1] < _ROW_ARGMIN_MIN:
        return v.argmin(axis=0)
    best = v[0]
    idx = np.zeros(v.shape[1], dtype=np.int64)
    for k in range(1, v.shape[0]):
        better = v[k] < best
        best = np.where(better, v[k], best)
        idx[better] = k
    return idx


def _prefix_argmin(v: np.ndarray) -> np.ndarray:
    """(kinds, batch) int64: row m holds v[:m + 1].argmin(axis=0) (the first least)."""
    out = np.empty(v.shape, dtype=np.int64)
    out[0] = 0
    best = v[0]
    for k in range(1, v.shape[0]):
        better = v[k] < best
        best = np.where(better, v[k], best)
        out[k] = np.where(better, k, out[k - 1])
    return out


@lru_cache(maxsize=256)
def _nudges(kinds: tuple, top_dividing: int):
    """(not dividing, dividing) columns of the relative nudge that breaks ties of equal
    predicted work: 1 + 1e-10 (1 - key / max key), key = divides x kinds^2 + rank x
    kinds + index; the max key over the batch is set by the largest dividing kind's key
    (``top_dividing``, -1: none divides) or else by the largest kind's."""
    fk = _family_keys(kinds)
    n_k, key = fk["n"], fk["order_key"]
    key_max = max(int(key.max()), 1)    # 0 only for one kind, where no tie is to break
    if top_dividing >= 0:
        key_max = max(key_max, n_k * n_k + top_dividing)
    out = tuple((1 + 1e-10 * (1 - (key + d * n_k * n_k) / key_max))[:, None] for d in (0, 1))
    for a in out:
        a.flags.writeable = False
    return out


def _built(trial):
    """A candidate's kind per GEMM (chains hand a function that builds it)."""
    return trial() if callable(trial) else trial


@lru_cache(maxsize=16)
def _chain_select(n_k: int):
    """(n_k - 1, n_k, n_k) bool, read-only: sel[j - 1, b, k] when a GEMM that starts at
    kind b is at kind k after j one-down shrinks (max(b - j, 0) == k)."""
    j = np.arange(1, n_k)[:, None, None]
    b = np.arange(n_k)[None, :, None]
    k = np.arange(n_k)[None, None, :]
    out = np.maximum(b - j, 0) == k
    out.flags.writeable = False
    return out


def _one_down_chains(bases, counts, cs, steps_live, one_tk: bool):
    """Algorithm 1's rounds where a shrink is one kind down (a "simple" family), from
    each start in ``bases``: round j puts GEMM i at max(kidx[i] - j, 0), so every
    round's per-kind aggregates come from one (start kind, kind) table per start, all
    from one matrix product, with no pass over the GEMMs per round. ``counts``, ``cs``
    (tiles x steps) are (kinds, batch); ``steps_live`` broadcasts to them. Returns per
    start [trials (functions building each round's kinds), tiles, tiles x steps, most
    steps], or [] when no GEMM can shrink."""
    n_k = counts.shape[0]
    kinds = np.arange(n_k)
    # per (start kind b, kind k): tiles and tiles x steps of the GEMMs starting at b,
    # as one product with the starts' indicators (integers: exact in any order), per
    # chunk of CHUNK GEMMs
    X = np.concatenate([counts, cs])
    B = X.shape[1]
    tab = None
    for a in range(0, B, CHUNK):
        onehot = np.concatenate([kidx[a:a + CHUNK] == kinds[:, None]
                                 for kidx in bases]).astype(np.float64)
        part = onehot @ X[:, a:a + CHUNK].T       # (starts x b, [counts | cs] by k)
        tab = part if tab is None else tab + part
    out = []
    for i, kidx in enumerate(bases):
        rounds = min(n_k - 1, int(kidx.max()))
        if rounds <= 0:
            out.append([])
            continue
        tab_n, tab_s = tab[i * n_k:(i + 1) * n_k, :n_k], tab[i * n_k:(i + 1) * n_k, n_k:]
        if one_tk:    # steps per GEMM: the most per start kind, the same for every kind
            most = np.zeros(n_k)
            np.maximum.at(most, kidx, steps_live)
            tab_m = most[:, None]
        else:
            cell = (kinds * n_k)[:, None] + kidx               # k * n_k + b
            tab_m = np.zeros(n_k * n_k)
            np.maximum.at(tab_m, cell.reshape(-1), steps_live.reshape(-1))
            tab_m = tab_m.reshape(n_k, n_k).T
        sel = _chain_select(n_k)[:rounds]
        n = (sel * tab_n).sum(axis=1)          # integers: exact in any order
        S = (sel * tab_s).sum(axis=1)
        Mx = (sel * tab_m).max(axis=1)         # steps >= 0
        trials = [lambda j=j, k=kidx: np.maximum(k - j, 0) for j in range(1, rounds + 1)]
        out.append([trials, n, S, Mx])
    return out


def _chain(n_k: int, kidx, nxt, cols):
    """Algorithm 1's rounds from ``kidx`` in any family, every GEMM one step smaller (the
    next smaller allowed tile, ``nxt``: _shrink_table's, flat) while any can shrink: the
    rounds' kinds per GEMM, [] when none can shrink."""
    B = kidx.shape[0]
    trials = []
    k = kidx
    for _ in range(n_k - 1):
        nk = nxt.take(k * B + cols)
        if np.array_equal(nk, k):
            break
        k = nk
        trials.append(k)
    return trials


def _within_caps(T, t_long: float, n_caps: int) -> np.ndarray:
    """(n_caps, batch) int8: for cap j = 1..n_caps (tau_j = t_long / 2**j), how many kinds
    of each GEMM have T <= tau_j (T: (kinds, batch), positive). Exact without dividing:
    T <= t_long / 2**j iff T 2**j <= t_long, which the binary exponents and mantissas
    of T and t_long decide (frexp), so each tile's last cap is one integer."""
    mT, eT = np.frexp(T)
    mL, eL = math.frexp(t_long)
    last = np.minimum(np.maximum(eL - eT - (mT > mL), 0), n_caps).astype(np.int8)   # within 1..last
    js = np.arange(1, n_caps + 1, dtype=np.int8)[:, None, None]
    return (last[None] >= js).sum(axis=1, dtype=np.int8)


@lru_cache(maxsize=64)
def _code_chains(kinds: tuple):
    """Algorithm 1's rounds for every set of allowed kinds (a bit mask ``code``) and start
    kind ``b``, memoised per family: (seq, length), seq (kinds, 2^kinds x kinds) int64
    with seq[j, code x kinds + b] the kind after j rounds (each the next smaller allowed
    kind, :func:`_shrink_table`'s), and length[code x kinds + b] the rounds until it
    stops shrinking. Read-only."""
    fk = _family_keys(kinds)
    n = fk["n"]
    codes = np.arange(1 << n)
    nxt = _shrink_table(fk, ((codes[None, :] >> fk["idx_c"]) & 1) == 1)   # (kinds, codes)
    seq = np.empty((n, (1 << n) * n), dtype=np.int64)
    seq[0] = np.tile(np.arange(n), 1 << n)
    col = np.repeat(codes, n)
    for j in range(1, n):
        seq[j] = nxt[seq[j - 1], col]
    length = (seq[1:] != seq[:-1]).sum(axis=0)    # a chain, once still, stays still
    for a in (seq, length):
        a.flags.writeable = False
    return seq, length


def _typed_candidates(fk, start, least, from_least: bool, allowed, counts, cs, steps_live,
                      one_tk: bool):
    """Per-kind aggregates (tiles, tiles x steps, most steps; each (C, kinds)) of the
    start, the least-work candidate and Algorithm 1's rounds from the start (and from
    the least-work candidate when ``from_least``), for a family of any shape, and the
    rounds' trials per start ([functions building each round's kinds] or []).

    Each of these candidates gives GEMM i a kind that depends only on its *type*: its
    start, its least-work kind and which kinds it allows (a bit mask), at most
    kinds^2 x 2^kinds types and in practice a few dozen. So one pass over the (kind,
    GEMM) tables sums tiles and tiles x steps, and takes the most steps, per (type,
    kind); the shrink table and the rounds then run over the types present, and every
    candidate's aggregates come from that small table (integers: the sums are exact
    in any order, so they equal the per-GEMM ones)."""
    n = fk["n"]
    B = start.shape[0]
    code = fk["bits"] @ allowed                            # allowed kinds as bits, (B,)
    typ = ((start * n + least) << n) | code
    n_typ = (n * n) << n
    flat = ((typ * n)[None, :] + fk["idx_c"]).reshape(-1)   # (type, kind) per (kind, GEMM)
    present = np.flatnonzero(np.bincount(typ, minlength=n_typ))
    t_n = np.bincount(flat, weights=counts.reshape(-1), minlength=n_typ * n)
    t_s = np.bincount(flat, weights=cs.reshape(-1), minlength=n_typ * n)
    t_m = np.zeros(n_typ * n)
    np.maximum.at(t_m, flat, (steps_live if steps_live.ndim == 2 else np.tile(steps_live, n)).reshape(-1))
    t_n, t_s, t_m = (a.reshape(n_typ, n).take(present, axis=0).T for a in (t_n, t_s, t_m))
    t_code, t_start, t_least = present & ((1 << n) - 1), (present >> n) // n, (present >> n) % n
    seq, length = _code_chains(fk["kinds"])
    rounds = []
    for b in ([t_start, t_least] if from_least else [t_start]):
        cell = t_code * n + b                    # the types' (allowed kinds, start) rows
        r = int(length.take(cell).max())         # rounds until no type shrinks
        rounds.append(list(seq[1:r + 1].take(cell, axis=1)))
    cols = np.arange(present.shape[0])
    agg = _aggregates(np.stack([t_start, t_least, *(r for rs in rounds for r in rs)]),
                      t_n, t_s, t_m, False)
    where = []

    def type_of_gemm():
        """Each GEMM's position among the types present (built on first use)."""
        if not where:
            inv = np.zeros(n_typ, dtype=np.int64)
            inv[present] = cols
            where.append(inv.take(typ))
        return where[0]
    chains = [[[lambda r=r: r.take(type_of_gemm()) for r in rs]] if rs else [] for rs in rounds]
    return agg, chains


def _aggregates(cands, counts, cs, steps_live, one_tk: bool):
    """Per-kind (tiles, tiles x steps, most steps of a live GEMM), each (C, kinds), of
    the C candidates ``cands`` (C, batch): one bincount each over all of them (per chunk
    of CHUNK GEMMs, added up)."""
    C, B = cands.shape
    n_k = counts.shape[0]
    flat_counts, flat_cs = counts.reshape(-1), cs.reshape(-1)
    g0 = (np.arange(C) * n_k)[:, None]
    n = S = Mx = None
    for a in range(0, max(B, 1), CHUNK):
        part = cands[:, a:a + CHUNK]
        flat = (part * B + np.arange(a, a + part.shape[1])).reshape(-1)
        g = (part + g0).reshape(-1)
        n_c = np.bincount(g, weights=flat_counts.take(flat), minlength=C * n_k)
        S_c = np.bincount(g, weights=flat_cs.take(flat), minlength=C * n_k)
        # flat index and values of its shape: numpy 2.4's ufunc.at reads past values
        # broadcast against a 2-D index
        vals = (np.concatenate([steps_live[a:a + CHUNK]] * C) if one_tk
                else steps_live.reshape(-1).take(flat))
        if n is None:
            n, S, Mx = n_c, S_c, np.zeros(C * n_k)
        else:
            n += n_c
            S += S_c
        np.maximum.at(Mx, g, vals)
    return n.reshape(C, n_k), S.reshape(C, n_k), Mx.reshape(C, n_k)


def device_rule(req, tlp_formula: str, kinds, table):
    """The device rule (module docstring). Returns (kidx, TLP, threshold, notes,
    predicted seconds).

    How it is fast enough for a plan-cache miss every step (MoE batches of new
    shapes): the (kind, GEMM) tables (tile counts, fits, divides, tile time, work) are
    built kind-major, each row a whole batch, so broadcasts run long inner loops.
    Every candidate is a kind per GEMM, and the model needs of it only per-kind
    aggregates (tiles, tiles x K steps, most K steps): the capped candidates get them
    from one bincount each over a (candidates, batch) matrix; in a nested family the
    start and least-work ones too, and Algorithm 1's rounds from one (start kind, kind)
    table; in any other family the start, least-work and rounds from one table over GEMM
    *types* (start, least-work kind, allowed kinds: _typed_candidates), the rounds of
    each type memoised per family. cost_model.predict_rows prices them all in one call,
    and the rule's sequential choice then runs over Python floats (the gate is evaluated
    only when the best changes). Where the family's tiles are nested (a prefix of the
    kinds fits) and a tile's time grows with its size, each candidate is a lookup in one
    least-work-among-a-prefix table instead of an argmin, every cap's at once
    (_within_caps). The choices are those of the one-candidate-at-a-time reading
    (tests/test_planner_rule_speed.py keeps a frozen copy of it and compares; plans of
    every strategy also match digests recorded before, tests/test_planner_digests.py)."""
    arch, shapes = req.arch, req.shapes
    fk = _family_keys(tuple(kinds))
    n_k, rank, B = fk["n"], fk["rank"], req.batch
    kc = kind_costs(arch, kinds, table, req.dtype)
    per_kind = req.mode == "per-kind"
    s = shapes.T.astype(np.float64)
    M, N, K = s[0], s[1], s[2]
    tm, tn = fk["tm_c"], fk["tn_c"]
    gm = np.ceil(M / tm)
    gn = np.ceil(N / tn)
    counts = gm * gn                                       # (kinds, batch)
    divides = (gm * tm == M) & (gn * tn == N)
    live = (M > 0) & (N > 0)
    if fk["simple"]:   # fitting kinds are a prefix: count them per dimension
        fit = np.minimum(np.searchsorted(fk["tm"], M, "right"),
                         np.searchsorted(fk["tn"], N, "right"))
        start = np.maximum(fit - 1, 0)                     # the largest fitting tile
        allowed = fk["idx_c"] <= start                     # fits, or the smallest
    else:
        allowed = ((tm <= M) & (tn <= N)) | fk["rank0_c"]  # fits, or among the smallest
        # largest fitting (equal areas: the one that divides)
        # (keys are distinct among the allowed, and the smallest is always allowed: the
        # least negated key is the one greatest key; _argmin_kinds walks rows when large)
        start = _argmin_kinds(np.where(allowed, -(divides * n_k + fk["start_key_c"]), 1))

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
    cols = np.arange(B)
    flat_counts = counts.reshape(-1)
    if not B or not live.any():
        cnt = flat_counts.take(start * B + cols)
        return (start, *gate(np.bincount(start, weights=cnt, minlength=n_k)), notes, 0.0)

    # K steps per GEMM (and kind, where the tk differ); dead GEMMs count 0 in the max
    steps = np.ceil(K / fk["tk"][0]) if fk["one_tk"] else np.ceil(K / fk["tk_c"])
    steps_live = np.where(live, steps, 0.0)
    cs = counts * steps
    # whole-batch floors (cost_model.floors, on the rows already converted)
    floor = max(kc.elem * float((M * K + K * N + M * N).sum()) / kc.ceil.copy_bytes_per_s,
                2.0 * float((M * N * K).sum()) / kc.flops_per_s)

    def aggregates(cands):
        return _aggregates(cands, counts, cs, steps_live, fk["one_tk"])

    n0 = np.bincount(start, weights=flat_counts.take(start * B + cols), minlength=n_k)
    # tile times at the start's sharing (the context in which alternatives are weighed)
    pe_k, step_k = start_stage_times(kc, n0.tolist(), per_kind)
    T = np.array(pe_k)[:, None] + steps * np.array(step_k)[:, None]     # (kinds, batch)
    # for equal predicted work, the one that divides, then the larger: a relative
    # nudge far below any real gap
    dk = divides.any(axis=1)
    nudge = _nudges(tuple(kinds), int(fk["order_key"][dk].max()) if dk.any() else -1)
    work = np.where(allowed, counts * T * np.where(divides, nudge[1], nudge[0]), np.inf)
    # Where the allowed tiles are a prefix of the kinds and a tile's time never falls
    # as tiles grow (every GEMM's fastest tile is the smallest, and the tiles no longer
    # than a cap are a prefix too), every candidate is a least-work-among-a-prefix
    # lookup in one table; otherwise argmins over the masked table.
    prefix = fk["simple"] and fk["one_tk"] and all(
        a <= b for a, b in zip(pe_k, pe_k[1:])) and all(a <= b for a, b in zip(step_k, step_k[1:]))
    if prefix:
        P = _prefix_argmin(work).reshape(-1)          # least work among kinds 0..m
        fastest = np.zeros(B, dtype=np.int64)
        T_fast = T[0]
        least = P.take(start * B + cols)

        def capped(tau):
            """Least work among tiles no longer than tau (none: the fastest tile)."""
            last = np.count_nonzero(T <= tau, axis=0) - 1   # the longest within tau
            trial = P.take(np.maximum(np.minimum(last, start), 0) * B + cols)
            return np.where(last < 0, fastest, trial)
    else:
        T_allowed = np.where(allowed, T, np.inf)
        fastest = _argmin_kinds(T_allowed)
        T_fast = T_allowed.min(axis=0)                    # T of each GEMM's fastest tile
        least = _argmin_kinds(work)                       # least predicted work per GEMM

        def capped(tau):
            """Least work among tiles no longer than tau (none: the fastest tile)."""
            trial = _argmin_kinds(np.where(T <= tau, work, np.inf))
            return np.where(T_fast > tau, fastest, trial)
    t_fast = float(T_fast[live].max())    # below this cap every GEMM is at its fastest
    t_long = float(T.reshape(-1).take(start * B + cols)[live].max())

    n_caps = MAX_CAPS                         # the longest tiles shrink first
    for j in range(1, MAX_CAPS + 1):
        if t_long / 2.0 ** j < t_fast:
            n_caps = j
            break
    if prefix and float(T_fast.min()) > 0:    # every cap at once
        caps = list(P.take(np.maximum(np.minimum(_within_caps(T, t_long, n_caps) - 1, start),
                                      0) * B + cols))
    else:
        caps = [capped(t_long / 2.0 ** j) for j in range(1, n_caps + 1)]
    # Algorithm 1's rounds start from the best after the least-work candidate: the
    # start or that candidate; both chains are priced with the rest, in one call
    bases = [start] if np.array_equal(least, start) else [start, least]
    first = np.stack([start, least] + caps)
    if fk["simple"]:
        chains = _one_down_chains(bases, counts, cs, steps_live, fk["one_tk"])
        agg = [aggregates(first)] + [c[1:] for c in chains if c]
        n_all, S_all, M_all = (np.concatenate(x) for x in zip(*agg))
    elif n_k > MAX_TYPED_KINDS:   # too many kinds to type GEMMs by: every row per GEMM
        nxt = _shrink_table(fk, allowed).reshape(-1)
        rounds = [_chain(n_k, b, nxt, cols) for b in bases]
        chains = [[r] if r else [] for r in rounds]
        n_all, S_all, M_all = aggregates(np.concatenate([first, *(np.stack(r) for r in rounds
                                                                  if r)]))
    else:   # start, least and the rounds from a table over GEMM types; caps per GEMM
        typed, chains = _typed_candidates(fk, start, least, len(bases) == 2, allowed, counts,
                                          cs, steps_live, fk["one_tk"])
        capped_agg = aggregates(first[2:])
        n_all, S_all, M_all = (np.concatenate([t[:2], c, t[2:]])
                               for t, c in zip(typed, capped_agg))
    # the sequential choice below runs over Python floats and lists (one conversion each)
    s_all = predict_rows(kc, n_all, S_all, M_all, per_kind, floor).tolist()
    n_rows = n_all.tolist()
    best_s = start_s = s_all[0]

    tried = kept = 0
    reached = False
    state = {"best": start, "s": best_s, "n": n_rows[0], "gate": gate(n_all[0])}

    def weigh(trial, row):
        """One candidate (row ``row`` of the priced ones) in turn; False when the best so
        far has reached the threshold."""
        nonlocal tried, kept, reached
        t, th = state["gate"]
        if t >= th * (1 - 1e-9):
            reached = True
            return False
        if n_rows[row] == state["n"] and np.array_equal(_built(trial), state["best"]):
            return True
        tried += 1
        if s_all[row] < state["s"] * (1 - 1e-9):
            state.update(best=_built(trial), s=s_all[row], n=n_rows[row], gate=gate(n_all[row]))
            kept += 1
        return True

    go = weigh(least, 1)
    at = first.shape[0]                       # where the chains' rows begin
    for b, chain in zip(bases, chains):
        if chain and b is not state["best"]:
            at += len(chain[0])
            continue
        for i, trial in enumerate(chain[0] if (go and chain) else ()):
            go = weigh(trial, at + i)
            if not go:
                break
        break
    if go:
        for i in range(2, first.shape[0]):
            if not weigh(first[i], i):
                break
    best, best_s = state["best"], state["s"]
    t, th = state["gate"]
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


def family_option(name, dtype: str):
    """The kinds of the ``family`` option (None: FAMILY, the paper's Table 3): a tile-list
    family of tiles.FAMILIES whose kernels exist in ``dtype``."""
    if name is None:
        return FAMILY
    usable = [f for f in FAMILIES if f != "magma" and dtype in FAMILY_DTYPES.get(f, (dtype,))]
    if name not in usable:
        raise ValidationError(f"family must be one of {', '.join(usable)} for {dtype}, "
                              f"got {name!r}")
    kinds = FAMILIES[name]
    return tuple(sorted(kinds, key=lambda k: k.area))   # the rule runs small -> large


# What the default plan weighs when the caller names neither family nor mode (device
# rule only): the paper's kinds in the requested default mode, and our larger kinds
# (tiles.py) one launch per kind; the cost model's faster prediction wins.
OUR_FAMILY = {"float32": "portgemm", "float64": "portgemm-f64"}


def algorithm1(req, strategy: str, tlp_formula: str, kinds=None):
    """Plan with ``tlp_formula`` "wavefront" or "workgroup" under the request's
    ``tlp_model`` rule. Under the device rule with neither ``family`` nor a mode named,
    two launch structures are weighed and the one the cost model predicts faster is
    returned: the paper's family (FAMILY) in the strategy's default mode, and our
    family (OUR_FAMILY, 32x32 to 128x128 tiles) one launch per kind. Only the winner's
    plan is built (its GEMM order and tile layout): the loser costs its rule alone."""
    auto = (kinds is None and req.options.get("family") is None and not req.mode_given
            and req.option("tlp_model", DEFAULT_TLP_MODEL) == "device"
            and req.dtype in OUR_FAMILY)
    use_tuned = req.option("tuned", True)
    if use_tuned not in (True, False):
        raise ValidationError(f"tuned must be True or False, got {use_tuned!r}")
    chosen = _choose(req, tlp_formula, kinds)
    if not auto:
        return _build(req, strategy, tlp_formula, chosen)
    # a tuned family for this device (occupancy/tuned.py: ours plus the sweep's additions)
    # stands in for ours, unless tuned=False
    tuned = tuned_family(req.arch.name, req.dtype) if use_tuned else None
    name = "tuned" if tuned else OUR_FAMILY[req.dtype]
    ours_req = dataclasses.replace(req, mode="per-kind", options={
        **req.options, "family": OUR_FAMILY[req.dtype]})
    ours = _choose(ours_req, tlp_formula, tuned.kinds if tuned else None)
    p_ms, o_ms = chosen.predicted * 1e3, ours.predicted * 1e3
    after = (f"tuned: {tuned.path}",) if tuned else ()
    if o_ms < p_ms:
        return _build(ours_req, strategy, tlp_formula, ours, (
            f"launch structure: {name} per-kind predicted {o_ms:.4g} ms, "
            f"faster than {FAMILY[0].family} {req.mode} ({p_ms:.4g} ms)",) + after)
    return _build(req, strategy, tlp_formula, chosen, (
        f"launch structure: {FAMILY[0].family} {req.mode} predicted {p_ms:.4g} ms, no "
        f"slower than {name} per-kind ({o_ms:.4g} ms)",) + after)


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


def _choose(req, tlp_formula: str, kinds=None) -> _Choice:
    """The rule's choice for ``kinds`` (default: the ``family`` option, else FAMILY;
    any tuple of TileConfig, small -> large)."""
    if kinds is None:
        kinds = family_option(req.options.get("family"), req.dtype)
    kinds = tuple(kinds)
    rule = req.option("tlp_model", DEFAULT_TLP_MODEL)
    if rule not in RULES:
        raise ValidationError(f"tlp_model must be one of {', '.join(TLP_MODELS)}, got {rule!r}")
    table = kind_table(req.arch, kinds, req.mode, req.dtype,
                       req.option("occupancy_model", "exact"), resources=req.resources)
    # looked up by name at call time, so bench/plan_time.py can time the rule on its own
    rule_fn = device_rule if rule == "device" else paper_rule
    kidx, t, threshold, rule_notes, predicted = rule_fn(req, tlp_formula, kinds, table)
    return _Choice(kinds, table, rule, kidx, t, threshold, rule_notes, predicted)


def _build(req, strategy: str, tlp_formula: str, c: _Choice, more_notes: tuple = ()):
    """The plan of a choice: one tile per block, longest tiles first (all tiles of a
    GEMM cost the same)."""
    shapes, kinds, kidx = req.shapes, c.kinds, c.kidx
    notes = notes_for_shapes(shapes) + list(c.notes) + list(more_notes)
    tm, tn = kind_edges(kinds)
    cost = ((tm * tn).take(kidx) * shapes[:, 2]).astype(np.float64)
    if req.mode == "per-kind":  # one launch per kind: kinds contiguous, heaviest first
        # each GEMM's own tile count (its kind only, not the whole (GEMM, kind) grid)
        n_tiles = cdiv_array(shapes[:, 0], tm.take(kidx)) * cdiv_array(shapes[:, 1], tn.take(kidx))
        order = gemm_lpt_order(cost, kidx, cost * n_tiles)
    else:
        order = gemm_lpt_order(cost)
    layout = tile_layout(shapes, kinds, kidx, gemm_order=order)   # the list: on first read
    return make_plan(req, strategy, kinds, layout, None, c.tlp, c.threshold,
                     MODEL_NAMES[(c.rule, tlp_formula)], c.table.occupancy, notes,
                     predicted_ms=c.predicted * 1e3)


@register("wavefront-tlp", modes=("fused", "per-kind"), options=OPTIONS)
def plan_wavefront(req):
    return algorithm1(req, "wavefront-tlp", "wavefront")
