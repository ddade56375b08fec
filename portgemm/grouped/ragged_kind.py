"""The one tile kind of a device-offsets (ragged M) call, chosen with the planner's cost
model over what such a call knows: G groups, T rows in all, N and K.

A device-offsets call launches one kind over an upper-bound tile list of
``(T // tm + G) x ceil(N / tn)`` slots; the slots past the real tiles leave at once. Its
group sizes are on the device, so every candidate is weighed on G groups of the mean
size m = T / G, each wasting half a row tile on average (the sizes are unknown, so their
remainders are taken as spread evenly), plus one latency per empty slot. The candidates
are the kinds the bound call's plans choose from: the paper's and ours for the dtype,
each in its own per-kind launch (16 bits on sm_90: the mma.sync and wgmma kinds).
"""
from __future__ import annotations

import numpy as np

from ..planner.cost_model import floors, kind_costs, predict_rows, steps_of
from ..planner.parallelism import kind_table
from ..occupancy.archs import has_mfma
from ..occupancy.ceilings import ceilings_for
from ..planner.wavefront_tlp import FAMILY, OUR_FAMILY
from ..precision import FAMILY as PRECISION_FAMILY
from ..planner.alignment import aligned_rows
from ..tiles import FAMILIES, HALF_FAMILIES, MFMA_FAMILIES, weighed_families, without_superseded

# The families a device-offsets call picks from, per dtype: the two the default planner
# weighs, the paper's kinds and our own.
CANDIDATE_FAMILIES = {dtype: (FAMILY[0].family, ours) for dtype, ours in OUR_FAMILY.items()}
# The 16-bit dtypes: their own family only (planner.HALF_FAMILY).
CANDIDATE_FAMILIES.update({d: (f,) for f, d in HALF_FAMILIES.items()})
# On an AMD arch with MFMA for the dtype (occupancy/archs.py MFMA), its MFMA family
# stands in for our family (fp64) or the mma.sync one (16 bits), as in the planner
# (wavefront_tlp.our_family, planner._half_request).
MFMA_FAMILY = {d: f for f, d in MFMA_FAMILIES.items()}


# Kinds whose device-offsets (ragged) entry point spills where their tile-list one does
# not (the slot lookup keeps the GEMM's descriptor in registers): never a candidate.
# 3xtf32 64x64/w32x32: 4-32 bytes on sm_80 (nn, tn, tt) and 16 on sm_90 (tt), vendor
# matrix, NVRTC 13.0.
RAGGED_SPILLS = frozenset({"portgemm-3xtf32.64x64/w32x32"})


def _kinds_of(fam: str) -> tuple:
    return tuple(k for k in FAMILIES[fam] if k.name not in RAGGED_SPILLS)


def candidate_families(name: str, arch=None, precision: str = "ieee",
                       aligned: bool = True) -> tuple:
    """The families a device-offsets call of dtype ``name`` weighs on ``arch`` (an Arch,
    its name, or None: the portable ones) in a precision mode: a tensor-core mode's own
    family (planner: precision=), else CANDIDATE_FAMILIES, with the arch's MFMA family in
    place of ours where it has one, and the families weighed with them there
    (tiles.weighed_families: the wgmma kinds on sm_90) where the operands' rows are
    16-byte ``aligned`` (as the planner, alignment.aligned_batch)."""
    if precision != "ieee":
        return (PRECISION_FAMILY[precision],)
    fams = CANDIDATE_FAMILIES[name]
    if arch is not None and name in MFMA_FAMILY and has_mfma(arch, name):
        swap = (OUR_FAMILY.get(name), *HALF_FAMILIES)
        fams = tuple(MFMA_FAMILY[name] if f in swap else f for f in fams)
    if arch is not None and aligned:
        where = arch if isinstance(arch, str) else arch.name
        fams = tuple(g for f in fams for g in weighed_families(f, where))
    return fams


def candidate_kinds(dtype, arch=None, precision: str = "ieee") -> tuple:
    """Every kind a device-offsets call of ``dtype`` may run on ``arch`` (None: the
    portable candidates; what the tests cover) in a precision mode."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    return tuple(k for fam in candidate_families(name, arch, precision) for k in _kinds_of(fam))


def predicted_seconds(arch, G: int, rows: int, N: int, K: int, dtype,
                      precision: str = "ieee") -> list:
    """[(kind, predicted seconds of its GEMM launch)] for every candidate kind. The
    packed operands' rows are K (A) and N (B) elements long: 16-byte aligned where both
    are multiples of 16 bytes."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    out = []
    aligned = bool(aligned_rows(np.array([[1, N, K]]), name).all())
    fams = candidate_families(name, arch, precision, aligned)
    weighed = set(without_superseded([k for fam in fams for k in _kinds_of(fam)]))
    for fam in fams:
        kinds = tuple(k for k in _kinds_of(fam) if k in weighed)
        try:
            kc = kind_costs(arch, kinds, kind_table(arch, kinds, "per-kind", name), name)
        except Exception:  # noqa: BLE001 - a family the occupancy model cannot place here
            continue
        out += zip(kinds, _seconds(kc, G, rows, N, K).tolist())
    return out


def _seconds(kc, G, rows, N, K) -> np.ndarray:
    """Predicted seconds per kind of one launch over the upper-bound list: the planner's
    per-kind launch model (cost_model.predict_rows, one row per kind with only that
    kind's tiles) plus one latency per empty slot, spread over the resident slots."""
    m = rows / G
    tiles_n = np.ceil(N / kc.tn)
    row_tiles = np.where(m > 0, np.maximum(1.0, m / kc.tm + 0.5), 0.0) * G
    launched = (rows // kc.tm + G) * tiles_n
    real = np.minimum(row_tiles * tiles_n, launched)
    steps = steps_of(K, kc.tk)
    n = np.diag(real)
    floor = floors(np.array([[m, N, K]], np.float64), kc) * G
    busy = predict_rows(kc, n, n * steps, np.diag(steps), True, floor)
    return busy + (launched - real) * kc.ceil.latency_s / (kc.cus * kc.active)


def choose_kind(arch, G: int, rows: int, N: int, K: int, dtype, precision: str = "ieee"):
    """The candidate kind with the least predicted time, or None when no candidate family
    could be weighed here. A tie goes to the kind of the faster engine, then to the first
    (where the wgmma kinds are weighed, tiles.without_superseded has already left out
    the mma.sync kinds of their tile shapes)."""
    pred = predicted_seconds(arch, G, rows, N, K, dtype, precision)
    if not pred:
        return None
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    c = ceilings_for(arch)
    return min(pred, key=lambda kv: (kv[1], -c.kind_flops_per_s(kv[0], name)))[0]
