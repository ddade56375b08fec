"""One case's operands on the device: A, B and C each one flat buffer holding the
matrices back to back (row-major, contiguous), with the per-GEMM views the list APIs
take, and the float64 reference C computed once per case.

Back-to-back storage makes the packed (ragged-M) layout the same memory when N and K
are shared, and lets the check reduce every GEMM's error in a few vector operations.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def _offsets(sizes) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])


def shared_nk(shapes) -> bool:
    """One N and one K across a non-empty batch of (M, N, K) rows."""
    s = np.asarray(shapes)
    return s.shape[0] > 0 and bool((s[:, 1] == s[0, 1]).all() and (s[:, 2] == s[0, 2]).all())


class BatchShapes:
    """What a case's operands say about their shapes (``shapes``: (batch, 3) M, N, K)."""
    shapes: np.ndarray

    @property
    def batch(self) -> int:
        return int(self.shapes.shape[0])

    @property
    def uniform_nk(self) -> bool:
        """One N and one K across the batch (the ragged-M layout applies)."""
        return shared_nk(self.shapes)


@dataclass(eq=False)
class Operands(BatchShapes):
    dev: object
    shapes: np.ndarray      # (batch, 3) M, N, K
    dtype: np.dtype
    a_flat: object
    b_flat: object
    c_flat: object
    c_off: np.ndarray       # element offsets of each C (batch + 1)
    A: list = field(default_factory=list)
    B: list = field(default_factory=list)
    C: list = field(default_factory=list)
    ref: object = None      # float64 flat reference of C

    def poison(self) -> None:
        """NaN into every C, so a GEMM left unwritten fails the check."""
        self.c_flat.fill(np.nan)

    def errors(self, xp) -> np.ndarray:
        """Relative Frobenius error of each GEMM's C (inf where a NaN was left)."""
        from .check import per_gemm_errors
        return per_gemm_errors(xp, self.c_flat, self.ref, self.c_off)


def make_operands(dev, shapes, dtype, seed, reference=True) -> Operands:
    """Fresh inputs uniform in [-0.5, 0.5) (seeded), C allocated, reference computed
    (unless reference=False: a profiling replay that checks nothing)."""
    from ..arrays import bfloat16_dtype
    xp, dt = dev.xp, bfloat16_dtype() if dtype == "bfloat16" else np.dtype(dtype)
    M, N, K = (shapes[:, i].astype(np.int64) for i in range(3))
    a_off, b_off, c_off = _offsets(M * K), _offsets(K * N), _offsets(M * N)
    rng = np.random.default_rng(seed)
    a_flat = dev.asarray(rng.random(int(a_off[-1]), dtype=np.float64).astype(dt) - dt.type(0.5))
    b_flat = dev.asarray(rng.random(int(b_off[-1]), dtype=np.float64).astype(dt) - dt.type(0.5))
    c_flat = xp.empty(int(c_off[-1]), dt)
    ops = Operands(dev, shapes, dt, a_flat, b_flat, c_flat, c_off)
    for i, (m, n, k) in enumerate(zip(M.tolist(), N.tolist(), K.tolist())):
        ops.A.append(a_flat[a_off[i]:a_off[i + 1]].reshape(m, k))
        ops.B.append(b_flat[b_off[i]:b_off[i + 1]].reshape(k, n))
        ops.C.append(c_flat[c_off[i]:c_off[i + 1]].reshape(m, n))
    if not reference:
        return ops
    ref = xp.empty(int(c_off[-1]), np.float64)
    for i, (a, b) in enumerate(zip(ops.A, ops.B)):
        r = ref[c_off[i]:c_off[i + 1]].reshape(a.shape[0], b.shape[1])
        xp.matmul(a.astype(np.float64), b.astype(np.float64), out=r)
    ops.ref = ref
    dev.synchronize()
    return ops
