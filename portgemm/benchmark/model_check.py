"""The planner's cost model against measured times, without a device: replay the
portgemm rows of a bench JSON (``python -m portgemm bench --grid`` or ``--paper``), plan
each case again with the strategy it was timed with, predict, and compare.

Only rows whose shapes can be rebuilt are used: the grid (workloads.grid_cases with
the run's seed) and the Inception layers. Runs made before the device rule timed
wavefront-tlp and workgroup-tlp with today's ``tlp_model="paper"``; ``paper_rule``
(default True) replans them so.

Reported: Pearson r of log predicted vs log measured time (all rows and per strategy),
the share of same-case pairs of strategies more than 10 % apart that the model orders
correctly, and the spread of predicted / measured.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

TILE_LIST = ("wavefront-tlp", "workgroup-tlp")


def _cases(seed: int) -> dict:
    from . import workloads as wl
    out = {c.name: c.shapes for c in wl.grid_cases(seed)}
    out.update({c.name: c.shapes for c in wl.inception_cases()})
    return out


def pairs_ordered(case: list, pred: np.ndarray, meas: np.ndarray, apart: float = 0.1):
    """(agreeing, total) over same-case pairs whose measured times differ by > apart."""
    agree = total = 0
    for c in set(case):
        idx = [i for i, x in enumerate(case) if x == c]
        for a in idx:
            for b in idx:
                if a < b and abs(np.log(meas[a] / meas[b])) > np.log1p(apart):
                    total += 1
                    agree += bool((pred[a] < pred[b]) == (meas[a] < meas[b]))
    return agree, total


def replay(path, arch=None, paper_rule: bool = True, ceil=None) -> dict:
    from .. import planner
    from ..planner.cost_model import predict
    data = json.loads(Path(path).read_text())
    seed = int(data.get("meta", {}).get("seed", 0) or 0)
    arch = arch or data.get("meta", {}).get("arch", "sm_90")
    shapes = _cases(seed)
    rows = [r for r in data["records"] if r.get("kind") == "portgemm" and r.get("status") == "ok"
            and r.get("entry") == "bound" and r.get("mode", "warm") == "warm"
            and r["case"] in shapes and r.get("part", "grid") in ("grid", "inception")]
    case, strat, pred, meas = [], [], [], []
    for r in rows:
        kw = {"tlp_model": "paper"} if paper_rule and r["strategy"] in TILE_LIST else {}
        p = planner.plan(shapes[r["case"]], r.get("dtype", "float32"), arch=arch,
                         strategy=r["strategy"], **kw)
        case.append(r["case"])
        strat.append(r["strategy"])
        pred.append(predict(p, ceil))
        meas.append(r["ms"])
    pred, meas = np.array(pred), np.array(meas)
    out = {"rows": len(meas), "arch": str(arch)}
    if len(meas) < 3:
        return out
    lp, lm = np.log(pred), np.log(meas)
    out["pearson_log"] = {"all": float(np.corrcoef(lp, lm)[0, 1])}
    for s in sorted(set(strat)):
        sel = np.array([x == s for x in strat])
        if sel.sum() > 2:
            out["pearson_log"][s] = float(np.corrcoef(lp[sel], lm[sel])[0, 1])
    agree, total = pairs_ordered(case, pred, meas)
    out["pairs_ordered"] = {"agree": agree, "total": total, "share": agree / max(total, 1)}
    ratio = pred / meas
    out["predicted_over_measured"] = {"median": float(np.median(ratio)),
                                      "min": float(ratio.min()), "max": float(ratio.max())}
    return out
