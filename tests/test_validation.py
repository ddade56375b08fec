"""problem.validate and arrays.info: every bad input raises a typed error naming the GEMM,
before anything is written; legal edge cases pass and are described correctly."""
import numpy as np
import pytest

import portgemm
from portgemm.arrays import ArrayInfo, info
from portgemm.errors import (DtypeError, LayoutError, PortgemmError, ShapeMismatch,
                             ValidationError)
from portgemm.problem import validate

F32 = np.float32
SHAPES = [(5, 7, 3), (16, 16, 16), (9, 4, 11), (12, 6, 8)]  # (M, N, K); GEMM 2 is the bad one


def make(shapes=SHAPES, dtype=F32, seed=0):
    rng = np.random.default_rng(seed)
    A = [rng.random((m, k)).astype(dtype) for m, n, k in shapes]
    B = [rng.random((k, n)).astype(dtype) for m, n, k in shapes]
    C = [rng.random((m, n)).astype(dtype) for m, n, k in shapes]
    return A, B, C


def expect(exc, gemm, A, B, C, alpha=1.0, beta=0.5, trans_a=False, trans_b=False):
    """The error type, its ValueError/TypeError base, the GEMM named, and no C written —
    both from validate() and through the public API on the numpy backend."""
    before = [np.array(c, copy=True) for c in C if isinstance(c, np.ndarray)]
    for call in (lambda: validate(A, B, C, alpha, beta, trans_a, trans_b, info),
                 lambda: portgemm.gemm_vbatched(A, B, C, alpha, beta, trans_a, trans_b,
                                                backend="numpy")):
        with pytest.raises(exc) as ei:
            call()
        e = ei.value
        assert isinstance(e, PortgemmError)
        assert isinstance(e, (ValueError, TypeError))
        assert e.gemm == gemm
        if gemm is not None:
            assert f"GEMM {gemm}:" in str(e)
        after = [c for c in C if isinstance(c, np.ndarray)]
        for x, y in zip(before, after):
            np.testing.assert_array_equal(x, y)
    return ei.value


# ---- counts, shapes, containers ------------------------------------------------------------

def test_counts_differ():
    A, B, C = make()
    e = expect(ShapeMismatch, None, A, B, C[:3])
    assert "4, 4 and 3" in str(e)


def test_inner_dims_differ():
    A, B, C = make()
    B[2] = np.ones((10, 4), F32)
    expect(ShapeMismatch, 2, A, B, C)


def test_c_shape_differs():
    A, B, C = make()
    C[2] = np.ones((4, 9), F32)  # the transpose of the right shape
    expect(ShapeMismatch, 2, A, B, C)


def test_transpose_flags_change_the_shapes():
    A, B, C = make()
    A[2] = np.ones((9, 11), F32)  # fine untransposed, wrong with trans_a
    validate(A, B, C, 1.0, 0.0, False, False, info)
    expect(ShapeMismatch, 0, A, B, C, trans_a=True)
    At = [a.T.copy() for a in A]
    Bt = [b.T.copy() for b in B]
    batch = validate(At, Bt, C, 1.0, 0.0, True, True, info)
    assert batch.shapes.tolist() == [list(s) for s in SHAPES]
    Bt[2] = np.ones((4, 10), F32)
    expect(ShapeMismatch, 2, At, Bt, C, trans_a=True, trans_b=True)


@pytest.mark.parametrize("bad", [np.ones((4, 3), F32), np.ones((4, 3, 3, 1), F32), "abc", 5,
                                 None])
def test_not_a_sequence_of_matrices(bad):
    A, B, C = make()
    e = expect(DtypeError, None, bad, B, C)
    assert isinstance(e, TypeError)


@pytest.mark.parametrize("bad", [np.ones(9, F32), np.ones((9, 11, 1), F32), np.ones((), F32)])
def test_not_2d(bad):
    A, B, C = make()
    A[2] = bad
    e = expect(ValidationError, 2, A, B, C)
    assert "2-D" in str(e)


def test_non_2d_from_a_backends_own_array_info():
    A, B, C = make()

    def lax_info(x):  # a backend fast path that forgot the 2-D check
        return info(x) if x.ndim == 2 else ArrayInfo(x.ctypes.data, x.shape, (1,), x.dtype, "cpu")

    B[2] = np.ones(44, F32)
    with pytest.raises(ValidationError, match="GEMM 2: B: expected a 2-D array"):
        validate(A, B, C, 1.0, 0.0, False, False, lax_info)


@pytest.mark.parametrize("bad", ["list", np.float32(1.0), None])
def test_not_an_array(bad):
    A, B, C = make()
    B[2] = B[2].tolist() if bad == "list" else bad
    expect(DtypeError, 2, A, B, C)


# ---- dtypes ---------------------------------------------------------------------------------

def test_mixed_dtypes():
    A, B, C = make()
    B[2] = B[2].astype(np.float64)
    e = expect(DtypeError, 2, A, B, C)
    assert "mixed" in str(e)


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.complex64, ">f4"])
def test_unsupported_dtype(dtype):
    A, B, C = make()
    C[2] = C[2].astype(dtype)
    e = expect(DtypeError, 2, A, B, C)
    assert "unsupported" in str(e)
    A, B, C = make(dtype=dtype)
    expect(DtypeError, 0, A, B, C)


# ---- layout ---------------------------------------------------------------------------------

def test_non_unit_inner_stride():
    A, B, C = make()
    A[2] = np.ones((9, 22), F32)[:, ::2]
    e = expect(LayoutError, 2, A, B, C)
    assert "inner" in str(e)


def test_column_major_is_rejected_with_a_hint():
    A, B, C = make()
    C[2] = np.asfortranarray(C[2])
    e = expect(LayoutError, 2, A, B, C)
    assert "trans" in str(e)


def test_negative_row_stride():
    A, B, C = make()
    B[2] = B[2][::-1]
    expect(LayoutError, 2, A, B, C)


def test_negative_inner_stride():
    A, B, C = make()
    C[2] = C[2][:, ::-1]
    expect(LayoutError, 2, A, B, C)


def test_byte_stride_not_a_multiple_of_itemsize():
    A, B, C = make()
    raw = np.zeros(4096, np.uint8)
    A[2] = np.lib.stride_tricks.as_strided(raw[:4].view(F32), shape=(9, 11), strides=(46, 4))
    e = expect(LayoutError, 2, A, B, C)
    assert "itemsize" in str(e)


def test_misaligned_pointer():
    A, B, C = make()
    raw = np.zeros(9 * 11 * 4 + 1, np.uint8)
    A[2] = raw[1:].view(F32).reshape(9, 11)
    assert not A[2].flags.aligned
    expect(LayoutError, 2, A, B, C)


def test_read_only_c():
    A, B, C = make()
    C[2].flags.writeable = False
    expect(LayoutError, 2, A, B, C)


def test_c_rows_overlap_each_other():
    A, B, C = make()
    C[2] = np.lib.stride_tricks.as_strided(np.zeros(64, F32), shape=(9, 4), strides=(8, 4))
    expect(LayoutError, 2, A, B, C)


def test_broadcast_a_is_legal_but_broadcast_c_is_not():
    A, B, C = make()
    A[2] = np.broadcast_to(np.ones((1, 11), F32), (9, 11))  # row stride 0: read-only input, fine
    validate(A, B, C, 1.0, 0.0, False, False, info)
    C[2] = np.lib.stride_tricks.as_strided(np.zeros(4, F32), shape=(9, 4), strides=(0, 4))
    expect(LayoutError, 2, A, B, C)


# ---- overlaps -------------------------------------------------------------------------------

def test_c_overlaps_its_own_a():
    A, B, C = make()
    buf = np.zeros((9, 15), F32)
    A[2], C[2] = buf[:, :11], buf[:, 10:14]  # share column 10
    e = expect(LayoutError, 2, A, B, C)
    assert "its own A" in str(e)


def test_c_is_its_own_b():
    A, B, C = make([(8, 8, 8)] * 3)
    C[2] = B[2]
    expect(LayoutError, 2, A, B, C)


def test_c_overlaps_a_of_another_gemm():
    A, B, C = make()
    C[2] = A[3][:9, :4]  # A[3] is 12x8
    e = expect(LayoutError, 2, A, B, C)
    assert "A of GEMM 3" in str(e)


def test_c_overlaps_b_of_an_earlier_gemm():
    A, B, C = make()
    C[2] = B[1][:9, :4]
    e = expect(LayoutError, 2, A, B, C)
    assert "B of GEMM 1" in str(e)


def test_c_overlaps_another_c():
    A, B, C = make([(8, 8, 8)] * 4)
    C[3] = C[2]
    e = expect(LayoutError, 2, A, B, C)
    assert "C of GEMM 3" in str(e)


def test_c_column_slices_sharing_a_column():
    A, B, C = make([(8, 8, 8)] * 4)
    buf = np.zeros((8, 40), F32)
    C[:] = [buf[:, 0:8], buf[:, 8:16], buf[:, 15:23], buf[:, 30:38]]
    expect(LayoutError, 1, A, B, C)


def test_c_last_row_meets_next_c_first_row():
    A, B, C = make([(4, 8, 8)] * 4)
    flat = np.zeros(200, F32)
    C[1] = flat[0:32].reshape(4, 8)
    C[3] = np.lib.stride_tricks.as_strided(flat[31:], shape=(4, 8), strides=(40, 4))
    expect(LayoutError, 1, A, B, C)


# ---- alpha, beta, flags ---------------------------------------------------------------------

@pytest.mark.parametrize("name", ["alpha", "beta"])
@pytest.mark.parametrize("value", [[1.0, 2.0], np.ones((4, 1)), [[1.0], [2.0, 3.0]]])
def test_scalar_sequence_wrong_length(name, value):
    A, B, C = make()
    expect(ShapeMismatch, None, A, B, C, **{name: value})


@pytest.mark.parametrize("name", ["alpha", "beta"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite(name, bad):
    A, B, C = make()
    expect(ValidationError, 2, A, B, C, **{name: [1.0, 0.5, bad, 2.0]})
    expect(ValidationError, 0, A, B, C, **{name: bad})  # a scalar breaks GEMM 0 first


def test_huge_integer_scalars():
    A, B, C = make()
    expect(ValidationError, 1, A, B, C, alpha=[1, 10**400, 1, 1])
    expect(ValidationError, 0, A, B, C, beta=-10**400)
    b = validate(A, B, C, [1, 10**30, 2, 3], 0.0, False, False, info)
    assert b.alpha[1] == 1e30


@pytest.mark.parametrize("name", ["alpha", "beta"])
def test_complex(name):
    A, B, C = make()
    expect(DtypeError, 0, A, B, C, **{name: 1j})
    expect(DtypeError, 2, A, B, C, **{name: [1, 2, 3 + 1j, 4]})


@pytest.mark.parametrize("bad", ["1.0", None, True, [1.0, 2.0, "x", 3.0]])
def test_not_a_number(bad):
    A, B, C = make()
    e = expect(DtypeError, 2 if isinstance(bad, list) else 0, A, B, C, alpha=bad)
    assert isinstance(e, TypeError)


@pytest.mark.parametrize("flag", ["trans_a", "trans_b"])
@pytest.mark.parametrize("bad", [1, 0, "N", None, np.array([True])])
def test_trans_flags_must_be_bool(flag, bad):
    A, B, C = make()
    expect(DtypeError, None, A, B, C, **{flag: bad})


# ---- legal edge cases -----------------------------------------------------------------------

def test_batch_description():
    A, B, C = make()
    A[1] = np.zeros((16, 40), F32)[:, 3:19]  # column slice: ld 40
    b = validate(tuple(A), B, C, [1, 2, 3, 4], np.float32(0.25), np.bool_(False), False, info)
    assert b.size == 4 and b.dtype == np.float32 and b.device == "cpu"
    assert b.shapes.dtype == np.int64 and b.shapes.tolist() == [list(s) for s in SHAPES]
    assert b.ptr.dtype == np.uint64 and b.ptr.shape == (4, 3)
    assert b.ptr[1, 0] == A[1].ctypes.data and b.ptr[3, 2] == C[3].ctypes.data
    assert b.ld.tolist()[1] == [40, 16, 16]
    assert b.ld[:, 0].tolist() == [3, 40, 11, 8]
    assert b.alpha.tolist() == [1, 2, 3, 4] and b.beta.tolist() == [0.25] * 4
    assert b.trans_a is False and b.trans_b is False
    assert isinstance(b.A, list) and b.A[1] is A[1]


def test_empty_batch():
    b = validate([], [], [], 1.0, 0.0, False, False, info)
    assert b.size == 0 and b.shapes.shape == (0, 3)
    assert portgemm.gemm_vbatched([], [], [], backend="numpy") == []


@pytest.mark.parametrize("mnk", [(0, 5, 3), (4, 0, 3), (4, 5, 0), (0, 0, 0)])
def test_zero_sizes_are_legal(mnk):
    A, B, C = make([(3, 3, 3), mnk, (2, 2, 2)])
    b = validate(A, B, C, 1.0, 0.0, False, False, info)
    assert b.shapes[1].tolist() == list(mnk)


def test_strided_views_are_legal():
    A, B, C = make()
    A[0] = np.ones((10, 3), F32)[::2]
    B[1] = np.ones((16, 50), F32)[:, 20:36]
    C[2] = np.zeros((27, 4), F32)[::3]
    C[3] = np.zeros((12, 1, 6), F32)[:, 0, :]
    b = validate(A, B, C, 1.0, 0.0, False, False, info)
    assert b.ld[0, 0] == 6 and b.ld[1, 1] == 50 and b.ld[2, 2] == 12


def test_interleaved_column_slices_of_one_buffer():
    # A and C of every GEMM side by side in one buffer; C spans overlap in bytes, not in elements
    A, B, C = make([(8, 8, 8)] * 4)
    buf = np.zeros((8, 64), F32)
    for i in range(4):
        A[i], C[i] = buf[:, 16 * i:16 * i + 8], buf[:, 16 * i + 8:16 * i + 16]
    validate(A, B, C, 1.0, 0.0, False, False, info)


def test_a_and_b_may_overlap_freely():
    A, B, C = make([(8, 8, 8)] * 3)
    X = np.ones((8, 8), F32)
    validate([X] * 3, [X, X.T.copy(), X], C, 1.0, 0.0, False, False, info)
    validate([X] * 3, [X] * 3, C, 1.0, 0.0, True, False, info)


def test_length_one_dimensions_ignore_their_strides():
    A, B, C = make([(1, 8, 8), (8, 1, 8)])
    C[0] = np.zeros((3, 8), F32)[::-1][:1]  # one row: any row stride, even negative
    C[1] = np.zeros((8, 5), F32)[:, 2:3]  # one column: any inner stride
    A[0] = np.zeros((8, 8), F32)[::-1][:1]  # one row with a negative stride
    b = validate(A, B, C, 1.0, 0.0, False, False, info)
    assert b.ld[1, 2] == 5


# ---- exact overlap test against a brute-force element set -----------------------------------

@pytest.mark.parametrize("seed", range(60))
def test_overlap_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    buf = np.zeros((24, 48), F32)
    n = int(rng.integers(1, 5))

    def place(rows, cols):
        if rng.random() < 0.3:
            return np.zeros((rows, cols), F32)
        step = int(rng.integers(1, 3))
        r0 = int(rng.integers(0, 24 - step * (rows - 1)))
        c0 = int(rng.integers(0, 48 - cols + 1))
        return buf[r0:r0 + step * (rows - 1) + 1:step, c0:c0 + cols]

    A, B, C = [], [], []
    for _ in range(n):
        m, nn, k = (int(v) for v in rng.integers(1, 9, 3))
        A.append(place(m, k))
        B.append(place(k, nn))
        C.append(place(m, nn))

    def cells(x):  # byte offsets of x's elements in buf
        r = np.arange(x.shape[0])[:, None] * x.strides[0]
        c = np.arange(x.shape[1])[None, :] * x.strides[1]
        return set((x.ctypes.data - buf.ctypes.data + r + c).ravel().tolist())

    def clash(x, y):
        if np.shares_memory(x, buf) and np.shares_memory(y, buf):
            return bool(cells(x) & cells(y))
        return x is y

    bad = any(clash(C[i], C[j]) for i in range(n) for j in range(n) if i != j) or \
        any(clash(C[i], X[j]) for i in range(n) for j in range(n) for X in (A, B))
    if bad:
        with pytest.raises(LayoutError):
            validate(A, B, C, 1.0, 0.0, False, False, info)
    else:
        validate(A, B, C, 1.0, 0.0, False, False, info)


# ---- arrays.info ----------------------------------------------------------------------------

class FakeDevice:
    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7000_0000_0000):
        self.__cuda_array_interface__ = dict(shape=shape, typestr=typestr, strides=strides,
                                             data=(ptr, False), version=3)


def test_info_numpy():
    x = np.zeros((6, 10), np.float64)[::2, 1:5]
    a = info(x)
    assert isinstance(a, ArrayInfo)
    assert a == (x.ctypes.data, (3, 4), (20, 1), np.dtype(np.float64), "cpu", False)


def test_info_cuda_array_interface():
    a = info(FakeDevice((3, 5)))
    assert a.shape == (3, 5) and a.strides == (5, 1) and a.device == "cuda"
    assert a.dtype == np.float32 and a.ptr == 0x7000_0000_0000
    a = info(FakeDevice((3, 5), "<f8", strides=(128, 8)))
    assert a.strides == (16, 1) and a.dtype == np.float64
    with pytest.raises(LayoutError):
        info(FakeDevice((3, 5), strides=(18, 4)))
    with pytest.raises(ValidationError):
        info(FakeDevice((3, 5, 2)))


def test_numpy_backend_refuses_device_arrays():
    A, B, C = make()
    before = [c.copy() for c in C]
    A[2] = FakeDevice((9, 11))
    with pytest.raises(DtypeError, match="GEMM 2: A: .*host") as ei:
        portgemm.gemm_vbatched(A, B, C, backend="numpy")
    assert isinstance(ei.value, TypeError) and ei.value.gemm == 2
    for x, y in zip(before, C):
        np.testing.assert_array_equal(x, y)


def test_mixed_devices():
    A, B, C = make()
    B[2] = FakeDevice((11, 4))
    with pytest.raises(ValidationError, match="GEMM 2: B is on cuda"):
        validate(A, B, C, 1.0, 0.0, False, False, info)


def test_matrix_spanning_more_than_32_bit_offsets_is_refused():
    """The kernels index with 32-bit element offsets: a matrix whose rows span 2**31
    elements or more is refused (by pointer arithmetic only: nothing is read)."""
    from numpy.lib.stride_tricks import as_strided
    base = np.zeros(8, np.float32)
    huge = as_strided(base, shape=(2, 4), strides=(4 * 2**31, 4))  # row stride 2**31 elements
    A = [np.zeros((2, 4), np.float32), huge]
    B = [np.zeros((4, 3), np.float32)] * 2
    C = [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)]
    with pytest.raises(portgemm.LayoutError, match=r"GEMM 1.*32-bit"):
        portgemm.gemm_vbatched(A, B, C, backend="numpy")
