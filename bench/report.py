"""Markdown tables for NOTES.md from the JSON that modes.py wrote.

    python bench/report.py modes.json [strategies.json]
"""
from __future__ import annotations

import json
import sys

import numpy as np


def _by_case(rows, key):
    out = {}
    for r in rows:
        out.setdefault((r["max_mn"], r["max_k"], r["batch"]), {})[r[key]] = r
    return out


def modes_table(rows) -> str:
    cases = _by_case(rows, "mode")
    lines = ["| MaxMN/MaxK | batch | fused run | fused bound | fused graph | per-kind run | "
             "per-kind bound | per-kind graph |", "|---" * 8 + "|"]
    for (m, k, b), v in cases.items():
        cells = []
        for mode in ("fused", "per-kind"):
            r = v[mode]
            cells += [r["gflops"], r["gflops"] * r["ms"] / r["bound_ms"], r["graph_gflops"]]
        lines.append(f"| {m}/{k} | {b} | " + " | ".join(f"{c:,.0f}" for c in cells) + " |")
    for t in ("graph_ms", "bound_ms", "ms"):
        ratio = [v["per-kind"][t] / v["fused"][t] for v in cases.values()]
        lines.append(f"\nper-kind / fused time ({t}): geomean {np.exp(np.mean(np.log(ratio))):.3f}, "
                     f"range {min(ratio):.2f} to {max(ratio):.2f}")
    return "\n".join(lines)


def strategies_table(modes_rows, strat_rows) -> str:
    cases = _by_case([r for r in modes_rows if r["mode"] == "fused"] + strat_rows, "strategy")
    names = ["wavefront-tlp", "workgroup-tlp", "coordinated", "magma"]
    lines = ["| MaxMN/MaxK | batch | " + " | ".join(names) + " |", "|---" * (2 + len(names)) + "|"]
    for (m, k, b), v in cases.items():
        lines.append(f"| {m}/{k} | {b} | " + " | ".join(
            f"{v[n]['graph_gflops']:,.0f}" if n in v else "-" for n in names) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    modes = json.load(open(sys.argv[1]))
    print(modes_table(modes))
    if len(sys.argv) > 2:
        print()
        print(strategies_table(modes, json.load(open(sys.argv[2]))))
