"""portgemm against cuBLAS grouped GEMM, one run, one device (docs/design.md §6 grid);
the fuller comparison is `python -m portgemm bench --grid`.

Both sides are timed the same way: arrays and call set up once, then back-to-back
calls with device events (median). portgemm: a bound plan call (`Plan.bind`, what a
repeated call costs) and `plan.run` (validation included); cuBLAS: one
cublasGemmGroupedBatchedEx call with prepared arrays. fp32, beta = 0, row-major.

    python bench/peers.py [--quick] [--out peers.json]
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
from portgemm.benchmark.cublas import CublasGrouped  # noqa: E402
from timing import do_bench, random_batch  # noqa: E402

MAX_MN = (128, 256, 512, 1024)
MAX_K = (128, 256, 512)
BATCHES = (8, 64, 256, 1024)


def checked(cp, fn, A, B, C):
    """Max relative error of one call of ``fn`` over NaN-poisoned C (float64 reference)."""
    for c in C:
        c.fill(cp.nan)
    fn()
    cp.cuda.get_current_stream().synchronize()
    return rel_err(cp, C, A, B)


def rel_err(cp, C, A, B, sample=32):
    """Over at most ``sample`` evenly spaced GEMMs (the GPU tests check every element)."""
    worst = 0.0
    pick = np.unique(np.linspace(0, len(A) - 1, min(sample, len(A))).astype(int))
    for i in pick:
        a, b, c = A[i], B[i], C[i]
        ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b).astype(np.float64)
        worst = max(worst, float(np.linalg.norm(cp.asnumpy(c) - ref) / max(np.linalg.norm(ref), 1e-300)))
    return worst


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    be = get_backend("cuda")
    cp = be.cp
    arch = be.arch()
    cublas = CublasGrouped(cp)
    rng = np.random.default_rng(args.seed)
    rows, raw, ratios = [], [], []
    grid = [(m, k) for m in MAX_MN for k in MAX_K]
    for mmn, mk in (grid[::4] if args.quick else grid):
        for batch in BATCHES:
            shapes, A, B, C = random_batch(cp, rng, batch, mmn, mk)
            flops = 2 * float((shapes[:, 0] * shapes[:, 1] * shapes[:, 2]).sum())
            p = portgemm.plan(shapes, "float32", arch=arch)
            bound = p.bind(A, B, C, backend=be)
            call = cublas.prepare(A, B, C)
            err_ours, err_peer = checked(cp, bound, A, B, C), checked(cp, call, A, B, C)
            ours = do_bench(cp, bound)
            ours_run = do_bench(cp, lambda: p.run(A, B, C, backend=be))
            peer = do_bench(cp, call)
            ratios.append(peer / ours)
            rows.append([f"{mmn}/{mk}", batch, flops / ours / 1e6, flops / ours_run / 1e6,
                         flops / peer / 1e6, peer / ours, f"{err_ours:.1e}", f"{err_peer:.1e}"])
            raw.append({"max_mn": mmn, "max_k": mk, "batch": batch, "ours_bound_ms": ours,
                        "ours_run_ms": ours_run, "cublas_ms": peer, "flops": flops,
                        "err_ours": err_ours, "err_cublas": err_peer})
    print(f"device: {be.device_name()} ({arch.name}, {arch.compute_units} SMs); GFLOP/s, fp32")
    print(tabulate(rows, headers=["maxMN/maxK", "batch", "portgemm bound", "portgemm run",
                                  "cuBLAS grouped", "speed-up (bound)", "err ours", "err cuBLAS"],
                   floatfmt=(".0f", ".0f", ",.0f", ",.0f", ",.0f", ".2f")))
    geo = float(np.exp(np.mean(np.log(ratios))))
    print(f"geomean speed-up of portgemm (bound) over cuBLAS grouped: {geo:.2f}x over {len(ratios)} cases; "
          f"portgemm faster in {sum(r > 1 for r in ratios)}")
    if args.out:
        Path(args.out).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
