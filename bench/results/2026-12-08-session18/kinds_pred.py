"""Measured (call1/k_u.json, k_a.json: bench/short_k.py, fp16, H100) against the cost
model's prediction of the same plan (cost_model.predict), per forced kind and case:
    python bench/results/2026-12-08-session18/kinds_pred.py > call1/kinds_pred.txt
The "default" rows are the direct plan (staging=False: what call 1 ran on unaligned rows)."""
import json
from pathlib import Path

import portgemm
from portgemm.benchmark.workloads import random_case
from portgemm.planner import resolve_arch
from portgemm.planner.cost_model import predict
from portgemm.tuning.model import family_kind_plan

HERE = Path(__file__).parent / "call1"
for r in json.loads((HERE / "k_u.json").read_text()) + json.loads((HERE / "k_a.json").read_text()):
    mn, k, b = map(int, r["case"].split("/"))
    s = random_case(b, mn, k, seed=(0, mn, k, b)).shapes
    s = -(-s // r["align"]) * r["align"]
    if r["method"] == "default":
        p = portgemm.plan(s, "float16", arch="sm_90", staging=False)
    else:
        fam, _, kind = r["method"].rpartition(":")
        p = family_kind_plan(s, "float16", resolve_arch("sm_90"), fam or "portgemm-f16", kind)
    pr = predict(p)
    print(f"{r['case']:>13} align {r['align']} {r['method']:>26} measured {r['ms'] * 1e3:6.1f} us "
          f"predicted {pr * 1e3:6.1f} us  ratio {r['ms'] / pr:5.2f}")
