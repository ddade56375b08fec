"""The timing protocol: one call to estimate, warm-up for a time budget, then timed
calls for a time budget (bounded by min/max reps), median. Budgets are milliseconds,
as in Triton's do_bench, so a slow method gets fewer reps rather than a long run.

Modes: "warm" times back-to-back calls on the same data (as a training loop sees
them); "cold-l2" flushes the L2 before each timed call (the flush is not timed).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MODES = ("warm", "cold-l2")


@dataclass(frozen=True)
class Budget:
    warmup_ms: float = 10.0
    rep_ms: float = 40.0
    min_reps: int = 3
    max_reps: int = 100


QUICK = Budget(warmup_ms=2.0, rep_ms=10.0, min_reps=3, max_reps=20)


def reps_for(budget_ms: float, one_ms: float, lo: int, hi: int) -> int:
    """How many calls of one_ms fit the budget, clamped to [lo, hi]."""
    return int(min(hi, max(lo, budget_ms / max(one_ms, 1e-4))))


def measure(dev, fn, mode: str, budget: Budget) -> tuple[float, int]:
    """(median ms, reps) of fn() on dev in the given mode."""
    if mode not in MODES:
        raise ValueError(f"unknown timing mode {mode!r}; known: {', '.join(MODES)}")
    flush = mode == "cold-l2"
    one = dev.time_calls(fn, 1, flush)[0]
    dev.time_calls(fn, reps_for(budget.warmup_ms, one, 0, budget.max_reps), flush)
    times = dev.time_calls(fn, reps_for(budget.rep_ms, one, budget.min_reps, budget.max_reps),
                           flush)
    return float(np.median(times)), len(times)
