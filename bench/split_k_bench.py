"""Split-K on the device: the default plan (split where the planner chooses it) against
the same plan with ``split_k=False`` and cuBLAS grouped, on batches whose tiles cannot
fill the device and whose K is long (issue 9 / issue 11), and a control that fills it.

For each case: bound calls (Plan.bind, event-timed with bench/timing.py's do_bench, host
overhead included) and CUDA-graph replays of both plans, cuBLAS grouped (arrays
prepared), the planner's predictions (split, unsplit), and each output's max relative
error against a float64 product on the device (C NaN-poisoned before the checked call).

    python bench/split_k_bench.py [--quick] [--rep-ms 50] [--out DIR]

About a minute on an H100 (compilation included). Writes split_k_bench.json to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import portgemm  # noqa: E402
from portgemm.backends import cuda as cuda_backend  # noqa: E402
from portgemm.benchmark.cublas import CublasGrouped  # noqa: E402
from timing import do_bench, graph_bench  # noqa: E402

# (name, dtype, batch, (M, N, K)) fixed, or (name, dtype, batch, (max MN, max K)) random
# with M, N in [16, max MN] and K in [16, max K].
CASES = [
    ("8 x 128x128x8192", "float32", 8, (128, 128, 8192)),
    ("16 x 256x256x4096", "float32", 16, (256, 256, 4096)),
    ("64 x 64x64x2048", "float32", 64, (64, 64, 2048)),
    ("4 x 64x64x8192", "float32", 4, (64, 64, 8192)),
    ("rand 16: MN<=256, K<=8192", "float32", 16, (256, 8192)),
    ("rand 64: MN<=256, K<=8192", "float32", 64, (256, 8192)),
    ("f64 8 x 128x128x8192", "float64", 8, (128, 128, 8192)),
    ("f64 rand 16: MN<=256, K<=8192", "float64", 16, (256, 8192)),
    ("control 64 x 1024^2x1024", "float32", 64, (1024, 1024, 1024)),
]
QUICK = {"8 x 128x128x8192", "16 x 256x256x4096", "64 x 64x64x2048", "rand 16: MN<=256, K<=8192"}


def make_batch(cp, rng, batch, dims, dtype):
    if len(dims) == 3:
        shapes = np.tile(np.array(dims, np.int64), (batch, 1))
    else:
        mn, k = dims
        shapes = np.stack([rng.integers(16, mn + 1, batch), rng.integers(16, mn + 1, batch),
                           rng.integers(16, k + 1, batch)], 1).astype(np.int64)
    A = [cp.asarray(rng.random((m, k)) - 0.5, dtype=dtype) for m, n, k in shapes]
    B = [cp.asarray(rng.random((k, n)) - 0.5, dtype=dtype) for m, n, k in shapes]
    C = [cp.empty((m, n), dtype=dtype) for m, n, k in shapes]
    return shapes, A, B, C


def max_error(cp, call, A, B, C) -> float:
    """Max relative error (Frobenius, per GEMM) of ``call`` over NaN-poisoned C."""
    for c in C:
        c.fill(cp.nan)
    call()
    cp.cuda.get_current_stream().synchronize()
    worst = 0.0
    for a, b, c in zip(A, B, C):
        ref = a.astype(cp.float64) @ b.astype(cp.float64)
        den = float(cp.linalg.norm(ref)) or 1.0
        worst = max(worst, float(cp.linalg.norm(c.astype(cp.float64) - ref)) / den)
    return worst


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rep-ms", type=float, default=50.0)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    be = cuda_backend.create()
    cp, arch = be.cp, be.arch()
    cublas = CublasGrouped(cp)
    rng = np.random.default_rng(args.seed)
    rows, raw = [], []
    for name, dtype, batch, dims in CASES:
        if args.quick and name not in QUICK:
            continue
        shapes, A, B, C = make_batch(cp, rng, batch, dims, dtype)
        flops = 2.0 * float((shapes[:, 0] * shapes[:, 1] * shapes[:, 2]).sum())
        split = portgemm.plan(shapes, dtype, arch=arch)
        plain = portgemm.plan(shapes, dtype, arch=arch, split_k=False)
        out = {"case": name, "dtype": dtype, "split": split.split is not None,
               "pred_split_ms": split.predicted_ms, "pred_unsplit_ms": plain.predicted_ms}
        for label, p in (("split", split), ("unsplit", plain)):
            bound = p.bind(A, B, C, backend=be)
            out[f"err_{label}"] = max_error(cp, bound, A, B, C)
            out[f"{label}_ms"] = do_bench(cp, bound, warmup_ms=10.0, rep_ms=args.rep_ms)
            out[f"{label}_graph_ms"] = graph_bench(cp, bound, warmup_ms=10.0, rep_ms=args.rep_ms)
        cub = cublas.prepare(A, B, C)
        out["err_cublas"] = max_error(cp, cub, A, B, C)
        out["cublas_ms"] = do_bench(cp, cub, warmup_ms=10.0, rep_ms=args.rep_ms)
        if split.split is not None:
            sp = split.split
            out["splits"] = f"{sp.split_gemms.size} GEMMs, s {int(sp.splits.max())}, " \
                            f"{sp.plan.n_tiles} tiles vs {plain.n_tiles}"
        raw.append(out)
        rows.append([name, out.get("splits", "-"),
                     f"{out['pred_unsplit_ms'] / out['pred_split_ms']:.2f}x",
                     out["split_ms"], out["unsplit_ms"],
                     f"{out['unsplit_ms'] / out['split_ms']:.2f}x",
                     f"{out['unsplit_graph_ms'] / out['split_graph_ms']:.2f}x",
                     out["cublas_ms"], f"{out['cublas_ms'] / out['split_ms']:.2f}x",
                     flops / out["split_ms"] / 1e9,
                     f"{max(out['err_split'], out['err_unsplit']):.1e}"])
        print(f"{name}: split {out['split_ms']:.4f} ms, unsplit {out['unsplit_ms']:.4f} ms, "
              f"cuBLAS {out['cublas_ms']:.4f} ms", flush=True)
    text = "\n".join([
        f"device: {be.device_name()}; bound calls (host included) unless 'graph'; ms medians",
        tabulate(rows, headers=["case", "split", "pred speed-up", "split ms", "unsplit ms",
                                "speed-up", "graph speed-up", "cuBLAS ms", "x cuBLAS",
                                "TFLOP/s", "max err"], floatfmt=".4g"),
        f"({time.perf_counter() - t0:.0f} s)"])
    print(text)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "split_k_bench.json").write_text(json.dumps(raw, indent=1))
    (Path(args.out) / "split_k_bench.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
