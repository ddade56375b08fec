"""The Hopper wgmma kinds (tiles.WGMMA_FAMILIES, sm_90 only) on a real device (marker
``gpu``): every kind alone, every transpose pair, edge sizes (not multiples of 64 or 16),
odd leading dimensions (the narrow copy paths), per-GEMM alpha/beta, beta = 0 over NaN,
alpha = 0, K = 0 and M = 0 groups; GEMMs spanning many k steps; the default plan; and the
packed ragged entry point with device offsets forced onto each kind. Checked against a
float64 reference of the very 16-bit inputs with the formats' tolerance, as
tests/test_gpu_half.py states it (its helpers are reused here).
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import backend_or_skip
from gpu_batches import stable_seed, trans_id
from test_gpu_half import (TRANS, check, check_default_plan, check_packed_ragged, host64,
                           kind_plan, make_batch)
from portgemm.tiles import FAMILIES, WGMMA_FAMILIES

pytestmark = pytest.mark.gpu

FAMILY = {d: f for f, d in WGMMA_FAMILIES.items()}
KINDS = [k.kind for k in FAMILIES["wgmma-f16"]]
# edges of every kind (64 / 128 rows and columns, BK 32), an empty GEMM, K = 0, and K
# over several pipeline stages with a tail
EDGE = [(1, 1, 1), (7, 9, 17), (64, 128, 32), (33, 65, 31), (129, 127, 70), (255, 130, 257),
        (64, 64, 0), (0, 40, 24), (100, 3, 5), (200, 260, 1000)]


@pytest.fixture(scope="module")
def be():
    be = backend_or_skip("cuda")
    if be.arch().name != "sm_90":
        pytest.skip("the wgmma kinds run on sm_90 only")
    return be


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("trans", TRANS, ids=trans_id)
@pytest.mark.parametrize("odd", [False, True], ids=["aligned", "odd-ld"])
def test_every_wgmma_kind(be, torch, dtype, kind, trans, odd):
    ta, tb = trans
    seed = stable_seed("wgmma-kind", dtype, kind, ta, tb, odd)
    rng = np.random.default_rng(seed)
    A, B, C, alpha, beta = make_batch(torch, rng, EDGE, dtype, ta, tb, odd)
    h = [[host64(x) for x in X] for X in (A, B, C)]
    plan = kind_plan(EDGE, dtype, be.arch(), kind, FAMILY[dtype])
    plan.run(A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=be)
    torch.cuda.synchronize()
    check([host64(c) for c in C], *h, alpha, beta, ta, tb, dtype,
          f"seed {seed} {dtype} {kind} {ta}{tb} odd={odd}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_default_plan_large_batch(be, torch, dtype):
    """A batch of large GEMMs with 16-byte aligned rows through the default plan, which
    runs wgmma kinds for them on sm_90, every transpose pair."""
    import portgemm
    seed = stable_seed("wgmma-default", dtype)
    rng = np.random.default_rng(seed)
    shapes = [tuple(int(v) for v in s) for s in
              np.stack([rng.integers(25, 88, 12) * 8, rng.integers(25, 88, 12) * 8,
                        rng.integers(13, 112, 12) * 8], axis=1)]
    used = portgemm.plan(np.array(shapes), dtype, arch=be.arch())
    assert any(k.family == FAMILY[dtype] and n for k, n in zip(used.kinds, used.tile_counts()))
    check_default_plan(be, torch, rng, shapes, dtype, f"seed {seed}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("kind", KINDS)
def test_packed_ragged_device_offsets(be, torch, dtype, kind, monkeypatch):
    """The ragged (device offsets) entry point forced onto each wgmma kind: empty groups,
    rows not a multiple of the tile, an odd ldc, per-group alpha, beta = 0 over NaN."""
    from portgemm.grouped import ragged
    k = next(t for t in FAMILIES[FAMILY[dtype]] if t.kind == kind)
    monkeypatch.setattr(ragged, "choose_kind", lambda *a, **kw: k)
    monkeypatch.setattr(ragged, "_kinds", {})
    check_packed_ragged(be, torch, dtype, True, stable_seed("wgmma-ragged", dtype, kind), kind)
