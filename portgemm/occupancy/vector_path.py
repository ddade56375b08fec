"""Measured efficiency of a kind's tiles on the kernel's scalar and vector load paths.

The cost model's tile time is built from the device's ceilings, the same for every
kind; what it leaves out shows as measured / predicted time per kind. Two things set
that ratio apart, per kind, on the H100 (session 6's kernel bench, one kind per plan,
seven fp32 batches: uniform 64 x 1000^2 x 512 and 16 x 1024^2 x 256, and five random
grids where about 7 % of GEMMs have both operands' rows 16-byte aligned):

- how far the kind's K loop is bound by instruction issue: the 128 x 128 tiles hold one
  or two blocks of 4-8 warps an SM, which the model's issue share u = r x warps / 16
  rates at half the SM; each of their warps has 64-128 independent FMAs a k, enough to
  keep the pipes busy (measured / predicted 0.6-0.8);
- which share of its staged loads take the 16-byte path (planner/alignment.py): the
  scalar path issues 4 (fp32) loads, with bounds checks, where the vector path issues
  one. That costs the issue-bound kinds their spare issue slots (128x128/16x8 runs 25 %
  longer on the scalar path) and the kinds bound by memory or latency almost nothing.

So a kind has two figures, ``scalar`` and ``vector``: measured / predicted time of its
tiles when every staged load takes that path; a batch whose share of vector loads is f
scales the kind's tile time by scalar^(1 - f) x vector^f (the fit: least squares of
log(measured / predicted) against f over the seven batches; residual 0.03-0.04 in log
against 0.16-0.35 before).

Only the kinds the model starves of issue slots get their figures: those whose
resident warps per SM (workgroups x warps) are at most half of SATURATING_WARPS, so
that u <= 0.5 (the 128 x 128 kinds). Of the other four fp32 kinds three fit within 5 %
of 1 (scalar, vector: 64x64/8x4 0.986, 0.930; 128x64/8x8 0.986, 0.956; 64x128/8x8
0.954, 0.979), inside the model's usual error, and 32x32/4x4 at 0.846, 0.762; but
correcting one family's kinds, and not the paper's kinds they are weighed against
(never timed one kind at a time), tilted the default's choice on replays of the
recorded planner runs: three batches of 8 GEMMs moved from the paper's fused kinds to
ours per kind, measured 7-19 % slower than old, and a dozen large batches changed their mix of
64 x 64 and 64 x 128 tiles on predicted gains of 1-3 %, below what the figures can
tell apart. fp64, other archs and other families keep the model's time (factor 1).
Refit with ``python bench/planner_proof.py --fit-vector-path <kernel_bench.json>``.

The 16-bit kinds copy a staged row by the widest of three paths its alignment allows
(kernels/vbatched_gemm.cu pg_copy16): 16-byte units, 4-byte chunks (an even leading
dimension) or 2-byte ones (an odd one), each slower than the one before by a measure
that differs per kind. Their figures are measured, not kept here: ceilings.json
``kind_path_factors`` (occupancy/ceilings.py), fitted with the kind factors on the
device by ``python -m portgemm.tuning.kind_factors``, and a batch's 4-byte share scales
the kind's time as its 16-byte share does: wide^s16 x four^s4 x two^(1 - s16 - s4).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import ceilings

# A plan the figures change must be predicted faster than the plan the model picks
# without them by more than this: the fit's rms log residual (0.033-0.038), so a gain
# the figures cannot tell from their own error moves no plan (the device rule)
SWITCH_MARGIN = 0.04

# (arch, dtype, family) -> {kind: (scalar, vector)}, each at most 1 (the device rule
# relies on the figures only shortening tiles); from
# bench/results/2026-11-24-h100-session6/round3/kernel_bench.json
EFFICIENCY = {
    ("sm_90", "float32", "portgemm"): {
        "128x128/8x8": (0.925, 0.773),
        "128x128/16x8": (0.795, 0.602),
    },
}


class PathFigures(NamedTuple):
    """Per kind, measured / predicted tile time when every staged load takes one path:
    ``wide`` the 16-byte one, ``four`` 4-byte chunks, ``two`` the narrowest (2-byte
    chunks of 16-bit rows; fp32's scalar path, which is also its ``four``)."""
    wide: np.ndarray
    four: np.ndarray
    two: np.ndarray

    @property
    def three_way(self) -> np.ndarray:
        """Per kind, whether its 4-byte path has a figure of its own."""
        return self.four != self.two


def efficiencies(arch, dtype: str, kinds) -> PathFigures | None:
    """The kinds' path figures: the measured ``kind_path_factors`` of ``arch``'s
    ceilings where their families have them (Ceilings.path_factors_of), else
    EFFICIENCY's (scalar, vector) pair (the
    scalar figure for both narrow paths; kinds without a pair 1), or None where no kind
    has figures (the model's time stands: factor 1)."""
    measured = ceilings.ceilings_for(arch).path_factors_of(kinds)
    if measured is not None:
        return PathFigures(*measured)
    rows = [EFFICIENCY.get((arch.name, dtype, k.family), {}).get(k.kind) for k in kinds]
    if not any(rows):
        return None
    rows = [r or (1.0, 1.0) for r in rows]
    scalar = np.array([r[0] for r in rows], dtype=np.float64)
    return PathFigures(np.array([r[1] for r in rows], dtype=np.float64), scalar, scalar)


def factor(eff: PathFigures, share, four=None) -> np.ndarray:
    """Tile-time factor per kind at 16-byte share ``share`` and 4-byte share ``four``
    (per kind; None: none of the loads are priced on the 4-byte path apart):
    two x (wide / two)^s16 x (four / two)^s4 (the module docstring)."""
    out = eff.two * (eff.wide / eff.two) ** np.asarray(share, dtype=np.float64)
    if four is not None:
        out = out * (eff.four / eff.two) ** np.asarray(four, dtype=np.float64)
    return out
