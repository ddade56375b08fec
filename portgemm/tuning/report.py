"""The sweep's outputs: the data file the planner reads (occupancy/tuned.py) and the
table printed at the end."""
from __future__ import annotations

import datetime

import numpy as np
from tabulate import tabulate

from ..occupancy import tuned
from . import choose
from .sweep import DtypeSweep


def _num(x, digits=4):
    return None if x is None or not np.isfinite(x) else round(float(x), digits)


def dtype_entry(sw: DtypeSweep, tolerance: float = choose.TOLERANCE) -> dict | None:
    """The file's entry for one dtype (None when no size was measured by every kind)."""
    done = sw.complete_sizes()
    chosen = sw.chosen(tolerance)
    if not chosen:
        return None
    return {
        "family": sw.family,
        "kinds": [k.name for k in chosen],
        "factors": {name: round(f, 4) for name, f in sw.factors().items()},
        "tolerance": tolerance,
        "complete": not sw.stopped and bool(done.all()),
        "sizes": [{"M": s.m, "N": s.n, "K": s.k, "batch": s.batch, "measured_by_all": bool(d)}
                  for s, d in zip(sw.sizes, done)],
        "measured_ms": {k.name: [_num(x, 5) for x in sw.ms[i]] for i, k in enumerate(sw.kinds)},
        "predicted_ms": {k.name: [_num(x, 5) for x in sw.predicted_ms[i]]
                         for i, k in enumerate(sw.kinds)},
        "excluded": dict(sw.excluded),
    }


def data_file(sweeps: list[DtypeSweep], info: dict, budget_s: float | None,
              tolerance: float = choose.TOLERANCE) -> dict:
    """The whole file: where and when it was measured, and an entry per dtype that has one."""
    from .. import __version__
    arch = sweeps[0].arch.name if sweeps else info.get("arch")
    out = {
        "generated_by": "python -m portgemm tune",
        "format": tuned.FORMAT,
        "arch": arch,
        "device": info.get("device"),
        "backend": info.get("backend"),
        "driver": info.get("driver"),
        "runtime": info.get("runtime"),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "portgemm": __version__,
        "kernel_sha256": tuned.kernel_fingerprint(),
        "budget_s": budget_s,
        "dtypes": {},
    }
    for sw in sweeps:
        entry = dtype_entry(sw, tolerance)
        if entry is not None:
            out["dtypes"][sw.dtype] = entry
    return out


def table(sw: DtypeSweep, tolerance: float = choose.TOLERANCE) -> str:
    """One row per kind: on how many sizes it is the best / within tolerance, its
    geometric-mean time over the best, its factor, chosen or excluded."""
    t = sw.table()
    chosen = {k.name for k in sw.chosen(tolerance)}
    factors = sw.factors()
    best = np.nanmin(t, axis=0) if t.size else np.zeros(0)
    rows = []
    for i, k in enumerate(sw.kinds):
        row = t[i]
        if k.name in sw.excluded:
            status = "excluded: " + sw.excluded[k.name]
        else:
            status = "chosen" if k.name in chosen else ""
        has = ~np.isnan(row)
        ratio = choose.geometric_mean(row[has] / best[has]) if has.any() else None
        rows.append([k.kind, k.threads, int((row == best).sum()),
                     int((row <= best * (1 + tolerance)).sum()),
                     "" if ratio is None else f"{ratio:.3f}",
                     "" if k.name not in factors else f"{factors[k.name]:.3f}", status])
    head = ["kind", "threads", "best on", f"within {tolerance:.0%}", "time / best (geo)",
            "factor", ""]
    done = int(sw.complete_sizes().sum())
    title = (f"{sw.dtype} on {sw.arch.name}: {len(sw.kinds)} kinds x {done} of "
             f"{len(sw.sizes)} sizes{' (stopped by the budget)' if sw.stopped else ''}")
    return title + "\n" + tabulate(rows, head, tablefmt="simple")
