"""Results out: the terminal table, JSON and CSV files, and summary.md.

Speed-up of portgemm against a peer = peer time / portgemm time in the same case and
mode (> 1: portgemm faster). "primary" is the portgemm method the speed-ups are of
(the first one measured: the first entry with the first strategy).
"""
from __future__ import annotations

import csv
import json
import math

import numpy as np
from tabulate import tabulate

CSV_FIELDS = ("case", "range", "batch", "dtype", "method", "kind", "strategy", "entry", "mode",
              "status", "ms", "reps", "gflops", "flops", "bytes", "roofline_ms",
              "roofline_fraction", "limiter", "max_rel_error", "predicted_occupancy", "error")


def geomean(xs) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def index(records) -> dict:
    """(case, mode, method) -> ok record."""
    return {(r["case"], r["mode"], r["method"]): r for r in records if r["status"] == "ok"}


def case_order(records) -> list:
    seen = {}
    for r in records:
        seen.setdefault(r["case"], r)
    return list(seen.values())


def methods_of(records, kind=None) -> list[str]:
    out = []
    for r in records:
        if (kind is None or r["kind"] == kind) and r["method"] not in out:
            out.append(r["method"])
    return out


def modes_of(records) -> list[str]:
    out = []
    for r in records:
        if r.get("mode") and r["mode"] not in out:
            out.append(r["mode"])
    return out


def speedups(records, primary, other, mode) -> list[tuple[str, float]]:
    """(case, other ms / primary ms) for every case where both were timed."""
    ix = index(records)
    out = []
    for c in case_order(records):
        a, b = ix.get((c["case"], mode, primary)), ix.get((c["case"], mode, other))
        if a and b:
            out.append((c["case"], b["ms"] / a["ms"]))
    return out


def table(records, mode, primary=None) -> str:
    ours, peers = methods_of(records, "portgemm"), methods_of(records, "peer")
    primary = primary or (ours[0] if ours else None)
    ix = index(records)
    failed = {(r["case"], r["method"]) for r in records if r["status"] == "failed"}
    rows = []
    for c in case_order(records):
        row = [c["case"], c["batch"]]
        for m in ours + peers:
            r = ix.get((c["case"], mode, m))
            row.append(f"{r['gflops']:,.0f}" if r else ("FAIL" if (c["case"], m) in failed else "-"))
        p = ix.get((c["case"], mode, primary))
        for m in peers:
            r = ix.get((c["case"], mode, m))
            row.append(f"{r['ms'] / p['ms']:.2f}x" if (p and r) else "-")
        row.append(f"{p['roofline_fraction']:.0%}" if p else "-")
        row.append(c["limiter"])
        rows.append(row)
    headers = (["case", "batch"] + list(ours + peers)
               + [f"vs {m}" for m in peers] + ["% roofline", "limit"])
    return tabulate(rows, headers=headers, disable_numparse=True)


def write_json(path, meta, ceilings, res):
    data = {"meta": meta, "ceilings": ceilings.as_dict(), "notes": res.notes,
            "records": res.records}
    with open(path, "w") as f:
        json.dump(data, f, indent=1, default=_jsonable)


def _jsonable(x):
    if isinstance(x, (np.integer, np.floating)):
        return x.item()
    return str(x)


def write_csv(path, records):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in records:
            w.writerow(r)


def summary_lines(records, primary=None) -> list[str]:
    """Geometric-mean speed-up against each peer per mode, and the cells where the
    primary loses, with the case's roofline limiter and the primary's share of it."""
    ours, peers = methods_of(records, "portgemm"), methods_of(records, "peer")
    if not ours:
        return ["no portgemm method was timed"]
    primary = primary or ours[0]
    ix = index(records)
    lines = [f"Speed-up of portgemm `{primary}` (peer time / ours; > 1 = portgemm faster):", ""]
    rows, losing = [], []
    for mode in modes_of(records):
        for m in peers + [o for o in ours if o != primary]:
            sp = speedups(records, primary, m, mode)
            if not sp:
                continue
            lose = [(c, s) for c, s in sp if s < 1]
            rows.append(f"| {mode} | {m} | {geomean([s for _, s in sp]):.2f}x | {len(sp)} | "
                        f"{len(lose)} |")
            losing += [(mode, m, c, s) for c, s in lose]
    lines += ["| mode | against | geomean | cases | ours slower |", "|---|---|---|---|---|", *rows]
    fails = [r for r in records if r["status"] == "failed"]
    if fails:
        lines += ["", "Failed checks (never timed):", ""]
        lines += [f"- {r['method']} on {r['case']}: {r.get('error', '')}" for r in fails]
    lines += ["", f"Cells where `{primary}` is slower ({len(losing)}):", ""]
    if losing:
        lines += ["| mode | case | against | speed-up | roofline limit | ours % of roofline |",
                  "|---|---|---|---|---|---|"]
        for mode, m, c, s in losing:
            p = ix[(c, mode, primary)]
            lines.append(f"| {mode} | {c} | {m} | {s:.2f}x | {p['limiter']} | "
                         f"{p['roofline_fraction']:.0%} |")
    else:
        lines.append("none")
    return lines


def header_lines(meta, ceilings) -> list[str]:
    v = ", ".join(f"{k} {x}" for k, x in meta.get("versions", {}).items())
    return [f"- device: {meta.get('device')} (backend {meta.get('backend')}, arch "
            f"{meta.get('arch')}); driver {meta.get('driver', '-')}, runtime "
            f"{meta.get('runtime', '-')}",
            f"- date: {meta.get('date')}; dtype {meta.get('dtype')}; command: "
            f"`{meta.get('command')}`",
            f"- versions: {v}",
            f"- ceilings measured in this run: GEMM {ceilings.flops_per_s / 1e12:,.2f} TFLOP/s, "
            f"copy {ceilings.bytes_per_s / 1e9:,.0f} GB/s, empty launch "
            f"{ceilings.launch_s * 1e6:,.1f} us"]


def summary_md(title, meta, ceilings, records, notes=(), extra=()) -> str:
    lines = [f"# {title}", "", *header_lines(meta, ceilings), "", *summary_lines(records)]
    if notes:
        lines += ["", "Skipped:", "", *[f"- {n}" for n in notes]]
    lines += ["", *extra]
    return "\n".join(lines) + "\n"
