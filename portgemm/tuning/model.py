"""The planner's view of one candidate kind: a plan that runs a batch with that kind
alone (one launch), and the cost model's time for it with the kind's tile time scaled
by a factor. Every use of the planner's internals by the sweep is here."""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..occupancy.ceilings import ceilings_for
from ..planner.alignment import share_for
from ..planner.cost_model import kind_costs, predict_assignment, step_floor
from ..planner.parallelism import kind_table
from ..planner.tiling import Request, build_tiles, make_plan, pack_blocks, tile_counts
from ..planner.wavefront_tlp import algorithm1
from ..tiles import FAMILIES

FACTOR_RANGE = (1 / 32, 32.0)   # the factors a fit may return


def _shapes(shapes) -> np.ndarray:
    s = np.array(shapes, dtype=np.int64).reshape(-1, 3)
    s.flags.writeable = False
    return s


def one_kind_plan(shapes, kind, dtype: str, arch, resources=None):
    """A per-kind plan of ``shapes`` that tiles every GEMM with ``kind``."""
    return kinds_plan(shapes, (kind,), dtype, arch, resources)


def kinds_plan(shapes, kinds, dtype: str, arch, resources=None):
    """The default rule's per-kind plan of ``shapes`` over ``kinds`` (TileConfigs, small
    -> large) instead of a family's."""
    req = Request(_shapes(shapes), dtype, arch, "per-kind", {}, resources, mode_given=True)
    return algorithm1(req, "wavefront-tlp", "wavefront", kinds=tuple(kinds))


def family_kind_plan(shapes, dtype: str, arch, family: str, kind: str, label: str = "forced"):
    """A per-kind plan that runs every GEMM on kind ``kind`` of ``family``, built over
    the whole family's kinds (so it runs on the family's one variant, as the planner's
    plans do, where one_kind_plan's runs on a variant of that kind alone): for tests and
    timing tools that force a kind."""
    kinds = FAMILIES[family]
    s = _shapes(shapes)
    kidx = np.full(len(s), [k.kind for k in kinds].index(kind), dtype=np.int64)
    tiles = build_tiles(s, kinds, kidx)
    tiles, block_ptr = pack_blocks(tiles, np.arange(tiles.shape[0]), s[:, 2], by_kind=True)
    return make_plan(Request(s, dtype, arch, "per-kind"), f"{label}-{family}", kinds,
                     tiles, block_ptr, 0.0, 0.0, "none", {}, [])


def predicted_seconds(shapes, kind, dtype: str, arch, factor: float = 1.0,
                      resources=None) -> float:
    """The cost model's seconds for :func:`one_kind_plan`'s launch, ``kind``'s tile time
    multiplied by ``factor`` (as a tuned data file makes the planner do), its K step no
    shorter than the kind's measured floor where it has one (cost_model.step_floor, at
    the batch's share of 16-byte loads; not its path efficiencies, which the factor
    fits leave to kind_factors.path_adjusted)."""
    s = _shapes(shapes)
    table = kind_table(arch, (kind,), "per-kind", dtype, resources=resources)
    share = share_for(arch, dtype, (kind,), s)
    kc = dataclasses.replace(kind_costs(arch, (kind,), table, dtype),
                             factor=np.array([float(factor)]),
                             step_floor=None if share is None else
                             step_floor(ceilings_for(arch), (kind,), share))
    return predict_assignment(s, tile_counts(s, (kind,)), np.zeros(s.shape[0], np.int64), kc,
                              per_kind=True)


def fit_factor(measured_s: float, predict, lo: float = FACTOR_RANGE[0],
               hi: float = FACTOR_RANGE[1], rel: float = 1e-4):
    """The factor f with predict(f) == measured_s (predict non-decreasing in f), by
    bisection on log f; None when even the smallest factor predicts more than was
    measured (the model's fixed costs - launch, the memory floor - already exceed the
    measurement, so the tile time cannot be told from it); ``hi`` when even the largest
    predicts less."""
    if predict(lo) > measured_s:
        return None
    if predict(hi) < measured_s:
        return hi
    a, b = math.log(lo), math.log(hi)
    while b - a > rel:
        mid = 0.5 * (a + b)
        if predict(math.exp(mid)) < measured_s:
            a = mid
        else:
            b = mid
    return math.exp(0.5 * (a + b))
