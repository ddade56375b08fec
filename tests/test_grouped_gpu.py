"""The packed API on a CUDA device (marker ``gpu``; skipped where there is none): both
forms against a float64 reference over NaN-poisoned outputs, host and device offsets,
a CUDA graph replayed after the device offsets change in place, and PyTorch tensors."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import portgemm
from portgemm.errors import DtypeError, LayoutError, ShapeMismatch

from gpu_batches import captured
from test_grouped import (TRANS, general_operands, poison, ragged_operands,
                          ragged_reference, scalars)

pytestmark = pytest.mark.gpu
TOL = {np.float32: 1e-5, np.float64: 1e-12}
SEEDS = itertools.count(9000)
SIZES = [5, 0, 70, 1, 33, 0, 16, 129, 300, 2]


def rel_err(got, ref) -> float:
    got = np.asarray(got, np.float64)
    if not np.isfinite(got).all():
        return float("inf")
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1.0))


@pytest.mark.parametrize("where", ["host", "device"])
@pytest.mark.parametrize("per_group", [False, True])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ragged_on_cuda(cuda, cp, dtype, trans, per_group, where):
    ta, tb = trans
    rng = np.random.default_rng(next(SEEDS))
    A, B, C, offs = ragged_operands(rng, SIZES, 96, 80, dtype, ta, tb)
    alpha, beta = scalars(rng, len(SIZES), per_group)
    poison(C, offs, beta)
    ref = ragged_reference(A, B, C, offs, alpha, beta, ta, tb)
    dC = cp.asarray(C)
    d_offs = cp.asarray(offs) if where == "device" else offs
    portgemm.gemm_grouped(cp.asarray(A), cp.asarray(B), dC, d_offs, alpha=alpha, beta=beta,
                          trans_a=ta, trans_b=tb, backend="cuda")
    got = cp.asnumpy(dC)
    end = int(offs[-1])
    assert rel_err(got[:end], ref[:end]) < TOL[dtype]
    assert np.isnan(got[end:]).all(), "rows past offs[-1] were written"


@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_general_on_cuda(cuda, cp, dtype, trans):
    ta, tb = trans
    rng = np.random.default_rng(next(SEEDS))
    sizes = np.array([[5, 7, 3], [0, 4, 2], [64, 33, 17], [1, 1, 1], [200, 90, 130], [9, 31, 0]])
    bufs, offs, lds, mats = general_operands(rng, sizes, dtype, ta, tb)
    for c in mats["C"]:
        c[...] = np.nan
    ref = [(a.T if ta else a).astype(np.float64) @ (b.T if tb else b)
           for a, b in zip(mats["A"], mats["B"])]
    dC = cp.asarray(bufs["C"])
    portgemm.gemm_grouped_general(cp.asarray(bufs["A"]), cp.asarray(bufs["B"]), dC, sizes,
                                  offs["A"], offs["B"], offs["C"], lds["A"], lds["B"], lds["C"],
                                  trans_a=ta, trans_b=tb, backend="cuda")
    host = cp.asnumpy(dC)
    for g, c in enumerate(mats["C"]):
        got = np.lib.stride_tricks.as_strided(host[offs["C"][g]:], c.shape, c.strides)
        assert rel_err(got, ref[g]) < TOL[dtype], g


@pytest.mark.parametrize("dtype, trans_b, per_group", [(np.float32, False, False),
                                                     (np.float64, True, True)])
def test_device_offsets_graph_replays_with_new_offsets(cuda, cp, dtype, trans_b, per_group):
    """Capture one call with device offsets, then change offs (and A) in place between
    replays: each replay computes the split current at replay time."""
    rng = np.random.default_rng(1)
    G, K, N, T = 8, 64, 96, 1000
    A = (rng.random((T, K)) - 0.5).astype(dtype)
    B = (rng.random((G, N, K) if trans_b else (G, K, N)) - 0.5).astype(dtype)
    alpha = rng.uniform(-2, 2, G) if per_group else 0.5
    dA, dB = cp.asarray(A), cp.asarray(B)
    dC = cp.full((T, N), cp.nan, dtype=dtype)
    d_offs = cp.asarray(np.linspace(0, T, G + 1)[1:].astype(np.int32))
    kw = dict(alpha=alpha, trans_b=trans_b, backend="cuda")
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        portgemm.gemm_grouped(dA, dB, dC, d_offs, **kw)  # warm-up
        graph = captured(stream, lambda: portgemm.gemm_grouped(dA, dB, dC, d_offs, **kw))
    splits = [rng.multinomial(T - 37, np.ones(G) / G), np.array([0, T - 37, 0, 0, 0, 0, 0, 0]),
              np.array([0] * G), np.array([1, 0, 0, 500, 3, 0, 120, 9])]
    for sizes in splits:
        offs = np.cumsum(sizes).astype(np.int32)
        A = (rng.random((T, K)) - 0.5).astype(dtype)
        with stream:
            d_offs.set(offs)
            dA.set(A)
            dC.fill(cp.nan)
            graph.launch(stream)
        stream.synchronize()
        got = cp.asnumpy(dC)
        C = np.full((T, N), np.nan)
        ref = ragged_reference(A, B, C, offs, alpha, 0.0, False, trans_b)
        end = int(offs[-1])
        assert rel_err(got[:end], ref[:end]) < TOL[dtype], sizes
        assert np.isnan(got[end:]).all()


@pytest.mark.parametrize("where", ["host", "device"])
def test_repeated_calls_follow_new_outputs_offsets_and_scalars(cuda, cp, where):
    """The call cache on a GPU: a new C each call (as a layer allocating its output),
    offsets changed in place, new alpha: every call computes what it is given."""
    rng = np.random.default_rng(4)
    G, K, N, T = 6, 40, 56, 300
    A = (rng.random((T, K)) - 0.5).astype(np.float32)
    B = (rng.random((G, K, N)) - 0.5).astype(np.float32)
    dA, dB = cp.asarray(A), cp.asarray(B)
    host = np.cumsum(rng.multinomial(T - 20, np.ones(G) / G)).astype(np.int32)
    offs = cp.asarray(host) if where == "device" else host
    for i in range(6):
        if i in (2, 4):   # same offsets array, new values
            new = np.cumsum(rng.multinomial(T - 20 * (i // 2), np.ones(G) / G)).astype(np.int32)
            host[:] = new
            if where == "device":
                offs.set(new)
        alpha = 1.0 if i < 3 else 0.25
        dC = cp.full((T, N), cp.nan, dtype=cp.float32)   # a new output every call
        portgemm.gemm_grouped(dA, dB, dC, offs, alpha=alpha, backend="cuda")
        got = cp.asnumpy(dC)
        ref = ragged_reference(A, B, np.full((T, N), np.nan), host, alpha, 0.0, False, False)
        end = int(host[-1])
        assert rel_err(got[:end], ref[:end]) < 1e-5, i
        assert np.isnan(got[end:]).all(), i


def test_torch_tensors(cuda, cp):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    A, B, C, offs = ragged_operands(rng, SIZES, 40, 24, np.float32, False, True)
    ref = ragged_reference(A, B, C, offs, 1.0, 0.0, False, True)
    tA, tB = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
    end = int(offs[-1])
    for t_offs in (torch.from_numpy(offs), torch.from_numpy(offs).cuda()):
        tC = torch.full(C.shape, float("nan"), device="cuda")
        torch.cuda.synchronize()
        portgemm.gemm_grouped(tA, tB, tC, t_offs, trans_b=True, backend="cuda")
        cuda.synchronize()
        got = tC.cpu().numpy()
        assert rel_err(got[:end], ref[:end]) < 1e-5
        assert np.isnan(got[end:]).all()


def test_device_offsets_errors(cuda, cp):
    rng = np.random.default_rng(3)
    A, B, C, offs = ragged_operands(rng, [3, 4, 5], 8, 8, np.float32, False, False)
    dA, dB, dC = cp.asarray(A), cp.asarray(B), cp.asarray(C)
    with pytest.raises(DtypeError, match="int32"):
        portgemm.gemm_grouped(dA, dB, dC, cp.asarray(offs.astype(np.int64)), backend="cuda")
    with pytest.raises(ShapeMismatch):
        portgemm.gemm_grouped(dA, dB, dC, cp.asarray(offs[:2]), backend="cuda")
    with pytest.raises(LayoutError):
        portgemm.gemm_grouped(dA, dB, dC, cp.asarray(np.repeat(offs, 2))[::2], backend="cuda")
    with pytest.raises(DtypeError, match="device arrays"):
        portgemm.gemm_grouped(A, dB, dC, cp.asarray(offs), backend="cuda")
    np.testing.assert_array_equal(cp.asnumpy(dC), C)


def _every_candidate():
    from portgemm.grouped.ragged_kind import candidate_kinds
    return [(dt, k) for dt in (np.float32, np.float64) for k in candidate_kinds(dt)]


@pytest.mark.parametrize("dtype, kind", _every_candidate(), ids=lambda x: getattr(x, "name", None))
def test_device_offsets_every_kind_the_chooser_may_give(cuda, cp, monkeypatch, dtype, kind):
    """Each kind the cost model may pick for a device-offsets call, forced, on the GPU:
    its ragged entry point (each block finds its group and tile from the offsets) over
    NaN-poisoned C, with empty groups and groups shorter and longer than one tile; the
    kinds take the four transposes in turn, so each engine (SIMT, fp64 MMA) runs all."""
    from portgemm.grouped import ragged
    monkeypatch.setattr(ragged, "choose_kind", lambda *a: kind)
    ragged._kinds.clear()
    ragged._calls.clear()
    try:
        rng = np.random.default_rng(next(SEEDS))
        sizes = [0, 3, kind.tm + 5, 0, 2 * kind.tm, 1, 3 * kind.tm - 1]
        ta, tb = TRANS[_every_candidate().index((dtype, kind)) % len(TRANS)]
        A, B, C, offs = ragged_operands(rng, sizes, 37, kind.tn + 9, dtype, ta, tb)
        alpha, beta = scalars(rng, len(sizes), True)
        poison(C, offs, beta)
        ref = ragged_reference(A, B, C, offs, alpha, beta, ta, tb)
        dC = cp.asarray(C)
        portgemm.gemm_grouped(cp.asarray(A), cp.asarray(B), dC, cp.asarray(offs), alpha=alpha,
                              beta=beta, trans_a=ta, trans_b=tb, backend="cuda")
        got = cp.asnumpy(dC)
        end = int(offs[-1])
        assert rel_err(got[:end], ref[:end]) < TOL[dtype]
        assert np.isnan(got[end:]).all(), "rows past offs[-1] were written"
    finally:
        ragged._kinds.clear()
        ragged._calls.clear()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_device_offsets_k_zero_and_all_groups_empty(cuda, cp, dtype):
    """K = 0 is C = beta C (beta = 0 writes zeros and never reads the NaNs), and offsets
    that leave every group empty write nothing, all on the one-launch path."""
    rng = np.random.default_rng(next(SEEDS))
    sizes = [3, 0, 40, 0, 17]
    A, B, C, offs = ragged_operands(rng, sizes, 0, 24, dtype, False, False)
    beta = np.array([2.0, 1.0, 0.0, 3.0, -0.5])
    poison(C, offs, beta)
    ref = ragged_reference(A, B, C, offs, 1.0, beta, False, False)
    dC = cp.asarray(C)
    portgemm.gemm_grouped(cp.asarray(A), cp.asarray(B), dC, cp.asarray(offs), beta=beta,
                          backend="cuda")
    got = cp.asnumpy(dC)
    end = int(offs[-1])
    assert rel_err(got[:end], ref[:end]) < TOL[dtype]
    assert np.isnan(got[end:]).all()
    A, B, C, _ = ragged_operands(rng, sizes, 16, 24, dtype, True, True)
    dC = cp.full(C.shape, cp.nan, dtype=dtype)
    portgemm.gemm_grouped(cp.asarray(A), cp.asarray(B), dC, cp.zeros(len(sizes), cp.int32),
                          trans_a=True, trans_b=True, backend="cuda")
    assert np.isnan(cp.asnumpy(dC)).all(), "an empty group was written"


def test_repeated_host_offsets_call_relaunches_on_the_current_stream_and_in_a_graph(cuda, cp):
    """A repeated host-offsets call is only its encoded launches (HostCall.relaunch): on
    another stream it runs on that stream, and it can be captured in a graph whose
    replays see new A contents."""
    rng = np.random.default_rng(2)
    sizes = [40, 0, 7, 129, 3]
    A, B, C, offs = ragged_operands(rng, sizes, 33, 70, np.float32, False, False)
    dA, dB = cp.asarray(A), cp.asarray(B)
    dC = cp.full(C.shape, cp.nan, dtype=np.float32)
    for _ in range(2):   # the first call validates, the second relaunches
        portgemm.gemm_grouped(dA, dB, dC, offs, backend="cuda")
    stream = cp.cuda.Stream(non_blocking=True)
    end = int(offs[-1])
    with stream:
        graph = captured(stream,
                         lambda: portgemm.gemm_grouped(dA, dB, dC, offs, backend="cuda"))
        for _ in range(2):
            A = (rng.random(A.shape) - 0.5).astype(np.float32)
            dA.set(A)
            dC.fill(cp.nan)
            graph.launch(stream)
            stream.synchronize()
            ref = ragged_reference(A, B, np.full(C.shape, np.nan), offs, 1.0, 0.0, False, False)
            got = cp.asnumpy(dC)
            assert rel_err(got[:end], ref[:end]) < TOL[np.float32]
            assert np.isnan(got[end:]).all()
        dC.fill(cp.nan)
        portgemm.gemm_grouped(dA, dB, dC, offs, backend="cuda")   # uncaptured, this stream
        stream.synchronize()
        assert rel_err(cp.asnumpy(dC)[:end], ref[:end]) < TOL[np.float32]


def test_device_offsets_on_new_buffers_each_call(cuda, cp):
    """New A and C every call over the same device offsets (a mixture-of-experts
    layer's activations): each call computes into its own buffers."""
    rng = np.random.default_rng(3)
    sizes = [30, 0, 7, 100, 1]
    _, B, _, offs = ragged_operands(rng, sizes, 48, 40, np.float32, False, False)
    dB, d_offs = cp.asarray(B), cp.asarray(offs)
    T, end = int(offs[-1]) + 3, int(offs[-1])
    for _ in range(3):
        A = (rng.random((T, 48)) - 0.5).astype(np.float32)
        dC = cp.full((T, 40), cp.nan, cp.float32)
        portgemm.gemm_grouped(cp.asarray(A), dB, dC, d_offs, backend="cuda")
        got = cp.asnumpy(dC)
        ref = ragged_reference(A, B, np.full((T, 40), np.nan), offs, 1.0, 0.0, False, False)
        assert rel_err(got[:end], ref[:end]) < TOL[np.float32]
        assert np.isnan(got[end:]).all()
