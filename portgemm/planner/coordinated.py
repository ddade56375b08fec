"""li2019 (PPoPP'19) coordinated tiling and batching.

Tiling engine (§4.2.3): for each GEMM a priority queue of the Table 2 tiles with
BY <= M and BX <= N, smallest first. Start from the smallest; while the TLP of Eq. 1
(tiles x threads per block) is above the threshold, advance every GEMM to its next
larger tile, except a GEMM whose queue holds one tile (it keeps it: "top" instead of
"pop"). If every queue is down to one tile and TLP is still above the threshold, do
the same with the 128-thread versions. The paper's threshold (65536 on V100 = 80 SMs
x 2048 threads x 0.4) is derived here from the architecture: CUs x max threads per CU
x LI2019_FACTOR. A GEMM smaller than 16 in M or N has no tile that fits; it gets the
smallest (the kernel guards the edges). The paper's worked example (16x32x128,
64x64x64, 256x256x64 -> small, medium, medium at TLP 17920) only comes out as printed
with BY <= M as stated: its text also lists "medium" for the 16x32 GEMM, a slip.

Batching engine (§5): a block may run several tiles one after another, to give tiles
with a small K more work per block (theta = 256 by default, li2019's V100 value):
- threshold batching: while (unassigned tiles + assigned blocks) x T > threshold / 2,
  fill the next block with tiles until their K sum reaches theta; then one tile per
  block. We batch tiles of one GEMM per block (as in the paper's Fig. 6), which makes
  the grouping a vectorised divide instead of a sequential scan; the last block of a
  GEMM may fall short of theta.
- binary batching: tiles sorted by K; the smallest is paired with the largest that
  keeps the pair's K sum <= theta (Eq. 5's intent: pair sums close to theta); tiles
  without such a partner run alone. At most two tiles per block.
li2019 picks one of the two with a random forest trained offline on V100, which we
cannot reproduce. Our rule instead: binary batching can at most double a block's K and
ignores TLP, so use it only when two tiles reach theta on average (mean K >= theta/2)
and the tiles' TLP exceeds the threshold (pairing then leaves at least threshold/2, the
floor threshold batching keeps); otherwise threshold batching. ``batching=`` forces one
("threshold", "binary" or "none"). K is never split.
"""
from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from ..tiles import LI2019_128, LI2019_256
from . import register
from .parallelism import kind_table, li2019_threshold, workgroup_tlp
from .tiling import (build_tiles, cdiv, kind_counts, make_plan, notes_for_shapes, pack_blocks,
                     stable_argsort, tile_counts)

THETA = 256
FAMILY_ORDER = (LI2019_256, LI2019_128)   # 256-thread versions first: more TLP
BATCHING = ("auto", "threshold", "binary", "none")
OPTIONS = ("tlp_factor", "tlp_threshold", "occupancy_model", "theta", "batching")


def _by_area(family):
    return tuple(sorted(family, key=lambda k: k.area))  # stable: tall before wide


def tiling_engine(shapes, tables, threshold):
    """Returns (family kinds, kind index per GEMM, Eq. 1 TLP, table, notes)."""
    M, N = shapes[:, 0:1], shapes[:, 1:2]
    live = (shapes[:, 0] > 0) & (shapes[:, 1] > 0)
    rows = np.arange(shapes.shape[0])
    for n_fam, (kinds, table) in enumerate(tables):
        tm = np.array([k.tm for k in kinds])
        tn = np.array([k.tn for k in kinds])
        counts = tile_counts(shapes, kinds)
        avail = (tm <= M) & (tn <= N)
        avail[:, 0] |= ~avail.any(axis=1)          # nothing fits: the smallest
        queue = np.argsort(~avail, axis=1, kind="stable")   # available kinds, small first
        length = avail.sum(axis=1)
        pos = np.zeros(shapes.shape[0], dtype=np.int64)
        while True:
            kidx = queue[rows, pos]
            tlp = workgroup_tlp(kind_counts(counts, kidx, len(kinds)), table.threads)
            if tlp <= threshold:
                return kinds, kidx, tlp, table, [f"tiling: {kinds[0].family}, TLP (Eq. 1) "
                                                 f"at or below the threshold"]
            can = live & (pos < length - 1)
            if not can.any():
                break           # every queue at its last tile: next family
            pos += can
    return kinds, kidx, tlp, table, [f"tiling: {kinds[0].family}, every GEMM at its largest "
                                     f"tile and TLP still above the threshold"]


def threshold_batching(tiles, K, n_per_gemm, theta, threads, threshold):
    """Block number per tile (tiles in GEMM order, each GEMM's tiles contiguous)."""
    n = tiles.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    gemm = tiles["gemm"]
    g = np.maximum(1, cdiv(theta, np.maximum(K, 1)))       # tiles whose K sum reaches theta
    live = n_per_gemm > 0
    n_live, g_live = n_per_gemm[live], g[live]
    groups = cdiv(n_live, g_live)                            # blocks per GEMM if all batched
    start = np.cumsum(n_live) - n_live                       # first tile of each live GEMM
    gstart = np.cumsum(groups) - groups
    slot = np.cumsum(live) - 1                               # GEMM -> index among live GEMMs
    s = slot[gemm]
    local = np.arange(n) - start[s]
    group = gstart[s] + local // g_live[s]
    n_groups = int(groups.sum())
    sizes = np.bincount(group, minlength=n_groups)
    before = np.cumsum(sizes) - sizes                        # tiles assigned before group j
    j = np.arange(n_groups)
    ok = (n - before + j) * threads > threshold / 2          # non-increasing in j
    jf = int(np.argmin(ok)) if not ok.all() else n_groups    # first group not batched
    if jf == n_groups:
        return group
    cut = int(before[jf])
    out = group.copy()
    out[cut:] = jf + np.arange(n - cut)
    return out


def binary_batching(tiles, K, theta, segments):
    """Block number per tile; pairs never cross ``segments`` (kinds in per-kind mode)."""
    n = tiles.shape[0]
    out = np.empty(n, dtype=np.int64)
    kt = K[tiles["gemm"]]
    next_block = 0
    for seg in segments:
        idx = seg[stable_argsort(kt[seg])]
        ks = kt[idx]
        m = idx.shape[0]
        t = np.arange(m)
        # Two pointers, vectorised: partner of t is min(partner of t-1 minus 1, the
        # largest index whose K fits with ks[t]); pairing stops when the pointers meet.
        lim = np.searchsorted(ks, theta - ks, side="right") - 1
        j = np.minimum.accumulate(lim + t) - t
        p = int((j > t).sum())                  # j - t strictly decreases: a prefix
        blk = np.empty(m, dtype=np.int64)
        single = np.ones(m, dtype=bool)
        blk[t[:p]] = next_block + t[:p]
        blk[j[:p]] = next_block + t[:p]
        single[t[:p]] = False
        single[j[:p]] = False
        n_single = int(single.sum())
        blk[single] = next_block + p + np.arange(n_single)
        out[idx] = blk
        next_block += p + n_single
    return out


@register("coordinated", modes=("fused", "per-kind"), options=OPTIONS)
def plan_coordinated(req):
    arch, shapes = req.arch, req.shapes
    threshold = req.options.get("tlp_threshold")
    if threshold is None:
        threshold = li2019_threshold(arch, req.options.get("tlp_factor"))
    threshold = float(threshold)
    theta = int(req.option("theta", THETA))   # range checked by plan()
    batching = req.option("batching", "auto")
    if batching not in BATCHING:
        raise ValidationError(f"unknown batching {batching!r}; known: {', '.join(BATCHING)}")
    model = req.option("occupancy_model", "exact")
    tables = [(kinds, kind_table(arch, kinds, req.mode, req.dtype, model,
                                 resources=req.resources))
              for kinds in map(_by_area, FAMILY_ORDER)]
    notes = notes_for_shapes(shapes)

    kinds, kidx, tlp, table, tnotes = tiling_engine(shapes, tables, threshold)
    notes += tnotes
    threads = float(table.threads.max())
    assert (table.threads == threads).all(), "li2019 families share one block size"
    K = shapes[:, 2]
    counts = tile_counts(shapes, kinds)[np.arange(req.batch), kidx]
    tiles = build_tiles(shapes, kinds, kidx)
    n = tiles.shape[0]

    if batching == "auto":
        mean_k = float(K[counts > 0].mean()) if n else 0.0
        batching = "binary" if (mean_k >= theta / 2 and n * threads > threshold) else "threshold"
        notes.append(f"batching: {batching} (mean K {mean_k:.0f}, theta {theta}; rule, not "
                     f"li2019's random forest)")
    if batching == "none":
        block_of = np.arange(n)
    elif batching == "threshold":
        block_of = threshold_batching(tiles, K, counts, theta, threads, threshold)
    else:
        kind = tiles["kind"]
        segs = ([np.flatnonzero(kind == k) for k in range(len(kinds))]
                if req.mode == "per-kind" else [np.arange(n)])
        block_of = binary_batching(tiles, K, theta, segs)
    tiles, block_ptr = pack_blocks(tiles, block_of, K, by_kind=req.mode == "per-kind")
    nb = block_ptr.shape[0] - 1
    notes.append(f"{n} tiles in {nb} blocks; TLP after batching {nb * threads:,.0f}")
    return make_plan(req, "coordinated", kinds, tiles, block_ptr, tlp, threshold,
                     "workgroup (li2019 Eq. 1, tiling engine)", table.occupancy, notes)
