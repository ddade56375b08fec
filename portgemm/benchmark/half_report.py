"""Tables and summaries of the 16-bit / tf32 / MoE benches from their records
(half_run.py): GFLOP/s per method, ours over the best peer per case, the fraction of
the measured bf16 dense peak, and the geometric mean of ours over the best peer.

A method's cell is its GFLOP/s, "n/a" when it was skipped (portgemm not taking the
format yet, a peer missing from this install), or "FAIL" when it ran but its output
missed the tolerance or it raised: a failed peer is never counted as the best peer.
"""
from __future__ import annotations

import math

from tabulate import tabulate

from .half_peers import OURS


def _cell(rec) -> str:
    if rec is None:
        return "-"
    if rec["status"] == "ok":
        return f"{rec['gflops']:,.0f}"
    return "n/a" if rec["status"] == "skipped" else "FAIL"


def best_peer(recs: dict):
    """(name, GFLOP/s) of the fastest peer that passed its check, or (None, None)."""
    ok = [(r["gflops"], m) for m, r in recs.items() if m not in OURS and r["status"] == "ok"]
    if not ok:
        return None, None
    g, m = max(ok)
    return m, g


def geomean(xs) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def by_case(records, fmt: str) -> dict:
    """{case name: {method: record}} of one format, in first-seen order."""
    out: dict = {}
    for r in records:
        if r["format"] == fmt:
            out.setdefault(r["case"], {})[r["method"]] = r
    return out


def _ratio(mine, g):
    return mine["gflops"] / g if g and mine is not None and mine["status"] == "ok" else None


def _summary(label, ratios) -> tuple[dict, str]:
    got = [r for r in ratios if r is not None]
    geo = geomean(got)
    s = {"against": label, "geomean": geo, "cases": len(ratios), "below_1": sum(r < 1.0 for r in got),
         "no_ratio": len(ratios) - len(got)}
    return s, (f"/ {label}: geomean " + (f"{geo:.3f}x" if geo else "n/a")
               + f" over {len(got)} cases, below 1.0x in {s['below_1']}; no ratio in {s['no_ratio']}")


def format_table(records, fmt: str, methods, ours: str, peak: float | None,
                 against=()) -> tuple[str, list]:
    """(text, summaries) of one format: a row per case with ours over the best peer
    (and over each method named in ``against``); a summary per ratio: its geomean,
    the cases below 1.0x and those without a ratio (ours or the other side n/a/FAIL)."""
    rows, best_r, other_r = [], [], {m: [] for m in against}
    for case, recs in by_case(records, fmt).items():
        name, g = best_peer(recs)
        mine = recs.get(ours)
        ratio = _ratio(mine, g)
        best_r.append(ratio)
        extra = []
        for m in against:
            o = recs.get(m)
            r = _ratio(mine, o["gflops"] if o is not None and o["status"] == "ok" else None)
            other_r[m].append(r)
            extra.append(f"{r:.2f}" if r else "-")
        pct = (lambda x: f"{100 * x * 1e9 / peak:.1f}" if peak and x else "-")
        errs = [r["err"] for r in recs.values() if r.get("err") is not None]
        rows.append([case, next(iter(recs.values()))["batch"]]
                    + [_cell(recs.get(m)) for m in methods]
                    + [name or "-", f"{ratio:.2f}" if ratio else "-"] + extra
                    + [pct(mine["gflops"] if mine and mine["status"] == "ok" else None), pct(g),
                       f"{max(errs):.1e}" if errs else "-"])
    headers = (["case", "batch"] + list(methods) + ["best peer", f"{ours} / best"]
               + [f"{ours} / {m}" for m in against]
               + [f"{ours} % peak", "peer % peak", "max err"])
    lines, summaries = [tabulate(rows, headers=headers, disable_numparse=True)], []
    for label, ratios in [("best peer", best_r)] + list(other_r.items()):
        s, line = _summary(label, ratios)
        summaries.append(dict(s, format=fmt, ours=ours))
        lines.append(f"{fmt}: {ours} {line}")
    return "\n".join(lines), summaries


def notes(records) -> list[str]:
    """One line per distinct skip or failure reason (method: reason)."""
    seen = []
    for r in records:
        if r["status"] != "ok":
            where = f" ({r['case']})" if r["status"] == "failed" else ""
            line = f"{r['format']} {r['method']} {r['status']}{where}: {r.get('note', '')}"
            if line not in seen:
                seen.append(line)
    return seen
