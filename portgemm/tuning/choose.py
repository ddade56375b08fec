"""From a table of measured times to the tuned family and the model's factors.

The family (abdelfattah2016's selection for variable sizes, made exact): the smallest
set of kinds such that on every measured size one of them is within ``tolerance`` of
the best kind there - a set cover, searched exhaustively by set size (a dozen or so
candidates make at most a few thousand subsets); among covers of the same size, the
one closest to the best everywhere (least sum over sizes of log(own best / best)).
Greedy (most sizes covered first) where the candidates are too many to search.
The candidates identical to the default family's kinds are always in it (the sweep's
``required``): a family chosen on uniform batches alone dropped kinds that random
batches need and ran 0.97-0.98x the untuned default on the H100 (bench/NOTES.md), so
tuning adds kinds to ours and never replaces them.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

EXACT_MAX_KINDS = 16
TOLERANCE = 0.03


def cover(times: np.ndarray, tolerance: float = TOLERANCE, required=()) -> list[int]:
    """Indices (ascending) of the chosen kinds. ``times`` is (kinds, sizes), NaN where a
    kind was not measured or failed; sizes no kind measured are ignored; kinds with no
    measurement are never chosen. ``required``: kinds that are in the family whatever
    they cover (those measured); the search adds the fewest others for the rest."""
    t = np.asarray(times, dtype=np.float64)
    seen = ~np.isnan(t)
    sizes = seen.any(axis=0)
    t = t[:, sizes]
    if t.shape[1] == 0:
        return []
    best = np.nanmin(t, axis=0)
    ok = ~np.isnan(t) & (t <= best * (1 + tolerance))        # kind k covers size s
    base = [k for k in sorted(set(required)) if seen[k].any()]
    usable = [k for k in range(t.shape[0]) if ok[k].any() and k not in base]
    logt = np.where(np.isnan(t), np.inf, np.log(np.where(np.isnan(t), 1.0, t)))

    def loss(ks):
        return float((logt[list(ks)].min(axis=0) - np.log(best)).sum())

    def covered(ks):
        return ok[list(ks)].any(axis=0).all() if ks else False

    if covered(base):
        return base
    if len(usable) <= EXACT_MAX_KINDS:
        for r in range(1, len(usable) + 1):
            covers = [base + list(ks) for ks in itertools.combinations(usable, r)
                      if covered(base + list(ks))]
            if covers:
                return sorted(min(covers, key=loss))
    chosen: list[int] = list(base)
    left = ~ok[base].any(axis=0) if base else np.ones(t.shape[1], dtype=bool)
    while left.any():
        k = max(usable, key=lambda k: (int((ok[k] & left).sum()), -loss(chosen + [k])))
        chosen.append(k)
        left &= ~ok[k]
    return sorted(chosen)


def geometric_mean(values) -> float | None:
    v = [float(x) for x in values if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None
