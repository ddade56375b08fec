"""The default plan's kinds per grid cell (docs/design.md §6, the grid's own seed) for the
tensor-core formats, one line per cell and format: to see which kinds a grid run timed,
or whether two trees plan alike (diff their outputs).

    python tools/grid_plans.py [--arch sm_90] [--device]

``--device``: plan for the CUDA device present (and with its backend's figures); else for
``--arch`` with the recorded figures.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import portgemm  # noqa: E402
from portgemm.benchmark.workloads import grid_cases  # noqa: E402
from portgemm.occupancy.archs import get_arch  # noqa: E402

FORMATS = (("bfloat16", None), ("float16", None), ("float32", "3xtf32"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--device", action="store_true")
    args = ap.parse_args(argv)
    if args.device:
        from portgemm.backends import cuda
        arch = cuda.create().arch()
    else:
        arch = get_arch(args.arch)
    for c in grid_cases(0):
        for dtype, precision in FORMATS:
            p = portgemm.plan(c.shapes, dtype, arch=arch, precision=precision)
            print(c.name, precision or dtype, p.tiles_per_kind(),
                  "staged" if p.staging is not None else "", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
