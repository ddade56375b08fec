"""The reuse path (portgemm/reuse.py) without a GPU: the CUDA backend over
test_cuda_backend_fake's fake CuPy (whose kernel launches run the NumPy emulation), and a
fake torch. Every call is checked against a float64 reference over NaN-poisoned C, so a
hit that launched stale descriptors shows up as a wrong C; cache_info() says which path
each call took."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import portgemm
from portgemm import reuse
from test_cuda_backend_fake import (FakeArray, fake_torch_guards, host_batch, install_fake_torch,
                                    reference)
from test_cuda_backend_fake import backend  # noqa: F401  (a fixture)

SHAPES = [(8, 9, 10), (3, 4, 5), (17, 6, 12), (1, 7, 3)]


@pytest.fixture(autouse=True)
def fresh_cache():
    reuse.clear()
    yield
    reuse.clear()


def arrays(shapes=SHAPES, seed=0, ta=False, tb=False, wrap=FakeArray):
    hA, hB, hC = host_batch(np.random.default_rng(seed), shapes, "float32", ta, tb)
    return [wrap(x) for x in hA], [wrap(x) for x in hB], [wrap(c) for c in hC]


def host(x):
    return x.a


def run_checked(call, A, B, C, alpha=1.0, beta=0.0, ta=False, tb=False):
    """Poison C where beta is 0, call, and compare with the float64 reference."""
    n = len(C)
    al = np.broadcast_to(np.asarray(alpha, float), (n,))
    be = np.broadcast_to(np.asarray(beta, float), (n,))
    for c, b in zip(C, be):
        if b == 0:
            host(c)[...] = np.nan
    before = [host(c).copy() for c in C]
    call()
    want = reference([host(x) for x in A], [host(x) for x in B], before, al, be, ta, tb)
    for i, (c, w) in enumerate(zip(C, want)):
        np.testing.assert_allclose(host(c), w, rtol=1e-4, atol=1e-4, err_msg=f"GEMM {i}")


def hits():
    return reuse.cache_info()["hits"]


# ---- hits, and when an entry is made -----------------------------------------------------------

@pytest.mark.parametrize("entry", ["gemm_vbatched", "run"])
def test_the_third_call_on_the_same_arrays_is_a_hit(backend, entry):
    A, B, C = arrays()
    p = portgemm.plan(SHAPES, dtype="float32", arch=backend.arch())
    call = {"gemm_vbatched": lambda: portgemm.gemm_vbatched(A, B, C, backend=backend),
            "run": lambda: p.run(A, B, C, backend=backend)}[entry]
    run_checked(call, A, B, C)
    assert reuse.cache_info()["entries"] == 0      # a first call makes no entry
    run_checked(call, A, B, C)
    assert reuse.cache_info()["entries"] == 1 and hits() == 0
    for _ in range(3):
        run_checked(call, A, B, C)
    assert hits() == 3 and len(backend.launches) == 5


def test_a_tuple_of_the_same_arrays_hits_the_list_entry(backend):
    A, B, C = arrays()
    for _ in range(2):
        portgemm.gemm_vbatched(A, B, C, backend=backend)
    run_checked(lambda: portgemm.gemm_vbatched(tuple(A), tuple(B), tuple(C), backend=backend),
                A, B, C)
    assert hits() == 1


def test_new_arrays_every_call_never_hit_and_make_no_entry(backend):
    keep = []
    for seed in range(4):
        A, B, C = arrays(seed=seed)
        keep.append((A, B, C))   # alive, so no id comes back
        run_checked(lambda: portgemm.gemm_vbatched(A, B, C, backend=backend), A, B, C)
    assert hits() == 0 and reuse.cache_info()["entries"] == 0


def test_numpy_backend_and_stacks_take_the_full_path_every_time(backend):
    hA, hB, hC = host_batch(np.random.default_rng(1), SHAPES, "float32", False, False)
    for _ in range(3):
        portgemm.gemm_vbatched(hA, hB, hC, backend="numpy")
    a = FakeArray(np.ones((3, 4, 5), np.float32))
    b = FakeArray(np.ones((3, 5, 2), np.float32))
    c = FakeArray(np.zeros((3, 4, 2), np.float32))
    for _ in range(3):
        portgemm.gemm_vbatched(a, b, c, backend=backend)
    assert hits() == 0 and reuse.cache_info()["entries"] == 0
    assert (c.a == 5).all()


# ---- what makes a miss ----------------------------------------------------------------------------

def _warm(backend, A, B, C, **kw):
    for _ in range(2):
        portgemm.gemm_vbatched(A, B, C, backend=backend, **kw)
    assert reuse.cache_info()["entries"] >= 1


def test_a_replaced_element_is_a_miss_and_the_new_array_is_written(backend):
    A, B, C = arrays()
    _warm(backend, A, B, C)
    old = C[2]
    old.a[...] = 7.0
    C[2] = FakeArray(np.full(old.a.shape, np.nan, np.float32))
    run_checked(lambda: portgemm.gemm_vbatched(A, B, C, backend=backend), A, B, C)
    assert hits() == 0 and (old.a == 7.0).all()
    A[0] = FakeArray(A[0].a * 2)   # an input replaced
    run_checked(lambda: portgemm.gemm_vbatched(A, B, C, backend=backend), A, B, C)
    assert hits() == 0


@pytest.mark.parametrize("gemms", [2, 40])   # the small-batch and the vectorised path
def test_a_shape_changed_in_place_is_a_miss(backend, gemms):
    """CuPy's ``x.shape = ...`` reshapes in place (same pointer, same size): a hit would
    compute with the old shape; the full path sees the new one (an entry compares each
    array's rows and ndim, which fix the shape of a 2-D array of a given size)."""
    A, B, C = arrays([(4, 6, 4)] * gemms)
    _warm(backend, A, B, C)
    e, = reuse._entries.values()
    assert e.same is reuse._cupy_same
    C[1].a.shape = (6, 4)   # same memory, new shape: no longer op(A) @ op(B)
    with pytest.raises(portgemm.ShapeMismatch, match="GEMM 1: C is 6x4"):
        portgemm.gemm_vbatched(A, B, C, backend=backend)
    assert hits() == 0
    C[1].a.shape = (4, 6)   # back as it was: the entry fits again
    run_checked(lambda: portgemm.gemm_vbatched(A, B, C, backend=backend), A, B, C)
    for shape in ((4, 6, 1), (24,), (1, 4, 6)):   # other ndim, the same size (and rows)
        C[1].a.shape = shape
        with pytest.raises(portgemm.PortgemmError):
            portgemm.gemm_vbatched(A, B, C, backend=backend)
        C[1].a.shape = (4, 6)
    run_checked(lambda: portgemm.gemm_vbatched(A, B, C, backend=backend), A, B, C)
    assert hits() == 2   # the two calls with C[1] as it was: no other call hit


@pytest.mark.parametrize("first, then", [
    (dict(alpha=2.0), dict(alpha=3.0)), (dict(alpha=1.0), dict(alpha=1)),
    (dict(beta=0.0), dict(beta=-0.0)), (dict(beta=0.5), dict(beta=np.float64(0.5))),
    (dict(trans_a=False), dict(trans_a=True)), (dict(trans_b=True), dict(trans_b=False))])
def test_other_scalars_or_flags_are_a_miss(backend, first, then):
    A, B, C = arrays([(5, 5, 5), (3, 3, 3), (6, 6, 6)])   # square: any flags fit
    _warm(backend, A, B, C, **first)
    kw = {**first, **then}
    run_checked(lambda: portgemm.gemm_vbatched(A, B, C, backend=backend, **kw), A, B, C,
                kw.get("alpha", 1.0), kw.get("beta", 0.0), kw.get("trans_a", False),
                kw.get("trans_b", False))
    assert hits() == 0


def test_per_gemm_scalars_changed_in_place_are_seen(backend):
    A, B, C = arrays()
    alpha = np.array([1.0, 2.0, -1.0, 0.5])
    beta = [0.0, 0.5, 0.0, 1.0]
    _warm(backend, A, B, C, alpha=alpha, beta=beta)
    call = lambda: portgemm.gemm_vbatched(A, B, C, alpha=alpha, beta=beta,  # noqa: E731
                                          backend=backend)
    run_checked(call, A, B, C, alpha, beta)
    assert hits() == 1
    alpha[2] = 4.0   # the same array object, a new value: a miss
    beta[1] = 0.25
    run_checked(call, A, B, C, alpha, beta)
    assert hits() == 1
    alpha[0] = np.nan   # and its error, with nothing written
    before = [c.a.copy() for c in C]
    with pytest.raises(portgemm.ValidationError, match="GEMM 0: alpha = nan"):
        call()
    for c, b in zip(C, before):
        np.testing.assert_array_equal(c.a, b)


def test_a_different_plan_or_strategy_is_a_miss(backend):
    A, B, C = arrays()
    p = portgemm.plan(SHAPES, dtype="float32", arch=backend.arch())
    q = portgemm.plan(SHAPES, dtype="float32", arch=backend.arch(), strategy="magma")
    for _ in range(2):
        p.run(A, B, C, backend=backend)
    run_checked(lambda: q.run(A, B, C, backend=backend), A, B, C)
    run_checked(lambda: portgemm.gemm_vbatched(A, B, C, backend=backend, strategy="magma"),
                A, B, C)
    assert hits() == 0
    run_checked(lambda: p.run(A, B, C, backend=backend), A, B, C)
    assert hits() == 1


def test_a_plan_for_other_shapes_still_raises_after_a_hit(backend):
    A, B, C = arrays()
    p = portgemm.plan(SHAPES, dtype="float32", arch=backend.arch())
    for _ in range(3):
        p.run(A, B, C, backend=backend)
    other = portgemm.plan(SHAPES[::-1], dtype="float32", arch=backend.arch())
    with pytest.raises(portgemm.ShapeMismatch, match="shapes differ"):
        other.run(A, B, C, backend=backend)


# ---- lifetime ---------------------------------------------------------------------------------------

def test_entries_hold_no_array_alive_and_go_with_their_arrays(backend):
    A, B, C = arrays()
    _warm(backend, A, B, C)
    refs = [weakref.ref(x) for x in A + B + C]
    del A, B, C
    gc.collect()
    assert all(r() is None for r in refs)
    assert reuse.cache_info()["entries"] == 0


def test_one_dead_array_drops_the_entry(backend):
    A, B, C = arrays()
    _warm(backend, A, B, C)
    B[1] = FakeArray(B[1].a.copy())   # the old B[1] dies here
    gc.collect()
    assert reuse.cache_info()["entries"] == 0
    run_checked(lambda: portgemm.gemm_vbatched(A, B, C, backend=backend), A, B, C)


def test_reallocated_arrays_with_reused_ids_are_computed_afresh(backend):
    """Free a batch and allocate another until ids come back: never a stale hit."""
    for seed in range(6):
        A, B, C = arrays(seed=seed, shapes=SHAPES[seed % 2:])
        for _ in range(3):
            run_checked(lambda: portgemm.gemm_vbatched(A, B, C, backend=backend), A, B, C)
        del A, B, C


def test_the_cache_is_bounded(backend):
    keep = []
    for seed in range(reuse.MAX_ENTRIES + 3):
        A, B, C = arrays(seed=seed)
        keep.append((A, B, C))
        _warm(backend, A, B, C)
    assert reuse.cache_info()["entries"] == reuse.MAX_ENTRIES


# ---- errors and aliasing are never skipped ------------------------------------------------------

def test_aliased_outputs_after_an_in_place_repoint_are_refused(backend, torch_fake):
    """A torch tensor can be re-pointed in place (``set_``): its new memory may alias
    another C. The hit's check sees the new pointer; the full path refuses the batch."""
    A, B, C = arrays(wrap=torch_fake.Tensor)
    _warm(backend, A, B, C)
    run_checked(lambda: portgemm.gemm_vbatched(A, B, C, backend=backend), A, B, C)
    assert hits() == 1
    C[1].set_(C[0].a[:3, :4])   # GEMM 1's shape (3x4), inside C[0]'s memory
    with pytest.raises(portgemm.LayoutError, match="C overlaps C"):
        portgemm.gemm_vbatched(A, B, C, backend=backend)
    # the same objects again, unchanged: still refused (no entry was made for them)
    with pytest.raises(portgemm.LayoutError, match="C overlaps C"):
        portgemm.gemm_vbatched(A, B, C, backend=backend)


# ---- torch tensors ------------------------------------------------------------------------------------

@pytest.fixture
def torch_fake(monkeypatch):
    return install_fake_torch(monkeypatch)


def test_torch_tensors_hit_and_in_place_changes_are_seen(backend, torch_fake, torch_form):
    T = torch_fake.Tensor
    A, B, C = arrays(wrap=T)
    call = lambda: portgemm.gemm_vbatched(A, B, C, backend=backend)  # noqa: E731
    for _ in range(3):
        run_checked(call, A, B, C)
    assert hits() == 1
    C[0].set_(np.full_like(C[0].a, np.nan))   # new memory, same shape: a miss
    run_checked(call, A, B, C)
    assert hits() == 1
    B[3].set_(B[3].a.astype(np.float64))     # same shape, other dtype: a miss, then an error
    with pytest.raises(portgemm.DtypeError):   # (the fake has no per-array reader)
        call()
    B[3].set_(B[3].a.astype(np.float32))
    C[2].set_(np.full((17, 9), np.nan, np.float32)[:, 1:7])   # same shape, other strides
    run_checked(call, A, B, C)
    assert hits() == 1
    run_checked(call, A, B, C)   # the entry was remade at once (its key was known)
    assert hits() == 2


def test_an_unhashable_backend_object_takes_the_reuse_path(backend):
    class Unhashable:   # defines __eq__, so __hash__ is None
        def __init__(self, inner):
            self.inner = inner

        def __eq__(self, other):
            return self is other

        def __getattr__(self, name):
            return getattr(self.inner, name)

    be = Unhashable(backend)
    A, B, C = arrays()
    for _ in range(3):
        run_checked(lambda: portgemm.gemm_vbatched(A, B, C, backend=be), A, B, C)
    assert hits() == 1


def test_an_unreadable_tensor_is_validations_to_report(backend, torch_fake, monkeypatch):
    """A tensor whose reads raise (as torch's data_ptr() does for some layouts) never
    makes the reuse path raise: the full path reports it as validation does. (The
    method raises for that one tensor at the type, as torch's does: the readers are
    the type's methods.)"""
    A, B, C = arrays(wrap=torch_fake.Tensor)
    for _ in range(3):
        portgemm.gemm_vbatched(A, B, C, backend=backend)
    readable = torch_fake.Tensor.data_ptr

    def data_ptr(t):
        if t is C[1]:
            raise RuntimeError("no data pointer")
        return readable(t)
    monkeypatch.setattr(torch_fake.Tensor, "data_ptr", data_ptr)
    with pytest.raises(RuntimeError, match="no data pointer"):   # from validation's read
        portgemm.gemm_vbatched(A, B, C, backend=backend)
    assert hits() == 1


# ---- the sampled key ----------------------------------------------------------------------------

def test_a_first_call_reads_no_ids_past_its_sample(backend):
    A, B, C = arrays()
    k, _ = reuse.key(backend, None, A, B, C, 1.0, 0.0, False, False)
    assert type(k) is reuse._Cold          # never seen: three ids, no full key
    run_checked(lambda: portgemm.gemm_vbatched(A, B, C, backend=backend), A, B, C)
    k, _ = reuse.key(backend, None, A, B, C, 1.0, 0.0, False, False)
    assert type(k) is tuple and len(k[8]) == 3 * len(A)   # seen once: the full key


def test_arrays_sharing_the_sample_do_not_hit_each_others_entry(backend):
    """Lists whose first, middle and last arrays are the same objects (one sampled key)
    but which differ elsewhere are different calls: the full key tells them apart."""
    A, B, C = arrays(shapes=SHAPES * 2)
    call = lambda A, B, C: portgemm.gemm_vbatched(A, B, C, backend=backend)  # noqa: E731
    for _ in range(3):
        run_checked(lambda: call(A, B, C), A, B, C)
    assert hits() == 1
    _, B2, _ = arrays(shapes=SHAPES * 2, seed=5)
    B_mixed = list(B)
    B_mixed[1] = B2[1]   # not the first, middle (B[0] of 8) or last array of A + B + C
    k1, _ = reuse.key(backend, None, A, B, C, 1.0, 0.0, False, False)
    k2, _ = reuse.key(backend, None, A, B_mixed, C, 1.0, 0.0, False, False)
    assert reuse._sample(k1) == reuse._sample(k2) and k1 != k2
    for _ in range(3):
        run_checked(lambda: call(A, B_mixed, C), A, B_mixed, C)
    # its own entry, made on its first call (its sample was seen: one call early, as
    # reuse.py says), and every result right: never the first list's entry
    assert hits() == 3 and reuse.cache_info()["entries"] == 2


@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_a_hits_checks_set_off_no_garbage_collection(backend, torch_fake, kind):
    """A hit compares each array's metadata as it reads it: holding 3n fresh shape
    tuples would pass the collector's threshold (700) and run it on every large call
    (measured on the H100 host: 40 % of a repeated call of 1,024 GEMMs). The check
    alone is watched: the fake kernels' emulation allocates freely."""
    wrap = FakeArray if kind == "cupy" else torch_fake.Tensor
    A, B, C = arrays([(2, 3, 4)] * 400, wrap=wrap)
    for _ in range(2):
        portgemm.gemm_vbatched(A, B, C, backend=backend)
    (entry,) = reuse._entries.values()
    X = [*A, *B, *C]
    runs = []
    gc.callbacks.append(lambda phase, info: runs.append(phase))
    try:
        gc.collect()
        runs.clear()
        assert entry.same(X, entry.meta)
    finally:
        gc.callbacks.pop()
    assert runs == []


def _entry_made_by(backend, A, B, C, comparer):
    """Three checked calls (the third a hit); the one entry compares with ``comparer``.
    Returns the call."""
    call = lambda: portgemm.gemm_vbatched(A, B, C, backend=backend)  # noqa: E731
    for _ in range(3):
        run_checked(call, A, B, C)
    assert hits() == 1
    (entry,) = reuse._entries.values()
    assert entry.same is comparer
    return call


@pytest.fixture(params=["guards", "columns", "rows"])
def torch_form(request, monkeypatch, torch_fake):
    """Every form of the torch check: torch's C++ guards (here fakes with their
    semantics), one C-level map a read, or one row a tensor."""
    if request.param == "guards":
        monkeypatch.setattr(torch_fake, "_C", fake_torch_guards(), raising=False)
    monkeypatch.setattr(reuse, "TORCH_COLUMNS", request.param == "columns")
    return request.param


def _comparer(form, rows):
    return {"guards": reuse._torch_guards_same, "columns": reuse._torch_columns_same}.get(
        form, rows)


def test_contiguous_torch_entries_compare_contiguity_and_see_an_in_place_transpose(
        backend, torch_fake, torch_form):
    """An entry of all-contiguous tensors compares is_contiguous() in place of stride():
    a square C transposed in place (same pointer, shape, dtype; other strides) is no
    longer contiguous, so the call misses and writes the transposed view right."""
    A, B, C = arrays([(6, 6, 5), (3, 4, 5)], wrap=torch_fake.Tensor)
    call = _entry_made_by(backend, A, B, C, _comparer(torch_form, reuse._torch_contiguous_same))
    if torch_form == "columns":
        assert reuse._entries[next(iter(reuse._entries))].meta.strides is None
    C[0].set_(C[0].a.T)   # t_() of a square matrix: strides (1, 6)
    with pytest.raises(portgemm.LayoutError):   # validation refuses column-major C
        call()
    assert hits() == 1
    C[0].set_(np.ascontiguousarray(C[0].a.T))
    run_checked(call, A, B, C)


def test_strided_torch_entries_compare_strides(backend, torch_fake, torch_form):
    T = torch_fake.Tensor
    A, B, C = arrays(wrap=T)
    C[1] = T(np.full((3, 9), np.nan, np.float32)[:, 2:6])   # row stride 9: not contiguous
    call = _entry_made_by(backend, A, B, C, _comparer(torch_form, reuse._torch_same))
    if torch_form == "columns":
        assert reuse._entries[next(iter(reuse._entries))].meta.strides is not None
    C[1].set_(np.full((3, 11), np.nan, np.float32)[:, 1:5])   # same shape, other strides
    run_checked(call, A, B, C)
    assert hits() == 1   # a miss: the strides differ
