"""Calibrate the TLP threshold factor (TLP_threshold = CUs x max waves x wave size x
factor) by a sweep, in the spirit of li2019 §4.2.3: for each factor, time the plans it
produces on workloads unlike the benchmark grid, and keep the factor with the best
geometric-mean time relative to the best factor per workload.

    python bench/calibrate_threshold.py [--out sweep.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import portgemm  # noqa: E402
from portgemm.backends.base import get_backend  # noqa: E402
from timing import graph_bench  # noqa: E402

FACTORS = (0.03125, 0.0625, 0.125, 0.25, 0.5, 1.0)


def workloads(rng):
    """(name, shapes): log-uniform sizes, small-K updates, MoE-like experts, tiny batches."""
    def logu(lo, hi, n):
        return np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype(np.int64)
    out = []
    for batch in (12, 96, 400, 1500):
        out.append((f"logu8-768 b{batch}", np.stack([logu(8, 768, batch), logu(8, 768, batch),
                                                     logu(8, 384, batch)], 1)))
    for batch in (20, 300):
        m = rng.integers(32, 600, batch)
        out.append((f"lu-update K=16 b{batch}", np.stack([m, m, np.full(batch, 16)], 1)))
    for experts in (8, 64):
        tokens = rng.multinomial(4096, np.ones(experts) / experts)
        out.append((f"moe {experts}x(tok,512,256)",
                    np.stack([tokens, np.full(experts, 512), np.full(experts, 256)], 1)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    be = get_backend("cuda")
    cp = be.cp
    arch = be.arch()
    rng = np.random.default_rng(args.seed)
    rows, raw = [], []
    rel = {f: [] for f in FACTORS}
    for name, shapes in workloads(rng):
        A = [cp.asarray(rng.random((m, k)) - 0.5, dtype=cp.float32) for m, n, k in shapes]
        B = [cp.asarray(rng.random((k, n)) - 0.5, dtype=cp.float32) for m, n, k in shapes]
        C = [cp.empty((m, n), cp.float32) for m, n, k in shapes]
        times = {}
        for f in FACTORS:
            p = portgemm.plan(shapes, "float32", arch=arch, tlp_factor=f)
            times[f] = graph_bench(cp, lambda: p.run(A, B, C, backend=be))
            raw.append({"workload": name, "factor": f, "ms": times[f],
                        "kinds": p.tiles_per_kind(), "tlp": p.tlp, "threshold": p.tlp_threshold})
        best = min(times.values())
        for f in FACTORS:
            rel[f].append(times[f] / best)
        rows.append([name] + [f"{times[f] / best:.2f}" for f in FACTORS])
    geo = {f: float(np.exp(np.mean(np.log(rel[f])))) for f in FACTORS}
    rows.append(["geomean"] + [f"{geo[f]:.3f}" for f in FACTORS])
    print(f"device: {be.device_name()} ({arch.name}); time / best time per workload, fused mode")
    print(tabulate(rows, headers=["workload"] + [f"f={f:g}" for f in FACTORS]))
    print("best factor:", min(geo, key=geo.get))
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": raw, "geomean": geo}, indent=1))


if __name__ == "__main__":
    main()
