"""python -m portgemm.tuning.step_floors: measure how long one K step of each kind's tile
takes when the tile is alone on its compute unit, and keep that as device data.

The cost model's tile time is built from throughput figures (copy, shared-memory and FMA
rates shared by the tiles on a CU) and corrected per kind by factors fitted on full
waves (tuning/kind_factors.py). Neither describes a launch of about one tile per CU,
where each step is one tile's own chain: its loads, the barrier, its MMAs or FMAs. That
chain is measured here, per kind and per load path, as the slope of a launch's time in
K: each kind runs alone on a batch of about one tile per CU, at two depths (STEPS apart):
GEMMs of TILES x TILES tiles each (so tiles share A's and B's panels through L2, as the
tiles of a GEMM do), on the 16-byte path (M, N whole tiles, K a multiple of every vector
width: "aligned") and off it (N - 1 and K - 1: both operands' leading dimensions off the
16-byte grid, rows long enough for the kernel's word copies: "unaligned"). The
difference of the two times over the difference of their K steps leaves out the launch,
the prologue and the epilogue. Every run is checked against float64 first
(tuning/sweep.py).

Why GEMMs of several tiles: a first measurement took one tile per GEMM (no reuse, every
load a DRAM miss) and, unaligned, on M - 1 x N - 1 GEMMs (edge tiles whose rows are too
short for word copies). Those chains (64x64/w32x32 3.7 us a step unaligned, the wgmma
kinds 0.8-1.0 aligned) exceed what the same kinds' tiles take in full waves, and as
floors they cost the H100's 16-bit grid 16 % (bench/NOTES.md, session 17).

The cost model never prices a kind's K step below its floor (cost_model.step_floor,
ceilings.json ``kind_step_floors``), for a family every kind of which has one; so
``--family`` should be each family the planner weighs for the dtype (float16 /
bfloat16: the mma.sync family, the default, and the wgmma one by name). Measure the
floors before fitting the kind factors: the fit prices each size with the floors
(tuning/model.py), so the factors explain what the floors leave.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

# The two depths of a measurement, in K steps of the kind: far enough apart that their
# difference stands well out of the launch-to-launch spread.
STEPS = (8, 40)
TILES = 4   # a GEMM of the measurement is TILES x TILES tiles


def parser() -> argparse.ArgumentParser:
    from .kind_factors import device_arguments
    p = argparse.ArgumentParser(
        prog="python -m portgemm.tuning.step_floors",
        description="Time one K step of each kind's tile alone on a compute unit, on the "
                    "16-byte and the scalar load path, and keep them as the cost model's "
                    "step floors.")
    device_arguments(p, budget=60.0, write="the floors")
    return p


def main(argv=None) -> int:
    return run(parser().parse_args(sys.argv[1:] if argv is None else argv))


def lone_sizes(kind, compute_units: int) -> list:
    """The four batches of one kind: aligned at STEPS[0] and STEPS[1] K steps, then
    unaligned (N - 1, K - 1) at the same steps; each of TILES x TILES tiles a GEMM, as many
    GEMMs as give every CU at most one tile."""
    from .space import Size
    batch = max(1, compute_units // (TILES * TILES))
    return [Size(TILES * kind.tm, TILES * kind.tn - odd, s * kind.tk - odd, batch)
            for odd in (0, 1) for s in STEPS]


def floors_of(ms: np.ndarray) -> tuple:
    """(aligned, unaligned) seconds per K step from lone_sizes' four times (ms), None for a
    path whose two times are not both measured or do not grow with K."""
    out = []
    for lo, hi in ((ms[0], ms[1]), (ms[2], ms[3])):
        d = (hi - lo) * 1e-3 / (STEPS[1] - STEPS[0])
        out.append(float(d) if np.isfinite(d) and d > 0 else None)
    return tuple(out)


def model_step(kind, dtype: str, arch) -> float:
    """The cost model's K step of a lone tile of ``kind`` (r = 1, the issue share its warps
    can use; with its measured kind factor), in seconds, for comparison."""
    from ..planner.cost_model import kind_costs, stage_times, tiles_sharing
    from ..planner.parallelism import kind_table
    table = kind_table(arch, (kind,), "per-kind", dtype)
    kc = kind_costs(arch, (kind,), table, dtype)
    return float(stage_times(kc, *tiles_sharing(kc, np.ones(1), kc.active, kc.tile_warps))[1][0])


def run(args, timer=None) -> int:
    """The command (``timer``: the sweep's, for tests; default the device's)."""
    from tabulate import tabulate

    from ..benchmark.device import open_device
    from ..occupancy import ceilings
    from ..tiles import family
    from .kind_factors import default_family, finish
    from .sweep import device_timer, sweep_dtype

    dev = open_device(args.backend)
    arch = dev.be.arch()
    fam = args.family or default_family(args.dtype, arch)
    kinds = family(fam)
    t0 = time.monotonic()
    deadline = t0 + args.budget
    floors, rows, table, stopped = {}, [], {}, False
    for kind in kinds:
        sizes = lone_sizes(kind, arch.compute_units)
        sw = sweep_dtype(dev, args.dtype, sizes, kinds=(kind,), timer=timer or device_timer,
                         deadline=deadline, show_progress=False)
        stopped |= sw.stopped
        ms = sw.ms[0]
        got = floors_of(ms)
        model = model_step(kind, args.dtype, arch)
        why = sw.excluded.get(kind.name) or ("budget ran out" if np.isnan(ms).any() else
                                             None if None not in got else "no growth with K")
        if None not in got:
            floors[kind.name] = got
        table[kind.name] = {"sizes": [s.name for s in sizes], "ms": ms.tolist(),
                            "floors_s": got, "model_step_s": model, "excluded": why}
        rows.append([kind.kind, *(f"{g * 1e6:.3f}" if g else "-" for g in got),
                     f"{model * 1e6:.3f}",
                     f"{got[1] / model:.2f}" if got[1] else "-", why or ""])
    print(f"{fam} on {dev.name()} ({arch.name}): about one tile per CU, a K step in us, "
          f"{time.monotonic() - t0:.0f} s{' (budget ran out)' if stopped else ''}")
    print(tabulate(rows, headers=["kind", "aligned", "unaligned", "model", "unaligned / model",
                                  "not measured"], disable_numparse=True))

    def write(path):
        ceilings.write_kind_step_floors(arch.name, floors, path=path, source=(
            f"python -m portgemm.tuning.step_floors --dtype {args.dtype} on {dev.name()}: "
            f"{fam}'s kinds alone, about one tile per CU ({sizes[0].batch} GEMMs of {TILES} x "
            f"{TILES} tiles), K steps {STEPS[0]} and {STEPS[1]}"))
        print(f"wrote {len(floors)} kind step floors into {path}")
    return finish(args, dev, {"arch": arch.name, "device": dev.name(), "family": fam,
                              "dtype": args.dtype, "steps": list(STEPS), "kinds": table},
                  len(floors) == len(kinds), "both floors", write)


if __name__ == "__main__":
    sys.exit(main())
