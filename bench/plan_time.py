"""Host time of planning (the non-cached path), per strategy and batch size.

    python bench/plan_time.py [--arch sm_90] [--reps 50] [--all-modes]

Shapes follow docs/design.md §6: M, N uniform in [16, MaxMN], K in [16, 512]. Each cell is
the median of ``reps`` calls of ``plan(..., use_cache=False)`` after one warm-up call
(which fills the per-variant occupancy memo, as the first plan of a process does).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from tabulate import tabulate

from portgemm.planner import plan, strategies, strategy_info


def shapes(batch, max_mn, max_k=512, seed=0):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(16, max_mn + 1, batch), rng.integers(16, max_mn + 1, batch),
                     rng.integers(16, max_k + 1, batch)], axis=1)


def median_us(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1e3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--batches", default="8,64,256,1024")
    ap.add_argument("--max-mn", default="128,1024")
    ap.add_argument("--all-modes", action="store_true", help="every mode, not just the default")
    args = ap.parse_args(argv)
    rows = []
    for strategy in strategies():
        info = strategy_info(strategy)
        for mode in (info.modes if args.all_modes else (info.default_mode,)):
            for max_mn in map(int, args.max_mn.split(",")):
                for batch in map(int, args.batches.split(",")):
                    s = shapes(batch, max_mn)
                    p = plan(s, arch=args.arch, strategy=strategy, mode=mode, use_cache=False)
                    us = median_us(lambda: plan(s, arch=args.arch, strategy=strategy, mode=mode,
                                                use_cache=False), args.reps)
                    rows.append([strategy, mode, max_mn, batch, p.n_tiles, p.n_blocks,
                                 f"{us:,.0f}"])
    s = shapes(1024, 1024)
    plan(s, arch=args.arch)
    hit = median_us(lambda: plan(s, arch=args.arch), args.reps)
    print(f"arch {args.arch}; median of {args.reps} non-cached calls; cache hit "
          f"(wavefront-tlp, 1024 GEMMs): {hit:,.1f} µs")
    print(tabulate(rows, headers=["strategy", "mode", "MaxMN", "batch", "tiles", "blocks",
                                  "median µs"], colalign=("left", "left")))


if __name__ == "__main__":
    main()
