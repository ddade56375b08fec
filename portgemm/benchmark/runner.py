"""Cases x methods x modes: for each case, fresh operands and the float64 reference;
for each method, make it (or note why it is skipped), check it over NaN-poisoned C,
and time it in each mode only when the check passed. One record per measurement,
failed check or error: a record with status "failed" and no time."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

from .check import TOLERANCE, check
from .methods import Skip
from .operands import make_operands
from .roofline import case_bytes, fraction_of_roofline, roofline
from .timing import measure


@dataclass
class Results:
    records: list = field(default_factory=list)
    notes: list = field(default_factory=list)   # one line per skip reason, in order

    def note(self, text: str):
        if text not in self.notes:
            self.notes.append(text)


def progress(items, desc, enabled=True):
    """tqdm over items when installed (and enabled), else a line per item on stderr."""
    if not enabled:
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return _plain_progress(items, desc)
    return tqdm(items, desc=desc, unit="case", file=sys.stderr)


def _plain_progress(items, desc):
    n = len(items)
    for i, x in enumerate(items, 1):
        print(f"{desc}: {i}/{n} {getattr(x, 'name', '')}", file=sys.stderr, flush=True)
        yield x


def run_cases(dev, cases, methods, dtype, modes, budget, ceilings, seed=0, results=None,
              show_progress=True, desc="bench") -> Results:
    res = results if results is not None else Results()
    tol = TOLERANCE[dtype]
    itemsize = 4 if dtype == "float32" else 8
    for ci, case in enumerate(progress(cases, desc, show_progress)):
        ops = make_operands(dev, case.shapes, dtype, seed=(seed, ci, case.batch))
        flops, nbytes = case.flops, case_bytes(case.shapes, itemsize)
        roof_s, limiter = roofline(flops, nbytes, ceilings)
        base = dict(case=case.name, range=case.range, batch=case.batch, dtype=dtype,
                    flops=flops, bytes=nbytes, roofline_ms=roof_s * 1e3, limiter=limiter)
        for m in methods:
            rec = dict(base, method=m.name, kind=m.kind, strategy=m.strategy, entry=m.entry)
            try:
                prep = m.make(dev, ops)
            except Skip as e:
                res.note(f"{m.name}: skipped ({e})")
                continue
            except Exception as e:  # a method that cannot even be set up is a failure
                res.records.append(dict(rec, status="failed", error=_one_line(e)))
                continue
            if prep.plan is not None:
                rec["predicted_occupancy"] = prep.plan.predicted_occupancy()
            try:
                err, worst = check(dev, ops, prep)
            except Exception as e:
                res.records.append(dict(rec, status="failed", error=_one_line(e)))
                continue
            rec["max_rel_error"] = err
            if not err <= tol:
                res.records.append(dict(rec, status="failed",
                                        error=f"GEMM {worst}: relative error {err:.2e} > {tol:.0e}"))
                continue
            for mode in modes:
                ms, reps = measure(dev, prep.call, mode, budget)
                res.records.append(dict(rec, status="ok", mode=mode, ms=ms, reps=reps,
                                        gflops=flops / (ms * 1e-3) / 1e9,
                                        roofline_fraction=fraction_of_roofline(ms, roof_s * 1e3)))
            del prep
        del ops
    return res


def _one_line(e: Exception) -> str:
    text = f"{type(e).__name__}: {e}"
    return text.splitlines()[0][:200] if text else type(e).__name__
