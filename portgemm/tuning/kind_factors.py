"""python -m portgemm.tuning.kind_factors: measure how far the cost model is off for each
kind of the default plan's own family, and keep that as device data.

Each kind of the family (default: the dtype's, planner OUR_FAMILY; float16 / bfloat16:
their mma.sync family, planner HALF_FAMILY, and the wgmma family weighed beside it by
name) runs alone, one launch, on the tuning sweep's uniform sizes (tuning/space.py: M = N
in 32..1024, K in 32..1024, aligned and odd; a family the planner weighs on aligned rows
only, the aligned half) and is checked against float64 as in ``tune`` (tuning/sweep.py;
16-bit operands are torch tensors on the device, within their format's bound); its
factor is the geometric mean over the sizes of measured / modelled tile time
(DtypeSweep.factors). Where a kind has measured path efficiencies
(occupancy/vector_path.py: fp32's 128 x 128 kinds on the H100), which the cost model
multiplies with the kind factor, each size's factor is divided by the kind's path
figure at that size's vector share first (:func:`path_adjusted`): the aligned half of
the sweep runs the 16-byte path, the odd half the scalar one, and the stored factor is
what the path figures leave unexplained, not counted twice. Each kind's factor per depth
(the sizes of one K, aligned and odd: K = 32, 256, 1024) goes beside it
(:func:`depth_factors`, ceilings.json ``kind_depth_factors``), for the cost model to read
at a batch's K. Unlike ``tune``, the family stays the one the
planner uses and the factors go into the arch's measured ceilings (ceilings.json
``kind_factors``), which do not go stale with the kernel source's hash: they say how
the model errs per kind (bandwidth of small tiles' loads, the MMA kinds' issue), not
which kinds to use. Random batches are not used to fit (the bench grid judges the
result; fitting to it would tune to the grid).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m portgemm.tuning.kind_factors",
        description="Time each kind of the default family alone on the tuning sweep's "
                    "uniform sizes and fit the cost model's per-kind factors.")
    device_arguments(p, budget=120.0, write="the factors")
    p.add_argument("--quick", action="store_true", help="a few sizes only (a smoke run)")
    return p


def device_arguments(p: argparse.ArgumentParser, budget: float, write: str) -> None:
    """The options this command and tuning/step_floors.py share: what to measure, on
    which backend, for how long, and where the result goes."""
    p.add_argument("--dtype", default="float64",
                   choices=("float32", "float64", "float16", "bfloat16"))
    p.add_argument("--family", default=None,
                   help="default: the dtype's own family (float16 / bfloat16: the "
                        "mma.sync one; the wgmma one by name)")
    p.add_argument("--budget", type=float, default=budget, help="seconds for the sweep")
    p.add_argument("--out", type=Path, default=None, help="also write the table here (JSON)")
    p.add_argument("--write", action="store_true",
                   help=f"put {write} into portgemm/occupancy/ceilings.json")
    p.add_argument("--ceilings", type=Path, default=None,
                   help="with --write: this ceilings file instead of the package's (a dry "
                        "run on the numpy backend may write there)")
    p.add_argument("--backend", choices=("cuda", "numpy"), default=None)


def default_family(dtype: str, arch) -> str:
    """The family measured when none is named: the dtype's mma.sync family for float16 /
    bfloat16 (planner.HALF_FAMILY), else the default plan's own (OUR_FAMILY)."""
    from ..planner import HALF_FAMILY
    from ..planner.wavefront_tlp import our_family
    return HALF_FAMILY.get(dtype) or our_family(dtype, arch)


def main(argv=None) -> int:
    return run(parser().parse_args(sys.argv[1:] if argv is None else argv))


def run(args, timer=None) -> int:
    """The command (``timer``: the sweep's, for tests; default the device's)."""
    from ..benchmark.device import open_device
    from ..occupancy import ceilings
    from ..planner.alignment import aligned_rows
    from ..tiles import aligned_rows_only, family
    from . import space
    from .choose import geometric_mean
    from .sweep import device_timer, sweep_dtype

    dev = open_device(args.backend)
    arch = dev.be.arch()
    fam = args.family or default_family(args.dtype, arch)
    kinds = family(fam)
    sizes = space.sizes(arch.compute_units, args.dtype, args.quick)
    if aligned_rows_only(fam):   # the planner weighs it on aligned rows alone
        sizes = [s for s in sizes if aligned_rows(s.shapes()[:1], args.dtype).all()]
    t0 = time.monotonic()
    sw = sweep_dtype(dev, args.dtype, sizes,
                     kinds=kinds, timer=timer or device_timer, deadline=t0 + args.budget,
                     show_progress=False)
    raw = sw.size_factors()
    per_size = path_adjusted(raw, sw.sizes, kinds, arch, args.dtype)
    factors = {n: g for n, g in ((n, geometric_mean(fs)) for n, fs in per_size.items())
               if g is not None}
    depths = depth_factors(per_size, sw.sizes)
    names = [s.name for s in sw.sizes]
    print(f"{fam} on {dev.name()} ({arch.name}): measured / modelled tile time, "
          f"{time.monotonic() - t0:.0f} s{' (budget ran out)' if sw.stopped else ''}")
    for k in kinds:
        row = per_size.get(k.name)
        if row is None:
            print(f"  {k.kind:16s} excluded: {sw.excluded.get(k.name)}")
            continue
        shown = [f for f in row if f is not None]
        print(f"  {k.kind:16s} factor {factors.get(k.name, float('nan')):.3f}  "
              f"(sizes {len(shown)}, min {min(shown, default=float('nan')):.2f}, "
              f"max {max(shown, default=float('nan')):.2f}; per K "
              + ", ".join(f"{d}: {f:.3f}" for d, f in depths.get(k.name, ())) + ")")
    table = {"arch": arch.name, "device": dev.name(), "family": fam, "dtype": args.dtype,
             "factors": factors, "sizes": names, "ms": sw.ms.tolist(),
             "predicted_ms": sw.predicted_ms.tolist(), "per_size_factors": per_size,
             "per_size_factors_before_path": raw, "depth_factors": depths,
             "excluded": sw.excluded, "kinds": [k.name for k in kinds]}

    def write(path):
        ceilings.write_kind_factors(arch.name, factors, path=path, depth_factors=depths, source=(
            f"python -m portgemm.tuning.kind_factors --dtype {args.dtype} on {dev.name()}: "
            f"{fam}'s kinds alone on {len(names)} uniform sizes, geometric mean of measured "
            "/ modelled, and per K"))
        print(f"wrote {len(factors)} kind factors into {path}")
    return finish(args, dev, table, len(factors) == len(kinds), "a factor", write)


def finish(args, dev, table: dict, complete: bool, what: str, write) -> int:
    """The commands' last step (this one's and tuning/step_floors.py's): ``table`` as
    JSON where --out names a file; with --write, ``write(path)`` into the ceilings file,
    refused (2) for host timings into the package's own file and (1) unless every kind
    has ``what``. Returns the exit status."""
    from ..occupancy import ceilings
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(table, indent=1) + "\n")
    if args.write:
        if dev.kind == "host" and args.ceilings is None:
            print("error: the numpy backend times the host, not a GPU", file=sys.stderr)
            return 2
        if not complete:
            print(f"error: not every kind has {what}; nothing written", file=sys.stderr)
            return 1
        write(ceilings.PATH if args.ceilings is None else args.ceilings)
    return 0


def depth_factors(per_size: dict, sizes) -> dict:
    """kind name -> [[K, factor], ...]: the geometric mean of the kind's factors over the
    sizes of each depth (K rounded to a power of two: the aligned size and its odd
    neighbour together), K ascending; kinds with no factor left out."""
    from .choose import geometric_mean
    depth = [2 ** round(math.log2(max(s.k, 1))) for s in sizes]
    out = {}
    for name, fs in per_size.items():
        rows = [[d, geometric_mean([f for f, e in zip(fs, depth) if e == d])]
                for d in sorted(set(depth))]
        rows = [r for r in rows if r[1] is not None]
        if rows:
            out[name] = rows
    return out


def path_adjusted(per_size: dict, sizes, kinds, arch, dtype: str) -> dict:
    """``per_size`` (kind name -> per size, measured / modelled tile time or None) with
    each factor divided by the kind's measured path efficiency at the size's vector
    share (occupancy/vector_path.py), as the cost model will multiply the two; unchanged
    where the family has no path efficiencies (fp64, other archs)."""
    from ..occupancy import vector_path
    from ..planner.alignment import aligned_rows, vector_share
    eff = vector_path.efficiencies(arch.name, dtype, kinds)
    if eff is None:
        return per_size
    tm, tn, tk = ([getattr(k, a) for k in kinds] for a in ("tm", "tn", "tk"))
    path = []   # per size, the path factor per kind
    for s in sizes:
        shapes = s.shapes()
        path.append(vector_path.factor(eff, vector_share(shapes, aligned_rows(shapes, dtype),
                                                         tm, tn, tk)))
    index = {k.name: i for i, k in enumerate(kinds)}
    return {name: [None if f is None else f / float(path[j][index[name]])
                   for j, f in enumerate(fs)] for name, fs in per_size.items()}


if __name__ == "__main__":
    sys.exit(main())
