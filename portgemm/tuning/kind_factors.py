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
what the path figures leave unexplained, not counted twice. The 16-bit kinds copy by
three paths (16-, 4- and 2-byte: occupancy/vector_path.py), and the sweep has a size of
each (tuning/space.py); their figures per path are fitted here first (:func:`path_figures`,
ceilings.json ``kind_path_factors``) and divided out the same way. Each kind's factor per depth
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
    figures = path_figures(raw, sw.sizes, kinds, args.dtype)
    per_size = path_adjusted(raw, sw.sizes, kinds, args.dtype,
                             _figures_of(figures, kinds, arch, args.dtype))
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
              + ", ".join(f"{d}: {f:.3f}" for d, f in depths.get(k.name, ())) + ")"
              + (" copy paths 16/4/2-byte " + "/".join(f"{f:.3f}" for f in figures[k.name])
                 if k.name in figures else ""))
    if _three_paths(args.dtype) and not aligned_rows_only(fam) and not figures:
        print("  no copy-path figures: too few sizes on each path (every kind needs "
              f"{MIN_PATH_SIZES}); the factors are fitted over the paths together")
    table = {"arch": arch.name, "device": dev.name(), "family": fam, "dtype": args.dtype,
             "factors": factors, "sizes": names, "ms": sw.ms.tolist(),
             "predicted_ms": sw.predicted_ms.tolist(), "per_size_factors": per_size,
             "path_factors": figures,
             "per_size_factors_before_path": raw, "depth_factors": depths,
             "excluded": sw.excluded, "kinds": [k.name for k in kinds]}

    def write(path):
        ceilings.write_kind_factors(arch.name, factors, path=path, depth_factors=depths,
                                    path_factors=figures, source=(
            f"python -m portgemm.tuning.kind_factors --dtype {args.dtype} on {dev.name()}: "
            f"{fam}'s kinds alone on {len(names)} uniform sizes, geometric mean of measured "
            "/ modelled, and per K" + (", after the copy paths' figures (kind_path_factors)"
                                       if figures else "")))
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


def path_adjusted(per_size: dict, sizes, kinds, dtype: str, eff) -> dict:
    """``per_size`` (kind name -> per size, measured / modelled tile time or None) with
    each factor divided by the kind's path figure at the size's shares of 16-byte and
    4-byte loads (occupancy/vector_path.py; ``eff``: a PathFigures, None for none), as
    the cost model will multiply the two; unchanged where there are no figures (fp64,
    other archs, 16-bit families without enough sizes per path)."""
    from ..occupancy import vector_path
    if eff is None:
        return per_size
    index = {k.name: i for i, k in enumerate(kinds)}
    path = [vector_path.factor(eff, s16, s4 if eff.three_way.any() else None)
            for s16, s4 in (_path_shares(s, kinds, dtype) for s in sizes)]
    return {name: [None if f is None else f / float(path[j][index[name]])
                   for j, f in enumerate(fs)] for name, fs in per_size.items()}


# a copy path's figure is fitted only from at least this many sizes that put most of a
# kind's loads on it (each path, each kind)
MIN_PATH_SIZES = 2


def _three_paths(dtype: str) -> bool:
    """Whether the dtype's kinds copy by three paths (16-bit: 16-, 4- and 2-byte)."""
    from ..tiles import ITEMSIZE
    return ITEMSIZE[dtype] == 2


def _path_shares(size, kinds, dtype: str):
    """Per kind, the size's shares of staged loads on the 16-byte and the 4-byte path, as
    the cost model takes them (planner/alignment.share_for): by rows for the 16-bit
    kinds, inside slices for fp32's 16-byte share (and no 4-byte one)."""
    import numpy as np
    from ..planner.alignment import aligned_rows, four_byte_rows, row_share, vector_share
    shapes = size.shapes()
    tm, tn, tk = ([getattr(k, a) for k in kinds] for a in ("tm", "tn", "tk"))
    if not _three_paths(dtype):
        return vector_share(shapes, aligned_rows(shapes, dtype), tm, tn, tk), np.zeros(len(kinds))
    return (row_share(shapes, aligned_rows(shapes, dtype), tm, tn, tk),
            row_share(shapes, four_byte_rows(shapes, dtype), tm, tn, tk))


def path_figures(per_size: dict, sizes, kinds, dtype: str) -> dict:
    """The 16-bit kinds' figures per copy path, {kind name: [16-byte, 4-byte, 2-byte]},
    the greatest 1 (ceilings.json ``kind_path_factors``): per kind, least squares of
    log(measured / modelled) over the sizes against a constant per depth (the sizes' K,
    as depth_factors rounds it) and the size's 16-byte and 4-byte shares, the 2-byte
    path the rest. {} for other dtypes, and unless every kind has MIN_PATH_SIZES sizes
    with most of its loads on each path (a family is corrected whole or not at all)."""
    import numpy as np
    if not _three_paths(dtype):
        return {}
    shares = [_path_shares(s, kinds, dtype) for s in sizes]
    depth = [2 ** round(math.log2(max(s.k, 1))) for s in sizes]
    levels = sorted(set(depth))
    out = {}
    for i, k in enumerate(kinds):
        rows = [(j, f) for j, f in enumerate(per_size.get(k.name, ())) if f is not None]
        s16 = np.array([shares[j][0][i] for j, _ in rows])
        s4 = np.array([shares[j][1][i] for j, _ in rows])
        if min(int((s16 > 0.5).sum()), int((s4 > 0.5).sum()),
               int((1.0 - s16 - s4 > 0.5).sum())) < MIN_PATH_SIZES:
            return {}
        X = np.column_stack([[float(depth[j] == d) for j, _ in rows] for d in levels]
                            + [s16, s4])
        coef = np.linalg.lstsq(X, np.log([f for _, f in rows]), rcond=None)[0]
        logs = np.array([coef[-2], coef[-1], 0.0])
        out[k.name] = [float(x) for x in np.exp(logs - logs.max())]
    return out


def _figures_of(figures: dict, kinds, arch, dtype: str):
    """The PathFigures the factors are adjusted by: the figures just fitted (16-bit), or
    none for a 16-bit family without them (not those the ceilings file holds from an
    earlier fit: the new factors replace them), else the kinds' own (fp32's)."""
    from ..occupancy import vector_path
    import numpy as np
    if figures:
        rows = np.array([figures[k.name] for k in kinds], dtype=np.float64)
        return vector_path.PathFigures(rows[:, 0], rows[:, 1], rows[:, 2])
    return None if _three_paths(dtype) else vector_path.efficiencies(arch, dtype, kinds)


if __name__ == "__main__":
    sys.exit(main())
