"""The small-batch path (portgemm/small_batch.py): up to SMALL_BATCH GEMMs are read into
Python tuples and checked with plain loops. It must accept exactly what the vectorised
path accepts, describe it identically (the same Batch fields and device descriptors),
and leave every refusal to the vectorised path: the same typed error naming the same
GEMM on either side of the threshold, and nothing written."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm
from portgemm import problem, small_batch
from portgemm.backends.launch import descriptors
from portgemm.errors import DtypeError, LayoutError, ShapeMismatch, ValidationError

T = small_batch.SMALL_BATCH
SIZES = (1, 2, T - 1, T, T + 1, 2 * T + 3)   # either side of the threshold


def batch(n, seed=0, dtype=np.float32, ta=False, tb=False):
    rng = np.random.default_rng(seed)
    shapes = rng.integers(2, 9, (n, 3))
    A = [rng.random((k, m) if ta else (m, k)).astype(dtype) for m, _, k in shapes]
    B = [rng.random((nn, k) if tb else (k, nn)).astype(dtype) for _, nn, k in shapes]
    C = [np.full((m, nn), np.nan, dtype) for m, nn, _ in shapes]
    return A, B, C


def vectorised(A, B, C, *args, **kw):
    """problem.validate with the small path switched off."""
    old = problem.SMALL_BATCH
    problem.SMALL_BATCH = -1
    try:
        return problem.validate(A, B, C, *args, **kw)
    finally:
        problem.SMALL_BATCH = old


def same_batch(a, b):
    for f in ("shapes", "ptr", "ld", "alpha", "beta"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), f
        assert x.flags.c_contiguous, f
    assert (a.dtype, a.size, a.device, a.trans_a, a.trans_b) == \
        (b.dtype, b.size, b.device, b.trans_a, b.trans_b)
    assert descriptors(a).tobytes() == descriptors(b).tobytes()


@pytest.mark.parametrize("n", [1, 3, T])
@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_batches_are_described_as_the_vectorised_path_does(n, ta, tb, dtype):
    A, B, C = batch(n, n, dtype, ta, tb)
    alpha, beta = np.linspace(-1, 1, n), np.linspace(2, 3, n)
    got = problem.validate(A, B, C, alpha, beta, ta, tb)
    assert got.flat is not None   # it took the small path
    same_batch(got, vectorised(A, B, C, alpha, beta, ta, tb))


@pytest.mark.parametrize("ta, tb", [(False, False), (True, True)])
def test_vectors_and_one_row_matrices_take_the_small_path(ta, tb):
    rng = np.random.default_rng(8)
    shapes = [(1, 5, 3), (4, 1, 2), (3, 6, 1), (1, 1, 1), (2, 2, 7)]
    A = [rng.random((k, m) if ta else (m, k)).astype(np.float32) for m, _, k in shapes]
    B = [rng.random((n, k) if tb else (k, n)).astype(np.float32) for _, n, k in shapes]
    C = [np.zeros((m, n), np.float32) for m, n, _ in shapes]
    wide = np.zeros((3, 40), np.float32)
    C[0] = wide[:1, 3:8]     # one row of a wider buffer: its row stride 40 is not used
    got = problem.validate(A, B, C, 1.0, 0.0, ta, tb)
    assert got.flat is not None
    same_batch(got, vectorised(A, B, C, 1.0, 0.0, ta, tb))


def test_a_one_row_view_with_a_huge_row_stride_is_left_to_the_vectorised_path():
    """Its row stride is never used, but it is no int32: the small path declines."""
    buf = np.arange(8, dtype=np.float32)
    A = [np.lib.stride_tricks.as_strided(buf, shape=(1, 4), strides=(2**33, 4))]
    B = [np.ones((4, 2), np.float32)]
    C = [np.full((1, 2), np.nan, np.float32)]
    got = problem.validate(A, B, C)
    assert got.flat is None
    portgemm.gemm_vbatched(A, B, C, backend="numpy")
    np.testing.assert_allclose(C[0], [[6.0, 6.0]])


def test_empty_matrices_are_left_to_the_vectorised_path():
    A = [np.ones((3, 0), np.float32), np.ones((2, 2), np.float32)]
    B = [np.ones((0, 4), np.float32), np.ones((2, 2), np.float32)]
    C = [np.full((3, 4), np.nan, np.float32), np.zeros((2, 2), np.float32)]
    got = problem.validate(A, B, C)
    assert got.flat is None
    same_batch(got, vectorised(A, B, C))


def test_strided_views_and_a_shared_b_take_the_small_path():
    base = np.zeros((40, 64), np.float32)
    out = np.zeros((40, 64), np.float32)
    B = np.ones((6, 5), np.float32)
    A = [base[8 * i:8 * i + 4, 2:8] for i in range(4)]     # row stride 64, not contiguous
    C = [out[8 * i:8 * i + 4, 10:15] for i in range(4)]
    got = problem.validate(A, [B] * 4, C)
    assert got.flat is not None
    same_batch(got, vectorised(A, [B] * 4, C))


def test_interleaved_column_slices_are_refined_exactly():
    """C's spans meet (columns 0-3 and 4-7 of the same rows) but share no element: the
    sweep flags them, and the vectorised path's row-by-row check accepts them."""
    out = np.full((6, 8), np.nan, np.float32)
    A = [np.ones((6, 3), np.float32)] * 2
    B = [np.ones((3, 4), np.float32)] * 2
    C = [out[:, :4], out[:, 4:]]
    got = problem.validate(A, B, C)
    assert got.flat is None
    portgemm.gemm_vbatched(A, B, C, backend="numpy")
    np.testing.assert_allclose(out, 3.0)


def _offender(kind, A, B, C, i):
    """Make GEMM i of the batch bad in one way; returns the error type expected."""
    m, k = A[i].shape
    nn = B[i].shape[1]
    if kind == "inner":
        B[i] = np.ones((k + 1, nn), np.float32)
        return ShapeMismatch
    if kind == "c-shape":
        C[i] = np.full((m + 1, nn), np.nan, np.float32)
        return ShapeMismatch
    if kind == "column-major":
        A[i] = np.asfortranarray(A[i])
        return LayoutError
    if kind == "read-only":
        C[i].flags.writeable = False
        return LayoutError
    if kind == "misaligned":
        raw = np.zeros(m * k * 4 + 1, np.uint8)[1:].view(np.float32).reshape(m, k)
        A[i] = raw
        return LayoutError
    if kind == "c-overlaps-c":
        j = (i + 1) % len(C)
        big = np.full((m + C[j].shape[0], max(nn, C[j].shape[1])), np.nan, np.float32)
        C[i], C[j] = big[:m, :nn], big[1:1 + C[j].shape[0], :C[j].shape[1]]
        return LayoutError
    if kind == "c-overlaps-own-a":
        buf = np.full((max(m, k) + 1, max(nn, k) + 1), np.nan, np.float32)
        C[i], A[i] = buf[:m, :nn], buf[1:1 + m, :k]
        return LayoutError
    if kind == "dtype":
        A[i] = A[i].astype(np.float64)
        return DtypeError
    if kind == "one-dimensional":
        A[i] = A[i].reshape(-1)
        return ValidationError
    raise AssertionError(kind)


KINDS = ("inner", "c-shape", "column-major", "read-only", "misaligned", "c-overlaps-c",
         "c-overlaps-own-a", "dtype", "one-dimensional")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", KINDS)
def test_bad_input_gets_the_same_typed_error_at_every_size_and_writes_nothing(n, kind):
    if kind == "c-overlaps-c" and n == 1:
        pytest.skip("one GEMM has no other C")
    A, B, C = batch(n, 3)
    i = n // 2
    for c in C:
        c[...] = 7.0   # beta = 1 below: any write changes it
    want = _offender(kind, A, B, C, i)
    before = [c.copy() for c in C]
    with pytest.raises(want) as err:
        portgemm.gemm_vbatched(A, B, C, beta=1.0, backend="numpy")
    assert err.value.gemm in (i, (i + 1) % n, min(i, (i + 1) % n)) or \
        (kind == "dtype" and err.value.gemm is None)
    if kind == "c-overlaps-c":
        assert err.value.gemm == min(i, (i + 1) % n)
    elif kind != "dtype":
        assert err.value.gemm == i
    for c, b in zip(C, before):
        if c.flags.writeable:
            np.testing.assert_array_equal(c, b)
    # the vectorised path says the same
    with pytest.raises(want) as err2:
        vectorised(A, B, C)
    assert (type(err2.value), err2.value.gemm) == (type(err.value), err.value.gemm)


@pytest.mark.parametrize("n", SIZES)
def test_results_match_the_float64_reference_either_side_of_the_threshold(n):
    A, B, C = batch(n, 5)
    portgemm.gemm_vbatched(A, B, C, alpha=0.5, backend="numpy")
    for a, b, c in zip(A, B, C):
        np.testing.assert_allclose(c, 0.5 * (a.astype(np.float64) @ b), rtol=1e-5)


def test_layout_keys_of_small_batches_are_tuples_and_hit_on_new_views():
    from portgemm import api
    api._layouts.clear()
    A, B, C = batch(4, 9)
    portgemm.gemm_vbatched(A, B, C, backend="numpy")
    views = [[x.view() for x in X] for X in (A, B, C)]
    whole = problem.gather_lists(*views, ("cpu",))
    assert type(whole) is small_batch.Few
    for c in C:
        c[...] = np.nan
    portgemm.gemm_vbatched(*views, backend="numpy")
    assert len(api._layouts._d) == 1   # the second call found the first one's entry
    for a, b, c in zip(A, B, C):
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5)
