"""float16 / bfloat16 copy widths on a real device (marker ``gpu``). The MMA kinds stage
each operand by the widest copy its rows allow (kernel: pg_align_of): 16-byte cp.async
where the base address and leading dimension are multiples of 8 elements, 4-byte
cp.async where they are even, and element copies otherwise. Every kind of the 16-bit
families x every transpose pair x each alignment class (leading dimension 0, 4, 2 and 1
mod 8 elements, and a base address 2 or 4 bytes past a 16-byte boundary with an aligned
leading dimension), on shapes with whole interior tiles and ragged edges, over
NaN-poisoned C; and the ragged (device-offsets) entry point of every 16-bit kind, forced,
with aligned, even and odd K. Tolerances and the reference: tests/test_gpu_half.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from gpu_batches import stable_seed, trans_id
from test_gpu_half import (TRANS, be, check, host64, run_kind_and_check, tdtype,  # noqa: F401
                           torch)
from portgemm.tiles import FAMILIES

pytestmark = pytest.mark.gpu

SHAPES = [(130, 136, 100), (64, 64, 64), (257, 129, 96), (33, 200, 47), (128, 128, 128)]
# (leading dimension mod 8 elements, base offset in elements): which copy each takes
ALIGN = {"ld0": (0, 0), "ld4": (4, 0), "ld2": (2, 0), "ld-odd": (1, 0), "base+1": (0, 1),
         "base+2": (0, 2)}


def operand(torch, rng, rows, cols, dtype, ld_mod, off):
    """A (rows, cols) view with leading dimension = ld_mod mod 8 (at least cols) starting
    ``off`` elements past the 16-byte aligned start of its buffer."""
    ld = cols + (ld_mod - cols) % 8
    flat = torch.zeros(rows * ld + off, dtype=tdtype(torch, dtype), device="cuda")
    view = flat[off:].view(rows, ld)[:, :cols]
    vals = torch.from_numpy(rng.standard_normal((rows, cols)).astype(np.float32))
    view.copy_(vals.to(flat.dtype))
    assert view.stride(0) == ld and view.data_ptr() % 16 == (2 * off) % 16
    return view


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("kind", [k.kind for k in FAMILIES["portgemm-f16"]])
@pytest.mark.parametrize("trans", TRANS, ids=trans_id)
@pytest.mark.parametrize("align", list(ALIGN))
def test_every_copy_width(be, torch, dtype, kind, trans, align):
    ta, tb = trans
    seed = stable_seed("half-align", dtype, kind, ta, tb, align)
    rng = np.random.default_rng(seed)
    A, B, C, alpha, beta = classed_batch(torch, rng, SHAPES, dtype, ta, tb, align, align)
    run_kind_and_check(be, torch, SHAPES, A, B, C, alpha, beta, dtype, kind, ta, tb,
                       f"seed {seed} {dtype} {kind} {ta}{tb} {align}")


def classed_batch(torch, rng, shapes, dtype, ta, tb, a_class, b_class):
    """A, B, C (C of B's class) of the ALIGN classes named, per-GEMM alpha, and beta 0
    (C poisoned with NaN: it must be overwritten, never read) on every other GEMM."""
    A, B, C = [], [], []
    for m, n, k in shapes:
        A.append(operand(torch, rng, *((k, m) if ta else (m, k)), dtype, *ALIGN[a_class]))
        B.append(operand(torch, rng, *((n, k) if tb else (k, n)), dtype, *ALIGN[b_class]))
        C.append(operand(torch, rng, m, n, dtype, *ALIGN[b_class]))
    batch = len(shapes)
    alpha = rng.uniform(-2, 2, batch)
    beta = np.where(np.arange(batch) % 2 == 0, 0.0, rng.uniform(-2, 2, batch))
    for c, b in zip(C, beta):
        if b == 0:
            c.fill_(float("nan"))
    return A, B, C, alpha, beta


def _ragged_cases():
    from portgemm.grouped.ragged_kind import candidate_kinds
    return [(dt, k) for dt in ("float16", "bfloat16") for k in candidate_kinds(dt)]


@pytest.mark.parametrize("dtype, kind", _ragged_cases(), ids=lambda x: getattr(x, "kind", x))
@pytest.mark.parametrize("trans", TRANS, ids=trans_id)
@pytest.mark.parametrize("K", [40, 42, 37], ids=["k40", "k42", "k37"])
def test_ragged_entry_every_kind(be, torch, monkeypatch, dtype, kind, trans, K):
    """Each 16-bit kind's device-offsets entry point, forced (as the fp32 / fp64 test in
    test_grouped_gpu.py): empty groups, groups shorter and longer than a tile, rows past
    the last group left untouched, K a multiple of 8, even, and odd (A's and B^T's
    leading dimension, so every copy width runs)."""
    check_ragged_entry(be, torch, monkeypatch, dtype, kind, trans, K)


def check_ragged_entry(be, torch, monkeypatch, dtype, kind, trans, K):
    """test_ragged_entry_every_kind's batch through kind ``kind`` on backend ``be``."""
    from portgemm.grouped import gemm_grouped, ragged
    ta, tb = trans
    monkeypatch.setattr(ragged, "choose_kind", lambda *a: kind)
    ragged._kinds.clear()
    ragged._calls.clear()
    try:
        seed = stable_seed("half-ragged-kind", dtype, kind.kind, ta, tb, K)
        rng = np.random.default_rng(seed)
        sizes = [0, 3, kind.tm + 5, 0, 2 * kind.tm, 1, 3 * kind.tm - 1]
        ends = np.cumsum(sizes)
        G, N, T = len(sizes), kind.tn + 9, int(ends[-1]) + 7
        t = tdtype(torch, dtype)

        def rand(*shape):
            return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(t).cuda()
        A = rand(K, T) if ta else rand(T, K)
        B = rand(G, N, K) if tb else rand(G, K, N)
        C = torch.full((T, N), float("nan"), dtype=t, device="cuda")
        alpha = rng.uniform(-2, 2, G)
        gemm_grouped(A, B, C, torch.from_numpy(ends.astype(np.int32)).cuda(), alpha=alpha,
                     beta=0.0, trans_a=ta, trans_b=tb, backend=be)
        torch.cuda.synchronize()
        hA = host64(A.T if ta else A)
        hB = [host64(B[g].T if tb else B[g]) for g in range(G)]
        hC = host64(C)
        starts = np.concatenate([[0], ends[:-1]])
        check([hC[s:e] for s, e in zip(starts, ends)], [hA[s:e] for s, e in zip(starts, ends)],
              hB, [np.zeros((e - s, N)) for s, e in zip(starts, ends)], alpha, np.zeros(G),
              False, False, dtype, f"seed {seed} {dtype} ragged {kind.kind} {ta}{tb} K={K}")
        assert np.isnan(hC[int(ends[-1]):]).all(), "rows past offs[-1] were written"
    finally:
        ragged._kinds.clear()
        ragged._calls.clear()
