"""The lists path's layout cache (call_cache.layout_key): a call on new array objects
over the same memory, layout and scalars as a validated call skips validation and
planning; anything else that validation reads takes the full path, and bad calls are
refused every time, writing nothing."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm
from portgemm import api
from portgemm.errors import LayoutError


@pytest.fixture
def counted(monkeypatch):
    calls = []
    real = api.validate

    def validate(*a, **kw):
        calls.append(1)
        return real(*a, **kw)
    monkeypatch.setattr(api, "validate", validate)
    api._layouts.clear()
    yield calls
    api._layouts.clear()


def buffers(rng, shapes):
    A = [rng.random((m, k)) - 0.5 for m, n, k in shapes]
    B = [rng.random((k, n)) - 0.5 for m, n, k in shapes]
    C = [np.full((m, n), np.nan) for m, n, k in shapes]
    return A, B, C


def views(X):
    return [x.view() for x in X]   # new objects, same memory and layout


def check(A, B, C, alpha):
    for a, b, c, al in zip(A, B, C, np.broadcast_to(alpha, len(A))):
        np.testing.assert_allclose(c, al * a @ b, rtol=1e-12, atol=1e-12)


def test_new_views_of_the_same_memory_skip_validation(counted):
    rng = np.random.default_rng(1)
    A, B, C = buffers(rng, [(5, 7, 3), (1, 4, 9), (16, 2, 5), (0, 3, 3)])
    for i in range(4):
        for a in A:
            a[...] = rng.random(a.shape) - 0.5   # new contents each call
        for c in C:
            c[...] = np.nan
        portgemm.gemm_vbatched(views(A), views(B), tuple(views(C)), alpha=2.0,
                               backend="numpy")
        check(A, B, C, 2.0)
    assert len(counted) == 1, "later calls over the same memory were validated again"
    per_gemm = [0.5, -1.0, 2.0, 3.0]
    for _ in range(2):                            # other scalars: validated once more
        portgemm.gemm_vbatched(views(A), views(B), views(C), alpha=per_gemm, backend="numpy")
        check(A, B, C, per_gemm)
    assert len(counted) == 2
    portgemm.gemm_vbatched(views(A), views(B), views(C), alpha=-0.0, backend="numpy")
    portgemm.gemm_vbatched(views(A), views(B), views(C), alpha=0.0, backend="numpy")
    assert len(counted) == 4, "0.0 and -0.0 are different keys"
    A2 = [np.ascontiguousarray(a) + 0 for a in A]  # other memory: validated again
    portgemm.gemm_vbatched(A2, views(B), views(C), alpha=2.0, backend="numpy")
    check(A2, B, C, 2.0)
    assert len(counted) == 5
    portgemm.gemm_vbatched(views(A), views(B), views(C), trans_a=False, alpha=2,
                           backend="numpy")
    assert len(counted) == 6, "an int alpha is its own key"


def test_refused_calls_are_refused_every_time(counted):
    rng = np.random.default_rng(2)
    A, B, _ = buffers(rng, [(4, 6, 3), (4, 6, 3)])
    out = np.full((4, 9), np.nan)
    C = [out[:, :6], out[:, 3:]]                   # C_0 and C_1 share columns 3-5
    for _ in range(3):
        with pytest.raises(LayoutError):
            portgemm.gemm_vbatched(views(A), views(B), views(C), backend="numpy")
        assert np.isnan(out).all(), "a refused call wrote"
    assert len(counted) == 3


def test_read_only_output_is_refused_though_the_layout_was_accepted(counted):
    rng = np.random.default_rng(3)
    A, B, C = buffers(rng, [(3, 3, 3)])
    portgemm.gemm_vbatched(A, B, C, backend="numpy")
    ro = C[0].view()
    ro.flags.writeable = False
    with pytest.raises(LayoutError):
        portgemm.gemm_vbatched(views(A), views(B), [ro], backend="numpy")


def test_cuda_layout_hits_only_launch_on_the_current_stream(counted, backend):
    """On the CUDA backend (fake CuPy) a layout hit is the encoded launches of the first
    call on the caller's current stream: no upload, results follow the new contents."""
    from test_cuda_backend_fake import FakeArray, FakeStream, check, host_batch, reference
    shapes = [(20, 33, 7), (1, 5, 40), (64, 64, 64)]
    rng = np.random.default_rng(4)
    hA, hB, hC = host_batch(rng, shapes, "float32", False, True)
    alpha = [1.5, -1.0, 0.5]
    with FakeStream(31) as s:
        portgemm.gemm_vbatched([FakeArray(x) for x in hA], [FakeArray(x) for x in hB],
                               [FakeArray(x) for x in hC], alpha=alpha, trans_b=True,
                               backend=backend)
        uploads = len(s.log)
    for stream in (57, 31):
        for x in hA:
            x[...] = rng.random(x.shape) - 0.5
        with FakeStream(stream) as s2:
            portgemm.gemm_vbatched([FakeArray(x) for x in hA], [FakeArray(x) for x in hB],
                                   [FakeArray(x) for x in hC], alpha=alpha, trans_b=True,
                                   backend=backend)
        assert s2.log == [] and backend.launches[-1][1] == stream
        check(hC, reference(hA, hB, hC, alpha, [0.0] * 3, False, True), "float32")
    assert len(counted) == 1 and uploads


from test_cuda_backend_fake import backend  # noqa: E402,F401  (a fixture)


def test_plan_run_takes_the_layout_cache_per_plan(counted):
    rng = np.random.default_rng(5)
    shapes = [(5, 7, 3), (9, 2, 4)]
    A, B, C = buffers(rng, shapes)
    p = portgemm.plan(shapes, dtype="float64")
    for _ in range(3):
        p.run(views(A), views(B), views(C), backend="numpy")
        check(A, B, C, 1.0)
    assert len(counted) == 1
    q = portgemm.plan(shapes, dtype="float64", strategy="magma")
    q.run(views(A), views(B), views(C), backend="numpy")
    assert len(counted) == 2, "another plan: validated for it"
    with pytest.raises(portgemm.ShapeMismatch):
        portgemm.plan([(5, 7, 3), (9, 2, 5)], dtype="float64").run(
            views(A), views(B), views(C), backend="numpy")
