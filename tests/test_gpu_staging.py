"""Alignment staging on a real device (marker ``gpu``; CUDA): staged float16 / bfloat16
batches (planner/staging.py, backends/stage.py) through Plan.run, Plan.bind and
gemm_vbatched, every transpose pair, dense and odd leading dimensions, per-GEMM alpha and
beta (beta = 0 over NaN C, alpha = 0), K = 0, M = 0, N = 0; equal to the direct plan;
a NaN-poisoned workspace; a bound staged call captured in a CUDA graph and replayed on
new inputs; Plan.run captured after its first call; the packed API with host offsets;
a grid batch the model stages by itself. Checked against float64 of the very 16-bit
inputs with test_gpu_half's bound."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm
from portgemm.planner import staging as staging_rule

from gpu_batches import captured, replay_over_nan, replay_second_run, stable_seed
from test_gpu_half import TRANS, be, check, host64, make_batch, tdtype, torch  # noqa: F401 (fixtures)

pytestmark = pytest.mark.gpu

HALF = ("float16", "bfloat16")
SHAPES = [(1, 1, 1), (7, 9, 17), (33, 65, 31), (129, 127, 70), (255, 130, 257),
          (64, 64, 0), (0, 8, 40), (8, 0, 40), (100, 3, 5), (200, 136, 1001)]


@pytest.fixture
def forced(monkeypatch):
    """Every 16-bit plan made in the test stages every unaligned operand (as
    plan(..., staging=True)), so the entry points that plan themselves stage too."""
    from portgemm import planner
    monkeypatch.setattr(planner, "_staging_option",
                        lambda s, dt: True if dt in staging_rule.STAGED_DTYPES else s)
    planner.clear_cache()
    yield
    planner.clear_cache()


def run_and_check(be, torch, entry, dtype, ta, tb, odd, what):
    rng = np.random.default_rng(stable_seed("gpu-staging", entry, dtype, ta, tb, odd))
    A, B, C, alpha, beta = make_batch(torch, rng, SHAPES, dtype, ta, tb, odd)
    h = [[host64(x) for x in X] for X in (A, B, C)]
    kw = dict(alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=be)
    if entry == "gemm_vbatched":
        portgemm.gemm_vbatched(A, B, C, **kw)
    else:
        p = portgemm.plan(SHAPES, dtype, arch=be.arch(), staging=True)
        assert p.staging is not None
        if entry == "run":
            p.run(A, B, C, **kw)
        else:
            p.bind(A, B, C, **kw)()
    torch.cuda.synchronize()
    check([host64(c) for c in C], *h, alpha, beta, ta, tb, dtype, what)
    return C


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("trans", TRANS, ids=lambda t: ("t" if t[0] else "n") + ("t" if t[1] else "n"))
@pytest.mark.parametrize("odd", [False, True], ids=["dense", "odd-ld"])
@pytest.mark.parametrize("entry", ["run", "bind", "gemm_vbatched"])
def test_staged_batch_matches_float64(be, torch, forced, dtype, trans, odd, entry):
    ta, tb = trans
    run_and_check(be, torch, entry, dtype, ta, tb, odd, f"staged {entry} {dtype} {trans} odd={odd}")


@pytest.mark.parametrize("dtype", HALF)
def test_staged_equals_direct(be, torch, dtype):
    rng = np.random.default_rng(stable_seed("gpu-staging-direct", dtype))
    A, B, C, alpha, beta = make_batch(torch, rng, SHAPES, dtype, False, True, True)
    C2 = [c.clone() for c in C]
    kw = dict(alpha=alpha, beta=beta, trans_b=True, backend=be)
    portgemm.plan(SHAPES, dtype, arch=be.arch(), staging=True).run(A, B, C, **kw)
    portgemm.plan(SHAPES, dtype, arch=be.arch(), staging=False).run(A, B, C2, **kw)
    torch.cuda.synchronize()
    for i, (a, b) in enumerate(zip(C, C2)):
        a, b = host64(a), host64(b)
        tol = 4 * {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}[dtype] * (1 + np.abs(b))
        assert (np.abs(a - b) <= tol).all(), f"GEMM {i}"


def test_poisoned_workspace_is_never_read_past_the_copy(be, torch):
    """The unbound call's workspace filled with NaN bits between calls: the next call's
    copy rewrites what the GEMMs read (padding included), so results stay finite."""
    from portgemm.backends.split import _STATES
    dtype = "float16"
    rng = np.random.default_rng(stable_seed("gpu-staging-poison"))
    A, B, C, alpha, beta = make_batch(torch, rng, SHAPES, dtype, False, False, True)
    h = [[host64(x) for x in X] for X in (A, B, C)]
    C0 = [c.clone() for c in C]
    p = portgemm.plan(SHAPES, dtype, arch=be.arch(), staging=True)
    kw = dict(alpha=alpha, beta=beta, backend=be)
    p.run(A, B, C, **kw)
    torch.cuda.synchronize()
    states = list(_STATES[p].values())
    assert states
    for st in states:
        st["ws"].fill(0xFF)   # 0xFFFF: a NaN in float16 and bfloat16
    be.cp.cuda.Device().synchronize()
    for c, c0 in zip(C, C0):
        c.copy_(c0)
    p.run(A, B, C, **kw)
    torch.cuda.synchronize()
    check([host64(c) for c in C], *h, alpha, beta, False, False, dtype, "poisoned workspace")


def _cupy_case(cp, rng, shapes):
    """float16 CuPy operands with odd leading dimensions, C NaN."""
    def odd_view(rows, cols):
        buf = cp.zeros((max(rows, 1), cols + (1 if cols % 2 == 0 else 2)), cp.float16)
        buf[:rows, :cols] = cp.asarray(rng.standard_normal((rows, cols)).astype(np.float16))
        return buf[:rows, :cols]
    A = [odd_view(m, k) for m, n, k in shapes]
    B = [odd_view(k, n) for m, n, k in shapes]
    C = [cp.full((m, n), cp.nan, cp.float16) for m, n, k in shapes]
    return A, B, C


def _check_cupy(cp, A, B, C, alpha, what):
    got = [cp.asnumpy(c).astype(np.float64) for c in C]
    hA = [cp.asnumpy(a).astype(np.float64) for a in A]
    hB = [cp.asnumpy(b).astype(np.float64) for b in B]
    zeros = [np.zeros(g.shape) for g in got]
    check(got, hA, hB, zeros, np.full(len(A), alpha), np.zeros(len(A)), False, False,
          "float16", what)


def test_bound_staged_call_in_a_cuda_graph(cuda, cp):
    shapes = [(129, 127, 70), (64, 33, 257), (17, 200, 45), (20, 24, 0)]
    rng = np.random.default_rng(51)
    A, B, C = _cupy_case(cp, rng, shapes)
    p = portgemm.plan(shapes, "float16", arch=cuda.arch(), staging=True)
    assert p.staging is not None
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        call = p.bind(A, B, C, alpha=1.5, backend="cuda")
        call()   # compiles outside the capture
        graph = captured(stream, call)
    for trial in range(2):   # new inputs in the captured buffers, C poisoned, a replay
        for a in A:
            a[...] = cp.asarray(rng.standard_normal(a.shape).astype(np.float16))
        replay_over_nan(cp, stream, graph, C)
        _check_cupy(cp, A, B, C, 1.5, f"graph replay {trial}")


def test_plan_run_in_a_cuda_graph(cuda, cp):
    """After its first call a staged plan's run neither allocates nor uploads: it can be
    captured (its workspace is the plan's for that stream)."""
    shapes = [(129, 127, 70), (64, 33, 257), (17, 200, 45)]
    rng = np.random.default_rng(53)
    A, B, C = _cupy_case(cp, rng, shapes)
    p = portgemm.plan(shapes, "float16", arch=cuda.arch(), staging=True)
    replay_second_run(cp, lambda: p.run(A, B, C, backend="cuda"), C)
    _check_cupy(cp, A, B, C, 1.0, "Plan.run captured")


@pytest.mark.parametrize("dtype", HALF)
def test_packed_api_host_offsets(be, torch, forced, dtype):
    """gemm_grouped_general: packed buffers, host offsets, odd leading dimensions."""
    from portgemm.grouped import gemm_grouped_general
    rng = np.random.default_rng(stable_seed("gpu-staging-packed", dtype))
    sizes = np.array([[5, 9, 13], [160, 80, 70], [0, 4, 4], [11, 3, 0], [64, 64, 129]])
    lda, ldb, ldc = 131, 91, 83
    a_off = np.array([0, 2000, 30000, 30100, 30200])
    b_off = np.array([0, 1500, 20000, 20100, 20200])
    c_off = np.array([0, 1000, 20000, 20100, 21000])
    t = tdtype(torch, dtype)
    A = torch.from_numpy(rng.standard_normal(60000).astype(np.float32)).to(t).cuda()
    B = torch.from_numpy(rng.standard_normal(40000).astype(np.float32)).to(t).cuda()
    C = torch.full((40000,), float("nan"), dtype=t, device="cuda")
    alpha = rng.uniform(-2, 2, len(sizes))
    gemm_grouped_general(A, B, C, sizes, a_off, b_off, c_off, lda, ldb, ldc, alpha=alpha,
                         beta=0.0, backend=be)
    torch.cuda.synchronize()
    hA, hB, hC = host64(A), host64(B), host64(C)

    def view(buf, off, rows, cols, ld):
        return np.stack([buf[off + r * ld:off + r * ld + cols] for r in range(rows)]) \
            if rows else np.zeros((0, cols))
    got, As, Bs = [], [], []
    for g, (m, n, k) in enumerate(sizes):
        got.append(view(hC, c_off[g], m, n, ldc))
        As.append(view(hA, a_off[g], m, k, lda))
        Bs.append(view(hB, b_off[g], k, n, ldb))
    check(got, As, Bs, [np.zeros(x.shape) for x in got], alpha, np.zeros(len(sizes)),
          False, False, dtype, f"packed host offsets {dtype}")


@pytest.mark.parametrize("dtype", HALF)
def test_grid_batch_staged_by_the_model(be, torch, dtype):
    """The grid's 1024/512 batch of 64 (random sizes, dense operands): the default plan
    stages it by itself; its results are right."""
    from portgemm.benchmark.workloads import grid_cases
    case = next(c for c in grid_cases(0) if c.name == "1024/512 b64")
    shapes = [tuple(int(v) for v in s) for s in case.shapes]
    p = portgemm.plan(case.shapes, dtype, arch=be.arch())
    assert p.staging is not None, p.notes
    rng = np.random.default_rng(stable_seed("gpu-staging-grid", dtype))
    A, B, C, alpha, beta = make_batch(torch, rng, shapes, dtype, False, False, False)
    h = [[host64(x) for x in X] for X in (A, B, C)]
    portgemm.gemm_vbatched(A, B, C, alpha=alpha, beta=beta, backend=be)
    torch.cuda.synchronize()
    check([host64(c) for c in C], *h, alpha, beta, False, False, dtype, f"grid {dtype}")
