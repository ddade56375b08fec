"""Quick timing of the Hopper wgmma kinds (tiles.WGMMA_FAMILIES) against the mma.sync kinds
of the same dtype and torch.bmm, on one CUDA device (sm_90): uniform batches, each
through one kind alone (a bound plan: the launches only), so the per-kind rates the cost
model takes (occupancy/ceilings.py) can be read off. bench/timing.do_bench (CUDA events,
median); prints one JSON line per case and kind.

    python tools/wgmma_timing.py [--dtype bfloat16,float16] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from timing import do_bench  # noqa: E402

# (batch, M, N, K): square batches of growing size and MoE-like expert GEMMs
CASES = [(16, 1024, 1024, 1024), (64, 512, 512, 512), (256, 256, 256, 256),
         (8, 2048, 4096, 2048), (64, 256, 2048, 1024), (4, 4096, 4096, 4096)]
KINDS = {"float16": ("portgemm-f16", "wgmma-f16"), "bfloat16": ("portgemm-bf16", "wgmma-bf16")}


def kind_plan(shapes, dtype, arch, family, kind):
    from portgemm.planner.tiling import Request, build_tiles, make_plan, pack_blocks
    from portgemm.tiles import FAMILIES
    kinds = FAMILIES[family]
    shapes = np.ascontiguousarray(shapes, dtype=np.int64)
    shapes.flags.writeable = False
    kidx = np.full(len(shapes), [k.kind for k in kinds].index(kind), dtype=np.int64)
    tiles = build_tiles(shapes, kinds, kidx)
    tiles, block_ptr = pack_blocks(tiles, np.arange(tiles.shape[0]), shapes[:, 2], by_kind=True)
    return make_plan(Request(shapes, dtype, arch, "per-kind"), "timing-" + family, kinds,
                     tiles, block_ptr, 0.0, 0.0, "none", {}, [])


def main() -> int:
    import torch

    import portgemm
    from portgemm.backends.base import get_backend
    from portgemm.tiles import FAMILIES
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="bfloat16,float16")
    p.add_argument("--out")
    args = p.parse_args()
    be = get_backend("cuda")
    arch = be.arch()
    out = open(args.out, "w") if args.out else None
    for dtype in args.dtype.split(","):
        tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
        for batch, M, N, K in CASES:
            A = torch.randn(batch, M, K, dtype=tdt, device="cuda")
            B = torch.randn(batch, K, N, dtype=tdt, device="cuda")
            C = torch.empty(batch, M, N, dtype=tdt, device="cuda")
            As, Bs, Cs = list(A.unbind(0)), list(B.unbind(0)), list(C.unbind(0))
            flops = 2.0 * batch * M * N * K
            shapes = np.tile([M, N, K], (batch, 1))
            times = {"torch_bmm": do_bench(be.cp, lambda: torch.bmm(A, B, out=C)) * 1e-3}
            ref = C.float().clone()
            for fam in KINDS[dtype]:
                for k in FAMILIES[fam]:
                    if k.engine != "mma":
                        continue
                    plan = kind_plan(shapes, dtype, arch, fam, k.kind)
                    bound = plan.bind(As, Bs, Cs, backend=be)
                    t = do_bench(be.cp, bound) * 1e-3
                    err = float((C.float() - ref).abs().max() / ref.abs().max())
                    times[k.name] = t
                    times[k.name + ":relerr"] = err
            default = portgemm.plan(shapes, dtype)
            bound = default.bind(As, Bs, Cs, backend=be)
            used = [k.name for k, n in zip(default.kinds, default.tile_counts()) if n]
            times["default:" + ",".join(used)] = do_bench(be.cp, bound) * 1e-3
            row = {"dtype": dtype, "batch": batch, "M": M, "N": N, "K": K,
                   "tflops": {n: (flops / t / 1e12 if not n.endswith(":relerr") else t)
                              for n, t in times.items()}}
            line = json.dumps(row)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
