"""Quick timing of the Hopper wgmma kinds (tiles.WGMMA_FAMILIES) against the mma.sync kinds
of the same dtype and torch.bmm, on one CUDA device (sm_90): uniform batches, each
through one kind alone (a bound plan: the launches only), so the per-kind rates the cost
model takes (occupancy/ceilings.py) can be read off. bench/timing.do_bench (CUDA events,
median); prints one JSON line per case and kind.

    python tools/wgmma_timing.py [--dtype bfloat16,float16] [--wgmma-only] [--interleaved]
                                 [--odd-ld] [--windows] [--out FILE]
    python tools/wgmma_timing.py --set-rate FILE
    python tools/wgmma_timing.py --wgmma-only --configs 128x128:64:4,128x256:64:3 [--dtype ...]

--interleaved renders the wgmma kinds with wgmma's no-swizzle layout (render.WGMMA_SWIZZLE
False) instead of the swizzled one; --windows renders the 16-bit ones with aligned windows
for rows not 16-byte aligned (render.WGMMA_WINDOWS; --odd-ld gives them such rows);
--set-rate writes the wgmma kinds' rate into occupancy/ceilings.json (measured sm_90
wgmma_flops_per_s): the slower of float16 and bfloat16 through 128x128/g64x128 alone on
the 4 x 4096^3 case of a timing FILE.
--configs adds candidate wgmma kinds for this run only, each BMxBN:BK:STAGES (warpgroups of
64 x 128, one per 128 threads; named e.g. 128x256/g64x128/k64s3), to compare tile, BK and
pipeline depth before a kind enters the catalogue (stages past 48 KiB take dynamic shared
memory).
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

# (batch, M, N, K): square batches of growing size and MoE-like expert GEMMs
CASES = [(16, 1024, 1024, 1024), (64, 512, 512, 512), (256, 256, 256, 256),
         (8, 2048, 4096, 2048), (64, 256, 2048, 1024), (4, 4096, 4096, 4096)]
KINDS = {"float16": ("portgemm-f16", "wgmma-f16"), "bfloat16": ("portgemm-bf16", "wgmma-bf16")}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="bfloat16,float16")
    p.add_argument("--out")
    p.add_argument("--wgmma-only", action="store_true", help="time the wgmma kinds only")
    p.add_argument("--interleaved", action="store_true",
                   help="the wgmma kinds in the no-swizzle layout")
    p.add_argument("--set-rate", metavar="FILE", help="write the rate measured in FILE")
    p.add_argument("--configs", default="",
                   help="candidate wgmma kinds BMxBN:BK:STAGES, comma-separated")
    p.add_argument("--windows", action="store_true",
                   help="the 16-bit wgmma kinds with aligned windows (render.WGMMA_WINDOWS)")
    p.add_argument("--odd-ld", action="store_true",
                   help="operands with odd leading dimensions (the 2-byte copy path)")
    args = p.parse_args()
    if args.set_rate:
        return set_rate(Path(args.set_rate))
    import torch

    import portgemm
    from portgemm.backends.base import get_backend
    from portgemm.tiles import FAMILIES
    from portgemm.tuning.model import family_kind_plan
    from portgemm.kernels import render
    if args.interleaved:
        render.WGMMA_SWIZZLE = False
    if args.windows:
        render.WGMMA_WINDOWS = set(render.WGMMA_16BIT)
    add_candidates(args.configs)
    be = get_backend("cuda")
    arch = be.arch()
    out = open(args.out, "w") if args.out else None
    for dtype in args.dtype.split(","):
        tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
        for batch, M, N, K in CASES:
            pad = 1 if args.odd_ld else 0     # a view of odd row length: 2-byte rows
            A = torch.randn(batch, M, K + pad, dtype=tdt, device="cuda")[:, :, :K]
            B = torch.randn(batch, K, N + pad, dtype=tdt, device="cuda")[:, :, :N]
            C = torch.empty(batch, M, N, dtype=tdt, device="cuda")
            As, Bs, Cs = list(A.unbind(0)), list(B.unbind(0)), list(C.unbind(0))
            flops = 2.0 * batch * M * N * K
            shapes = np.tile([M, N, K], (batch, 1))
            times = {"torch_bmm": do_bench(be.cp, lambda: torch.bmm(A, B, out=C)) * 1e-3}
            ref = C.float().clone()
            if args.odd_ld and (batch, M) not in ((16, 1024), (8, 2048)):
                continue
            for fam in KINDS[dtype][1:] if args.wgmma_only else KINDS[dtype]:
                for k in FAMILIES[fam]:
                    if k.engine != "mma":
                        continue
                    plan = family_kind_plan(shapes, dtype, arch, fam, k.kind, "timing")
                    bound = plan.bind(As, Bs, Cs, backend=be)
                    t = do_bench(be.cp, bound) * 1e-3
                    err = float((C.float() - ref).abs().max() / ref.abs().max())
                    times[k.name] = t
                    times[k.name + ":relerr"] = err
            if not args.wgmma_only:
                default = portgemm.plan(shapes, dtype)
                bound = default.bind(As, Bs, Cs, backend=be)
                used = [k.name for k, n in zip(default.kinds, default.tile_counts()) if n]
                times["default:" + ",".join(used)] = do_bench(be.cp, bound) * 1e-3
            row = {"dtype": dtype, "batch": batch, "M": M, "N": N, "K": K,
                   "layout": "swizzled" if render.WGMMA_SWIZZLE else "interleaved",
                   "odd_ld": args.odd_ld, "windows": args.windows,
                   "tflops": {n: (flops / t / 1e12 if not n.endswith(":relerr") else t)
                              for n, t in times.items()}}
            line = json.dumps(row)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
    return 0


def add_candidates(configs: str) -> None:
    """Add the --configs kinds to the wgmma families (tiles.FAMILIES) for this process,
    with their stages (render.STAGES) and a register cap that fills the SM's register
    file (render.MIN_BLOCKS: 65,536 / threads / 128 registers)."""
    import dataclasses

    from portgemm import tiles
    from portgemm.kernels import render
    for spec in filter(None, configs.split(",")):
        shape, bk, st = spec.split(":")
        bm, bn = map(int, shape.split("x"))
        for fam, dt in tiles.WGMMA_FAMILIES.items():
            if dt == "float32":     # wgmma-3xtf32: BK 32 only (one 128-byte split row)
                continue
            base = tiles.FAMILIES[fam][0]
            k = dataclasses.replace(base, kind=f"{shape}/g64x128/k{bk}s{st}", tm=bm, tn=bn,
                                    tk=int(bk), threads=bm * bn // (64 * 128) * 128)
            tiles.FAMILIES[fam] = tiles.FAMILIES[fam] + (k,)
            render.STAGES[(fam, k.kind, dt)] = int(st)
            render.MIN_BLOCKS[(fam, k.kind, dt)] = max(1, 65536 // k.threads // 128)


def set_rate(path: Path) -> int:
    """Write the wgmma kinds' rate measured in the timing file ``path`` into
    occupancy/ceilings.json (see the module docstring)."""
    from portgemm.occupancy import ceilings
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if (r["batch"], r["M"], r["N"], r["K"]) == (4, 4096, 4096, 4096)
            and not r.get("odd_ld")]
    got = {r["dtype"]: r["tflops"][f"{KINDS[r['dtype']][1]}.128x128/g64x128"] for r in rows}
    if not got:
        print(f"{path}: no 4 x 4096^3 case", file=sys.stderr)
        return 1
    layout = rows[0].get("layout", "swizzled")
    rate = round(min(got.values()), 1) * 1e12
    source = ("4 x 4096^3 through our wgmma 128x128/g64x128 kind alone (wgmma.mma_async "
              f"m64n128k16, fp32 accumulators, cp.async stages in the {layout} layout), "
              + ", ".join(f"{d} {t:.0f}" for d, t in sorted(got.items()))
              + " TFLOP/s (the slower taken), measured on the H100 (tools/wgmma_timing.py)")
    # line edits in place (after sm_90's tf32 source where absent), so the file keeps its
    # one-line spec rows; every row but the object's last ends with a comma
    lines = ceilings.PATH.read_text().splitlines()
    for key, value in (("wgmma_flops_per_s", repr(rate)), ("wgmma_source", json.dumps(source))):
        at = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith(f'"{key}"')), None)
        if at is None:
            at = 1 + next(i for i, ln in enumerate(lines)
                          if ln.lstrip().startswith(('"tf32_mma_source"', '"wgmma_flops_per_s"')))
            lines.insert(at, "")
        indent = lines[at - 1][:len(lines[at - 1]) - len(lines[at - 1].lstrip())]
        lines[at - 1] = lines[at - 1].rstrip(",") + ","
        more = not lines[at + 1].lstrip().startswith("}")
        lines[at] = f'{indent}"{key}": {value}' + ("," if more else "")
    ceilings.PATH.write_text("\n".join(lines) + "\n")
    json.loads(ceilings.PATH.read_text())   # still JSON
    print(f"wgmma_flops_per_s = {rate:.4g} ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
