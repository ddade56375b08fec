"""Plan.bind: validated once, then each call only executes (numpy backend here)."""
import numpy as np
import pytest

import portgemm


def test_bound_call_recomputes_from_current_values():
    rng = np.random.default_rng(1)
    shapes = [(5, 7, 3), (16, 1, 9), (0, 4, 2)]
    A = [rng.random((m, k)).astype(np.float32) for m, n, k in shapes]
    B = [rng.random((k, n)).astype(np.float32) for m, n, k in shapes]
    C = [np.full((m, n), np.nan, np.float32) for m, n, k in shapes]
    p = portgemm.plan(shapes, dtype="float32")
    call = p.bind(A, B, C, alpha=2.0, backend="numpy")
    for _ in range(2):
        for a in A:
            a[...] = rng.random(a.shape)  # new values in the same buffers
        assert call() is C
        for a, b, c in zip(A, B, C):
            np.testing.assert_allclose(c, 2.0 * a.astype(np.float64) @ b, rtol=1e-5)


def test_bind_validates_against_the_plan():
    p = portgemm.plan([(4, 4, 4)], dtype="float32")
    A, B, C = [np.ones((4, 5), np.float32)], [np.ones((5, 4), np.float32)], [np.ones((4, 4), np.float32)]
    with pytest.raises(portgemm.ShapeMismatch, match="GEMM 0"):
        p.bind(A, B, C, backend="numpy")
    with pytest.raises(portgemm.DtypeError):
        p.bind([a.astype(np.float64) for a in A], B, C, backend="numpy")
