"""MAGMA vbatched (abdelfattah2016): one tile config for the whole batch, a 3-D grid
(ceil(max M / tm), ceil(max N / tn), batch) and early termination (ETM) of the blocks
that fall outside their own GEMM.

MAGMA picks the kernel version from the maximal dimensions with autotuned tables we do
not have. Our rule: the config of the ``magma`` family that minimises the total padded
tile area over the batch, sum_i ceil(M_i/tm) ceil(N_i/tn) tm tn (the work the real
tiles do, edge waste included; early-exit blocks cost a launch slot but no work); ties
go to the larger tile (more reuse per block). ``plan.tiles`` lists only the real tiles,
in launch order (z, then y, then x), one per block, so the coverage property holds;
``plan.grid`` is the launch, early-exit blocks included.
"""
from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from ..tiles import MAGMA
from . import register
from .launches import GRID_YZ_MAX as GRID_LIMIT
from .parallelism import kind_table, tlp_threshold
from .tiling import cdiv, make_plan, notes_for_shapes, tile_counts, tile_layout

FAMILY = MAGMA
OPTIONS = ("tlp_factor", "tlp_threshold", "occupancy_model", "config")


def choose_config(shapes: np.ndarray, kinds=FAMILY) -> int:
    counts = tile_counts(shapes, kinds)
    area = np.array([k.area for k in kinds], dtype=np.int64)
    padded = (counts * area).sum(axis=0)
    # lexsort: last key primary -> smallest padded area, then largest tile
    return int(np.lexsort((-area, padded))[0])


@register("magma", modes=("grid-z",), options=OPTIONS)
def plan_magma(req):
    arch, shapes = req.arch, req.shapes
    notes = notes_for_shapes(shapes)
    name = req.option("config", None)
    if name is not None:
        names = [k.kind for k in FAMILY]
        if name not in names:
            raise ValidationError(f"unknown magma config {name!r}; known: {', '.join(names)}")
        c = names.index(name)
    else:
        c = choose_config(shapes)
    cfg = FAMILY[c]
    kinds = (cfg,)
    table = kind_table(arch, kinds, "grid-z", req.dtype, req.option("occupancy_model", "exact"),
                       resources=req.resources)
    kidx = np.zeros(req.batch, dtype=np.int64)
    layout = tile_layout(shapes, kinds, kidx, m_fastest=True)   # the list: on first read
    max_m = int(shapes[:, 0].max()) if req.batch else 0
    max_n = int(shapes[:, 1].max()) if req.batch else 0
    grid = (int(cdiv(max_m, cfg.tm)), int(cdiv(max_n, cfg.tn)), req.batch)
    launched = grid[0] * grid[1] * grid[2]
    n = layout.n_tiles
    notes.append(f"config {cfg.kind} ({cfg.tm}x{cfg.tn}): least padded tile area")
    if launched:
        notes.append(f"grid {grid}: {launched - n} of {launched} blocks exit early "
                     f"({(launched - n) / launched:.0%})")
    if grid[1] > GRID_LIMIT:  # z is split into launches by the backends; y is not
        raise ValidationError(f"magma: the largest N needs {grid[1]} tile columns, over the "
                              f"grid's y limit of {GRID_LIMIT}; use another strategy")
    threshold = req.options.get("tlp_threshold")
    if threshold is None:
        threshold = tlp_threshold(arch, req.options.get("tlp_factor"))
    threshold = float(threshold)
    return make_plan(req, "magma", kinds, layout, None, launched * cfg.threads,
                     threshold, "launched threads (grid-z, early-exit blocks included)",
                     table.occupancy, notes, grid=grid)
