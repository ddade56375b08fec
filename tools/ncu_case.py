"""One batch, one bound call between cudaProfilerStart and cudaProfilerStop: the target
of ``ncu --profile-from-start off`` (tools/device_round.sh part ``ncu``), so that Nsight
Compute reports our GEMM kernel (or cuBLAS grouped's) and none of the set-up kernels.

    python tools/ncu_case.py CASE [--dtype float32] [--kind 64x128/8x8] [--peer cublas]
                             [--family wgmma-3xtf32] [--align4]

CASE is ``MaxMN/MaxK/batch`` (M, N uniform in [16, MaxMN], K in [16, MaxK]) or
``MxNxK/batch`` (a uniform batch). ``--kind`` forces one kind of our family (or of
``--family``) on every GEMM (tuning.model.one_kind_plan); without it the default plan
runs. ``--align4``: a random case's sizes rounded up to multiples of 4, so every row is
16-byte aligned (tools/tf32_timing.py's "a4" cases).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import portgemm  # noqa: E402
from portgemm import tiles  # noqa: E402
from portgemm.backends import cuda as cuda_backend  # noqa: E402
from portgemm.benchmark.cublas import CublasGrouped  # noqa: E402
from portgemm.planner.wavefront_tlp import OUR_FAMILY  # noqa: E402
from portgemm.tuning.model import one_kind_plan  # noqa: E402
from timing import profile_once, random_batch  # noqa: E402


def batch_of(cp, rng, case: str, dtype: str, align: int = 1):
    size, batch = case.rsplit("/", 1)
    b = int(batch)
    if "x" in size:
        m, n, k = map(int, size.split("x"))
        A = [cp.asarray(rng.random((m, k)) - 0.5, dtype=dtype) for _ in range(b)]
        B = [cp.asarray(rng.random((k, n)) - 0.5, dtype=dtype) for _ in range(b)]
        C = [cp.empty((m, n), dtype=dtype) for _ in range(b)]
        return np.tile(np.array([m, n, k], np.int64), (b, 1)), A, B, C
    max_mn, max_k = map(int, size.split("/"))
    return random_batch(cp, rng, b, max_mn, max_k, dtype, align=align)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--kind", default=None, help="force one kind of our family")
    ap.add_argument("--peer", choices=("cublas",), default=None)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--family", default=None, help="--kind's family (default: our family)")
    ap.add_argument("--align4", action="store_true", help="sizes rounded up to multiples of 4")
    args = ap.parse_args(argv)
    be = cuda_backend.create()
    cp = be.cp
    shapes, A, B, C = batch_of(cp, np.random.default_rng(args.seed), args.case, args.dtype,
                               4 if args.align4 else 1)
    if args.peer == "cublas":
        call = CublasGrouped(cp).prepare(A, B, C)
        label = "cuBLAS grouped"
    else:
        if args.kind:
            family = args.family or OUR_FAMILY[args.dtype]
            kind = next(k for k in tiles.FAMILIES[family] if k.kind == args.kind)
            p = one_kind_plan(shapes, kind, args.dtype, be.arch())
        else:
            p = portgemm.plan(shapes, args.dtype, arch=be.arch())
        call = p.bind(A, B, C, backend=be)
        label = f"portgemm {p.mode} {p.tiles_per_kind()}"
    profile_once(cp, call)
    print(f"{args.case} {args.dtype}: {label}", flush=True)


if __name__ == "__main__":
    main()
