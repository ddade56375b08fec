"""The 16-bit wgmma kinds with aligned windows (render.WGMMA_WINDOWS; kernel: PgWgWindow,
pg_wgmma_windows) on a real sm_90 device (marker ``gpu``). The committed tables leave the
windows off, so this file switches them on for every 16-bit wgmma kind on a fresh CUDA
backend (its own compiled functions) and runs:

- every kind x dtype x transpose pair x each alignment class of tests/test_gpu_half_align
  (leading dimension 0, 4, 2 and 1 mod 8 elements, base 1 or 2 elements past a 16-byte
  boundary), and A and B of different classes (one operand aligned: its window phases are
  0), on shapes with interior tiles, ragged edges, K tails, K = 0 and M = 0, over
  NaN-poisoned C with per-GEMM alpha and beta (0 on every other GEMM);
- the device-offsets (ragged) entry point of each kind, every transpose pair, K a
  multiple of 8, even and odd.

Checked against a float64 reference of the very 16-bit inputs with the formats'
tolerance (tests/test_gpu_half.py).
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import backend_or_skip
from gpu_batches import stable_seed, trans_id
from test_gpu_half import TRANS, run_kind_and_check, torch  # noqa: F401
from test_gpu_half_align import ALIGN, check_ragged_entry, classed_batch
from portgemm.tiles import FAMILIES, WGMMA_FAMILIES

pytestmark = pytest.mark.gpu

FAMILY = {d: f for f, d in WGMMA_FAMILIES.items() if d != "float32"}
KINDS = [k.kind for k in FAMILIES["wgmma-f16"]]
SHAPES = [(130, 136, 100), (64, 128, 64), (257, 129, 96), (33, 200, 47), (128, 128, 1000),
          (7, 9, 17), (64, 64, 0), (0, 40, 24), (200, 260, 33)]
# (A's class, B's class) of ALIGN: the same for both, or one aligned and one not
PAIRS = [(a, a) for a in ALIGN] + [("ld0", "ld-odd"), ("ld-odd", "ld0"), ("ld2", "base+1")]


@pytest.fixture(scope="module")
def windowed_be():
    be = backend_or_skip("cuda")
    if be.arch().name != "sm_90":
        pytest.skip("the wgmma kinds run on sm_90 only")
    from portgemm.backends.cuda import CudaBackend
    from portgemm.kernels import render, resources
    saved = render.WGMMA_WINDOWS
    render.WGMMA_WINDOWS = set(render.WGMMA_16BIT)
    render.render.cache_clear()
    try:
        yield CudaBackend(be.cp)
    finally:
        render.WGMMA_WINDOWS = saved
        render.render.cache_clear()
        resources._registered.clear()   # the windowed variants' figures: forget them


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("trans", TRANS, ids=trans_id)
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
def test_every_kind_and_alignment(windowed_be, torch, dtype, kind, trans, pair):
    ta, tb = trans
    seed = stable_seed("wg-windows", dtype, kind, ta, tb, *pair)
    rng = np.random.default_rng(seed)
    A, B, C, alpha, beta = classed_batch(torch, rng, SHAPES, dtype, ta, tb, *pair)
    run_kind_and_check(windowed_be, torch, SHAPES, A, B, C, alpha, beta, dtype, kind, ta, tb,
                       f"seed {seed} {dtype} {kind} {ta}{tb} {pair}", FAMILY[dtype])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("trans", TRANS, ids=trans_id)
@pytest.mark.parametrize("K", [40, 42, 37], ids=["k40", "k42", "k37"])
def test_ragged_entry(windowed_be, torch, monkeypatch, dtype, kind, trans, K):
    """The device-offsets entry point forced onto each windowed kind
    (test_gpu_half_align's batch): K even or odd puts A's rows (and B^T's) off 16 bytes."""
    k = next(t for t in FAMILIES[FAMILY[dtype]] if t.kind == kind)
    check_ragged_entry(windowed_be, torch, monkeypatch, dtype, k, trans, K)
