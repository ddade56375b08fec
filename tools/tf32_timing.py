"""Quick timing of float32 on the tensor cores (precision "3xtf32" and "tf32") against our
IEEE SIMT path, on one CUDA device: uniform batches and random (design-grid-like)
batches, each through every MMA kind of the 3xtf32 families alone (tiles.FAMILIES
portgemm-3xtf32 and, on sm_90, wgmma-3xtf32) and through the default plans. Every result
is checked against a float64 reference (max |C - ref| / max |ref|) before it is timed;
bench/timing.do_bench (CUDA events, median). One JSON line per case.

    python tools/tf32_timing.py [--out FILE] [--ops nn,tt] [--quick] [--cases PREFIX,...]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from timing import do_bench  # noqa: E402

# (name, shapes): uniform batches of growing size, and random M, N in [16, MaxMN], K in
# [16, MaxK] (the design grid's distribution) at batch 256
UNIFORM = [(4, 4096, 4096, 4096), (16, 1024, 1024, 1024), (64, 512, 512, 512),
           (256, 256, 256, 256), (8, 2048, 4096, 2048)]
RANDOM = [(256, 1024, 512), (1024, 512, 256), (256, 512, 128)]
FAMILIES_3X = ("portgemm-3xtf32", "wgmma-3xtf32")


def cases(quick: bool, only: str = ""):
    """The cases; each random one also with its sizes rounded up to multiples of 4 ("a4":
    every row 16-byte aligned), to tell the copies' width from the sizes' spread."""
    from portgemm.benchmark.workloads import random_case
    out = [(f"{b}x{m}x{n}x{k}", np.tile([m, n, k], (b, 1))) for b, m, n, k in UNIFORM]
    for c in (random_case(b, mn, k, seed=11) for b, mn, k in RANDOM):
        out += [(c.name, c.shapes), (c.name + " a4", -(-c.shapes // 4) * 4)]
    out = out[:3] + out[-2:] if quick else out
    return [c for c in out if not only or any(c[0].startswith(o) for o in only.split(","))]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out")
    p.add_argument("--ops", default="nn")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--cases", default="", help="comma list of case-name prefixes")
    args = p.parse_args()
    import cupy as cp

    import portgemm
    from portgemm.backends.base import get_backend
    from portgemm.tiles import FAMILIES, family_builds_for
    from portgemm.tuning.model import family_kind_plan
    be = get_backend("cuda")
    arch = be.arch()
    out = open(args.out, "w") if args.out else None
    rng = np.random.default_rng(5)
    for op in args.ops.split(","):
        ta, tb = op[0] == "t", op[1] == "t"
        for name, shapes in cases(args.quick, args.cases):
            As, Bs, Cs, refs = [], [], [], []
            for m, n, k in shapes.tolist():
                a = rng.uniform(-1, 1, (k, m) if ta else (m, k)).astype(np.float32)
                b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
                ga, gb = cp.asarray(a), cp.asarray(b)
                As.append(ga)
                Bs.append(gb)
                Cs.append(cp.empty((m, n), cp.float32))
                refs.append((ga.T if ta else ga).astype(cp.float64) @ (gb.T if tb else gb).astype(cp.float64))
            scale = max(float(cp.abs(r).max()) for r in refs)
            flops = 2.0 * float((shapes[:, 0] * shapes[:, 1] * shapes[:, 2]).astype(np.float64).sum())
            plans = {"ieee": portgemm.plan(shapes, "float32", arch=arch),
                     "3xtf32": portgemm.plan(shapes, "float32", arch=arch, precision="3xtf32"),
                     "tf32": portgemm.plan(shapes, "float32", arch=arch, precision="tf32")}
            for fam in FAMILIES_3X:
                if fam not in FAMILIES or not family_builds_for(fam, arch.name):
                    continue
                for k in FAMILIES[fam]:
                    if k.engine == "mma":
                        plans[k.name] = family_kind_plan(shapes, "float32", arch, fam, k.kind, "timing")
            row = {"op": op, "case": name, "batch": int(shapes.shape[0]), "tflops": {}, "relerr": {},
                   "kinds": {}}
            for label, plan in plans.items():
                for c in Cs:
                    c.fill(float("nan"))
                bound = plan.bind(As, Bs, Cs, trans_a=ta, trans_b=tb, backend=be)
                bound()
                cp.cuda.runtime.deviceSynchronize()
                err = max(float(cp.nan_to_num(cp.abs(c - r), nan=np.inf).max()) for c, r in zip(Cs, refs))
                row["relerr"][label] = err / scale
                row["tflops"][label] = flops / (do_bench(cp, bound) * 1e-3) / 1e12
                row["kinds"][label] = {k.name: int(n) for k, n in zip(plan.kinds, plan.tile_counts()) if n}
            line = json.dumps(row)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
