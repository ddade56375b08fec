"""The reuse path's records by list identity (reuse.fast) and the one-pass readers of the
lists path (arrays.gather, small_batch.gather), without a GPU: the CUDA backend over
test_cuda_backend_fake's fake CuPy (its launches run the NumPy emulation) and a fake
torch. Every call is checked against a float64 reference over NaN-poisoned C, so a
call that launched stale descriptors shows up as a wrong C."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import portgemm
from portgemm import api, arrays as arrays_mod, reuse, small_batch
from test_cuda_backend_fake import FakeArray, host_batch, install_fake_torch
from test_cuda_backend_fake import backend  # noqa: F401  (a fixture)
from test_reuse_path import hits, run_checked

SMALL = [(8, 9, 10), (3, 4, 5), (17, 6, 12), (1, 7, 3)]              # the small-batch path
LARGE = [(5 + i % 7, 3 + i % 5, 2 + i % 4) for i in range(small_batch.SMALL_BATCH + 3)]


@pytest.fixture(autouse=True)
def fresh_caches():
    reuse.clear()
    api._layouts.clear()
    yield
    reuse.clear()
    api._layouts.clear()


@pytest.fixture
def torch_fake(monkeypatch):
    return install_fake_torch(monkeypatch)


@pytest.fixture(params=["cupy", "torch"])
def wrap(request, monkeypatch):
    """The array type of a test: the fake CuPy's, or the fake torch's tensors."""
    if request.param == "torch":
        return install_fake_torch(monkeypatch).Tensor
    return FakeArray


def lists(shapes, wrap, seed=0, dtype="float32"):
    hA, hB, hC = host_batch(np.random.default_rng(seed), shapes, dtype, False, False)
    return [wrap(x) for x in hA], [wrap(x) for x in hB], [wrap(c) for c in hC]


def recorded(backend, A, B, C, **kw):
    """Four checked calls on the same lists: the third hits through the key and leaves a
    record, the fourth hits through it. Returns the call."""
    call = lambda: portgemm.gemm_vbatched(A, B, C, backend=backend, **kw)  # noqa: E731
    for _ in range(4):
        run_checked(call, A, B, C, **{k: v for k, v in kw.items() if k in ("alpha", "beta")})
    assert hits() == 2 and len(reuse._by_lists) == 1
    return call


def no_key(monkeypatch):
    """Make the key path fail loudly: a call that still hits came through the record."""
    def refuse(*a, **k):
        raise AssertionError("reuse.key ran: not a recorded hit")
    monkeypatch.setattr(reuse, "key", refuse)


@pytest.mark.parametrize("shapes", [SMALL, LARGE], ids=["small", "vectorised"])
def test_a_repeated_call_on_the_same_lists_hits_through_its_record(backend, wrap, shapes,
                                                                   monkeypatch):
    A, B, C = lists(shapes, wrap)
    call = recorded(backend, A, B, C)
    no_key(monkeypatch)
    run_checked(call, A, B, C)
    assert hits() == 3


@pytest.mark.parametrize("shapes", [SMALL, LARGE], ids=["small", "vectorised"])
def test_a_changed_array_in_a_reused_list_is_seen(backend, wrap, shapes):
    A, B, C = lists(shapes, wrap)
    call = recorded(backend, A, B, C)
    old = C[1]
    old.a[...] = 123.0
    C[1] = wrap(np.full(C[1].a.shape, np.nan, np.float32))   # same shape, other memory
    run_checked(call, A, B, C)
    assert hits() == 2   # a miss: the record's array ids differ
    assert (old.a == 123.0).all()   # the replaced array was not written
    A[0], A[2] = lists(shapes, wrap, seed=5)[0][0], A[2]   # another A of the same shape
    run_checked(call, A, B, C)
    assert hits() == 2


def test_swapped_arrays_of_one_shape_in_a_reused_list_are_seen(backend, wrap):
    shapes = [(6, 5, 4)] * 3
    A, B, C = lists(shapes, wrap)
    call = recorded(backend, A, B, C)
    C[0], C[2] = C[2], C[0]   # the same arrays in other places: every shape as before
    run_checked(call, A, B, C)
    assert hits() == 2


def test_lists_split_elsewhere_never_take_a_record(backend):
    """The same arrays in order, but one moved from the end of A to the start of B: the
    ids in order are the record's, the lengths are not."""
    shapes = [(4, 4, 4)] * 3
    A, B, C = lists(shapes, FakeArray)
    call = recorded(backend, A, B, C)
    B.insert(0, A.pop())
    with pytest.raises(portgemm.ShapeMismatch):
        call()
    assert hits() == 2


def test_a_reshaped_array_in_a_reused_list_is_seen(backend):
    A, B, C = lists([(6, 4, 5), (2, 3, 4)], FakeArray)
    call = recorded(backend, A, B, C)
    C[0].a = C[0].a.reshape(4, 6)   # the same array object, reshaped in place
    with pytest.raises(portgemm.ShapeMismatch):
        call()
    assert hits() == 2


def test_other_scalars_or_flags_on_the_same_lists_take_their_own_path(backend):
    A, B, C = lists(SMALL, FakeArray)
    recorded(backend, A, B, C, alpha=2.0)
    for alpha in (3.0, -2.0, 2):
        run_checked(lambda: portgemm.gemm_vbatched(A, B, C, alpha=alpha, backend=backend),
                    A, B, C, alpha=alpha)
    alphas = [1.0, 2.0, 3.0, 4.0]
    call = lambda: portgemm.gemm_vbatched(A, B, C, alpha=alphas, backend=backend)  # noqa: E731
    for _ in range(4):
        run_checked(call, A, B, C, alpha=alphas)
    alphas[2] = -7.0   # per-GEMM scalars changed in place: never recorded, always compared
    run_checked(call, A, B, C, alpha=alphas)


def test_a_record_goes_with_its_entry(backend):
    A, B, C = lists(SMALL, FakeArray)
    recorded(backend, A, B, C)
    (r,) = reuse._by_lists.values()
    del C[3]
    gc.collect()   # the dropped array's weakref drops the entry, and so its record
    assert not r.entry.live and not reuse._by_lists
    C.append(FakeArray(np.full((1, 7), np.nan, np.float32)))
    run_checked(lambda: portgemm.gemm_vbatched(A, B, C, backend=backend), A, B, C)


@pytest.mark.parametrize("shapes", [SMALL, LARGE], ids=["small", "vectorised"])
def test_aliased_outputs_are_refused_on_every_path(backend, wrap, shapes):
    """C_i sharing memory with C_j: refused by a first call, by a reused list whose C was
    changed to alias, and by new array objects over aliased memory (the layout cache
    keeps only validated calls); nothing written."""
    A, B, C = lists(shapes, wrap)
    call = recorded(backend, A, B, C)
    launched = len(backend.launches)
    (r0, c0), (r1, c1) = C[0].a.shape, C[1].a.shape
    buf = np.full(max(r0 * c0, r1 * c1), np.nan, np.float32)
    C[0], C[1] = wrap(buf[:r0 * c0].reshape(r0, c0)), wrap(buf[:r1 * c1].reshape(r1, c1))
    for _ in range(3):
        with pytest.raises(portgemm.LayoutError, match="C overlaps C"):
            call()
    with pytest.raises(portgemm.LayoutError, match="C overlaps C"):   # new objects, again
        portgemm.gemm_vbatched(list(A), list(B), [wrap(c.a) for c in C], backend=backend)
    assert len(backend.launches) == launched


def test_a_dtype_changed_in_a_reused_list_is_a_typed_error(backend, wrap):
    A, B, C = lists(SMALL, wrap)
    call = recorded(backend, A, B, C)
    B[2] = wrap(B[2].a.astype(np.float64))
    with pytest.raises(portgemm.DtypeError):
        call()
    assert hits() == 2


def test_a_tensor_moved_to_another_device_in_a_reused_list_is_refused(backend, torch_fake,
                                                                      monkeypatch):
    """A tensor re-pointed in place to another GPU (``.data = y``): its get_device() is
    compared on a hit, and the full path refuses the batch with a typed error."""
    A, B, C = lists(SMALL, torch_fake.Tensor)
    call = recorded(backend, A, B, C)
    moved = C[2]
    base = type(moved).get_device
    monkeypatch.setattr(type(moved), "get_device",
                        lambda t: 1 if t is moved else base(t))
    with pytest.raises(portgemm.PortgemmError):
        call()
    assert hits() == 2


@pytest.mark.parametrize("n", [2, 12])
def test_gather_refuses_what_is_not_a_list_of_2d_arrays(backend, n):
    """The readers' 2-D check comes from the shapes as read (no ndim read): a 3-D and a
    1-D array, whose shapes hold four numbers together, are refused as two non-pairs."""
    X = [FakeArray(np.zeros((2, 3), np.float32)) for _ in range(n)]
    assert arrays_mod.gather(X) is not None and small_batch.gather(X) is not None
    X[0], X[1] = FakeArray(np.zeros((2, 3, 4), np.float32)), FakeArray(np.zeros(5, np.float32))
    assert arrays_mod.gather(X) is None and small_batch.gather(X) is None
    X[0], X[1] = FakeArray(np.zeros((), np.float32)), FakeArray(np.zeros((2, 3), np.float32))
    assert arrays_mod.gather(X) is None and small_batch.gather(X) is None


def test_torch_gather_reads_through_the_types_methods(torch_fake):
    T = torch_fake.Tensor
    X = [T(np.zeros((3, 4), np.float32)[:, 1:]), T(np.zeros((2, 5), np.float32))]
    op = arrays_mod.gather(X)
    few = small_batch.gather(X)
    assert op.shape.tolist() == [[3, 3], [2, 5]] and op.strides.tolist() == [[4, 1], [5, 1]]
    assert op.ptr.tolist() == [x.data_ptr() for x in X] and op.device == "cuda:0"
    assert few.shape == ((3, 3), (2, 5)) and few.strides == ((4, 1), (5, 1))
    assert few.ptr == tuple(x.data_ptr() for x in X)


def test_torch_records_compare_values_so_new_tensors_over_the_same_memory_hit(
        backend, torch_fake, monkeypatch):
    """A torch entry compares every value validation reads of each tensor (type,
    data_ptr, shape, strides or contiguity, dtype, device), so its record needs no ids: a
    tensor replaced by another object over the same memory hits and computes right; one
    of another type, or over other memory, does not."""
    T = torch_fake.Tensor
    A, B, C = lists(SMALL, T)
    call = recorded(backend, A, B, C)
    key = reuse.key
    no_key(monkeypatch)
    old = C[1]   # kept alive: an entry goes when any of its arrays does
    C[1] = T(old.a)   # a new tensor object, the same memory and layout
    run_checked(call, A, B, C)
    assert hits() == 3
    monkeypatch.setattr(reuse, "key", key)

    class Sub(T):
        pass
    kept = A[2]
    A[2] = Sub(kept.a)
    with pytest.raises(portgemm.DtypeError):   # another type: a miss, then the full path
        call()                                 # (the fake has no per-array torch reader)
    assert hits() == 3
