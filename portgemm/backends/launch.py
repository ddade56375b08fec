"""Launch geometry and per-call descriptors shared by the GPU backends (no GPU library)."""
from __future__ import annotations

import numpy as np

from ..kernels.render import GEMM_DTYPE


def descriptors(batch) -> np.ndarray:
    """The per-GEMM device descriptors (struct PgGemm) of a validated batch."""
    d = np.zeros(batch.size, GEMM_DTYPE)
    d["A"], d["B"], d["C"] = batch.ptr[:, 0], batch.ptr[:, 1], batch.ptr[:, 2]
    d["lda"], d["ldb"], d["ldc"] = batch.ld[:, 0], batch.ld[:, 1], batch.ld[:, 2]
    d["M"], d["N"], d["K"] = batch.shapes[:, 0], batch.shapes[:, 1], batch.shapes[:, 2]
    d["alpha"], d["beta"] = batch.alpha, batch.beta
    return d


def per_kind_layout(plan):
    """Reorder blocks so each kind's are contiguous: (tiles, block_ptr, launches) with
    launches = [(variant index, first block, n blocks)] in plan.kinds order."""
    sizes = np.diff(plan.block_ptr)
    kind_of_block = plan.tiles["kind"][plan.block_ptr[:-1]]
    # A stable sort of the tiles by their block's kind keeps every block contiguous.
    order = np.argsort(np.repeat(kind_of_block, sizes), kind="stable")
    tiles = plan.tiles[order]
    sizes = sizes[np.argsort(kind_of_block, kind="stable")]
    block_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    counts = np.bincount(kind_of_block, minlength=len(plan.kinds))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    launches = [(k, int(starts[k]), int(counts[k])) for k in range(len(plan.kinds)) if counts[k]]
    return tiles, block_ptr, launches


def grid_z_launches(plan, zmax: int):
    """MAGMA layout: one (tiles_m, tiles_n, gemms) grid per chunk of at most zmax GEMMs."""
    gx, gy, batch = plan.grid
    kind = int(plan.tiles["kind"][0])
    return [(kind, z0, (gx, gy, min(zmax, batch - z0))) for z0 in range(0, batch, zmax)]
