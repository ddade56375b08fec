"""A one-tile-per-block plan as per-GEMM runs of tiles, and its expansion to the flat
tile list.

A plan whose blocks each hold one tile (wavefront-tlp, workgroup-tlp, magma) is fully
described by O(batch) numbers: the GEMMs in launch order and, per GEMM, its kind and
tile grid. The planner keeps only these; ``Plan.tiles`` is expanded from them on first
read on the host (``TileLayout.tiles``), and the GPU backends send them to the device,
where a small kernel writes the tile list (backends/expand.py), so neither planning nor
a first call writes 24 bytes per tile on the host.

Nothing here loops over GEMMs or tiles in Python.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TILE_DTYPE = np.dtype([("gemm", "<i4"), ("m0", "<i4"), ("n0", "<i4"),
                       ("tm", "<i4"), ("tn", "<i4"), ("kind", "<i4")])

# Tiles per pass of the expansion: temporaries of this many int64 stay in a core's cache.
_CHUNK = 1 << 15


@dataclass(frozen=True, eq=False)
class TileLayout:
    """The tiles of a one-tile-per-block plan, GEMM by GEMM. Slot s (the s-th GEMM in
    launch order) is GEMM ``gemm[s]``, tiled by kind ``kind[s]`` (tm x tn) into a
    ``gm[s]`` x ``gn[s]`` grid; its tiles are entries ``first[s] .. first[s + 1] - 1``
    of the list, row-major over that grid (``m_fastest``: column-major). Every array is
    int64 and read-only; ``first`` has one entry more than the slots (the tile count)."""
    gemm: np.ndarray
    kind: np.ndarray
    tm: np.ndarray
    tn: np.ndarray
    gm: np.ndarray
    gn: np.ndarray
    first: np.ndarray
    m_fastest: bool = False

    @property
    def n_tiles(self) -> int:
        return int(self.first[-1])

    def tiles_per_kind(self, n_kinds: int) -> np.ndarray:
        """int64 (n_kinds,): tiles of each kind."""
        return np.bincount(self.kind, weights=np.diff(self.first),
                           minlength=n_kinds).astype(np.int64)

    def tiles(self) -> np.ndarray:
        """The flat tile list (TILE_DTYPE), slot after slot.

        Speed (this was most of a plan-cache miss before plans kept the layout): the
        24-byte records are written as three int64 columns, each holding two int32
        fields (little-endian: the first field in the low half): (gemm, m0), (n0, tm),
        (tn, kind). Along a *line* of tiles (a tile row; a tile column with
        ``m_fastest``) every field but one coordinate is constant, so two columns are
        one repeat of a per-line or per-GEMM value, and the third is ``tile index x
        step + per-line base``: a handful of passes over the tiles instead of one per
        field.
        """
        i64 = np.int64
        g, kk, tm, tn, gm, gn = self.gemm, self.kind, self.tm, self.tn, self.gm, self.gn
        n = self.n_tiles
        out = np.empty((n, 3), dtype=i64)
        tiles = out.reshape(-1).view(TILE_DTYPE)
        if n == 0:
            return tiles
        n_t = np.diff(self.first)
        hi = i64(32)
        if self.m_fastest:  # a line is a tile column: gn lines of gm tiles, m0 varies
            lines, per_line, lstep, pstep = gn, gm, tn, tm
        else:               # a line is a tile row: gm lines of gn tiles, n0 varies
            lines, per_line, lstep, pstep = gm, gn, tm, tn
        first_tile = self.first[:-1]                                     # per GEMM slot
        # Per line (a few thousand): its slot, its index r in its GEMM, its length, its
        # first tile and its coordinate
        lslot = np.repeat(np.arange(g.shape[0]), lines)
        r = np.arange(lslot.shape[0]) - (np.cumsum(lines) - lines).take(lslot)
        llen = per_line.take(lslot)
        lfirst = np.cumsum(llen) - llen
        lcoord = r * lstep.take(lslot)                                   # the line's m0 (n0)
        l_pstep = pstep.take(lslot)
        # The varying column is t x step + base (t = the tile's index in the whole list).
        const2 = tn | (kk << hi)                                         # (tn, kind), per slot
        if self.m_fastest:  # (n0, tm) constant per line; (gemm, m0): m0 = (t - first) x tm
            vary, cfield = 0, 1
            cline = lcoord | (tm << hi).take(lslot)
            # t x (step << 32) may wrap int64: the sum is exact modulo 2**64 and the final
            # (gemm, m0) pair is in range, so the wrap cancels
            base = g.take(lslot) - ((lfirst * l_pstep) << hi)
            step = pstep << hi                                           # per slot
        else:               # (gemm, m0) constant per line; (n0, tm): n0 = (t - first) x tn
            vary, cfield = 1, 0
            cline = g.take(lslot) | (lcoord << hi)
            base = (tm << hi).take(lslot) - lfirst * l_pstep
            step = pstep                                                 # per slot
        first_line = np.cumsum(lines) - lines
        # In chunks of whole GEMMs, so the temporaries stay in cache and only the output
        # goes to memory (the expansion is bandwidth-bound at a few hundred thousand tiles).
        tile_end = self.first[1:]
        cuts = ([] if n <= _CHUNK else   # GEMM slots where a chunk ends
                np.unique(np.searchsorted(tile_end, np.arange(_CHUNK, n, _CHUNK)) + 1).tolist())
        s0 = 0
        for s1 in [*cuts, g.shape[0]]:
            if s1 <= s0:
                continue
            t0, t1 = int(first_tile[s0]), int(tile_end[s1 - 1])
            l0, l1 = int(first_line[s0]), int(first_line[s1 - 1] + lines[s1 - 1])
            o = out[t0:t1]
            per_gemm, per_l = n_t[s0:s1], llen[l0:l1]
            o[:, 2] = np.repeat(const2[s0:s1], per_gemm)
            o[:, cfield] = np.repeat(cline[l0:l1], per_l)
            col = np.arange(t0, t1, dtype=i64)
            col *= np.repeat(step[s0:s1], per_gemm)
            col += np.repeat(base[l0:l1], per_l)
            o[:, vary] = col
            s0 = s1
        return tiles
