"""Offline (no device this session): the copy-path figures as the library now applies them
(ceilings.json kind_path_factors, alignment.share_for's 16- and 4-byte shares,
occupancy/vector_path.factor), with provisional figures, against session 18's measured
forced-kind plans (bench/results/2026-12-08-session18/call1: fp16, H100, batches' own
rows and rounded to multiples of 8). The provisional figures are session 18's pathfit.py
ones (session 16's sweep: aligned sizes against odd ones, the 4-byte path placed between
them by planner/staging.py's NARROW_COPY_SLOWDOWN), scaled so the 2-byte one is 1, with
the kind factors (and per depth) scaled by the same 2-byte figure over their geometric
mean. It checks that the implementation reproduces pathfit's error cut and says which
default plans the figures would move; it is not a measurement of the figures, which
python -m portgemm.tuning.kind_factors fits from a sweep with its own 4-byte sizes.
    python bench/results/2026-12-08-session19/pathcheck.py > bench/results/2026-12-08-session19/pathcheck.txt"""
import json
from pathlib import Path

import numpy as np

import portgemm
from portgemm.benchmark.workloads import random_case
from portgemm.occupancy import ceilings
from portgemm.planner import resolve_arch
from portgemm.planner.cost_model import predict
from portgemm.tuning.model import family_kind_plan

S16 = Path("bench/results/2026-12-07-session16/fp16/kf_portgemm-f16.json")
CALL1 = Path("bench/results/2026-12-08-session18/call1")

d = json.loads(S16.read_text())
ms, pr = np.array(d["ms"], float), np.array(d["predicted_ms"], float)
al = np.array([all(int(x) % 8 == 0 for x in s.split("x")[1:]) for s in d["sizes"]])
figures, scale = {}, {}
for i, name in enumerate(d["factors"]):
    r = ms[i] / pr[i]
    f16, f2 = np.exp(np.nanmean(np.log(r[al]))), np.exp(np.nanmean(np.log(r[~al])))
    geo = np.exp(np.nanmean(np.log(r)))
    t = (np.log(273 / 166) / np.log(273 / 96) if "128x" in name
         else np.log(152 / 107) / np.log(152 / 69))
    f4 = np.exp(np.log(f16) + t * (np.log(f2) - np.log(f16)))
    top = max(f16, f4, f2)
    figures[name] = [float(f16 / top), float(f4 / top), float(f2 / top)]
    scale[name] = float(top / geo)


def runs():
    for r in json.loads((CALL1 / "k_u.json").read_text()) + json.loads((CALL1 / "k_a.json").read_text()):
        mn, k, b = map(int, r["case"].split("/"))
        s = random_case(b, mn, k, seed=(0, mn, k, b)).shapes
        yield r, -(-s // r["align"]) * r["align"]


def plan_of(r, s):
    if r["method"] == "default":
        return portgemm.plan(s, "float16", arch="sm_90", staging=False, use_cache=False)
    fam, _, kind = r["method"].rpartition(":")
    return family_kind_plan(s, "float16", resolve_arch("sm_90"), fam or "portgemm-f16", kind)


def predictions():
    out = []
    for r, s in runs():
        p = plan_of(r, s)
        out.append((r, predict(p), p.tiles_per_kind() if r["method"] == "default" else None))
    return out


before = predictions()
row = dict(ceilings._load()["measured"]["sm_90"])
row[ceilings.KIND_FACTORS] = {n: f * scale.get(n, 1.0) for n, f in row[ceilings.KIND_FACTORS].items()}
row[ceilings.KIND_DEPTH_FACTORS] = {n: [[k, f * scale.get(n, 1.0)] for k, f in v]
                                    for n, v in row[ceilings.KIND_DEPTH_FACTORS].items()}
row[ceilings.KIND_PATH_FACTORS] = figures
ceilings.use_in_memory("sm_90", row)
portgemm.planner.clear_cache()
after = predictions()

print("provisional figures [16-byte, 4-byte, 2-byte] and kind-factor scale:")
for n, f in figures.items():
    print(f"  {n:30} {f[0]:.3f} {f[1]:.3f} {f[2]:.3f}  x{scale[n]:.3f}")
print(f"\n{'case':>13} {'rows':>8} {'method':>26} {'measured':>9} {'before':>7} {'after':>7}  ratio before / after")
lb, la = [], []
for (r, pb, kb), (_, pa, ka) in zip(before, after):
    m = r["ms"]
    if r["method"] != "default" and ":" not in r["method"]:   # the mma.sync kinds forced
        lb.append(np.log(m / pb)); la.append(np.log(m / pa))
    rows = "own" if r["align"] == 1 else f"x{r['align']}"
    print(f"{r['case']:>13} {rows:>8} {r['method']:>26} {m * 1e3:7.1f}us {pb * 1e3:5.1f}us {pa * 1e3:5.1f}us"
          f"  {m / pb:5.2f} / {m / pa:5.2f}" + ("" if kb is None or kb == ka else f"  plan {kb} -> {ka}"))
lb, la = np.array(lb), np.array(la)
print(f"\nforced mma.sync kinds ({len(lb)} plans): log(measured / predicted) std {lb.std():.3f} -> "
      f"{la.std():.3f}, max |.| {np.abs(lb).max():.3f} -> {np.abs(la).max():.3f}")
