"""Quick timing of the float16/bfloat16 kinds against PyTorch on one CUDA device (the
bench helper's cuBLAS grouped peers are not used here): portgemm's default plan vs a
per-GEMM torch.matmul loop and a padded torch.bmm, over random variable-size batches,
and one large GEMM through each MMA kind alone (what mma.sync m16n8k16 reaches in our
kernel). "ours" times a bound plan (Plan.bind: the launches alone), "ours_run" Plan.run
with its per-call checks of the torch lists. bench/timing.do_bench (CUDA events,
median); prints one JSON line per case.

    python tools/half_timing.py [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from timing import do_bench  # noqa: E402


def main() -> int:
    import torch

    import portgemm
    from portgemm.backends.base import get_backend
    from portgemm.tuning.model import family_kind_plan
    from portgemm.tiles import FAMILIES
    p = argparse.ArgumentParser()
    p.add_argument("--out")
    args = p.parse_args()
    be = get_backend("cuda")

    def timed(torch, fn):   # seconds: bench/timing.do_bench (CUDA events, median)
        return do_bench(be.cp, fn) * 1e-3
    rows = []
    rng = np.random.default_rng(0)
    for dtype, tdt in (("float16", torch.float16), ("bfloat16", torch.bfloat16)):
        for batch, max_mn, max_k in ((1024, 128, 128), (256, 512, 512), (64, 1024, 1024)):
            mn = rng.integers(16, max_mn + 1, (batch, 2))
            ks = rng.integers(16, max_k + 1, batch)
            A = [torch.randn(int(m), int(k), dtype=tdt, device="cuda") for (m, _), k in zip(mn, ks)]
            B = [torch.randn(int(k), int(n), dtype=tdt, device="cuda") for (_, n), k in zip(mn, ks)]
            C = [torch.empty(int(m), int(n), dtype=tdt, device="cuda") for m, n in mn]
            flops = 2.0 * float(np.sum(mn[:, 0] * mn[:, 1] * ks))
            shapes = np.stack([mn[:, 0], mn[:, 1], ks], axis=1)
            plan = portgemm.plan(shapes, dtype)
            ours_call = timed(torch, lambda: plan.run(A, B, C, backend=be))
            bound = plan.bind(A, B, C, backend=be)   # the kernels alone, no per-call checks
            ours = timed(torch, bound)
            loop = timed(torch, lambda: [torch.matmul(a, b, out=c) for a, b, c in zip(A, B, C)])
            M, N, K = int(mn[:, 0].max()), int(mn[:, 1].max()), int(ks.max())
            Ap = torch.randn(batch, M, K, dtype=tdt, device="cuda")
            Bp = torch.randn(batch, K, N, dtype=tdt, device="cuda")
            bmm = timed(torch, lambda: torch.bmm(Ap, Bp))
            row = {"dtype": dtype, "batch": batch, "max_mn": max_mn, "max_k": max_k,
                   "ours_gflops": flops / ours / 1e9, "ours_run_gflops": flops / ours_call / 1e9,
                   "torch_loop_gflops": flops / loop / 1e9,
                   "padded_bmm_gflops": flops / bmm / 1e9,
                   "kinds": sorted({k.kind for k in plan.kinds})}
            rows.append(row)
            print(json.dumps(row), flush=True)
        n = 4096
        a = torch.randn(n, n, dtype=tdt, device="cuda")
        b = torch.randn(n, n, dtype=tdt, device="cuda")
        c = torch.empty(n, n, dtype=tdt, device="cuda")
        shapes = np.array([[n, n, n]], np.int64)
        shapes.flags.writeable = False
        family = "portgemm-f16" if dtype == "float16" else "portgemm-bf16"
        for k in FAMILIES[family]:
            if k.engine != "mma":
                continue
            pl = family_kind_plan(shapes, dtype, be.arch(), family, k.kind, "timing")
            t = timed(torch, lambda: pl.run([a], [b], [c], backend=be))
            row = {"dtype": dtype, "single": n, "kind": k.kind, "tflops": 2.0 * n ** 3 / t / 1e12}
            rows.append(row)
            print(json.dumps(row), flush=True)
        t = timed(torch, lambda: torch.matmul(a, b, out=c))
        row = {"dtype": dtype, "single": n, "kind": "torch.matmul", "tflops": 2.0 * n ** 3 / t / 1e12}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
