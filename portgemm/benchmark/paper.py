"""--paper: zhang2025 §5 on this device, in one run.

- Figs. 4/5, speed-up per method across the 12 ranges: the grid (batches 8..1024), the
  bound call of every strategy and every peer; per range, the geometric mean over batches
  of (method time / wavefront-tlp time).
- Fig. 6, occupancy per method: achieved occupancy by Nsight Compute over the 12 ranges at
  batch 64, next to the occupancy model's prediction (plan.predicted_occupancy()); all
  ncu runs together get NCU_BUDGET_S, so the whole of --paper fits one 10-minute call.
- Fig. 7, planning overhead: host time of planning (the plan cache bypassed) over
  planning + the bound call, for batch 8..1024.
- Figs. 8/9, wavefront-TLP vs workgroup-TLP: speed-up per grid case.
- Fig. 10, latency vs batch size: every method at MaxMN = MaxK = 256, batch 8..1024.
- Fig. 11, Inception layers (Table 6): speed-up per layer against each method.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np

import portgemm

from . import ncu as _ncu
from . import plots, workloads as wl
from .report import geomean, index, methods_of, speedups
from .runner import Results, run_cases

SWEEP_BATCHES = (8, 16, 32, 64, 128, 256, 512, 1024)
SWEEP_RANGE = (256, 256)
OCCUPANCY_BATCH = 64
NCU_BUDGET_S = 240   # all ncu runs together, so --paper stays within one device call


def sweep_cases(seed, batches=SWEEP_BATCHES):
    mn, k = SWEEP_RANGE
    return [wl.Case(f"sweep {mn}/{k} b{b}", wl.random_case(b, mn, k, (seed, 99, b)).shapes, mn, k)
            for b in batches]


def occupancy_cases(seed, ranges=wl.RANGES):
    return [wl.random_case(OCCUPANCY_BATCH, mn, k, (seed, 77, mn, k)) for mn, k in ranges]


def plan_seconds(shapes, arch, strategy, reps=20) -> float:
    """Median host time of one uncached plan (after one call that fills the memos)."""
    portgemm.plan(shapes, arch=arch, strategy=strategy, use_cache=False)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        portgemm.plan(shapes, arch=arch, strategy=strategy, use_cache=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _tag(res, part):
    for r in res.records:
        r["part"] = part
    return res


def run_paper(args, dev, methods, modes, budget, ceilings, meta, out) -> int:
    from .cli import emit, grid_of
    grid = grid_of(args)
    sweep = sweep_cases(args.seed, args.batches or (SWEEP_BATCHES[::3] if args.quick
                                                    else SWEEP_BATCHES))
    ranges = args.ranges or (wl.QUICK_RANGES if args.quick else wl.RANGES)
    common = dict(dtype=args.dtype, modes=modes, budget=budget, ceilings=ceilings,
                  seed=args.seed, show_progress=not args.no_progress)
    res = Results()
    parts = {}
    for part, cases in (("grid", grid), ("sweep", sweep), ("inception", wl.inception_cases())):
        r = run_cases(dev, cases, methods, desc=f"paper {part}", **common)
        parts[part] = _tag(r, part).records
        res.records += r.records
        for n in r.notes:
            res.note(n)
    primary = methods_of(res.records, "portgemm")[0] if methods_of(res.records, "portgemm") else None
    mode = modes[0]
    extra, figs = [], []
    draw = not args.no_plots
    if primary:
        extra += _ranges(parts["grid"], primary, mode, out, draw, figs)
        extra += _tlp(parts["grid"], mode, out, draw, figs)
        extra += _planning(parts["sweep"], sweep, dev, primary, mode, out, draw, figs)
        extra += _latency(parts["sweep"], mode, out, draw, figs)
        extra += _inception(parts["inception"], primary, mode, out, draw, figs)
    extra += _occupancy(args, dev, methods, ranges, out, draw, figs)
    meta = dict(meta, paper={"occupancy_batch": OCCUPANCY_BATCH, "sweep_range": SWEEP_RANGE})
    return emit("paper", "portgemm bench --paper (zhang2025 §5)", meta, ceilings, res, out,
                args.no_plots, extra=extra, plots=figs)


def _others(records, primary):
    return [m for m in methods_of(records) if m != primary]


def _ranges(records, primary, mode, out, draw, figs):
    """Figs. 4/5: per range, geomean over batches of each method's speed-up."""
    ranges = list(dict.fromkeys(r["range"] for r in records))
    by_case = {r["case"]: r["range"] for r in records}
    series = {}
    for m in _others(records, primary):
        sp = speedups(records, primary, m, mode)
        series[m] = [geomean([s for c, s in sp if by_case[c] == rg]) for rg in ranges]
    lines = ["## Figs. 4/5: speed-up of " + f"`{primary}` per range (geomean over batches, {mode})",
             "", "| range | " + " | ".join(series) + " |", "|---" * (1 + len(series)) + "|"]
    for i, rg in enumerate(ranges):
        lines.append(f"| {rg} | " + " | ".join(_x(v[i]) for v in series.values()) + " |")
    lines.append("| all | " + " | ".join(
        _x(geomean([s for _, s in speedups(records, primary, m, mode)])) for m in series) + " |")
    if draw:
        figs.append(plots.bars(ranges, series, out / "paper-fig4-5-speedup-per-range.png",
                               f"speed-up of {primary}", "speed-up per range (Figs. 4/5)",
                               hline=1.0, log=True))
    return lines + [""]


def _tlp(records, mode, out, draw, figs):
    """Figs. 8/9: bound wavefront-tlp against bound workgroup-tlp."""
    names = methods_of(records, "portgemm")
    wf = next((m for m in names if m.endswith("/wavefront-tlp")), None)
    wg = next((m for m in names if m.endswith("/workgroup-tlp")), None)
    if not (wf and wg):
        return ["## Figs. 8/9: not run (needs both wavefront-tlp and workgroup-tlp)", ""]
    sp = speedups(records, wf, wg, mode)
    batch = {r["case"]: r["batch"] for r in records}
    small = [s for c, s in sp if batch[c] <= 64]
    large = [s for c, s in sp if batch[c] > 64]
    if draw:
        figs.append(plots.bars([c for c, _ in sp], {"workgroup / wavefront time": [s for _, s in sp]},
                               out / "paper-fig8-9-tlp.png", "speed-up of wavefront-TLP",
                               "wavefront-TLP vs workgroup-TLP (Figs. 8/9)", hline=1.0))
    return ["## Figs. 8/9: wavefront-TLP vs workgroup-TLP", "",
            f"geomean speed-up {_x(geomean([s for _, s in sp]))} over {len(sp)} cases; "
            f"batch <= 64: {_x(geomean(small))}, batch > 64: {_x(geomean(large))}", ""]


def _planning(records, cases, dev, primary, mode, out, draw, figs):
    """Fig. 7: planning time / (planning + bound call) against batch size."""
    ix = index(records)
    arch = dev.be.arch()
    strategy = primary.split("/", 1)[1]
    rows, xs, shares = [], [], []
    for c in cases:
        r = ix.get((c.name, mode, primary))
        if r is None:
            continue
        plan_ms = plan_seconds(c.shapes, arch, strategy) * 1e3
        share = plan_ms / (plan_ms + r["ms"])
        xs.append(c.batch)
        shares.append(100 * share)
        rows.append(f"| {c.batch} | {plan_ms:.3f} | {r['ms']:.3f} | {share:.1%} |")
    if draw and xs:
        figs.append(plots.lines(xs, {strategy: shares}, out / "paper-fig7-planning-share.png",
                                "batch", "planning share of plan + call (%)",
                                "planning overhead (Fig. 7)"))
    return [f"## Fig. 7: planning overhead ({strategy}, {SWEEP_RANGE[0]}/{SWEEP_RANGE[1]})", "",
            "| batch | plan ms (uncached) | bound call ms | planning share |", "|---|---|---|---|",
            *rows, ""]


def _latency(records, mode, out, draw, figs):
    """Fig. 10: each method's time against batch size."""
    ix = index(records)
    cases = list(dict((r["case"], r) for r in records).values())
    xs = [c["batch"] for c in cases]
    series = {m: [ix[(c["case"], mode, m)]["ms"] if (c["case"], mode, m) in ix else float("nan")
                  for c in cases] for m in methods_of(records)}
    if draw and xs:
        figs.append(plots.lines(xs, series, out / "paper-fig10-latency.png", "batch", "ms",
                                f"latency vs batch (Fig. 10), {mode}", logy=True))
    lines = ["## Fig. 10: latency (ms) vs batch", "",
             "| method | " + " | ".join(str(x) for x in xs) + " |", "|---" * (1 + len(xs)) + "|"]
    lines += [f"| {m} | " + " | ".join(f"{v:.3f}" for v in ys) + " |" for m, ys in series.items()]
    return lines + [""]


def _inception(records, primary, mode, out, draw, figs):
    """Fig. 11: speed-up per Inception layer against each method."""
    layers = list(dict.fromkeys(r["case"] for r in records))
    series = {}
    for m in _others(records, primary):
        d = dict(speedups(records, primary, m, mode))
        series[m] = [d.get(layer, float("nan")) for layer in layers]
    if draw:
        figs.append(plots.bars(layers, series, out / "paper-fig11-inception.png",
                               f"speed-up of {primary}", "Inception layers (Fig. 11)",
                               hline=1.0, log=True))
    lines = [f"## Fig. 11: Inception layers, speed-up of `{primary}`", "",
             "| method | geomean over layers |", "|---|---|"]
    lines += [f"| {m} | {_x(geomean(v))} |" for m, v in series.items()]
    return lines + [""]


def _occupancy(args, dev, methods, ranges, out, draw, figs):
    """Fig. 6: measured (ncu) and predicted occupancy per method."""
    cases = occupancy_cases(args.seed, ranges)
    arch = dev.be.arch()
    ncu = _ncu.find_ncu(args.ncu) if dev.kind == "cuda" else None
    lines = [f"## Fig. 6: occupancy over {len(cases)} ranges at batch {OCCUPANCY_BATCH}", ""]
    if ncu is None:
        why = "off" if args.ncu == "off" else (
            "needs the cuda backend" if dev.kind != "cuda" else "ncu not found on PATH or CUDA_HOME")
        lines.append(f"measured occupancy: skipped (ncu {why}); predicted only")
    lines += ["", "| method | measured (ncu) | predicted (model) | note |", "|---|---|---|---|"]
    names, measured, predicted = [], [], []
    deadline = time.monotonic() + NCU_BUDGET_S
    for m in methods:
        pred = None
        if m.strategy:
            pred = 100 * float(np.mean([portgemm.plan(c.shapes, dtype=args.dtype, arch=arch,
                                                      strategy=m.strategy).predicted_occupancy()
                                        for c in cases]))
        occ, note = None, ""
        if ncu is not None and time.monotonic() < deadline:
            occ, note = _ncu.measure(ncu, m.name, args.dtype, [c.shapes for c in cases],
                                     timeout_s=min(120, max(1, deadline - time.monotonic())))
        elif ncu is not None:
            note = f"not profiled: the {NCU_BUDGET_S} s ncu budget was spent"
        names.append(m.name)
        measured.append(occ if occ is not None else float("nan"))
        predicted.append(pred if pred is not None else float("nan"))
        lines.append(f"| {m.name} | {_pct(occ)} | {_pct(pred)} | {note} |")
    if draw:
        figs.append(plots.bars(names, {"measured (ncu)": measured, "predicted": predicted},
                               Path(out) / "paper-fig6-occupancy.png", "occupancy (%)",
                               "achieved vs predicted occupancy (Fig. 6)"))
    return lines + [""]


def _x(v):
    return "-" if v != v else f"{v:.3f}x"


def _pct(x):
    return "-" if x is None or x != x else f"{x:.0f}%"
