"""Mixture-of-experts batches (ragged M, one N and K per layer) through portgemm's
packed call (portgemm.gemm_grouped) against torch's grouped matmul
(torch.nn.functional.grouped_mm or torch._grouped_mm, whichever torch has), cuBLAS
grouped (cublasGemmGroupedBatchedEx) and padded torch.bmm, in one run, on the same
operands; every method checked against float64 before it is timed.

Layers: one real MoE layer per expert count 8, 16, 32, 64, 128 (portgemm/benchmark/
workloads.py MOE_LAYERS), up and down projections; --tokens tokens each routed to the
layer's top_k distinct experts uniformly at random (--routing zipf: expert e drawn with
weight 1/(e+1), as a router with favourite experts). bf16 (all peers) and fp16 (torch's
grouped matmul is bf16-only on most versions: reported n/a or FAIL where it is).

    python bench/moe_bench.py [--dtype bfloat16,float16] [--tokens 4096] [--experts 8,64]
                              [--routing uniform|zipf] [--out DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from portgemm.benchmark.half_cli import moe_main  # noqa: E402
from portgemm.benchmark.workloads import MOE_TOKENS  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="bfloat16,float16")
    ap.add_argument("--tokens", type=int, default=MOE_TOKENS)
    ap.add_argument("--experts", help="comma list of expert counts (default: all)")
    ap.add_argument("--routing", default="uniform", choices=("uniform", "zipf"),
                    help="router: uniform experts, or Zipf (1/rank) popularity")
    ap.add_argument("--mode", default="warm", choices=("warm", "cold-l2"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    experts = {int(x) for x in args.experts.split(",")} if args.experts else None
    moe_main(args.dtype, args.out, args.tokens, experts, args.mode, args.seed,
             name="moe" if args.routing == "uniform" else f"moe_{args.routing}",
             routing=args.routing)


if __name__ == "__main__":
    main()
