"""GPU backends on a real device (marker ``gpu``): every test runs on each backend whose
device is present ("cuda", "hip") and skips otherwise; a few CUDA-only ones (CUDA graphs,
PyTorch interop, the driver's occupancy calculator) say so.

Every check draws fresh random inputs, poisons C with NaN when beta == 0 (so an unwritten
or NaN-leaking element fails), and compares against a float64 host reference."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import portgemm

from conftest import backend_or_skip
from gpu_batches import (EDGE_SIZES, TOL, captured, make_host_batch, max_rel_error, random_shapes,
                         reference, stable_seed)

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", params=["cuda", "hip"])
def be(request):
    return backend_or_skip(request.param)


def run_case(be, shapes, dtype, trans_a=False, trans_b=False, strategy=None, mode=None,
             strided=False, per_gemm_scalars=True, use_plan=False):
    # Seeded from the case itself, so a failure reproduces alone and in any test order.
    seed = stable_seed(np.asarray(shapes).tobytes(), dtype, trans_a, trans_b, strategy, mode,
                       strided, per_gemm_scalars, use_plan)
    rng = np.random.default_rng(seed)
    hA, hB, hC = make_host_batch(rng, shapes, dtype, trans_a, trans_b, strided)
    batch = len(shapes)
    if per_gemm_scalars:
        alpha = rng.uniform(-2, 2, batch)
        beta = np.where(rng.random(batch) < 0.5, 0.0, rng.uniform(-2, 2, batch))
    else:
        alpha, beta = np.full(batch, 1.5), np.zeros(batch)
    for i in range(batch):
        if beta[i] == 0:
            hC[i][...] = np.nan  # must be overwritten, never read
    ref = reference(hA, hB, hC, alpha, beta, trans_a, trans_b)
    dA, dB, dC = ([_to_device(be, x, strided) for x in xs] for xs in (hA, hB, hC))
    if use_plan or mode is not None:
        p = portgemm.plan(shapes, dtype=dtype, arch=be.arch(), strategy=strategy, mode=mode)
        p.run(dA, dB, dC, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b, backend=be)
    else:
        portgemm.gemm_vbatched(dA, dB, dC, alpha=alpha, beta=beta, trans_a=trans_a,
                               trans_b=trans_b, backend=be, strategy=strategy)
    got = [be.to_host(c) for c in dC]
    err = max_rel_error(got, ref)
    assert err < TOL[dtype], f"max relative error {err:.3e} (seed {seed})"
    return err


def _to_device(be, x, strided):
    if not strided:
        return be.to_device(x)
    # The same padded view on the device: copy the host view's whole buffer, slice alike.
    r, c = x.shape
    buf = be.to_device(x.base)
    if not hasattr(buf, "__getitem__"):
        pytest.skip(f"{be.name}: device arrays without slicing (install CuPy for this backend)")
    return buf[1::2, 3:3 + c]


@pytest.mark.parametrize("strategy", ["wavefront-tlp", "workgroup-tlp", "coordinated", "magma"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("trans", [(False, False), (False, True), (True, False), (True, True)])
def test_strategies_dtypes_transposes(be, strategy, dtype, trans):
    seed = stable_seed(strategy, dtype, trans)
    rng = np.random.default_rng(seed)
    shapes = random_shapes(rng, 60, 300, 200)
    run_case(be, shapes, dtype, *trans, strategy=strategy)


@pytest.mark.parametrize("mode", ["fused", "per-kind"])
@pytest.mark.parametrize("strategy", ["wavefront-tlp", "workgroup-tlp"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_execution_modes(be, mode, strategy, dtype):
    rng = np.random.default_rng(7)
    shapes = random_shapes(rng, 100, 256, 256)
    run_case(be, shapes, dtype, strategy=strategy, mode=mode)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("strategy", ["wavefront-tlp", "coordinated", "magma"])
def test_edge_sizes(be, dtype, strategy):
    shapes = np.array(list(itertools.product(EDGE_SIZES, EDGE_SIZES, EDGE_SIZES)))
    run_case(be, shapes, dtype, strategy=strategy, trans_a=True)
    run_case(be, shapes, dtype, strategy=strategy)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("trans", [(False, False), (True, True)])
def test_strided_views(be, dtype, trans):
    rng = np.random.default_rng(11)
    shapes = random_shapes(rng, 40, 130, 70)
    run_case(be, shapes, dtype, *trans, strided=True)


def test_batch_of_one(be):
    for shape in ([[1, 1, 1]], [[1000, 3, 517]], [[64, 64, 64]]):
        for dtype in ("float32", "float64"):
            run_case(be, np.array(shape), dtype)


def test_batch_of_20000(be):
    rng = np.random.default_rng(3)
    shapes = random_shapes(rng, 20000, 40, 40)
    run_case(be, shapes, "float32", strategy="wavefront-tlp")
    run_case(be, shapes, "float32", strategy="magma")


def test_torch_and_dlpack_inputs(cuda, cp):  # CUDA only
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    shapes = random_shapes(rng, 20, 100, 100)
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    ref = reference(hA, hB, hC, np.ones(20), np.zeros(20), False, False)
    tA = [torch.from_numpy(a).cuda() for a in hA]
    tB = [torch.from_numpy(b).cuda() for b in hB]
    tC = [torch.full(c.shape, float("nan"), device="cuda") for c in hC]
    portgemm.gemm_vbatched(tA, tB, tC, backend="cuda")  # __cuda_array_interface__
    torch.cuda.synchronize()
    assert max_rel_error([c.cpu().numpy() for c in tC], ref) < 1e-5

    class DLPackOnly:  # exposes DLPack and nothing else
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, **kw):
            return self.t.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    tC2 = [torch.full(c.shape, float("nan"), device="cuda") for c in hC]
    portgemm.gemm_vbatched([DLPackOnly(a) for a in tA], [DLPackOnly(b) for b in tB],
                           [DLPackOnly(c) for c in tC2], backend="cuda")
    torch.cuda.synchronize()
    assert max_rel_error([c.cpu().numpy() for c in tC2], ref) < 1e-5


def test_plan_run_is_graph_capturable(cuda, cp):  # CUDA only
    """After the first call, plan.run neither allocates nor synchronises: capture it in
    a CUDA graph, change the inputs in place, replay, and check the new result."""
    rng = np.random.default_rng(9)
    shapes = random_shapes(rng, 50, 200, 100)
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    dA, dB = [cp.asarray(a) for a in hA], [cp.asarray(b) for b in hB]
    dC = [cp.full(c.shape, cp.nan, dtype=cp.float32) for c in hC]
    alpha = rng.uniform(-1, 1, 50)
    p = portgemm.plan(shapes, dtype="float32", arch=cuda.arch())
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        p.run(dA, dB, dC, alpha=alpha, backend="cuda")  # first call: uploads
        graph = captured(stream, lambda: p.run(dA, dB, dC, alpha=alpha, backend="cuda"))
    for trial in range(2):
        hA = [(rng.random(a.shape) - 0.5).astype(np.float32) for a in hA]
        for d, h in zip(dA, hA):
            d.set(h)
        for c in dC:
            c.fill(cp.nan)
        with stream:
            graph.launch()
        stream.synchronize()
        ref = reference(hA, hB, hC, alpha, np.zeros(50), False, False)
        assert max_rel_error([cp.asnumpy(c) for c in dC], ref) < 1e-5


def test_occupancy_model_matches_driver(cuda):  # CUDA only
    """Our exact model agrees with cudaOccupancyMaxActiveBlocksPerMultiprocessor for every
    catalogue variant, using the compiled kernels' real attributes."""
    from portgemm.kernels.variants import catalogue_variants
    from portgemm.occupancy import occupancy
    from portgemm.occupancy.resources import KernelResources
    arch = cuda.arch()
    rows = []
    for v in catalogue_variants(trans=((False, False), (True, True))):
        fn = cuda.function(v)
        attrs = cuda.function_attributes(fn)
        res = KernelResources(registers=attrs["num_regs"], shared_bytes=attrs["shared_size_bytes"])
        ours = occupancy(arch, v.threads, res).active_workgroups
        driver = cuda.max_active_blocks(fn, v.threads)
        rows.append((v.name, attrs["num_regs"], attrs["shared_size_bytes"], ours, driver))
    bad = [r for r in rows if r[3] != r[4]]
    assert not bad, f"model != driver for {bad}"


def test_resources_registered_for_the_planner(be):
    from portgemm.kernels import resources as kres
    from portgemm.kernels.variants import variants_for
    from portgemm.tiles import ZHANG2025
    v = variants_for(ZHANG2025, "fused", "float32")[0]
    be.function(v)
    r = kres.lookup(be.arch(), v)
    # what the backend measured on this device, not the recorded file or an estimate
    assert r is kres._registered[(be.arch().name, v.name)] and r.registers > 0
