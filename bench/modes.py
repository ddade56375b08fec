"""Fused multi-thread kernel vs per-kind launches (issue 3), and strategies, on the
device. Prints GFLOP/s per case and the per-kind/fused time ratio.

    python bench/modes.py [--quick] [--out results.json]
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
from timing import do_bench, graph_bench, random_batch  # noqa: E402

GRID = [(128, 128), (256, 256), (512, 512), (1024, 512)]
BATCHES = [8, 64, 256, 1024]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--strategies", default="wavefront-tlp")
    ap.add_argument("--modes", default="fused,per-kind")
    args = ap.parse_args(argv)
    be = get_backend("cuda")
    cp = be.cp
    arch = be.arch()
    rng = np.random.default_rng(args.seed)
    rows, raw = [], []
    grid = GRID[:2] if args.quick else GRID
    for (mmn, mk) in grid:
        for batch in (BATCHES[:2] if args.quick else BATCHES):
            shapes, A, B, C = random_batch(cp, rng, batch, mmn, mk)
            flops = 2 * float((shapes[:, 0] * shapes[:, 1] * shapes[:, 2]).sum())
            row = [f"{mmn}/{mk}", batch]
            times = {}
            for strategy in args.strategies.split(","):
                for mode in args.modes.split(","):
                    if strategy == "magma":
                        mode = "grid-z"
                    p = portgemm.plan(shapes, "float32", arch=arch, strategy=strategy, mode=mode)
                    call = lambda: p.run(A, B, C, backend=be)  # noqa: E731
                    ms = do_bench(cp, call)
                    bms = do_bench(cp, p.bind(A, B, C, backend=be))
                    gms = graph_bench(cp, call)
                    times[(strategy, mode)] = gms
                    row += [flops / ms / 1e6, flops / bms / 1e6, flops / gms / 1e6]
                    raw.append({"max_mn": mmn, "max_k": mk, "batch": batch, "strategy": strategy,
                                "mode": mode, "ms": ms, "bound_ms": bms, "graph_ms": gms,
                                "gflops": flops / ms / 1e6, "graph_gflops": flops / gms / 1e6,
                                "kinds": p.tiles_per_kind(), "tlp": p.tlp,
                                "threshold": p.tlp_threshold})
            rows.append(row)
    heads = ["maxMN/maxK", "batch"] + [f"{s}:{m} {t}" for s in args.strategies.split(",")
                                       for m in args.modes.split(",") for t in ("run", "bound", "graph")]
    print(f"device: {be.device_name()} ({arch.name}, {arch.compute_units} SMs)")
    print(tabulate(rows, headers=heads, floatfmt=".0f"))
    if args.out:
        Path(args.out).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
