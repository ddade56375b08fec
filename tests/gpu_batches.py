"""Random irregular batches and a float64 reference, for the GPU tests."""
from __future__ import annotations

import zlib

import numpy as np


def stable_seed(*parts) -> int:
    """A seed that is the same in every process for the same parts (hash() of a string is
    randomised per process, so a failure seeded by it could not be reproduced)."""
    return zlib.crc32(repr(parts).encode())


def make_host_batch(rng, shapes, dtype, trans_a=False, trans_b=False, strided=False):
    """Host operands for (M, N, K) shapes: A stored (K, M) when trans_a, B (N, K) when
    trans_b; strided=True makes every operand a view with a padded row stride and an
    offset start (inner stride stays 1)."""
    A, B, C = [], [], []
    for m, n, k in shapes:
        a_shape = (k, m) if trans_a else (m, k)
        b_shape = (n, k) if trans_b else (k, n)
        A.append(_rand(rng, a_shape, dtype, strided))
        B.append(_rand(rng, b_shape, dtype, strided))
        C.append(_rand(rng, (m, n), dtype, strided))
    return A, B, C


def _rand(rng, shape, dtype, strided):
    if not strided:
        return (rng.random(shape) - 0.5).astype(dtype)
    r, c = shape
    # rows 2 apart, columns from offset 3: a view with ld = 2 * (c + 5)
    buf = (rng.random((2 * r + 1, c + 5)) - 0.5).astype(dtype)
    return buf[1::2, 3:3 + c]


def reference(A, B, C, alpha, beta, trans_a, trans_b):
    out = []
    for i, (a, b, c) in enumerate(zip(A, B, C)):
        a64 = np.asarray(a, np.float64)
        b64 = np.asarray(b, np.float64)
        a64 = a64.T if trans_a else a64
        b64 = b64.T if trans_b else b64
        r = alpha[i] * (a64 @ b64)
        if beta[i] != 0:
            r = r + beta[i] * np.asarray(c, np.float64)
        out.append(r)
    return out


def max_rel_error(got, ref) -> float:
    worst = 0.0
    for g, r in zip(got, ref):
        if r.size == 0:
            continue
        g = np.asarray(g, np.float64)
        if not np.all(np.isfinite(g)):
            return float("inf")
        denom = np.linalg.norm(r)
        err = np.linalg.norm(g - r) / (denom if denom > 0 else 1.0)
        worst = max(worst, float(err))
    return worst


def random_shapes(rng, batch, max_mn, max_k, low=1):
    m = rng.integers(low, max_mn + 1, batch)
    n = rng.integers(low, max_mn + 1, batch)
    k = rng.integers(low, max_k + 1, batch)
    return np.stack([m, n, k], axis=1)


EDGE_SIZES = (0, 1, 15, 16, 17, 31, 61, 127)
TOL = {"float32": 1e-5, "float64": 1e-12}


def captured(stream, call):
    """The CUDA graph of ``call()`` captured on ``stream`` (current in the caller). The
    capture ends whatever the call does: a failed call must not leave the stream
    capturing, which would fail every later test's synchronisation."""
    stream.begin_capture()
    try:
        call()
    except BaseException:
        stream.end_capture()
        raise
    return stream.end_capture()
