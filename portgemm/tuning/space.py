"""What the sweep measures: uniform batches M = N = S, K, that span the size space,
each twice: aligned (S, K powers of two: whole tiles, 16-byte loads) and odd (S - 1,
K - 1: partial edge tiles, and leading dimensions that are not a multiple of 16 bytes,
so the kernel's scalar loads). Random batches are mostly the second kind - about 3 in 4
of their GEMMs have an unaligned leading dimension - and a sweep of aligned sizes alone
chose a family that ran 0.97x the untuned default on random batches (H100,
bench/NOTES.md). The 16-bit dtypes get a third, even (S - 2, K - 2): rows of an even
leading dimension, which their kernels copy by 4-byte chunks where odd ones take 2-byte
ones (tuning/kind_factors.py fits a figure per path); and two mixed ones, A's rows odd
and B's aligned (S, K - 1) and the other way round (S - 1, K), since a random batch's
operands take their paths independently while the sizes above put both on one.

Each size gets one batch count for every kind (kinds are compared on the same
problem): enough GEMMs that a mid-sized tile (64 x 64) fills the device about
WAVES times over, so every kind runs at least a wave or two, within a memory cap.
Sizes are visited in a spread order (far-apart sizes first, each with all its variants
together), so a sweep stopped by its budget has still seen the corners of the space, on
every copy path.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..tiles import ITEMSIZE

EDGES = (32, 64, 128, 256, 512, 1024)   # M = N
DEPTHS = (32, 256, 1024)                # K
QUICK_EDGES = (64, 256)
QUICK_DEPTHS = (64,)
WAVES = 3                # 64 x 64 tiles per size: WAVES x CUs x RESIDENT_64
RESIDENT_64 = 4          # 64 x 64 tiles one CU holds at once, roughly (128 threads each)
MAX_BYTES = 1 << 30      # operands of one size, all GEMMs together
MAX_BATCH = 8192

# The candidate family the sweep times, per dtype (tiles.py).
CANDIDATES = {"float32": "tune", "float64": "tune-f64"}


@dataclass(frozen=True)
class Size:
    m: int
    n: int
    k: int
    batch: int

    @property
    def name(self) -> str:
        return f"{self.batch}x{self.m}x{self.n}x{self.k}"

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.batch

    def shapes(self):
        import numpy as np
        return np.tile(np.array([[self.m, self.n, self.k]], dtype=np.int64), (self.batch, 1))


def batch_for(m: int, n: int, k: int, compute_units: int, elem: int) -> int:
    tiles = -(-m // 64) * -(-n // 64)
    want = -(-WAVES * compute_units * RESIDENT_64 // tiles)
    fits = MAX_BYTES // (elem * (m * k + k * n + m * n))
    return int(max(1, min(want, fits, MAX_BATCH)))


def spread(items: list) -> list:
    """``items`` reordered so that early ones lie far apart: the first, the last, then
    the midpoints of ever finer halvings."""
    n = len(items)
    if n <= 2:
        return list(items)
    order, seen = [0, n - 1], {0, n - 1}
    step = n - 1
    while len(order) < n:
        step = max(1, step // 2)
        for i in range(step, n, step):
            if i not in seen:
                seen.add(i)
                order.append(i)
    return [items[i] for i in order]


def sizes(compute_units: int, dtype: str, quick: bool = False) -> list[Size]:
    """The sweep's sizes for a device of ``compute_units``, in spread order."""
    elem = ITEMSIZE[dtype]
    edges, depths = (QUICK_EDGES, QUICK_DEPTHS) if quick else (EDGES, DEPTHS)
    # (S, K) offsets: aligned, odd; 16-bit: even, and A odd / B aligned, A aligned / B odd
    offsets = ((0, 0), (1, 1), (2, 2), (0, 1), (1, 0)) if elem == 2 else ((0, 0), (1, 1))
    # the (S, K) points in spread order, each with its variants together: a sweep stopped
    # early has every copy path at the points it reached
    return [Size(s - ds, s - ds, k - dk, batch_for(s, s, k, compute_units, elem))
            for s, k in spread([(s, k) for s in edges for k in depths]) for ds, dk in offsets]
