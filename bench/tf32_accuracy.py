"""Accuracy of the fp32 precision modes against float64, and their raw rate, on the GPU.

For K = 64 ... 4096: a batch of GEMMs of M = N = 256 with inputs uniform in [-1, 1)
(fp32), computed by portgemm in each precision mode ("ieee": our SIMT kinds, "tf32",
"3xtf32") and by cuBLAS through torch.matmul (fp32 IEEE, and TF32 with allow_tf32),
each against the float64 product of the same fp32 inputs. Reported per K: the largest
elementwise |C - ref| over max |ref| of the batch ("max rel"), and the relative
Frobenius error ||C - ref|| / ||ref|| averaged over the batch ("frob").

Then the rate of each mode on one 4096^3 GEMM and on a 256-GEMM batch of 512^2 x 512
(bound plan, median of event-timed calls), which the planner's TF32 ceiling is read from.

    python3 bench/tf32_accuracy.py [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import portgemm  # noqa: E402
from timing import do_bench  # noqa: E402  (bench/timing.py, beside this file)

KS = (64, 128, 256, 512, 1024, 2048, 4096)
MODES = ("ieee", "tf32", "3xtf32")


def errors(got, ref):
    mx = max(float(np.abs(g - r).max()) / float(np.abs(r).max()) for g, r in zip(got, ref))
    frob = float(np.mean([np.linalg.norm(g - r) / np.linalg.norm(r) for g, r in zip(got, ref)]))
    return mx, frob


def accuracy(torch, be, batch=8, mn=256):
    rows = []
    rng = np.random.default_rng(2026)
    for K in KS:
        Ah = [rng.uniform(-1, 1, (mn, K)).astype(np.float32) for _ in range(batch)]
        Bh = [rng.uniform(-1, 1, (K, mn)).astype(np.float32) for _ in range(batch)]
        ref = [a.astype(np.float64) @ b.astype(np.float64) for a, b in zip(Ah, Bh)]
        A = [torch.from_numpy(a).cuda() for a in Ah]
        B = [torch.from_numpy(b).cuda() for b in Bh]
        row = {"K": K}
        for mode in MODES:
            C = [torch.full((mn, mn), float("nan"), device="cuda") for _ in range(batch)]
            portgemm.gemm_vbatched(A, B, C, backend=be, precision=mode)
            torch.cuda.synchronize()
            row[mode] = errors([c.cpu().numpy().astype(np.float64) for c in C], ref)
        for name, tf32 in (("cublas-ieee", False), ("cublas-tf32", True)):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            got = [(a @ b).cpu().numpy().astype(np.float64) for a, b in zip(A, B)]
            row[name] = errors(got, ref)
        torch.backends.cuda.matmul.allow_tf32 = False
        rows.append(row)
    return rows


def rate(torch, be, shapes, mode):
    rng = np.random.default_rng(7)
    A = [torch.from_numpy(rng.uniform(-1, 1, (m, k)).astype(np.float32)).cuda() for m, n, k in shapes]
    B = [torch.from_numpy(rng.uniform(-1, 1, (k, n)).astype(np.float32)).cuda() for m, n, k in shapes]
    C = [torch.zeros((m, n), device="cuda") for m, n, k in shapes]
    p = portgemm.plan(shapes, "float32", be.arch(), precision=mode)
    t = do_bench(be.cp, p.bind(A, B, C, backend=be)) * 1e-3
    return {"mode": mode, "shapes": f"{len(shapes)} x {shapes[0]}", "ms": t * 1e3,
            "tflops": p.flops / t / 1e12, "kinds": p.tiles_per_kind()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    import torch
    be = portgemm.backends.base.get_backend("cuda")
    rows = accuracy(torch, be)
    cols = list(MODES) + ["cublas-ieee", "cublas-tf32"]
    table = tabulate([[r["K"]] + [f"{r[c][0]:.2e} / {r[c][1]:.2e}" for c in cols] for r in rows],
                     headers=["K"] + [f"{c} max rel / frob" for c in cols])
    rates = [rate(torch, be, [(4096, 4096, 4096)], m) for m in MODES]
    rates += [rate(torch, be, [(512, 512, 512)] * 256, m) for m in MODES]
    rtab = tabulate([[r["mode"], r["shapes"], f"{r['ms']:.3f}", f"{r['tflops']:.1f}",
                      ", ".join(f"{k} {n}" for k, n in r["kinds"].items())] for r in rates],
                    headers=["mode", "batch", "ms", "TFLOP/s", "kinds"])
    text = (f"device: {torch.cuda.get_device_name()}\naccuracy vs float64, M = N = 256, batch 8, "
            f"inputs uniform in [-1, 1)\n{table}\n\nrate (bound plan, bench/timing.do_bench: median of event-timed calls)\n{rtab}\n")
    print(text, flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "tf32_accuracy.txt").write_text(text)
    (Path(args.out) / "tf32_accuracy.json").write_text(json.dumps({"accuracy": rows, "rates": rates},
                                                                  indent=1, default=str))


if __name__ == "__main__":
    main()
