"""python -m portgemm tune: sweep the candidate tile kinds on this device and write the
per-architecture data file the planner reads (occupancy/tuned/<arch>.json)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..cli import OneLineParser
from ..errors import PortgemmError
from . import choose

DTYPES = ("float32", "float64")
DEFAULT_BUDGET_S = 240.0


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return v


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return v


def parser() -> OneLineParser:
    p = OneLineParser(
        prog="python -m portgemm tune",
        description="Time every candidate tile kind (tiles.py: tune, "
                    "tune-f64) on uniform batches spanning M = N in 32..1024 "
                    "and K in 32..1024 on this device, check each against a float64 "
                    "reference, and write the tuned family (the fewest kinds within the "
                    "tolerance of the best on every size) and the cost model's per-kind "
                    "factors to portgemm/occupancy/tuned/<arch>.json, which the default "
                    "plan then uses ($PORTGEMM_TUNED=0 or plan(..., tuned=False) ignore it).")
    p.add_argument("--dtype", nargs="+", choices=DTYPES, default=list(DTYPES),
                   help="dtypes to tune (default: both)")
    p.add_argument("--budget", type=_seconds, default=DEFAULT_BUDGET_S,
                   help=f"seconds for the whole sweep, compiles included (default "
                        f"{DEFAULT_BUDGET_S:g}); shared among the dtypes; when it runs out the "
                        "file holds the sizes measured so far")
    p.add_argument("--out", type=Path, default=None,
                   help="write here instead of portgemm/occupancy/tuned/<arch>.json")
    p.add_argument("--no-write", action="store_true", help="print the tables, write nothing")
    p.add_argument("--backend", choices=("cuda", "numpy"), default=None,
                   help="default: cuda when present, else numpy (a dry run: it needs --out "
                        "or --no-write, since host timings say nothing about a GPU)")
    p.add_argument("--quick", action="store_true", help="a few sizes only (a smoke run)")
    p.add_argument("--tolerance", type=_fraction, default=choose.TOLERANCE,
                   help=f"how close to the best a kind must be to cover a size (default "
                        f"{choose.TOLERANCE:g})")
    p.add_argument("--no-progress", action="store_true", help="no progress bar or lines")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except PortgemmError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def run(args, timer=None, clock=time.monotonic) -> int:
    from ..benchmark.device import open_device
    from ..occupancy import tuned
    from .report import data_file, table
    from .space import sizes
    from .sweep import device_timer, sweep_dtype

    start = clock()
    dev = open_device(args.backend)
    arch = dev.be.arch()
    if dev.kind == "host" and args.out is None and not args.no_write:
        print("error: the numpy backend times the host, not a GPU: give --out FILE or "
              "--no-write for a dry run", file=sys.stderr)
        return 2
    dtypes = list(dict.fromkeys(args.dtype))
    sweeps = []
    for i, dtype in enumerate(dtypes):
        # each dtype gets an equal share of what is left
        deadline = clock() + (start + args.budget - clock()) / (len(dtypes) - i)
        sw = sweep_dtype(dev, dtype, sizes(arch.compute_units, dtype, args.quick),
                         timer=timer or device_timer, clock=clock, deadline=deadline,
                         show_progress=not args.no_progress)
        sweeps.append(sw)
        print(table(sw, args.tolerance))
        print()
    data = data_file(sweeps, dev.info(), args.budget, args.tolerance)
    for sw in sweeps:
        entry = data["dtypes"].get(sw.dtype)
        if entry is None:
            print(f"{sw.dtype}: no size was measured by every kind: no entry")
        else:
            print(f"{sw.dtype}: tuned family {', '.join(n.split('.', 1)[1] for n in entry['kinds'])}"
                  f"{'' if entry['complete'] else ' (partial: the budget ran out)'}")
    print(f"{clock() - start:.0f} s on {dev.name()} ({arch.name})")
    if args.no_write:
        return 0
    if not data["dtypes"]:
        print("nothing to write", file=sys.stderr)
        return 1
    path = args.out if args.out is not None else tuned.path_for(arch.name)
    tuned.write(path, data)
    print(f"wrote {path}")
    return 0
