"""What the 16-bit copy widths cost (bench/NOTES.md, session 7): one float16 GEMM through
one MMA kind with leading dimensions 0, 4, 2 and 1 mod 8 elements (16-byte, 4-byte
(8-byte rows take the 4-byte path) and element copies), and a random batch with tight
leading dimensions (random K and N: mostly narrow copies) against the same batch padded
to multiples of 8 (all 16-byte). Bound calls, bench/timing.do_bench (CUDA events, median);
TFLOP/s. (The numbers in bench/NOTES.md, session 7, were taken with a median of 10 events
after 3 warm-up calls, the same measure with fewer repetitions.)

    python tools/half_align_probe.py [--size 4096] [--batch 256] [--max 512]
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
from portgemm.tuning.model import one_kind_plan  # noqa: E402
from timing import do_bench  # noqa: E402


def matrix(cp, rng, rows, cols, pad):
    buf = cp.empty((rows, cols + pad), dtype=cp.float16)
    view = buf[:, :cols]
    view[...] = cp.asarray(rng.random((rows, cols)) - 0.5, dtype=cp.float16)
    return view


def seconds(cp, call):
    return do_bench(cp, call) / 1e3


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--max", type=int, default=512)
    args = ap.parse_args(argv)
    be = cuda_backend.create()
    cp = be.cp
    rng = np.random.default_rng(0)
    n = args.size
    shapes = np.array([[n, n, n]], np.int64)
    for kind in ("128x128/w64x32", "64x64/w32x32"):
        k = next(k for k in tiles.FAMILIES["portgemm-f16"] if k.kind == kind)
        row = []
        for pad in (0, 4, 2, 1):   # ld = n + pad: 0, 4, 2, 1 mod 8
            A, B, C = (matrix(cp, rng, n, n, pad) for _ in range(3))
            call = one_kind_plan(shapes, k, "float16", be.arch()).bind([A], [B], [C], backend=be)
            row.append(f"ld%8={pad}: {2 * n ** 3 / seconds(cp, call) / 1e12:.0f}")
        print(f"{n}^3 float16 {kind}: " + ", ".join(row) + " TFLOP/s", flush=True)
    m = rng.integers(16, args.max + 1, (args.batch, 3))
    for pad8 in (False, True):
        A, B, C = [], [], []
        for mm, nn, kk in m:
            pk = (-kk) % 8 if pad8 else 0
            pn = (-nn) % 8 if pad8 else 0
            A.append(matrix(cp, rng, mm, kk, pk))
            B.append(matrix(cp, rng, kk, nn, pn))
            C.append(matrix(cp, rng, mm, nn, pn))
        call = portgemm.plan(m, "float16", arch=be.arch()).bind(A, B, C, backend=be)
        flops = 2 * float(np.prod(m, axis=1).sum())
        tflops = flops / seconds(cp, call) / 1e12
        print(f"random {args.max}/{args.max} b{args.batch} float16, leading dimensions "
              f"{'padded to 8' if pad8 else 'tight'}: {tflops:.1f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
