"""python -m portgemm bench: argument handling and the run of one workload."""
from __future__ import annotations

import argparse
import datetime as _dt
import re
import shlex
import sys
from pathlib import Path

from ..errors import PortgemmError
from . import entries as _entries
from . import peers as _peers
from .timing import MODES, QUICK, Budget

DTYPES = ("float32", "float64")


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return v


def _ranges(text):
    from .workloads import WorkloadError, parse_ranges
    try:
        return parse_ranges(text)
    except WorkloadError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _batches(text):
    return [_positive(t) for t in text.split(",") if t.strip()]


def _choices(known, what, allow=("all",)):
    """A comma-separated list checked against ``known()``; "all" = every one."""
    def parse(text: str) -> list[str]:
        names = known()
        items = [t.strip() for t in text.split(",") if t.strip()]
        if items == ["all"] and "all" in allow:
            return list(names)
        if items == ["none"] and "none" in allow:
            return []
        bad = [t for t in items if t not in names]
        if bad or not items:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {', '.join(bad) or '(empty)'}; known: {', '.join(names)}")
        return items
    return parse


def _strategies():
    import portgemm
    return portgemm.strategies()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m portgemm bench",
        description="portgemm against cuBLAS grouped, a cuBLAS loop, a Triton grouped GEMM and "
                    "PyTorch padded bmm on this device; each output checked against a float64 "
                    "reference before it is timed. Without a workload flag: one random case "
                    "(--batch, --max-mn, --max-k).")
    w = p.add_mutually_exclusive_group()
    w.add_argument("--grid", action="store_true",
                   help="12 size ranges (MaxMN 128..1024 x MaxK 128..512) x batch 8/64/256/1024")
    w.add_argument("--shapes-file", metavar="F", help="CSV or JSON of M,N,K rows: one case")
    w.add_argument("--inception", action="store_true", help="zhang2025 Table 6's Inception layers")
    w.add_argument("--paper", action="store_true",
                   help="zhang2025 §5: speed-ups, occupancy (ncu), planning share, TLP, latency, "
                        "Inception")
    w.add_argument("--ceilings", action="store_true",
                   help="measure this device's ceilings for the planner's cost model and write "
                        "them to portgemm/occupancy/ceilings.json (benchmark/ceilings.py)")
    p.add_argument("--batch", type=_positive, default=1024, help="one random case: GEMMs (1024)")
    p.add_argument("--max-mn", type=_positive, default=256, help="one random case: largest M, N")
    p.add_argument("--max-k", type=_positive, default=256, help="one random case: largest K")
    p.add_argument("--ranges", type=_ranges, default=None, metavar="MN/K,...",
                   help="--grid/--paper: MaxMN/MaxK ranges (default all 12)")
    p.add_argument("--batches", type=_batches, default=None, metavar="B,...",
                   help="--grid/--paper: batch sizes (default 8,64,256,1024; --paper's latency "
                        "sweep 8..1024)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--strategies", type=_choices(_strategies, "strategy"), default=None,
                   help="comma-separated, or all (default: the planner's default; --paper: all)")
    p.add_argument("--entry", type=_choices(_entries.entries, "entry"), default=None,
                   help=f"portgemm entry points, comma-separated: "
                        f"{', '.join(_entries.ENTRIES)} (default: bound,gemm_vbatched,run; "
                        f"--paper: bound)")
    p.add_argument("--peers", type=_choices(lambda: list(_peers.PEERS), "peer", ("all", "none")),
                   default=list(_peers.PEERS), help=f"comma-separated, all or none "
                                                    f"(default all: {', '.join(_peers.PEERS)})")
    p.add_argument("--modes", type=_choices(lambda: list(MODES), "mode"), default=None,
                   help="warm, cold-l2 or both (default both; --paper: warm)")
    p.add_argument("--quick", action="store_true",
                   help="4 ranges x 3 batches and short time budgets (a smoke run)")
    p.add_argument("--warmup-ms", type=float, default=None, help="warm-up budget per measurement")
    p.add_argument("--rep-ms", type=float, default=None, help="timed budget per measurement")
    p.add_argument("--backend", choices=("cuda", "numpy"), default=None,
                   help="default: cuda when present, else numpy (a dry run)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output folder (default bench/results/<date>-<device>/)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plots", action="store_true", help="no PNGs even with matplotlib")
    p.add_argument("--ncu", default="auto", help="--paper: path of ncu, auto (PATH, CUDA_HOME) "
                                                  "or off")
    return p


def budget_of(args) -> Budget:
    b = QUICK if args.quick else Budget()
    return Budget(warmup_ms=args.warmup_ms if args.warmup_ms is not None else b.warmup_ms,
                  rep_ms=args.rep_ms if args.rep_ms is not None else b.rep_ms,
                  min_reps=b.min_reps, max_reps=b.max_reps)


def workload(args):
    """(prefix, cases) of the chosen workload."""
    from . import workloads as wl
    if args.grid:
        return "grid", grid_of(args)
    if args.shapes_file:
        return "shapes", [wl.read_shapes_file(args.shapes_file)]
    if args.inception:
        return "inception", wl.inception_cases()
    return "random", [wl.random_case(args.batch, args.max_mn, args.max_k, args.seed)]


def grid_of(args):
    from . import workloads as wl
    ranges = args.ranges or (wl.QUICK_RANGES if args.quick else wl.RANGES)
    batches = args.batches or (wl.QUICK_BATCHES if args.quick else wl.BATCHES)
    return wl.grid_cases(args.seed, ranges, batches)


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:40] or "device"


def out_dir(args, dev) -> Path:
    if args.out:
        d = Path(args.out)
    else:
        d = Path("bench/results") / f"{_dt.date.today().isoformat()}-{slug(dev.name())}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def method_list(args, paper: bool):
    strategies = args.strategies or (_strategies() if paper else [_strategies()[0]])
    names = args.entry or (["bound"] if paper else
                           [e for e in ("bound", "gemm_vbatched", "run")])
    return _entries.methods(names, strategies) + _peers.methods(args.peers)


def meta_of(args, dev, argv, modes, budget) -> dict:
    m = dev.info()
    m.update(date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
             dtype=args.dtype, modes=modes, seed=args.seed, budget=vars(budget),
             command="python -m portgemm bench " + shlex.join(argv))
    return m


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        if args.ceilings:
            from .ceilings import main as ceilings_main
            return ceilings_main(["--out", args.out] if args.out else [])
        return _run(args, argv)
    except PortgemmError as e:  # a bad file, option or missing device: one line, exit 2
        print(f"error: {e}", file=sys.stderr)
        return 2


def _run(args, argv) -> int:
    from .device import open_device
    from .roofline import measure_ceilings

    prefix, cases = ("paper", None) if args.paper else workload(args)
    dev = open_device(args.backend)
    budget = budget_of(args)
    modes = args.modes or (["warm"] if args.paper else list(MODES))
    methods = method_list(args, args.paper)
    ceilings = measure_ceilings(dev, args.dtype)
    meta = meta_of(args, dev, argv, modes, budget)
    out = out_dir(args, dev)
    if args.paper:
        from .paper import run_paper
        return run_paper(args, dev, methods, modes, budget, ceilings, meta, out)
    from .runner import run_cases
    res = run_cases(dev, cases, methods, args.dtype, modes, budget, ceilings, seed=args.seed,
                    show_progress=not args.no_progress)
    title = f"portgemm bench --{prefix}" if prefix != "random" else "portgemm bench"
    return emit(prefix, title, meta, ceilings, res, out, args.no_plots)


def emit(prefix, title, meta, ceilings, res, out, no_plots, extra=(), plots=()) -> int:
    """Print the tables and summary; write JSON, CSV, summary and plots."""
    from . import report
    from .plots import pyplot, standard_plots
    for line in report.header_lines(meta, ceilings):
        print(line)
    for mode in report.modes_of(res.records):
        print(f"\n[{mode}] GFLOP/s, speed-up of portgemm against each peer, % of roofline")
        print(report.table(res.records, mode))
    print()
    core = [r for r in res.records if r.get("part", "grid") == "grid"]  # --paper: the grid
    for line in report.summary_lines(core):
        print(line)
    for n in res.notes:
        print(f"note: {n}")
    files = [out / f"{prefix}.json", out / f"{prefix}.csv", out / f"{prefix}-summary.md"]
    report.write_json(files[0], meta, ceilings, res)
    report.write_csv(files[1], res.records)
    png = []
    if not no_plots:
        if pyplot() is None:
            print("note: matplotlib not installed: no plots (pip install 'portgemm[bench]')")
        else:
            png = standard_plots(res.records, out, prefix) + [p for p in plots if p]
    files[2].write_text(report.summary_md(title, meta, ceilings, core, res.notes, extra))
    print("wrote: " + ", ".join(str(f) for f in files + png))
    failed = any(r["status"] == "failed" and r["kind"] == "portgemm" for r in res.records)
    return 1 if failed else 0
