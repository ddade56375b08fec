"""The lists path's vectorised validation and lean launch encoding, on the CPU: each fast
form against a plain form of the same rule (the per-array reading, a brute-force overlap
test, a per-GEMM shape check), and every error still typed and naming the GEMM."""
from __future__ import annotations

import ctypes
import types

import numpy as np
import pytest

import portgemm
from portgemm import arrays, problem
from portgemm.backends import cuda as cudabe
from test_cuda_backend_fake import (FAKE, FakeArray, backend, check, host_batch,  # noqa: F401
                                    install_fake_torch, reference)

TRANS = ((False, False), (False, True), (True, False), (True, True))


class Flagged(FakeArray):
    """test_cuda_backend_fake's CuPy-like array with CuPy's ``_c_contiguous`` flag, so that
    arrays.gather derives the strides (and validation takes its contiguous checks)."""
    _c_contiguous = property(lambda self: self.a.flags.c_contiguous)


class Meta:
    """A CuPy-like array that is only metadata (no memory): for checks that never read it."""

    def __init__(self, ptr, shape, dtype=np.float32):
        self.dtype, self.shape, self._c_contiguous = np.dtype(dtype), tuple(shape), True
        self.data = types.SimpleNamespace(ptr=ptr, device_id=0)
        self.strides = (shape[1] * self.dtype.itemsize, self.dtype.itemsize)
        self.ndim = len(self.shape)


@pytest.fixture
def flagged(backend, monkeypatch):
    """The fake backend, its CuPy's array type the flagged one."""
    monkeypatch.setattr(backend.cp, "ndarray", Flagged)
    return backend


@pytest.fixture
def fake_cupy(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(ndarray=Meta))


def _batch(rng, n, ta, tb):
    shapes = [tuple(int(v) for v in rng.integers(1, 7, 3)) for _ in range(n)]
    return shapes, host_batch(rng, shapes, "float32", ta, tb)


@pytest.mark.parametrize("ta, tb", TRANS)
def test_contiguous_cupy_lists_compute_what_the_reference_does(flagged, ta, tb):
    rng = np.random.default_rng(11)
    shapes, (hA, hB, hC) = _batch(rng, 9, ta, tb)
    A, B, C = ([Flagged(x) for x in xs] for xs in (hA, hB, hC))
    for x in C:
        x.a[...] = np.nan   # beta = 0 never reads C
    assert problem.gather_lists(A, B, C, ("cuda:",)).contiguous
    alpha = rng.random(9) - 0.5
    portgemm.gemm_vbatched(A, B, C, alpha=alpha, trans_a=ta, trans_b=tb, backend=flagged)
    check(C, reference(hA, hB, hC, alpha, [0] * 9, ta, tb), "float32")


@pytest.mark.parametrize("ta, tb", TRANS)
def test_derived_strides_validate_as_the_read_ones(flagged, ta, tb):
    """The contiguous checks give the Batch the per-array reading gives (shapes of one
    row or column included, where the fast 2x2 forms do not apply)."""
    for seed in range(6):
        rng = np.random.default_rng(seed)
        _, (hA, hB, hC) = _batch(rng, 7, ta, tb)
        A, B, C = ([Flagged(x) for x in xs] for xs in (hA, hB, hC))
        assert problem.gather_lists(A, B, C, ("cuda:",)).contiguous
        fast = problem.validate(A, B, C, 2.0, -0.0, ta, tb, flagged.array_info,
                                flagged.fast_devices)
        slow = problem.validate(A, B, C, 2.0, -0.0, ta, tb, flagged.array_info, ())
        for f in ("shapes", "ptr", "ld", "alpha", "beta"):
            np.testing.assert_array_equal(getattr(fast, f), getattr(slow, f), err_msg=f)
        assert fast.device == slow.device and fast.dtype == slow.dtype


def _meta_lists(n, isz=4):
    """n GEMMs of 4x4 float32 matrices at distinct addresses, 4 KiB apart."""
    base = 1 << 32
    mk = lambda k: Meta(base + 4096 * k, (4, 4))   # noqa: E731
    return [mk(i) for i in range(n)], [mk(n + i) for i in range(n)], \
        [mk(2 * n + i) for i in range(n)]


def test_contiguous_path_names_a_misaligned_pointer(fake_cupy):
    A, B, C = _meta_lists(5)
    C[3] = Meta(C[3].data.ptr + 2, (4, 4))
    with pytest.raises(portgemm.LayoutError, match="not aligned") as e:
        problem.validate(A, B, C, fast_devices=("cuda:",))
    assert e.value.gemm == 3


def test_contiguous_path_names_a_span_past_32_bit_offsets(fake_cupy):
    A, B, C = _meta_lists(4)
    B[2] = Meta(1 << 40, (4, 2**30))
    A[2] = Meta(A[2].data.ptr, (4, 4))
    C[2] = Meta(1 << 44, (4, 2**30))
    with pytest.raises(portgemm.LayoutError, match="32-bit") as e:
        problem.validate(A, B, C, fast_devices=("cuda:",))
    assert e.value.gemm == 2


@pytest.mark.parametrize("other, message", [("C", "C overlaps C of GEMM 3"),
                                            ("A", "C overlaps A of GEMM 3")])
def test_contiguous_path_rejects_shared_memory(fake_cupy, other, message):
    A, B, C = _meta_lists(5)
    X = C if other == "C" else A
    X[3] = Meta(C[1].data.ptr + 8, (4, 4))   # inside C_1
    with pytest.raises(portgemm.LayoutError, match=message) as e:
        problem.validate(A, B, C, fast_devices=("cuda:",))
    assert e.value.gemm == 1


@pytest.mark.parametrize("ta, tb", TRANS)
def test_shape_checks_agree_with_a_per_gemm_rule(ta, tb):
    rng = np.random.default_rng(5)
    for _ in range(40):
        n = int(rng.integers(1, 6))
        shp = rng.integers(1, 4, (3 * n, 2)).astype(np.int64)
        a, b, c = shp[:n], shp[n:2 * n], shp[2 * n:]
        M, K = (a[:, 1], a[:, 0]) if ta else (a[:, 0], a[:, 1])
        Kb, N = (b[:, 1], b[:, 0]) if tb else (b[:, 0], b[:, 1])
        bad = [i for i in range(n) if K[i] != Kb[i] or c[i, 0] != M[i] or c[i, 1] != N[i]]
        if bad:
            with pytest.raises(portgemm.ShapeMismatch) as e:
                problem._shapes(shp, n, ta, tb)
            assert e.value.gemm == bad[0]
            kind = "inner dimensions" if K[bad[0]] != Kb[bad[0]] else "C is"
            assert kind in str(e.value)
        else:
            np.testing.assert_array_equal(problem._shapes(shp, n, ta, tb),
                                          np.stack([M, N, K], 1))


def test_disjoint_spans_agree_with_brute_force():
    rng = np.random.default_rng(9)
    for _ in range(300):
        k = int(rng.integers(1, 8))
        lo = rng.integers(0, 40, k).astype(np.int64)
        hi = lo + rng.integers(0, 8, k)   # empty spans too
        pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
        shared = any(max(lo[i], lo[j]) < min(hi[i], hi[j]) for i, j in pairs)
        empty = bool((hi <= lo).any())
        # True only when provably disjoint; False sends the call to the exact sweep
        assert problem._disjoint(lo, hi) == (not shared and not empty)


def test_scalar_arrays_are_kept_read_only_and_keep_the_sign_of_zero():
    pos, neg = problem._scalars(0.0, 5, "beta"), problem._scalars(-0.0, 5, "beta")
    assert not pos.flags.writeable and not neg.flags.writeable
    assert not np.signbit(pos).any() and np.signbit(neg).all()
    assert problem._scalars(0.0, 5, "beta") is pos   # kept: no allocation a call
    np.testing.assert_array_equal(problem._scalars(3, 4, "alpha"), [3.0] * 4)
    with pytest.raises(ValueError):
        pos[0] = 1.0


def test_encoded_gemm_arguments_point_at_their_values():
    item = cudabe._encoded_gemm(7, 12, 128, 0xDEAD0000, 0xBEEF0000, 0xCAFE0000, -3, "k", 66544)
    fn, grid, threads, smem, params, _, name = item
    assert (fn, grid, threads, smem, name) == (7, (12, 1, 1), 128, 66544, "k")
    got = [ctypes.c_uint64.from_address(params[i]).value for i in range(3)]
    assert got == [0xDEAD0000, 0xBEEF0000, 0xCAFE0000]
    assert ctypes.c_int32.from_address(params[3]).value == -3


def test_cupy_calls_upload_on_the_current_stream_and_torch_calls_on_torchs(backend,
                                                                         monkeypatch):
    shapes = [(8, 9, 10), (3, 4, 5)]
    hA, hB, hC = host_batch(np.random.default_rng(3), shapes, "float32", False, False)
    A, B, C = ([FakeArray(x) for x in xs] for xs in (hA, hB, hC))
    portgemm.gemm_vbatched(A, B, C, backend=backend)
    assert ("copy", 128) in FAKE["null"].log   # the descriptors, on CuPy's current stream
    Tensor = install_fake_torch(monkeypatch, stream_handle=555).Tensor
    tC = [Tensor(c.copy()) for c in hC]
    FAKE["null"].log.clear()
    portgemm.gemm_vbatched([Tensor(x) for x in hA], [Tensor(x) for x in hB], tC,
                           alpha=2.0, backend=backend)
    torch_stream = backend._stream(tC[0].device)
    assert torch_stream.ptr == 555 and ("copy", 128) in torch_stream.log
    assert ("copy", 128) not in FAKE["null"].log
    check([c.a for c in tC], reference(hA, hB, hC, [2, 2], [0, 0], False, False), "float32")


def test_gather_declines_mixed_types_and_dtypes(monkeypatch):
    install_fake_torch(monkeypatch)   # a loaded torch: type tests must not trip on None
    a, b = np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float64)
    assert arrays.gather([]) is None
    assert arrays.gather([a, object()]) is None
    assert arrays.gather([object(), a]) is None
    assert arrays.gather([a, b]) is None
    op = arrays.gather([a, a.copy()])
    assert op.dtype == np.float32 and op.device == "cpu" and not op.contiguous


def test_layout_key_of_contiguous_arrays_holds_their_shapes_not_their_strides(flagged):
    from portgemm.call_cache import layout_key
    hA, hB, hC = host_batch(np.random.default_rng(2), [(4, 6, 3), (2, 2, 5)], "float32",
                            False, False)

    def key(A, B, C):
        whole = problem.gather_lists(A, B, C, flagged.fast_devices)
        return whole and layout_key(flagged, None, whole, C, 1.0, 0.0, False, False)
    lists = lambda: [[Flagged(x) for x in xs] for xs in (hA, hB, hC)]  # noqa: E731
    first = key(*lists())
    assert first == key(*lists())    # new objects over the same memory: the same key
    A, B, C = lists()
    C[0] = Flagged(hC[0].reshape(6, 4))   # same pointer, another shape
    assert key(A, B, C) != first
    A, B, C = lists()
    C[1] = Flagged(hC[1][:, :1])   # a column: same pointer, strides of the parent
    assert not problem.gather_lists(A, B, C, flagged.fast_devices).contiguous
    assert key(A, B, C) != first


def test_descriptors_go_to_raw_device_memory_where_cupy_has_alloc(backend, monkeypatch):
    """With cupy.cuda.alloc the descriptors are uploaded into bare device memory (no
    array around it); every entry point still computes the right C."""
    sizes = []

    def alloc(n):
        sizes.append(n)
        return backend.cp.empty(n, np.uint8).data   # a MemoryPointer-like of the fake
    monkeypatch.setattr(backend.cp.cuda, "alloc", alloc, raising=False)
    shapes = [(8, 9, 10), (3, 4, 5), (6, 2, 7)]
    hA, hB, hC = host_batch(np.random.default_rng(8), shapes, "float32", False, False)
    A, B, C = ([FakeArray(x) for x in xs] for xs in (hA, hB, hC))
    p = portgemm.plan(shapes, dtype="float32", arch=backend.arch())
    for alpha, call in ((1.5, lambda: portgemm.gemm_vbatched(A, B, C, alpha=1.5,
                                                            backend=backend)),
                        (-2.0, lambda: p.run(A, B, C, alpha=-2.0, backend=backend)),
                        (0.5, p.bind(A, B, C, alpha=0.5, backend=backend))):
        for c in C:
            c.a[...] = np.nan
        call()
        check(C, reference(hA, hB, [np.zeros_like(c) for c in hC], [alpha] * 3, [0] * 3,
                           False, False), "float32")
    assert sizes and set(sizes) == {3 * 64}   # descriptors only: 64 bytes a GEMM
