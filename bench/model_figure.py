"""The cost model against the device: predicted vs measured time of every timed plan of a
``bench/planner_proof.py`` run, per tile kind and per batch size, with the correlation.

    python bench/model_figure.py planner_proof.json [--out DIR]

Writes ``model_vs_measured.png`` (left: predicted vs measured, log-log, one colour per
plan's main tile kind; right: predicted / measured per batch size) and prints the log
correlation overall, per kind and per batch. A point is one (case, method) plan; plans
that several methods share are counted once. The main kind is the one holding most of
the plan's tiles.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from portgemm.benchmark.plots import pyplot  # noqa: E402


def points(run: dict) -> list[dict]:
    """One point per distinct timed plan: case, batch, main kind, predicted and measured ms."""
    out, seen = [], set()
    for case in run["cases"]:
        for method, m in case["methods"].items():
            key = (case["case"], m.get("plan"))
            if key in seen or not m.get("ms") or not m.get("predicted_ms"):
                continue
            seen.add(key)
            tiles = m.get("tiles") or {}
            kind = max(tiles, key=tiles.get) if tiles else "?"
            out.append({"case": case["case"], "batch": case["batch"], "method": method,
                        "kind": kind, "pred": float(m["predicted_ms"]), "meas": float(m["ms"])})
    return out


def log_r(pts) -> float:
    if len(pts) < 3:
        return float("nan")
    p = np.log([q["pred"] for q in pts])
    m = np.log([q["meas"] for q in pts])
    return float(np.corrcoef(p, m)[0, 1])


def summary(pts, by: str) -> list[list]:
    """Rows of (group, points, log r, geomean and range of predicted / measured)."""
    groups = defaultdict(list)
    for q in pts:
        groups[q[by]].append(q)
    rows = []
    for g in sorted(groups, key=lambda x: (isinstance(x, str), x)):
        qs = groups[g]
        ratio = np.array([q["pred"] / q["meas"] for q in qs])
        rows.append([g, len(qs), log_r(qs), float(np.exp(np.log(ratio).mean())),
                     float(ratio.min()), float(ratio.max())])
    return rows


def figure(pts, path: Path, title: str):
    plt = pyplot()
    if plt is None:
        return None
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 5))
    kinds = sorted({q["kind"] for q in pts})
    cmap = plt.get_cmap("tab20")
    for i, k in enumerate(kinds):
        qs = [q for q in pts if q["kind"] == k]
        ax.scatter([q["meas"] for q in qs], [q["pred"] for q in qs], s=12, color=cmap(i % 20),
                   label=k)
    lo = min(min(q["meas"], q["pred"]) for q in pts) / 1.5
    hi = max(max(q["meas"], q["pred"]) for q in pts) * 1.5
    ax.plot([lo, hi], [lo, hi], "k--", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured ms (bound call)")
    ax.set_ylabel("predicted ms (cost model)")
    ax.set_title(f"{title}: log r = {log_r(pts):.3f}, {len(pts)} plans")
    ax.legend(fontsize=6, ncol=2, title="main tile kind", title_fontsize=7)
    batches = sorted({q["batch"] for q in pts})
    data = [[q["pred"] / q["meas"] for q in pts if q["batch"] == b] for b in batches]
    bx.boxplot(data, tick_labels=[str(b) for b in batches])
    bx.axhline(1.0, color="k", ls="--", lw=1)
    bx.set_yscale("log")
    bx.set_xlabel("GEMMs in the batch")
    bx.set_ylabel("predicted / measured")
    bx.set_title("model error per batch size")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="planner_proof.json of a device run")
    ap.add_argument("--out", default=".", help="folder for model_vs_measured.png")
    args = ap.parse_args(argv)
    run = json.loads(Path(args.run).read_text())
    pts = points(run)
    if not pts:
        print("no timed plans with predictions in", args.run, file=sys.stderr)
        return 1
    head = ["", "plans", "log r", "pred/meas geomean", "min", "max"]
    print(f"{run.get('device', '?')} ({run.get('arch', '?')}): {len(pts)} distinct plans, "
          f"log r = {log_r(pts):.4f}")
    for by in ("kind", "batch"):
        print(tabulate(summary(pts, by), headers=[f"by {by}"] + head[1:], floatfmt=".3f"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = figure(pts, out / "model_vs_measured.png", run.get("device", ""))
    print(f"figure: {path}" if path else "matplotlib not installed: no figure written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
