"""The correctness gate: every method runs once over NaN-poisoned C and is compared
with the float64 reference before it may be timed.

Error of GEMM i: ||C_i - Cref_i||_F / ||Cref_i||_F (0 for an empty C_i); a NaN left in
C (an element never written) makes it infinite. Per-GEMM sums come from cumulative
sums over the flat buffers, so the check costs a few vector operations per case.
"""
from __future__ import annotations

import numpy as np

TOLERANCE = {"float32": 1e-5, "float64": 1e-12}


def per_gemm_errors(xp, c_flat, ref, c_off) -> np.ndarray:
    """Relative Frobenius error of each GEMM's C (host float64 array)."""
    c = c_flat.astype(np.float64)
    bad = ~xp.isfinite(c)
    d2 = xp.where(bad, 0.0, (c - ref) ** 2)
    r2 = ref * ref
    off = xp.asarray(c_off)

    def seg(x):
        cs = xp.concatenate([xp.zeros(1, np.float64), xp.cumsum(x)])
        return cs[off[1:]] - cs[off[:-1]]

    nbad = seg(bad.astype(np.float64))
    num, den = seg(d2), seg(r2)
    err = xp.sqrt(xp.maximum(num, 0.0) / xp.maximum(den, 1e-300))
    err = xp.where(nbad > 0, xp.inf, err)
    err = xp.where(off[1:] == off[:-1], 0.0, err)
    return np.asarray(err.get() if hasattr(err, "get") else err, np.float64)


def check(dev, ops, prepared) -> tuple[float, int | None]:
    """Poison, run once, collect, compare: (max error, worst GEMM or None)."""
    ops.poison()
    if prepared.poison is not None:
        prepared.poison()
    prepared.call()
    if prepared.collect is not None:
        prepared.collect()
    dev.synchronize()
    err = ops.errors(dev.xp)
    if err.size == 0:
        return 0.0, None
    worst = int(np.argmax(err))
    return float(err[worst]), worst
