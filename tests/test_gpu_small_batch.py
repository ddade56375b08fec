"""The small-batch path and the torch reuse check on a CUDA device (marker ``gpu``):
batches either side of small_batch.SMALL_BATCH, CuPy and torch, against a float64
reference over NaN-poisoned C on every path (full, layout-cache hit, reuse hit); the
same typed error for an aliased C on either side, nothing written; a square torch C
transposed in place seen by the contiguous-rows check."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm
from portgemm.small_batch import SMALL_BATCH

from gpu_batches import make_host_batch, max_rel_error, random_shapes, reference

pytestmark = pytest.mark.gpu
SIZES = (1, 2, SMALL_BATCH, SMALL_BATCH + 1, 2 * SMALL_BATCH + 5)


def _lib(cp, lib):
    if lib == "torch":
        torch = pytest.importorskip("torch")
        return (lambda x: torch.from_numpy(np.ascontiguousarray(x)).cuda(),
                lambda x: x.cpu().numpy(), torch.cuda.synchronize)
    return cp.asarray, cp.asnumpy, cp.cuda.Device().synchronize


@pytest.mark.parametrize("lib", ["cupy", "torch"])
@pytest.mark.parametrize("n", SIZES)
def test_every_path_gives_the_reference_either_side_of_the_threshold(cuda, cp, lib, n):
    from portgemm import reuse
    to_dev, to_host, sync = _lib(cp, lib)
    reuse.clear()
    rng = np.random.default_rng(n)
    shapes = random_shapes(rng, n, 90, 70)
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    alpha = rng.uniform(-2, 2, n)
    A, B = [to_dev(x) for x in hA], [to_dev(x) for x in hB]
    ref = reference(hA, hB, hC, alpha, np.zeros(n), False, False)
    C = [to_dev(np.full_like(c, np.nan)) for c in hC]
    for call in range(4):   # full, full (entry made), reuse hit, new views (layout hit)
        for c in C:
            c[...] = float("nan")
        args = (A, B, C) if call < 3 else tuple([x[...] for x in X] for X in (A, B, C))
        portgemm.gemm_vbatched(*args, alpha=alpha, backend="cuda")
        sync()
        assert max_rel_error([to_host(c) for c in C], ref) < 1e-5, f"call {call}"


@pytest.mark.parametrize("n", SIZES[1:])
def test_aliased_outputs_get_the_same_error_either_side_and_nothing_is_written(cuda, cp, n):
    rng = np.random.default_rng(40 + n)
    shapes = np.tile([8, 8, 8], (n, 1))
    hA, hB, _ = make_host_batch(rng, shapes, "float32")
    A, B = [cp.asarray(x) for x in hA], [cp.asarray(x) for x in hB]
    buf = cp.full((8, 8 * n + 4), 7.0, cp.float32)
    C = [buf[:, 8 * i:8 * i + 8] for i in range(n)]
    C[n - 1] = buf[:, 8 * (n - 2) + 4:8 * (n - 2) + 12]   # half over C[n - 2]
    with pytest.raises(portgemm.LayoutError, match="C overlaps C") as err:
        portgemm.gemm_vbatched(A, B, C, beta=1.0, backend="cuda")
    assert err.value.gemm == n - 2
    cp.cuda.Device().synchronize()
    assert bool((buf == 7.0).all())


def test_a_square_torch_c_transposed_in_place_is_seen(cuda, cp):
    torch = pytest.importorskip("torch")
    from portgemm import reuse
    reuse.clear()
    rng = np.random.default_rng(5)
    shapes = np.array([[16, 16, 8], [5, 7, 3]])
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    A, B = [torch.from_numpy(x).cuda() for x in hA], [torch.from_numpy(x).cuda() for x in hB]
    C = [torch.zeros(c.shape, device="cuda") for c in hC]
    for _ in range(3):
        portgemm.gemm_vbatched(A, B, C, backend="cuda")
    assert reuse.cache_info()["hits"] == 1
    C[0].t_()   # same pointer, shape and dtype; strides (1, 16): column-major
    with pytest.raises(portgemm.LayoutError):
        portgemm.gemm_vbatched(A, B, C, backend="cuda")
    C[0].t_()
    C[0].fill_(float("nan"))
    portgemm.gemm_vbatched(A, B, C, backend="cuda")
    torch.cuda.synchronize()
    ref = reference(hA, hB, hC, np.ones(2), np.zeros(2), False, False)
    assert max_rel_error([c.cpu().numpy() for c in C], ref) < 1e-5
