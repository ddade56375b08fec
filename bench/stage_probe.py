"""Alignment staging, measured (bench/NOTES.md, session 9): on a few grid cells (random
M, N, K, dense float16 operands: lda = K, ldb = N), bound calls of the direct plan
(staging=False), the staged plan (staging=True: copy + inner plan), the default plan (the
model's choice), and the staged call's inner bound call alone (its GEMMs on the copies the
staged call made, C as given: the staged call without its copy, so staged - inner is the
copy). bench/timing.do_bench (CUDA events, median); TFLOP/s of the batch's flops and the
model's predictions.

    python bench/stage_probe.py [--out DIR] [--cells "512/512 b256,..."]
                                [--dtype float32 [--precision ieee|3xtf32]]

float32 (--dtype): the planner stages only the 16-bit dtypes (planner/staging.py
STAGED_DTYPES); this adds float32 for the run, to measure what staging would give it
(direct and staged plans unsplit; no "default" row: the model has no float32 figures).

A cell not in the grid ("768/2048 b64") is drawn by the grid's generator under its own
seed: the model's choice off the batches it was fitted on.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import portgemm  # noqa: E402
from portgemm.backends import cuda as cuda_backend  # noqa: E402
from portgemm.benchmark.workloads import grid_cases, parse_ranges, random_case  # noqa: E402
from timing import do_bench  # noqa: E402

CELLS = ("128/512 b8", "128/128 b1024", "256/256 b1024", "512/512 b256", "512/512 b1024",
         "1024/128 b1024", "1024/512 b64", "1024/512 b256")


def off_grid(name):
    """A cell named like the grid's ("MaxMN/MaxK bN") but not in it: the same generator
    (M, N uniform in [16, MaxMN], K in [16, MaxK]) under another seed."""
    rng_part, batch = name.split(" b")
    mn, k = parse_ranges(rng_part)[0]
    return random_case(int(batch), mn, k, seed=(9009, mn, k, int(batch)))   # 9009: not the grid's 0


def operands(cp, rng, shapes, dtype="float16"):
    def mat(rows, cols):
        return cp.asarray(rng.random((rows, cols)) - 0.5, dtype=dtype)
    return ([mat(m, k) for m, n, k in shapes], [mat(k, n) for m, n, k in shapes],
            [mat(m, n) for m, n, k in shapes])


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--dtype", default="float16", choices=("float16", "float32"))
    ap.add_argument("--precision", default="ieee", choices=("ieee", "3xtf32", "tf32"))
    args = ap.parse_args(argv)
    opts = {}
    if args.dtype == "float32":
        from portgemm.planner import staging
        staging.STAGED_DTYPES = staging.STAGED_DTYPES + ("float32",)
        opts = {"precision": args.precision, "split_k": False}
    be = cuda_backend.create()
    cp = be.cp
    want = [c.strip() for c in args.cells.split(",") if c.strip()]
    cases = {c.name: c for c in grid_cases(0)}
    extra = {"4096^2x4095": np.array([[4096, 4096, 4095]]), "4096^3": np.array([[4096] * 3])}
    rows = []
    for name in want + list(extra):
        shapes = extra[name] if name in extra else np.asarray(
            (cases[name] if name in cases else off_grid(name)).shapes)
        rng = np.random.default_rng(0)
        flops = 2.0 * float(np.prod(shapes.astype(np.float64), axis=1).sum())
        tight = operands(cp, rng, shapes, args.dtype)
        plans = {"direct": portgemm.plan(shapes, args.dtype, arch=be.arch(), staging=False, **opts),
                 "staged": portgemm.plan(shapes, args.dtype, arch=be.arch(), staging=True, **opts)}
        if args.dtype == "float16":
            plans["default"] = portgemm.plan(shapes, args.dtype, arch=be.arch())
        rec = {"cell": name, "batch": int(shapes.shape[0]), "dtype": args.dtype,
               "precision": args.precision,
               "default_staged": "default" in plans and plans["default"].staging is not None,
               "direct_kinds": plans["direct"].tiles_per_kind()}
        bound = {}
        for what, p in plans.items():
            if what == "staged" and p.staging is None:   # nothing unaligned (4096^3)
                continue
            bound[what] = p.bind(*tight, backend=be)
            ms = do_bench(cp, bound[what])
            rec[what] = {"ms": ms, "tflops": flops / ms / 1e9, "predicted_ms": p.predicted_ms}
        st = plans["staged"].staging
        if st is not None:
            inner = bound["staged"]._launch.gemms[0]   # backends/stage.prepare's inner call
            ms = do_bench(cp, inner)
            rec["inner"] = {"ms": ms, "tflops": flops / ms / 1e9,
                            "predicted_ms": st.plan.predicted_ms,
                            "kinds": st.plan.tiles_per_kind()}
            rec["copy_predicted_ms"] = st.copy_ms
        rows.append(rec)
        line = f"{name:>14}: " + ", ".join(
            f"{k} {rec[k]['tflops']:.1f}" for k in ("direct", "staged", "default", "inner")
            if k in rec) + " TFLOP/s" + (" (default stages)" if rec["default_staged"] else "")
        if "staged" in rec:
            line += (f"; staged/direct {rec['direct']['ms'] / rec['staged']['ms']:.2f}x, "
                     f"copy measured ~{rec['staged']['ms'] - rec['inner']['ms']:.4f} ms "
                     f"predicted {st.copy_ms:.4f}")
        print(line, flush=True)
    name = "stage_probe" + ("" if args.dtype == "float16" else f"_{args.dtype}_{args.precision}")
    Path(args.out, name + ".json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
