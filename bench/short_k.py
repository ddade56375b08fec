"""fp32 SIMT on the grid's short-K cells (issue 9): the grid's own batches (the seeds of
``python -m portgemm bench --grid``), timed or profiled one method at a time.

For each case: the default plan's bound call, every kind of our fp32 family forced on
the whole batch (tuning.model.family_kind_plan), and cuBLAS grouped, event-timed in one
process (bench/timing.py); every timed call's output is checked once against a float64
reference (NaN-poisoned C, a few GEMMs of the batch). ``--profile METHOD`` instead runs
one call of that method between cudaProfilerStart and cudaProfilerStop, the target of
``ncu --profile-from-start off``.

    python bench/short_k.py [--cases 1024/128/1024,1024/512/1024] [--methods default,cublas,kinds]
                            [--op nn|nt|tn|tt] [--align 8]
    ncu --profile-from-start off --set full python bench/short_k.py --cases 1024/128/1024 --profile default

``--dtype float16`` / ``bfloat16`` time the 16-bit families the same way ("kinds": the
mma.sync family's). Methods ``staged`` and ``direct``: the default plan with every
unaligned operand copied to aligned rows first, or none (16-bit dtypes: plan(staging=True
/ False)). A method ``FAMILY:KIND`` forces a kind of another family
(``wgmma-f16:64x128/g64x128``).
``--align N`` rounds every size up to a multiple of N (N = 8: every 16-bit row 16-byte
aligned), to time the aligned paths on the same batch.

PG_TREE=DIR imports portgemm from DIR instead of this checkout (two trees, one run).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, os.environ.get("PG_TREE") or str(HERE.parent))
sys.path.insert(1, str(HERE))
import portgemm  # noqa: E402
from portgemm import tiles  # noqa: E402
from portgemm.backends import cuda as cuda_backend  # noqa: E402
from portgemm.benchmark.cublas import CublasGrouped  # noqa: E402
from portgemm.benchmark.workloads import random_case  # noqa: E402
from portgemm.planner.wavefront_tlp import OUR_FAMILY  # noqa: E402
from portgemm.tuning.model import family_kind_plan  # noqa: E402
from timing import do_bench, profile_once  # noqa: E402

CASES = "1024/128/1024,1024/512/1024"
# our default family per dtype (the 16-bit ones: their mma.sync families)
OURS = {**OUR_FAMILY, **{dt: fam for fam, dt in tiles.HALF_FAMILIES.items()}}
# the default plan and its staging forced on or off (16-bit dtypes: planner/staging.py)
STAGING = {"default": {}, "staged": {"staging": True}, "direct": {"staging": False}}
GRID_SEED = 0    # portgemm bench --grid's seed: case (MaxMN, MaxK, batch) draws from (0, MaxMN, MaxK, batch)


def grid_batch(cp, case: str, dtype: str, op: str = "nn", align: int = 1):
    """The grid's shapes of ``MaxMN/MaxK/batch`` (each size rounded up to a multiple of
    ``align``), random operands (stored transposed where ``op`` says: "tn" A^T B, ...),
    C NaN-poisoned."""
    mn, k, b = map(int, case.split("/"))
    shapes = random_case(b, mn, k, seed=(GRID_SEED, mn, k, b)).shapes
    shapes = -(-shapes // align) * align
    gen = cp.random.default_rng(b)
    A = [(gen.random((kk, m) if op[0] == "t" else (m, kk), dtype=cp.float64) - 0.5).astype(dtype)
         for m, _, kk in shapes]
    B = [(gen.random((n, kk) if op[1] == "t" else (kk, n), dtype=cp.float64) - 0.5).astype(dtype)
         for _, n, kk in shapes]
    C = [cp.full((m, n), cp.nan, dtype=dtype) for m, n, _ in shapes]
    return shapes, A, B, C


def worst_error(cp, shapes, A, B, C, call, sample=4, op="nn"):
    for c in C:
        c.fill(cp.nan)
    call()
    cp.cuda.get_current_stream().synchronize()
    worst = 0.0
    for i in np.unique(np.linspace(0, len(A) - 1, sample).astype(int)):
        a, b = cp.asnumpy(A[i]).astype(np.float64), cp.asnumpy(B[i]).astype(np.float64)
        ref = (a.T if op[0] == "t" else a) @ (b.T if op[1] == "t" else b)
        got = cp.asnumpy(C[i]).astype(np.float64)
        err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-300))
        worst = max(worst, err if np.isfinite(err) else float("inf"))
    return worst


def calls(be, shapes, A, B, C, dtype, methods, op="nn"):
    """(label, note, bound call) of each method: default, cublas, a kind name, or
    ``kinds`` (every kind of our family); ``op``: the operands' transposes (cuBLAS grouped
    times "nn" only)."""
    out = []
    ta, tb = op[0] == "t", op[1] == "t"
    for m in methods:
        if m == "cublas":
            if op == "nn":
                out.append(("cuBLAS grouped", "", CublasGrouped(be.cp).prepare(A, B, C)))
        elif m in STAGING:
            p = portgemm.plan(shapes, dtype, arch=be.arch(), **STAGING[m])
            q = p.staging.plan if p.staging is not None else p   # the kinds that run
            note = " ".join(f"{k}:{v}" for k, v in q.tiles_per_kind().items())
            out.append((m, note, p.bind(A, B, C, trans_a=ta, trans_b=tb, backend=be)))
        else:
            fam, _, kind = m.rpartition(":")
            fam = fam or OURS[dtype]
            kinds = [k.kind for k in tiles.FAMILIES[fam]] if m == "kinds" else [kind]
            for kind in kinds:
                p = family_kind_plan(shapes, dtype, be.arch(), fam, kind)
                label = kind if fam == OURS[dtype] else f"{fam}:{kind}"
                out.append((label, "forced", p.bind(A, B, C, trans_a=ta, trans_b=tb, backend=be)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--methods", default="default,cublas,kinds")
    ap.add_argument("--op", default="nn", choices=("nn", "nt", "tn", "tt"),
                    help="the operands' transposes (A^T B: tn)")
    ap.add_argument("--align", type=int, default=1, help="round sizes up to multiples of N")
    ap.add_argument("--profile", default=None, help="one method, between profiler start/stop")
    ap.add_argument("--rep-ms", type=float, default=30.0)
    ap.add_argument("--label", default="", help="a tag for this tree's rows")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    be = cuda_backend.create()
    cp = be.cp
    rows = []
    for case in args.cases.split(","):
        shapes, A, B, C = grid_batch(cp, case, args.dtype, args.op, args.align)
        flops = 2.0 * float((shapes[:, 0] * shapes[:, 1] * shapes[:, 2]).sum())
        if args.profile:
            (label, note, call), = calls(be, shapes, A, B, C, args.dtype, [args.profile], args.op)
            profile_once(cp, call)
            print(f"profiled {case} {args.dtype}: {label} {note}", flush=True)
            continue
        for label, note, call in calls(be, shapes, A, B, C, args.dtype, args.methods.split(","), args.op):
            err = worst_error(cp, shapes, A, B, C, call, op=args.op)
            ms = do_bench(cp, call, warmup_ms=10.0, rep_ms=args.rep_ms)
            rows.append({"tree": args.label, "op": args.op, "align": args.align, "case": case,
                         "method": label, "note": note, "ms": ms, "tflops": flops / ms / 1e9,
                         "err": err})
            print(f"{args.label:>6} {case:>14} {label:>16} {ms:8.3f} ms {flops / ms / 1e9:6.1f} TFLOP/s "
                  f"err {err:.1e} {note}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
