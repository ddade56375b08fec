"""Split-K (planner/split_k.py, backends/split.py) on the CPU: the planner's decision, the
virtual GEMMs and the reduction's coverage, and results equal to the unsplit plan's and
a float64 reference on the NumPy backend and on the fake CUDA and HIP backends."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm
from portgemm import planner
from portgemm.backends import split as splitbe
from portgemm.errors import ValidationError
from portgemm.kernels.variants import SplitReduce
from portgemm.planner import split_k
from portgemm.tiles import FAMILIES, HALF_FAMILIES, family_dtypes
from test_cuda_backend_fake import FakeArray, FakeStream
from test_cuda_backend_fake import backend as cuda_backend  # noqa: F401  (a fixture)
from test_hip_backend_fake import DevArray
from test_hip_backend_fake import backend as hip_backend  # noqa: F401  (a fixture)


def call_entry(entry, p, A, B, C, **kw):
    """One call through ``entry`` (gemm_vbatched, run or bind) of plan ``p``'s batch."""
    if entry == "gemm_vbatched":
        portgemm.gemm_vbatched(A, B, C, **kw)
    elif entry == "run":
        p.run(A, B, C, **kw)
    else:
        p.bind(A, B, C, **kw)()


TRANS = ((False, False), (False, True), (True, False), (True, True))
# Long K on few tiles (split), with K not a multiple of the slice, K = 0, empty M or N,
# a short-K GEMM that stays whole, and one long-K GEMM too thin to matter.
SHAPES = [(64, 64, 8192), (48, 40, 5000), (33, 17, 3001), (16, 16, 40), (0, 8, 4096),
          (8, 0, 4096), (20, 24, 0), (5, 70, 2050)]
# per GEMM: beta = 0 over NaN C, alpha = 0 (A and B poisoned), both nonzero
ALPHA = np.array([1.5, 0.0, -0.75, 2.0, 1.0, 1.0, 1.25, 0.0])
BETA = np.array([0.0, 0.5, 2.0, 0.0, 1.0, 0.0, -1.0, 0.0])


def operands(rng, shapes, dtype, ta, tb):
    A = [(rng.random((k, m) if ta else (m, k)) - 0.5).astype(dtype) for m, n, k in shapes]
    B = [(rng.random((n, k) if tb else (k, n)) - 0.5).astype(dtype) for m, n, k in shapes]
    C = [(rng.random((m, n)) - 0.5).astype(dtype) for m, n, k in shapes]
    for i, (a, b, c) in enumerate(zip(A, B, C)):
        if BETA[i] == 0:
            c[...] = np.nan       # never read when beta == 0
        if ALPHA[i] == 0:
            a[...] = np.nan       # never read when alpha == 0
            b[...] = np.nan
    return A, B, C


def reference(A, B, C, ta, tb):
    out = []
    for a, b, c, al, be in zip(A, B, C, ALPHA, BETA):
        prod = 0.0 if al == 0 else al * ((a.T if ta else a).astype(np.float64)
                                         @ (b.T if tb else b).astype(np.float64))
        out.append(prod + (be * c.astype(np.float64) if be else 0.0)
                   + np.zeros(c.shape))
    return out


def check(C, want, dtype, K):
    for i, (got, ref) in enumerate(zip(C, want)):
        got = getattr(got, "a", got)
        assert np.isfinite(got).all(), f"GEMM {i}: NaN or Inf leaked"
        tol = (2e-6 if dtype == "float32" else 1e-14) * max(1, K[i]) ** 0.5 * 8
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol, err_msg=f"GEMM {i}")


def split_plan(shapes, dtype, **kw):
    p = portgemm.plan(shapes, dtype=dtype, arch="sm_90", **kw)
    assert p.split is not None, p.describe()
    return p


# -- the planner ---------------------------------------------------------------------

def test_planner_splits_few_long_gemms():
    p = split_plan([(64, 64, 8192)] * 4, "float32")
    sp = p.split
    assert (sp.splits > 1).all()
    assert sp.predicted_ms < sp.unsplit_ms and p.predicted_ms == sp.predicted_ms
    assert sp.plan.split is None and sp.plan.batch == int(sp.splits.sum())
    assert sp.workspace_elems == int((sp.splits * 64 * 64).sum())
    text = p.describe()
    assert "split-K: 4 GEMM(s) split" in text and "unsplit" in text
    assert "split-K=4" in repr(p)


def test_planner_keeps_a_batch_that_fills_the_device():
    p = portgemm.plan([(1024, 1024, 1024)] * 64, arch="sm_90")
    assert p.split is None
    assert split_k.wave_slots(p) <= p.n_tiles


def test_short_k_never_splits():
    p = portgemm.plan([(64, 64, 2 * split_k.MIN_SLICE - 1)] * 4, arch="sm_90")
    assert p.split is None


@pytest.mark.parametrize("strategy", planner.strategies())
def test_named_strategies_and_split_k_false_never_split(strategy):
    shapes = [(64, 64, 8192)] * 4
    assert portgemm.plan(shapes, arch="sm_90", strategy=strategy).split is None
    assert portgemm.plan(shapes, arch="sm_90", split_k=False).split is None
    with pytest.raises(ValidationError, match="never splits K"):
        portgemm.plan(shapes, arch="sm_90", strategy=strategy, split_k=True)


def test_split_k_option_is_checked_and_cached_apart():
    shapes = np.array([(64, 64, 8192)] * 4)   # an array: every cache path sees it
    with pytest.raises(ValidationError, match="split_k"):
        portgemm.plan(shapes, split_k="yes")
    on = portgemm.plan(shapes, arch="sm_90")
    off = portgemm.plan(shapes, arch="sm_90", split_k=False)
    assert on is portgemm.plan(shapes, arch="sm_90", split_k=True)
    assert off is not on and off.split is None
    # the split plan's own tiling is the unsplit plan's (what a backend without split runs)
    assert np.array_equal(on.tiles, off.tiles) and on.kinds == off.kinds


def test_virtual_slices_cover_k_in_order():
    shapes = np.array(SHAPES, dtype=np.int64)
    for target in (32, 100, 512, 4096):
        s, L = split_k.splits_for(shapes, target)
        v = split_k.virtual_shapes(shapes, s, L)
        first = np.cumsum(s) - s
        for i, (m, n, k) in enumerate(SHAPES):
            rows = v[first[i]:first[i] + s[i]]
            assert (rows[:, :2] == (m, n)).all()
            assert rows[:, 2].sum() == k and (rows[:, 2] > 0).all() or k == 0
            if s[i] > 1:
                assert L[i] % split_k.BK == 0 and L[i] >= split_k.MIN_SLICE
                assert (rows[:-1, 2] == L[i]).all() and s[i] <= max(split_k.CANDIDATES)
            else:
                assert L[i] == k
        assert (s[(shapes[:, 0] == 0) | (shapes[:, 1] == 0) | (shapes[:, 2] == 0)] == 1).all()


def test_split_plan_is_read_only():
    sp = split_plan([(64, 64, 8192)] * 4, "float32").split
    for a in (sp.splits, sp.slice_k, sp.first, sp.workspace_offset):
        with pytest.raises(ValueError):
            a[0] = 7
    with pytest.raises(AttributeError):
        sp.plan = None


# -- the reduction's coverage --------------------------------------------------------

@pytest.mark.parametrize("sizes", [[(1, 1)], [(32, 32), (1, 1023), (1, 1025), (7, 300)],
                                   [(64, 64)] * 3 + [(100, 101)]])
def test_reduction_writes_every_element_exactly_once(sizes):
    mn = np.array([m * n for m, n in sizes], dtype=np.int64)
    chunk = SplitReduce.chunk
    blocks = -(-mn // chunk)
    start = np.concatenate([[0], np.cumsum(blocks)]).astype(np.int32)
    g, e = splitbe.reduce_slots(start, mn)
    for r, n in enumerate(mn):
        counts = np.bincount(e[g == r], minlength=int(n))
        assert counts.shape[0] == n and (counts == 1).all()


# -- results -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("trans", TRANS)
def test_numpy_split_equals_unsplit_and_reference(dtype, trans):
    ta, tb = trans
    rng = np.random.default_rng(3)
    A, B, C = operands(rng, SHAPES, dtype, ta, tb)
    want = reference(A, B, C, ta, tb)
    K = [k for *_, k in SHAPES]
    kw = dict(alpha=ALPHA, beta=BETA, trans_a=ta, trans_b=tb, backend="numpy")
    p = split_plan(SHAPES, dtype)
    assert p.split.splits[0] > 1 and p.split.splits[3] == 1   # both phases do work
    Cs = [c.copy() for c in C]
    p.run(A, B, Cs, **kw)
    check(Cs, want, dtype, K)
    Cu = [c.copy() for c in C]
    portgemm.plan(SHAPES, dtype=dtype, arch="sm_90", split_k=False).run(A, B, Cu, **kw)
    check(Cu, want, dtype, K)
    check(Cs, Cu, dtype, K)   # split == unsplit, to rounding
    Cb = [c.copy() for c in C]
    p.bind(A, B, Cb, **kw)()
    for s_, b_ in zip(Cs, Cb):
        np.testing.assert_array_equal(s_, b_)   # deterministic: the same order every call


def test_gemm_vbatched_splits_by_default(monkeypatch):
    monkeypatch.setenv("PORTGEMM_ARCH", "sm_90")
    planner.clear_cache()
    shapes = [(64, 64, 8192)] * 4
    rng = np.random.default_rng(9)
    A = [(rng.random((m, k)) - 0.5).astype(np.float32) for m, n, k in shapes]
    B = [(rng.random((k, n)) - 0.5).astype(np.float32) for m, n, k in shapes]
    C = [np.full((m, n), np.nan, np.float32) for m, n, k in shapes]
    ran = []
    real = splitbe.emulate
    monkeypatch.setattr(splitbe, "emulate", lambda *a: ran.append(1) or real(*a))
    portgemm.gemm_vbatched(A, B, C, backend="numpy")
    assert ran
    for a, b, c in zip(A, B, C):
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def strided(x):
    """``x`` copied into a view with a padded row stride and an offset start (NaN
    around it), so pointer arithmetic that ignores the leading dimension shows."""
    r, c = x.shape
    buf = np.full((2 * r + 1, c + 5), np.nan, x.dtype)
    view = buf[1::2, 3:3 + c]
    view[...] = x
    return view


def _fake_run(backend, wrap, entry, ta, tb, dtype, layout=np.copy):
    rng = np.random.default_rng(5)
    A, B, C = operands(rng, SHAPES, dtype, ta, tb)
    want = reference(A, B, C, ta, tb)
    p = portgemm.plan(SHAPES, dtype=dtype, arch=backend.arch())
    assert p.split is not None
    dA, dB, dC = ([wrap(layout(x)) for x in xs] for xs in (A, B, C))
    call_entry(entry, p, dA, dB, dC, alpha=ALPHA, beta=BETA, trans_a=ta, trans_b=tb,
               backend=backend)
    check(dC, want, dtype, [k for *_, k in SHAPES])
    return p


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("entry", ["gemm_vbatched", "run", "bind"])
@pytest.mark.parametrize("layout", [np.copy, strided], ids=["dense", "strided"])
def test_fake_cuda_split_equals_reference(cuda_backend, dtype, trans, entry, layout):
    p = _fake_run(cuda_backend, FakeArray, entry, *trans, dtype, layout)
    assert len(cuda_backend.reductions) == 1
    _, writes = cuda_backend.reductions[0]
    assert len(writes) == p.split.split_gemms.size
    assert all((w == 1).all() for w in writes.values())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("entry", ["gemm_vbatched", "run", "bind"])
def test_fake_hip_split_equals_reference(hip_backend, dtype, entry):
    p = _fake_run(hip_backend, DevArray, entry, False, True, dtype)
    (_, writes), = hip_backend.fake.reductions
    assert len(writes) == p.split.split_gemms.size
    assert all((w == 1).all() for w in writes.values())


def test_fake_cuda_repeats_reuse_the_call_and_follow_the_stream(cuda_backend):
    shapes = [(64, 64, 8192)] * 4
    rng = np.random.default_rng(1)
    hA = [(rng.random((m, k)) - 0.5).astype(np.float32) for m, n, k in shapes]
    hB = [(rng.random((k, n)) - 0.5).astype(np.float32) for m, n, k in shapes]
    A, B = [FakeArray(x) for x in hA], [FakeArray(x) for x in hB]
    C = [FakeArray(np.full((m, n), np.nan, np.float32)) for m, n, k in shapes]
    p = portgemm.plan(shapes, dtype="float32", arch=cuda_backend.arch())
    assert p.split is not None
    call = p.bind(A, B, C, backend=cuda_backend)
    with FakeStream(4242) as s:
        first = cuda_backend.execute(p, portgemm.api._checked(p, A, B, C, 1.0, 0.0, False,
                                                                  False, cuda_backend)[1])
        uploads = len(s.log)
        again = cuda_backend.execute(p, portgemm.api._checked(p, A, B, C, 1.0, 0.0, False,
                                                                  False, cuda_backend)[1], first)
        assert again is first and len(s.log) == uploads   # a repeat uploads nothing
        call()
        assert len(s.log) == uploads   # the bound call's uploads were made at bind time
    assert cuda_backend.relauncher(p, None, first) is None
    # every launch (virtual GEMMs, then the reduction) on the stream current at the call
    assert {st for _, st in cuda_backend.launches} == {4242}
    names = [n for n, _ in cuda_backend.launches]
    assert names[-1].endswith("_split_reduce") and names.count(names[-1]) == 3
    for a, b, c in zip(hA, hB, C):
        np.testing.assert_allclose(c.a, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_fake_cuda_workspace_per_stream_but_none_allocated_in_a_capture(cuda_backend,
                                                                       monkeypatch):
    monkeypatch.setattr(FakeStream, "is_capturing", lambda self: self.ptr == 99, raising=False)
    shapes = [(64, 64, 8192)] * 4
    rng = np.random.default_rng(2)
    hA = [(rng.random((m, k)) - 0.5).astype(np.float32) for m, n, k in shapes]
    hB = [(rng.random((k, n)) - 0.5).astype(np.float32) for m, n, k in shapes]
    A, B = [FakeArray(x) for x in hA], [FakeArray(x) for x in hB]
    p = portgemm.plan(shapes, dtype="float32", arch=cuda_backend.arch())
    for ptr in (5, 99, 7):
        C = [FakeArray(np.full((m, n), np.nan, np.float32)) for m, n, k in shapes]
        with FakeStream(ptr):
            p.run(A, B, C, backend=cuda_backend)
        for a, b, c in zip(hA, hB, C):
            np.testing.assert_allclose(c.a, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    states = splitbe._STATES[p]
    assert sorted(k[1] for k in states) == [5, 7]   # the capture took stream 5's


def test_grouped_api_does_not_split(monkeypatch):
    G, K, N, m = 4, 8192, 64, 64
    A = np.ones((G * m, K), np.float32)
    B = np.ones((G, K, N), np.float32)
    C = np.zeros((G * m, N), np.float32)
    seen = []
    real = planner.plan
    monkeypatch.setattr(planner, "plan", lambda *a, **kw: seen.append(real(*a, **kw)) or seen[-1])
    portgemm.gemm_grouped(A, B, C, offs=np.arange(1, G + 1) * m, backend="numpy")
    assert seen and all(p.split is None for p in seen)
    np.testing.assert_allclose(C, K)


def test_the_slice_step_is_a_multiple_of_every_splittable_k_step():
    """Slices are multiples of split_k.BK, so it must be one of every K step of the kinds
    that may split (the fp32 and fp64 families), or a K step would straddle two slices."""
    steps = {k.tk for fam, kinds in FAMILIES.items() if fam not in HALF_FAMILIES
             and {"float32", "float64"} & set(family_dtypes(fam)) for k in kinds}
    assert steps and all(split_k.BK % tk == 0 for tk in steps)
