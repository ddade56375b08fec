"""Split-K on a real device (marker ``gpu``; CUDA graphs CUDA only): split plans through
gemm_vbatched, Plan.run and Plan.bind against a float64 reference over NaN-poisoned C,
every transpose pair, both dtypes, per-GEMM alpha and beta (beta = 0 over NaN C, alpha
= 0 over NaN A and B), K not a multiple of the slice, K = 0, M or N = 0; equal to the
unsplit plan; bitwise repeatable; a bound split call captured in a CUDA graph; calls on
two streams at once (each its own workspace)."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm

from conftest import backend_or_skip
from gpu_batches import (TOL, captured, make_host_batch, max_rel_error, reference,
                         replay_second_run, stable_seed)
from test_gpu_host_path import _check_replay
from test_split_k import call_entry

pytestmark = pytest.mark.gpu

TRANS = ((False, False), (False, True), (True, False), (True, True))
SHAPES = [(64, 64, 8192), (48, 40, 5000), (33, 17, 3001), (16, 16, 40), (0, 8, 4096),
          (8, 0, 4096), (20, 24, 0), (5, 70, 2050), (128, 128, 8191)]
ALPHA = np.array([1.5, 0.0, -0.75, 2.0, 1.0, 1.0, 1.25, 0.0, 0.5])
BETA = np.array([0.0, 0.5, 2.0, 0.0, 1.0, 0.0, -1.0, 0.0, 0.25])


@pytest.fixture(scope="module", params=["cuda", "hip"])
def be(request):
    return backend_or_skip(request.param)


def host_case(dtype, ta, tb, shapes=SHAPES, alpha=ALPHA, beta=BETA):
    rng = np.random.default_rng(stable_seed("split", dtype, ta, tb, len(shapes)))
    hA, hB, hC = make_host_batch(rng, shapes, dtype, ta, tb)
    for i in range(len(shapes)):
        if beta[i] == 0:
            hC[i][...] = np.nan
        if alpha[i] == 0:
            hA[i][...] = np.nan
            hB[i][...] = np.nan
    ref = reference(hA, hB, hC, alpha, beta, ta, tb)
    for i in range(len(shapes)):
        if alpha[i] == 0:   # the reference multiplies NaN by 0: C = beta C by definition
            ref[i] = beta[i] * hC[i].astype(np.float64) if beta[i] else np.zeros(hC[i].shape)
    return hA, hB, hC, ref


def split_plan(be, dtype, shapes=SHAPES):
    p = portgemm.plan(shapes, dtype=dtype, arch=be.arch())
    assert p.split is not None, p.describe()
    return p


def run(be, entry, p, hA, hB, hC, ta, tb, alpha=ALPHA, beta=BETA):
    A, B, C = ([be.to_device(x) for x in xs] for xs in (hA, hB, hC))
    call_entry(entry, p, A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=be)
    be.synchronize()
    return [be.to_host(c) for c in C]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("entry", ["gemm_vbatched", "run", "bind"])
def test_split_matches_reference_and_unsplit(be, dtype, trans, entry):
    ta, tb = trans
    hA, hB, hC, ref = host_case(dtype, ta, tb)
    p = split_plan(be, dtype)
    got = run(be, entry, p, hA, hB, hC, ta, tb)
    err = max_rel_error(got, ref)
    assert err < TOL[dtype], f"split: max relative error {err:.3e}"
    unsplit = portgemm.plan(SHAPES, dtype=dtype, arch=be.arch(), split_k=False)
    assert unsplit.split is None
    plain = run(be, "run", unsplit, hA, hB, hC, ta, tb)
    assert max_rel_error(got, [x.astype(np.float64) for x in plain]) < TOL[dtype]


def test_split_is_bitwise_repeatable(be):
    hA, hB, hC, _ = host_case("float32", False, False)
    p = split_plan(be, "float32")
    first = run(be, "run", p, hA, hB, hC, False, False)
    for entry in ("run", "bind", "gemm_vbatched"):
        again = run(be, entry, p, hA, hB, hC, False, False)
        for a, b in zip(first, again):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_split_with_scalar_alpha_and_beta(be, dtype):
    """Scalar alpha and beta (one value for every GEMM), beta = 0 over NaN C."""
    shapes = [(64, 64, 8192)] * 4 + [(17, 33, 1000)]
    n = len(shapes)
    alpha, beta = np.full(n, 0.5), np.zeros(n)
    hA, hB, hC, ref = host_case(dtype, True, False, shapes, alpha, beta)
    p = split_plan(be, dtype, shapes)
    got = run(be, "gemm_vbatched", p, hA, hB, hC, True, False, 0.5, 0.0)
    assert max_rel_error(got, ref) < TOL[dtype]


def long_k_case(cuda, cp, seed):
    """Four 64x64x8192 GEMMs on the device (C NaN) and their split plan."""
    shapes = [(64, 64, 8192)] * 4
    rng = np.random.default_rng(seed)
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    A, B = [cp.asarray(x) for x in hA], [cp.asarray(x) for x in hB]
    C = [cp.full(c.shape, cp.nan, cp.float32) for c in hC]
    p = portgemm.plan(shapes, dtype="float32", arch=cuda.arch())
    assert p.split is not None
    return rng, hA, hB, hC, A, B, C, p


def test_bound_split_call_in_a_cuda_graph(cuda, cp):  # CUDA only
    rng, hA, hB, hC, A, B, C, p = long_k_case(cuda, cp, 41)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        call = p.bind(A, B, C, alpha=1.5, backend="cuda")
        call()   # compiles outside the capture
        graph = captured(stream, call)
    # ``call`` stays alive: it holds the workspace and tables the graph's launches read

    def replay():
        with stream:
            graph.launch()
        stream.synchronize()
    for trial in range(2):
        _check_replay(rng, hA, hB, hC, np.full(4, 1.5), A, C, lambda d, h: d.set(h),
                      lambda c: c.fill(cp.nan), cp.asnumpy, replay)


def test_plan_run_in_a_cuda_graph(cuda, cp):  # CUDA only
    """After the first call a split plan's run neither allocates nor uploads: it can be
    captured (its workspace is the plan's for that stream)."""
    _, hA, hB, hC, A, B, C, p = long_k_case(cuda, cp, 43)
    replay_second_run(cp, lambda: p.run(A, B, C, backend="cuda"), C)
    ref = reference(hA, hB, hC, np.ones(4), np.zeros(4), False, False)
    assert max_rel_error([cp.asnumpy(c) for c in C], ref) < 1e-5


def test_plan_run_captured_on_another_stream(cuda, cp):  # CUDA only
    """Warmed up on one stream, captured on another: the capture allocates nothing (it
    takes the workspace the plan has on the device) and the replay is right."""
    _, hA, hB, hC, A, B, C, p = long_k_case(cuda, cp, 45)
    warm, cap = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    with warm:
        p.run(A, B, C, backend="cuda")
    warm.synchronize()
    with cap:
        graph = captured(cap, lambda: p.run(A, B, C, backend="cuda"))
        for c in C:
            c.fill(cp.nan)
        graph.launch()
    cap.synchronize()
    ref = reference(hA, hB, hC, np.ones(4), np.zeros(4), False, False)
    assert max_rel_error([cp.asnumpy(c) for c in C], ref) < 1e-5


def test_split_calls_on_two_streams_at_once(cuda, cp):  # CUDA only
    """Unbound calls of one split plan on two streams use a workspace each."""
    shapes = [(64, 64, 8192)] * 4
    rng = np.random.default_rng(47)
    p = portgemm.plan(shapes, dtype="float32", arch=cuda.arch())
    assert p.split is not None
    cases = []
    for _ in range(2):
        hA, hB, hC = make_host_batch(rng, shapes, "float32")
        cases.append((hA, hB, [cp.asarray(x) for x in hA], [cp.asarray(x) for x in hB],
                      [cp.full(c.shape, cp.nan, cp.float32) for c in hC]))
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    for _ in range(3):
        for s, (_, _, A, B, C) in zip(streams, cases):
            with s:
                p.run(A, B, C, backend="cuda")
    for s in streams:
        s.synchronize()
    for hA, hB, _, _, C in cases:
        ref = reference(hA, hB, [np.zeros(c.shape) for c in C], np.ones(4), np.zeros(4),
                        False, False)
        assert max_rel_error([cp.asnumpy(c) for c in C], ref) < 1e-5
