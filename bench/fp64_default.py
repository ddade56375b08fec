"""The default fp64 plan before and after the measured per-kind factors (ceilings.json
``kind_factors``), against cuBLAS grouped fp64, on the kernel bench's fp64 grid and on
batches off it (other batch counts and distributions: issue 9's rule, judge on more
than the grid).

For each case, bound calls (bench/timing.do_bench) of: cuBLAS grouped (arrays
prepared), the default plan without the kind factors ("old": the measured entry held
in memory without them, ceilings.use_in_memory), the default plan with them ("new"),
and 64x64/w32x32 forced on every GEMM. Every plan's output is checked once against a
float64 reference (NaN-poisoned C, a few GEMMs). Writes fp64_default.txt / .json to
--out (default $OUT, else .).

    python bench/fp64_default.py [--quick] [--out DIR]
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
from portgemm import tiles  # noqa: E402
from portgemm.backends import cuda as cuda_backend  # noqa: E402
from portgemm.benchmark.cublas import CublasGrouped  # noqa: E402
from portgemm.occupancy import ceilings  # noqa: E402
from portgemm.planner.cost_model import predict  # noqa: E402
from portgemm.tuning.model import one_kind_plan  # noqa: E402
from kernel_bench import CASES, Reference, checked, make_batch  # noqa: E402
from planner_proof import broad_batches  # noqa: E402
from timing import do_bench  # noqa: E402

# Random batches off the grid: (name, MaxMN, MaxK, batch), M, N in [16, MaxMN], K in
# [16, MaxK] as the grid's, at other batch counts and bounds.
OFF_GRID = [("f64 256/256 b1024", 256, 256, 1024), ("f64 512/512 b64", 512, 512, 64),
            ("f64 128/512 b256", 128, 512, 256), ("f64 1024/256 b16", 1024, 256, 16),
            ("f64 64/128 b4096", 64, 128, 4096), ("f64 384/128 b512", 384, 128, 512)]
BROAD = 30            # planner_proof.broad_batches drawn; their fp64 ones are timed
MAX_BYTES = 1 << 30   # a broad batch's operands, at most
FORCED = "64x64/w32x32"


def shapes_batch(cp, rng, shapes):
    A = [cp.asarray(rng.random((m, k)) - 0.5) for m, _, k in shapes]
    B = [cp.asarray(rng.random((k, n)) - 0.5) for _, n, k in shapes]
    C = [cp.empty((m, n)) for m, n, _ in shapes]
    return shapes, A, B, C


def all_cases(cp, quick):
    """(group, name, shapes, A, B, C), one case at a time (its arrays freed after)."""
    rng = np.random.default_rng(9)    # kernel_bench's seed and order: the same grid shapes
    for case in CASES["float64"]:
        yield ("grid", case[0], *make_batch(cp, rng, case, "float64"))
    rng = np.random.default_rng(10)
    for case in OFF_GRID[:2] if quick else OFF_GRID:
        yield ("off-grid", case[0], *make_batch(cp, rng, case, "float64"))
    if not quick:
        rng = np.random.default_rng(11)
        for name, s, dtype in broad_batches(BROAD):
            s = s[(s > 0).all(axis=1)]    # cuBLAS grouped takes no empty GEMM
            if dtype != "float64" or not len(s):
                continue
            if 8 * float((s[:, 0] * s[:, 2] + s[:, 2] * s[:, 1] + s[:, 0] * s[:, 1]).sum()) > MAX_BYTES:
                continue
            yield ("broad", "f64 " + name, *shapes_batch(cp, rng, s))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rep-ms", type=float, default=25.0)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    be = cuda_backend.create()
    cp = be.cp
    arch = be.arch()
    cublas = CublasGrouped(cp)
    row = dict(ceilings._load()["measured"][arch.name])
    if not row.get(ceilings.KIND_FACTORS):
        print(f"note: no kind_factors for {arch.name}: old and new are the same plan")
    entries = {"old": {k: v for k, v in row.items() if k != ceilings.KIND_FACTORS}, "new": row}
    forced = next(k for k in tiles.FAMILIES["portgemm-f64"] if k.kind == FORCED)
    rows, raw = [], []
    for group, name, shapes, A, B, C in all_cases(cp, args.quick):
        ref = Reference(cp, A, B)
        flops = 2.0 * float((shapes[:, 0] * shapes[:, 1] * shapes[:, 2]).sum())
        call = cublas.prepare(A, B, C)
        res = {"cublas": (do_bench(cp, call, warmup_ms=10.0, rep_ms=args.rep_ms),
                          checked(cp, call, C, ref), None, "")}
        for label, entry in entries.items():
            ceilings.use_in_memory(arch.name, entry)
            p = portgemm.plan(shapes, "float64", arch=arch)
            bound = p.bind(A, B, C, backend=be)
            err = checked(cp, bound, C, ref)
            res[label] = (do_bench(cp, bound, warmup_ms=10.0, rep_ms=args.rep_ms), err,
                          predict(p), " ".join(f"{k}:{v}" for k, v in p.tiles_per_kind().items()))
        p = one_kind_plan(shapes, forced, "float64", arch)
        bound = p.bind(A, B, C, backend=be)
        err = checked(cp, bound, C, ref)
        res["forced"] = (do_bench(cp, bound, warmup_ms=10.0, rep_ms=args.rep_ms), err,
                         predict(p), "")
        cub = res["cublas"][0]
        rows.append([group, name, len(shapes), flops / cub / 1e9, cub / res["old"][0],
                     cub / res["new"][0], cub / res["forced"][0],
                     res["old"][0] / res["new"][0], res["new"][3],
                     max(r[1] for r in res.values())])
        raw.append({"group": group, "case": name, "batch": len(shapes), "flops": flops,
                    **{f"{m}_ms": r[0] for m, r in res.items()},
                    **{f"{m}_pred_ms": r[2] for m, r in res.items() if r[2] is not None},
                    "old_tiles": res["old"][3], "new_tiles": res["new"][3],
                    "err": max(r[1] for r in res.values())})
        print(f"{name}: x cuBLAS old {rows[-1][4]:.3f} new {rows[-1][5]:.3f} forced "
              f"{rows[-1][6]:.3f}", flush=True)
    ceilings.use_in_memory(arch.name, entries["new"])
    lines = [f"device: {be.device_name()}; bound calls; x cuBLAS grouped fp64 (higher is "
             "faster); new/old: old ms / new ms; err: max relative error vs float64",
             tabulate(rows, headers=["group", "case", "GEMMs", "cuBLAS GFLOP/s", "old",
                                     "new", FORCED, "new/old", "new plan's tiles", "err"],
                      floatfmt=(None, None, None, ".0f", ".3f", ".3f", ".3f", ".3f", None, ".1e"))]

    def geo(xs):
        return float(np.exp(np.mean(np.log(xs)))) if len(xs) else float("nan")
    for group in ("grid", "off-grid", "broad", None):
        sel = [r for r in rows if group is None or r[0] == group]
        if sel:
            lines.append(f"{group or 'all'} ({len(sel)}): geomean x cuBLAS old "
                         f"{geo([r[4] for r in sel]):.3f}, new {geo([r[5] for r in sel]):.3f}, "
                         f"{FORCED} {geo([r[6] for r in sel]):.3f}; new/old "
                         f"{geo([r[7] for r in sel]):.3f}, new slower than old by > 2 % in "
                         f"{sum(r[7] < 0.98 for r in sel)}")
    bad = [r for r in rows if not r[9] < 1e-12]
    lines.append("max error: " + (f"{max(r[9] for r in rows):.2e}" if not bad else
                                  "FAILED " + "; ".join(f"{r[1]} {r[9]}" for r in bad)))
    lines.append(f"wall time {time.perf_counter() - t0:.0f} s")
    print("\n".join(lines))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "fp64_default.txt").write_text("\n".join(lines) + "\n")
    (Path(args.out) / "fp64_default.json").write_text(json.dumps(raw, indent=1) + "\n")


if __name__ == "__main__":
    main()
