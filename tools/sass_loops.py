"""Main-loop instruction counts of per-kind NVIDIA entry points, from their SASS (no GPU):
one k step's hot path, its FFMAs and everything else (portgemm/kernels/nv_sass.py).

    python tools/sass_loops.py [--family portgemm] [--kind 64x128/8x8 ...] [--op nn ...]
                               [--arch sm_90] [--source OTHER/vbatched_gemm.cu]

--source compiles another copy of the kernel source with this tree's defines (e.g. main's,
to compare before and after a change; bench/NOTES.md, session 10).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabulate import tabulate  # noqa: E402

from portgemm.kernels import nv_sass, nvrtc, render  # noqa: E402
from portgemm.kernels.variants import Variant  # noqa: E402
from portgemm.tiles import FAMILIES  # noqa: E402

OPS = ("nn", "nt", "tn", "tt")


def count(kind, op: str, arch: str, dtype: str, source: str | None):
    v = Variant((kind,), dtype, "tile-list", op[0] == "t", op[1] == "t")
    r = render.render(v)
    text = r.source
    if source is not None:
        _, body = render._texts()
        text = text.replace(body, Path(source).read_text())
    cubin, res = nvrtc.compile(text, r.name, arch)
    loop = nv_sass.main_loop(cubin)
    top = ", ".join(f"{op} {n}" for op, n in loop.mix if op != "FFMA")
    return [kind.kind, op, res.registers, res.spill_bytes, loop.static, loop.hot, loop.ffma,
            loop.other, f"{loop.other / loop.ffma:.3f}", top[:90]]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--family", default="portgemm")
    p.add_argument("--kind", action="append", help="default: every SIMT kind of the family")
    p.add_argument("--op", action="append", choices=OPS, help="default: all four")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--source", help="another kernel source to compile with these defines")
    args = p.parse_args(argv)
    kinds = [k for k in FAMILIES[args.family] if k.engine == "simt"
             and (not args.kind or k.kind in args.kind)]
    rows = [count(k, op, args.arch, args.dtype, args.source)
            for k in kinds for op in (args.op or OPS)]
    print(tabulate(rows, headers=["kind", "op", "regs", "spill", "loop", "step", "FFMA",
                                  "other", "other/FFMA", "other, most first"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
