"""The one-closure launches on the device (CudaBackend._lean): a bound call, a reuse hit
and a layout-cache hit of CuPy arrays each launch on CuPy's stream current at the call.
Inputs are written on a non-blocking stream behind a long spin: a launch on any other
stream would race past them and give a wrong result."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm
from gpu_batches import make_host_batch, max_rel_error, random_shapes, reference

pytestmark = pytest.mark.gpu

_SPIN = r'''extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}'''


@pytest.mark.parametrize("path", ["bound", "reuse hit", "layout hit"])
def test_lean_launches_follow_cupys_current_stream(cuda, cp, path):
    from portgemm import api, reuse
    reuse.clear()
    api._layouts.clear()
    spin = cp.RawKernel(_SPIN, "spin")
    rng = np.random.default_rng(61)
    shapes = random_shapes(rng, 8, 100, 70)
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    dA = [cp.asarray(x) for x in hA]
    A = [cp.zeros(x.shape, cp.float32) for x in hA]
    B = [cp.asarray(x) for x in hB]
    C = [cp.full(c.shape, cp.nan, cp.float32) for c in hC]
    bound = portgemm.plan(shapes, "float32", arch=cuda.arch()).bind(A, B, C, backend="cuda")
    side = cp.cuda.Stream(non_blocking=True)
    zero = np.zeros(len(shapes))
    for i in range(4):
        scale = float(i + 1)
        with side:
            for c in C:
                c.fill(cp.nan)
            spin((1,), (1,), (np.int64(200_000_000),))   # the inputs land late here
            for a, d in zip(A, dA):
                cp.multiply(d, scale, out=a)
            if path == "bound":
                bound()
            elif path == "reuse hit":
                portgemm.gemm_vbatched(A, B, C, backend="cuda")
            else:   # new array objects over the same memory: layout hits from the second
                portgemm.gemm_vbatched([a.view() for a in A], [b.view() for b in B],
                                       [c.view() for c in C], backend="cuda")
        side.synchronize()
        ref = reference([scale * h for h in hA], hB, hC, np.ones(len(shapes)), zero, False,
                        False)
        assert max_rel_error([cp.asnumpy(c) for c in C], ref) < 1e-5, f"call {i}"
    if path == "reuse hit":
        assert reuse.cache_info()["hits"] >= 2
