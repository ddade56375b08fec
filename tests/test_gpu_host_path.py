"""The host path on a CUDA device (marker ``gpu``; skipped without one): lists of CuPy
arrays and torch tensors, 3-D stacks, every entry point against a float64 reference over
NaN-poisoned C; aliased outputs refused with nothing launched; bound calls and Plan.run
captured in CUDA graphs (CuPy's stream and torch's: a launch on any other stream would
break the capture)."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm

from gpu_batches import captured, make_host_batch, max_rel_error, random_shapes, reference

pytestmark = pytest.mark.gpu


def _scalars(rng, n):
    alpha = rng.uniform(-2, 2, n)
    beta = np.where(rng.random(n) < 0.5, 0.0, rng.uniform(-2, 2, n))
    return alpha, beta


def _poison(hC, beta):
    for c, b in zip(hC, beta):
        if b == 0:
            c[...] = np.nan


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("trans", [(False, False), (True, True)])
@pytest.mark.parametrize("entry", ["gemm_vbatched", "run", "bind"])
@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_lists_on_every_entry_point(cuda, cp, dtype, trans, entry, lib):
    if lib == "torch":
        torch = pytest.importorskip("torch")
        to_dev = lambda x: torch.from_numpy(x).cuda()  # noqa: E731
        to_host = lambda x: x.cpu().numpy()  # noqa: E731
    else:
        to_dev, to_host = cp.asarray, cp.asnumpy
    rng = np.random.default_rng(21)
    shapes = random_shapes(rng, 80, 200, 150)
    hA, hB, hC = make_host_batch(rng, shapes, dtype, *trans)
    alpha, beta = _scalars(rng, len(shapes))
    _poison(hC, beta)
    ref = reference(hA, hB, hC, alpha, beta, *trans)
    A, B, C = ([to_dev(x) for x in xs] for xs in (hA, hB, hC))
    kw = dict(alpha=alpha, beta=beta, trans_a=trans[0], trans_b=trans[1], backend="cuda")
    if entry == "gemm_vbatched":
        portgemm.gemm_vbatched(A, B, C, **kw)
    else:
        p = portgemm.plan(shapes, dtype=dtype, arch=cuda.arch())
        p.run(A, B, C, **kw) if entry == "run" else p.bind(A, B, C, **kw)()
    cp.cuda.Device().synchronize()
    assert max_rel_error([to_host(c) for c in C], ref) < (1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_stacks_equal_lists_and_the_reference(cuda, cp, lib):
    rng = np.random.default_rng(22)
    a = (rng.random((300, 24, 40)) - 0.5).astype(np.float32)
    b = (rng.random((300, 40, 17)) - 0.5).astype(np.float32)
    if lib == "torch":
        torch = pytest.importorskip("torch")
        dev = lambda x: torch.from_numpy(np.ascontiguousarray(x)).cuda()  # noqa: E731
        host = lambda x: x.cpu().numpy()  # noqa: E731
    else:
        dev, host = cp.asarray, cp.asnumpy
    dA, dB = dev(a), dev(b)
    dC = dev(np.full((300, 24, 17), np.nan, np.float32))
    lists = [dev(np.full((24, 17), np.nan, np.float32)) for _ in range(300)]
    portgemm.gemm_vbatched(dA, dB, dC, alpha=0.5, backend="cuda")
    portgemm.gemm_vbatched([dA[i] for i in range(300)], dB, lists, alpha=0.5, backend="cuda")
    cp.cuda.Device().synchronize()
    ref = 0.5 * a.astype(np.float64) @ b.astype(np.float64)
    got = host(dC)
    assert max_rel_error(list(got), list(ref)) < 1e-5
    np.testing.assert_array_equal(got, np.stack([host(c) for c in lists]))


def test_aliased_outputs_are_refused(cuda, cp):
    buf = cp.full((32, 64), cp.nan, cp.float32)
    A = [cp.ones((32, 8), cp.float32)] * 2
    B = [cp.ones((8, 40), cp.float32)] * 2
    C = [buf[:, :40], buf[:, 24:64]]      # share columns 24..39
    p = portgemm.plan([(32, 40, 8)] * 2, dtype="float32", arch=cuda.arch())
    for call in (lambda: portgemm.gemm_vbatched(A, B, C, backend="cuda"),
                 lambda: p.run(A, B, C, backend="cuda"),
                 lambda: p.bind(A, B, C, backend="cuda")):
        with pytest.raises(portgemm.LayoutError, match="C overlaps C"):
            call()
    cp.cuda.Device().synchronize()
    assert bool(cp.isnan(buf).all())


def _check_replay(rng, hA, hB, hC, alpha, A, C, set_, fill_nan, to_host, replay):
    """New inputs in the captured buffers, C poisoned, one replay: the new product."""
    hA = [(rng.random(a.shape) - 0.5).astype(np.float32) for a in hA]
    for d, h in zip(A, hA):
        set_(d, h)
    for c in C:
        fill_nan(c)
    replay()
    ref = reference(hA, hB, hC, alpha, np.zeros(len(hA)), False, False)
    assert max_rel_error([to_host(c) for c in C], ref) < 1e-5


def test_bound_call_in_a_cupy_graph(cuda, cp):
    rng = np.random.default_rng(23)
    shapes = random_shapes(rng, 40, 150, 90)
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    A, B = [cp.asarray(x) for x in hA], [cp.asarray(x) for x in hB]
    C = [cp.full(c.shape, cp.nan, cp.float32) for c in hC]
    p = portgemm.plan(shapes, dtype="float32", arch=cuda.arch())
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        call = p.bind(A, B, C, alpha=1.5, backend="cuda")
        call()   # compiles and uploads outside the capture
        graph = captured(stream, call)

    def replay():
        with stream:
            graph.launch()
        stream.synchronize()
    _check_replay(rng, hA, hB, hC, np.full(40, 1.5), A, C, lambda d, h: d.set(h),
                  lambda c: c.fill(cp.nan), cp.asnumpy, replay)


def test_torch_tensors_launch_on_torchs_stream(cuda, cp):
    """Captured with torch.cuda.graph (torch's side stream is capturing): a launch on
    CuPy's or the null stream would fail the capture or miss the graph."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(24)
    shapes = random_shapes(rng, 30, 120, 80)
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    A, B = [torch.from_numpy(x).cuda() for x in hA], [torch.from_numpy(x).cuda() for x in hB]
    C = [torch.full(c.shape, float("nan"), device="cuda") for c in hC]
    p = portgemm.plan(shapes, dtype="float32", arch=cuda.arch())
    call = p.bind(A, B, C, backend="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):   # warm-up on a side stream, as torch's docs advise
        call()
        p.run(A, B, C, backend="cuda")
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call()
        p.run(A, B, C, backend="cuda")

    def replay():
        g.replay()
        torch.cuda.synchronize()
    _check_replay(rng, hA, hB, hC, np.ones(30), A, C, lambda d, h: d.copy_(torch.from_numpy(h)),
                  lambda c: c.fill_(float("nan")), lambda c: c.cpu().numpy(), replay)


# ---- the reuse path: repeated calls on the same arrays --------------------------------------

def _poisoned_call(cp, call, C, hC_before, beta):
    """Poison C where beta is 0 (restore the rest), call, synchronise."""
    for c, h, b in zip(C, hC_before, beta):
        c[...] = cp.nan if b == 0 else cp.asarray(h)
    call()
    cp.cuda.Device().synchronize()


@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("entry", ["gemm_vbatched", "run"])
def test_reuse_path_hits_give_the_reference(cuda, cp, trans, entry):
    from portgemm import reuse
    reuse.clear()
    rng = np.random.default_rng(31)
    shapes = random_shapes(rng, 300, 150, 120)
    hA, hB, hC = make_host_batch(rng, shapes, "float32", *trans)
    alpha, beta = _scalars(rng, len(shapes))
    ref = reference(hA, hB, hC, alpha, beta, *trans)
    A, B, C = ([cp.asarray(x) for x in xs] for xs in (hA, hB, hC))
    kw = dict(alpha=alpha, beta=beta, trans_a=trans[0], trans_b=trans[1], backend="cuda")
    p = portgemm.plan(shapes, dtype="float32", arch=cuda.arch())
    call = (lambda: portgemm.gemm_vbatched(A, B, C, **kw)) if entry == "gemm_vbatched" \
        else (lambda: p.run(A, B, C, **kw))
    for _ in range(5):
        _poisoned_call(cp, call, C, hC, beta)
        assert max_rel_error([cp.asnumpy(c) for c in C], ref) < 1e-5
    assert reuse.cache_info()["hits"] == 3


def test_reuse_path_sees_replaced_reshaped_and_reallocated_arrays(cuda, cp):
    from portgemm import reuse
    reuse.clear()
    rng = np.random.default_rng(32)
    for round_ in range(4):   # new arrays every round: ids of freed ones come back
        shapes = random_shapes(rng, 60, 100, 80)
        hA, hB, hC = make_host_batch(rng, shapes, "float32")
        A, B, C = ([cp.asarray(x) for x in xs] for xs in (hA, hB, hC))
        zero = np.zeros(len(shapes))
        for _ in range(3):
            _poisoned_call(cp, lambda: portgemm.gemm_vbatched(A, B, C, backend="cuda"),
                           C, hC, zero)
            assert max_rel_error([cp.asnumpy(c) for c in C],
                                 reference(hA, hB, hC, np.ones(60), zero, False, False)) < 1e-5
        old = C[7]
        C[7] = cp.full(old.shape, cp.nan, cp.float32)   # an element replaced
        old.fill(7.0)
        _poisoned_call(cp, lambda: portgemm.gemm_vbatched(A, B, C, backend="cuda"), C, hC, zero)
        assert bool((old == 7.0).all())
        assert max_rel_error([cp.asnumpy(c) for c in C],
                             reference(hA, hB, hC, np.ones(60), zero, False, False)) < 1e-5
        del A, B, C, old
    m, n = 6, 10
    A, B = [cp.ones((m, 4), cp.float32)] * 2, [cp.ones((4, n), cp.float32)] * 2
    C = [cp.zeros((m, n), cp.float32), cp.zeros((m, n), cp.float32)]
    for _ in range(3):
        portgemm.gemm_vbatched(A, B, C, backend="cuda")
    C[1].shape = (n, m)   # CuPy's in-place reshape: same pointer, other shape
    with pytest.raises(portgemm.ShapeMismatch, match="GEMM 1"):
        portgemm.gemm_vbatched(A, B, C, backend="cuda")


def test_reuse_path_sees_torch_tensors_repointed_in_place(cuda, cp):
    torch = pytest.importorskip("torch")
    from portgemm import reuse
    reuse.clear()
    rng = np.random.default_rng(33)
    shapes = random_shapes(rng, 40, 90, 70)
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    A, B = [torch.from_numpy(x).cuda() for x in hA], [torch.from_numpy(x).cuda() for x in hB]
    C = [torch.full(c.shape, float("nan"), device="cuda") for c in hC]
    ref = reference(hA, hB, hC, np.ones(40), np.zeros(40), False, False)
    for _ in range(3):
        portgemm.gemm_vbatched(A, B, C, backend="cuda")
    old = C[5].clone()
    C[5].set_(torch.full(hC[5].shape, float("nan"), device="cuda"))   # new memory, in place
    A[2].set_(torch.from_numpy(2 * hA[2]).cuda())
    ref[2] = 2 * ref[2]
    portgemm.gemm_vbatched(A, B, C, backend="cuda")
    torch.cuda.synchronize()
    assert max_rel_error([c.cpu().numpy() for c in C], ref) < 1e-5
    assert max_rel_error([old.cpu().numpy()], [ref[5]]) < 1e-5
    assert reuse.cache_info()["hits"] == 1


@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_layout_cache_hits_on_new_views_give_the_reference(cuda, cp, lib):
    """New array objects over the same memory every call (the layout cache, not the
    reuse path): the reference each time, with new contents and new per-GEMM scalars;
    a captured layout hit replays correctly."""
    from portgemm import api, reuse
    reuse.clear()
    api._layouts.clear()
    rng = np.random.default_rng(41)
    shapes = random_shapes(rng, 40, 130, 90)
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    A, B, C = ([cp.asarray(x) for x in xs] for xs in (hA, hB, hC))
    if lib == "torch":
        torch = pytest.importorskip("torch")
        fresh = lambda X: [torch.from_dlpack(x) for x in X]  # noqa: E731
    else:
        fresh = lambda X: [x.view() for x in X]  # noqa: E731
    zero = np.zeros(len(shapes))
    for i in range(4):
        alpha = rng.uniform(-2, 2, len(shapes)) if i == 3 else np.full(len(shapes), 1.5)
        for x, h in zip(A, hA):
            h[...] = rng.random(h.shape) - 0.5
            x.set(h)
        for c in C:
            c.fill(cp.nan)
        portgemm.gemm_vbatched(fresh(A), fresh(B), fresh(C), alpha=list(alpha), backend="cuda")
        cp.cuda.Device().synchronize()
        assert max_rel_error([cp.asnumpy(c) for c in C],
                             reference(hA, hB, hC, alpha, zero, False, False)) < 1e-5
    if lib == "cupy":
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            portgemm.gemm_vbatched(fresh(A), fresh(B), fresh(C), alpha=list(alpha),
                                   backend="cuda")
            graph = captured(stream, lambda: portgemm.gemm_vbatched(
                fresh(A), fresh(B), fresh(C), alpha=list(alpha), backend="cuda"))
            for c in C:
                c.fill(cp.nan)
            graph.launch(stream)
            stream.synchronize()
        assert max_rel_error([cp.asnumpy(c) for c in C],
                             reference(hA, hB, hC, alpha, zero, False, False)) < 1e-5


def test_layout_cache_sees_reshaped_views_and_refuses_aliases_every_time(cuda, cp):
    from portgemm import api
    api._layouts.clear()
    m, n = 6, 10
    A, B = [cp.ones((m, 4), cp.float32)] * 2, [cp.ones((4, n), cp.float32)] * 2
    C = [cp.zeros((m, n), cp.float32), cp.zeros((m, n), cp.float32)]
    for _ in range(2):
        portgemm.gemm_vbatched([a.view() for a in A], [b.view() for b in B],
                               [c.view() for c in C], backend="cuda")
    v = C[1].view()
    v.shape = (n, m)   # in place: same pointer, other shape
    with pytest.raises(portgemm.ShapeMismatch, match="GEMM 1"):
        portgemm.gemm_vbatched([a.view() for a in A], [b.view() for b in B],
                               [C[0].view(), v], backend="cuda")
    out = cp.full((m, 2 * n), cp.nan, cp.float32)
    for _ in range(3):
        with pytest.raises(portgemm.LayoutError):
            portgemm.gemm_vbatched([a.view() for a in A], [b.view() for b in B],
                                   [out[:, :n], out[:, n - 1:2 * n - 1]], backend="cuda")
    assert bool(cp.isnan(out).all()), "a refused call wrote"


def test_torch_repeated_calls_run_on_torchs_side_stream(cuda, cp):
    """Every path of a repeated torch call (full, reuse hit, layout hit) launches on
    torch's current stream (read as a raw handle, one CuPy stream object kept per handle):
    inputs written on a side stream behind a long sleep are seen, which a launch on any
    other stream would race past."""
    torch = pytest.importorskip("torch")
    from portgemm import api, reuse
    reuse.clear()
    api._layouts.clear()
    rng = np.random.default_rng(51)
    shapes = random_shapes(rng, 24, 100, 70)
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    dA = [torch.from_numpy(x).cuda() for x in hA]
    A = [torch.zeros(x.shape, device="cuda") for x in hA]
    B = [torch.from_numpy(x).cuda() for x in hB]
    C = [torch.full(c.shape, float("nan"), device="cuda") for c in hC]
    zero = np.zeros(24)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    for i in range(5):
        scale = float(i + 1)
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)   # the inputs land late on this stream
            for a, d in zip(A, dA):
                torch.mul(d, scale, out=a)      # device work, ordered after the sleep
            views = [c[:, :] for c in C] if i == 4 else C   # the last: a layout hit
            portgemm.gemm_vbatched(A, B, views, backend="cuda")
        side.synchronize()
        ref = reference([scale * h for h in hA], hB, hC, np.ones(24), zero, False, False)
        assert max_rel_error([c.cpu().numpy() for c in C], ref) < 1e-5
    assert reuse.cache_info()["hits"] >= 2


@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_full_miss_calls_back_to_back_give_the_reference(cuda, cp, lib):
    """Calls on arrays at new addresses every time (more sets than the layout and
    descriptor caches keep), queued back to back with no synchronisation: each uploads its
    descriptors into bare pool memory that an evicted set's may have held, which the pool
    hands out again only in the order of the stream the launches run on (torch's side
    stream for tensors); every C is right."""
    rng = np.random.default_rng(61)
    shapes = random_shapes(rng, 12, 64, 64)
    sets = [make_host_batch(rng, shapes, "float32") + (rng.uniform(-2, 2, 12),)
            for _ in range(24)]
    if lib == "torch":
        torch = pytest.importorskip("torch")
        to_dev, to_host = (lambda x: torch.from_numpy(x).cuda()), (lambda x: x.cpu().numpy())
        nan = lambda h: torch.full(h.shape, float("nan"), device="cuda")  # noqa: E731
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        where = torch.cuda.stream(side)
    else:
        import contextlib
        to_dev, to_host = cp.asarray, cp.asnumpy
        nan = lambda h: cp.full(h.shape, cp.nan, cp.float32)  # noqa: E731
        where = contextlib.nullcontext()
    outs = []
    with where:
        for hA, hB, hC, alpha in sets:
            A, B, C = [to_dev(x) for x in hA], [to_dev(x) for x in hB], [nan(c) for c in hC]
            portgemm.gemm_vbatched(A, B, C, alpha=alpha, backend="cuda")
            outs.append(C)
    cp.cuda.Device().synchronize()
    if lib == "torch":
        torch.cuda.synchronize()
    for (hA, hB, hC, alpha), C in zip(sets, outs):
        ref = reference(hA, hB, hC, alpha, np.zeros(12), False, False)
        assert max_rel_error([to_host(c) for c in C], ref) < 1e-5


def test_torch_guard_checks_see_every_in_place_change(cuda, cp):
    """Where torch has its C++ checks (reuse.TORCH_GUARDS), a repeated call compares
    through them: a hit gives the reference; each in-place change validation would see
    (set_, resize_, as_strided_, t_ of a square matrix, another dtype through .data) is
    a miss that gives the reference or the error; a hit costs no Python object a tensor;
    and the guards hold no tensor: dropping one drops the entry."""
    torch = pytest.importorskip("torch")
    import gc

    from portgemm import reuse
    if reuse._torch_guards([torch.zeros(1, device="cuda")]) is None:
        pytest.skip("this torch has no TensorGuards / data-pointer check")
    reuse.clear()
    rng = np.random.default_rng(61)
    shapes = [(m, m, k) for m, k in rng.integers(8, 90, (30, 2)).tolist()]   # square C
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    A, B = [torch.from_numpy(x).cuda() for x in hA], [torch.from_numpy(x).cuda() for x in hB]
    C = [torch.full(c.shape, float("nan"), device="cuda") for c in hC]
    n = len(shapes)
    ref = reference(hA, hB, hC, np.ones(n), np.zeros(n), False, False)

    def call_and_check(expect_hits):
        for c in C:
            c.fill_(float("nan"))
        portgemm.gemm_vbatched(A, B, C, backend="cuda")
        torch.cuda.synchronize()
        assert max_rel_error([c.cpu().numpy() for c in C], ref) < 1e-5
        assert reuse.cache_info()["hits"] == expect_hits

    for i in range(3):
        call_and_check(max(0, i - 1))
    (entry,) = reuse._entries.values()
    assert entry.same is reuse._torch_guards_same
    hits = reuse.cache_info()["hits"]
    call_and_check(hits + 1)
    A[4].set_(torch.from_numpy(3 * hA[4]).cuda())   # new memory, in place
    ref[4] = 3 * ref[4]
    call_and_check(hits + 1)
    call_and_check(hits + 2)   # the entry remade at once
    old = C[6]
    C[6].resize_(old.shape[0] + 1, old.shape[1])   # another shape
    with pytest.raises(portgemm.ShapeMismatch, match="GEMM 6"):
        portgemm.gemm_vbatched(A, B, C, backend="cuda")
    C[6].resize_(hC[6].shape)
    C[6].t_()   # square: same pointer and shape, other strides (column-major)
    with pytest.raises(portgemm.LayoutError):
        portgemm.gemm_vbatched(A, B, C, backend="cuda")
    C[6].t_()
    B[2].data = B[2].data.view(torch.int32)   # same pointer, shape and strides
    with pytest.raises(portgemm.DtypeError):
        portgemm.gemm_vbatched(A, B, C, backend="cuda")
    B[2].data = B[2].data.view(torch.float32)
    wide = torch.from_numpy(np.concatenate([hA[9], hA[9]], 1)).cuda()
    A[9].set_(wide.untyped_storage(), 0, hA[9].shape, (2 * hA[9].shape[1], 1))   # same values
    h = reuse.cache_info()["hits"]
    call_and_check(h)       # C[6]'s storage was reallocated by resize_: a miss
    call_and_check(h + 1)   # over the strided A[9]
    (entry,) = reuse._entries.values()
    del A[9], wide
    gc.collect()
    assert not entry.live and not reuse._entries, "an entry outlived its tensor"
