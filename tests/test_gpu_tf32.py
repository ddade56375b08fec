"""fp32 precision modes "tf32" and "3xtf32" on a real device (marker ``gpu``): every kind
of the TF32 families (tiles.TF32_FAMILIES: the m16n8k8 tensor-core kinds and the IEEE
SIMT kind) alone, every transpose pair, edge sizes (not multiples of 16 or 8), odd
leading dimensions, per-GEMM alpha/beta, beta = 0 over NaN C, alpha = 0, K = 0; the
default plan through gemm_vbatched; the packed entry points (gemm_grouped with host and
device offsets, gemm_grouped_general). Operands are float32 torch tensors on the GPU;
the reference is float64 over the very fp32 inputs.

Tolerance, elementwise, from the formats (u32 = 2^-24, fp32's unit roundoff; |A| |B|
the product of the absolute matrices, M = |alpha| |A| |B| + |beta| |C0|):

  tf32:   each input rounded to TF32 (unit roundoff 2^-11), so a product is off by at
          most (2 2^-11 + 2^-22) of |a| |b|; the product of two TF32 values is exact in
          fp32 (11 + 11 significand bits), the K-term sum and alpha, beta add (K + 2)
          roundings of u32, the store one more of |ref|:
            |C - ref| <= 2 ((2^-10 + 2^-22) |alpha| |A| |B| + (K + 2) u32 M + u32 |ref|)
  3xtf32: x = big + small + e, |e| < 2^-21 |x| (small = x - big, below 2^-11 |x|, read
          by the MMA truncated to TF32's 11 bits), and the dropped small*small term is
          below 2^-22 |a| |b|, so a product is off by less than 5 2^-22 of |a| |b|
          (< 2^-19); three MMAs per product add 3 K roundings:
            |C - ref| <= 2 (2^-19 |alpha| |A| |B| + (3 K + 2) u32 M + u32 |ref|)
The factor 2: slack for the reference's own order of summation and for the tensor
cores' accumulation, which is not IEEE round-to-nearest in every step. The SIMT kind
(IEEE fp32) meets both bounds.
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import backend_or_skip
from gpu_batches import (TRANS, check_packed_ragged, check_within, stable_seed, torch_batch,
                         torch_operand, trans_id)
from gpu_batches import torch_host64 as host64
from portgemm.tiles import FAMILIES, FAMILY_ARCHS, family_builds_for, tile
from portgemm.tuning.model import one_kind_plan

pytestmark = pytest.mark.gpu

U32 = 2.0 ** -24
FAMILY = {"tf32": "portgemm-tf32", "3xtf32": "portgemm-3xtf32"}
PRODUCT_ERR = {"tf32": 2.0 ** -10 + 2.0 ** -22, "3xtf32": 2.0 ** -19}
SUM_TERMS = {"tf32": 1, "3xtf32": 3}     # MMAs per product: roundings per k
EDGE = [(1, 1, 1), (7, 9, 17), (16, 8, 8), (33, 65, 31), (129, 127, 70), (255, 130, 257),
        (64, 64, 0), (100, 3, 5), (130, 260, 40)]


@pytest.fixture(scope="module")
def be():
    return backend_or_skip("cuda")


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def operand(torch, rng, rows, cols, odd):
    """A (rows, cols) float32 view of a CUDA tensor; ``odd``: an odd leading dimension."""
    return torch_operand(torch, rng, rows, cols, torch.float32, odd)


def tolerance(precision):
    """The module docstring's bound for ``precision``, as check_within takes it."""
    def tol(a, b, c0, alpha, beta, ref):
        ab = abs(alpha) * (np.abs(a) @ np.abs(b))
        mag = ab + (abs(beta) * np.abs(c0) if beta != 0 else 0.0)
        return 2 * (PRODUCT_ERR[precision] * ab
                    + (SUM_TERMS[precision] * a.shape[1] + 2) * U32 * mag + U32 * np.abs(ref))
    return tol


def check(got, A, B, C0, alpha, beta, trans_a, trans_b, precision, what):
    check_within(got, A, B, C0, alpha, beta, trans_a, trans_b, tolerance(precision), what)


def make_batch(torch, rng, shapes, trans_a, trans_b, odd):
    return torch_batch(torch, rng, shapes, torch.float32, trans_a, trans_b, odd)


def kind_plan(shapes, family, arch, kind):
    """A per-kind plan tiling every GEMM with one kind of ``family``."""
    return one_kind_plan(shapes, tile(f"{family}.{kind}"), "float32", arch)


# every kind of the modes' families, and of the wgmma family weighed with 3xtf32's on sm_90
KIND_FAMILIES = [*((p, f) for p, f in FAMILY.items()), ("3xtf32", "wgmma-3xtf32")]


@pytest.mark.parametrize("precision,family,kind", [(p, f, k.kind) for p, f in KIND_FAMILIES
                                                    for k in FAMILIES[f]])
@pytest.mark.parametrize("trans", TRANS, ids=trans_id)
@pytest.mark.parametrize("odd", [False, True], ids=["aligned", "odd-ld"])
def test_every_tf32_kind(be, torch, precision, family, kind, trans, odd):
    if not family_builds_for(family, be.arch().name):
        pytest.skip(f"{family} is built for {FAMILY_ARCHS[family]} only")
    ta, tb = trans
    seed = stable_seed("tf32-kind", precision, family, kind, ta, tb, odd)
    rng = np.random.default_rng(seed)
    # EDGE, and long K (many of the wgmma kinds' 32-deep split stages, summed in fp32)
    shapes = EDGE + [(70, 150, 1000)]
    A, B, C, alpha, beta = make_batch(torch, rng, shapes, ta, tb, odd)
    h = [[host64(x) for x in X] for X in (A, B, C)]
    plan = kind_plan(shapes, family, be.arch(), kind)
    assert plan.precision == precision
    plan.run(A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=be)
    torch.cuda.synchronize()
    check([host64(c) for c in C], *h, alpha, beta, ta, tb, precision,
          f"seed {seed} {precision} {kind} {ta}{tb} odd={odd}")


def nan_framed(torch, rng, rows, cols, ld, start):
    """A (rows, cols) float32 view with leading dimension ``ld`` that starts ``start``
    elements into its own CUDA buffer and ends at the buffer's end, every element of the
    buffer outside the view NaN: a copy that misplaces a row, or reads a gap, a byte
    before the view or past its end into a result, makes that result NaN."""
    n = start + (rows - 1) * ld + cols if rows and cols else start + 1
    flat = torch.full((n,), float("nan"), dtype=torch.float32, device="cuda")
    view = flat.as_strided((rows, cols), (ld, 1), start)
    vals = rng.standard_normal((rows, cols)).astype(np.float32)
    view.copy_(torch.from_numpy(vals).cuda())
    return view


@pytest.mark.parametrize("precision,family,kind", [(p, f, k.kind) for p, f in KIND_FAMILIES
                                                    for k in FAMILIES[f]])
@pytest.mark.parametrize("trans", TRANS, ids=trans_id)
def test_unaligned_rows_in_windows(be, torch, precision, family, kind, trans):
    """Rows that start off 16-byte boundaries (PgTf32Stage's aligned windows, and the
    element copies of the slices whose windows would leave the matrix): leading
    dimensions of every residue mod 4, bases 0-3 elements past a boundary, NaN around
    and between the rows; sizes whose tiles have whole inside slices (K and the rows
    past one stage) and edges."""
    if not family_builds_for(family, be.arch().name):
        pytest.skip(f"{family} is built for {FAMILY_ARCHS[family]} only")
    ta, tb = trans
    seed = stable_seed("tf32-windows", precision, family, kind, ta, tb)
    rng = np.random.default_rng(seed)
    shapes = [(130, 200, 97), (64, 128, 256), (33, 70, 65), (257, 129, 200), (5, 7, 3)]
    A, B, C, h = [], [], [], ([], [], [])
    for g, (m, n, k) in enumerate(shapes):
        for X, hx, (r, c) in ((A, h[0], (k, m) if ta else (m, k)),
                              (B, h[1], (n, k) if tb else (k, n))):
            X.append(nan_framed(torch, rng, r, c, c + (g % 4) + 1, (g + len(X)) % 4))
            hx.append(host64(X[-1]))
        C.append(operand(torch, rng, m, n, False))
        h[2].append(host64(C[-1]))
    alpha = rng.uniform(-2, 2, len(shapes))
    beta = rng.uniform(-2, 2, len(shapes))
    plan = kind_plan(shapes, family, be.arch(), kind)
    plan.run(A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=be)
    torch.cuda.synchronize()
    check([host64(c) for c in C], *h, alpha, beta, ta, tb, precision,
          f"seed {seed} {precision} {kind} {ta}{tb} windows")


@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
def test_tf32_is_really_tf32(be, torch, precision):
    """The tensor-core kinds round the inputs (tf32 differs from fp32 by ~2^-11, 3xtf32
    does not): a plan that quietly ran the IEEE path would pass the bounds above."""
    import portgemm
    rng = np.random.default_rng(stable_seed("tf32-really", precision))
    A = [operand(torch, rng, 256, 256, False)]
    B = [operand(torch, rng, 256, 256, False)]
    C = [operand(torch, rng, 256, 256, False)]
    p = portgemm.plan([(256, 256, 256)], "float32", be.arch(), precision=precision)
    assert any(k.engine == "mma" for k in p.kinds if k.kind in p.tiles_per_kind())
    p.run(A, B, C, backend=be)
    torch.cuda.synchronize()
    ref = host64(A[0]) @ host64(B[0])
    err = np.abs(host64(C[0]) - ref).max() / np.abs(ref).max()
    if precision == "tf32":
        assert err > 2.0 ** -16, err      # inputs rounded to 11 bits: errors near 2^-12
    else:
        assert err < 2.0 ** -18, err      # fp32-level


@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
def test_default_plan_random_batch(be, torch, precision):
    import portgemm
    seed = stable_seed("tf32-default", precision)
    rng = np.random.default_rng(seed)
    shapes = [tuple(int(v) for v in s) for s in
              np.stack([rng.integers(1, 300, 60), rng.integers(1, 300, 60),
                        rng.integers(0, 400, 60)], axis=1)]
    for ta, tb in TRANS:
        A, B, C, alpha, beta = make_batch(torch, rng, shapes, ta, tb, False)
        h = [[host64(x) for x in X] for X in (A, B, C)]
        portgemm.gemm_vbatched(A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb,
                               backend=be, precision=precision)
        torch.cuda.synchronize()
        check([host64(c) for c in C], *h, alpha, beta, ta, tb, precision,
              f"seed {seed} {precision} default plan {ta}{tb}")


@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
@pytest.mark.parametrize("device_offs", [False, True], ids=["host-offs", "device-offs"])
def test_packed_ragged_api(be, torch, precision, device_offs):
    def chk(*args):
        check(*args[:-1], precision, f"{precision} {args[-1]}")
    check_packed_ragged(be, torch, torch.float32, device_offs,
                        stable_seed("tf32-ragged", precision, device_offs), chk, "",
                        precision=precision)


@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
def test_packed_general_api(be, torch, precision):
    from portgemm.grouped import gemm_grouped_general
    seed = stable_seed("tf32-general", precision)
    rng = np.random.default_rng(seed)
    sizes = np.array([[70, 90, 33], [1, 5, 7], [128, 64, 256], [45, 3, 0]])
    lda, ldb, ldc = sizes[:, 2] + 1, sizes[:, 1] + 3, sizes[:, 1] + 1   # odd strides
    a_off = np.concatenate([[0], np.cumsum(sizes[:, 0] * lda)[:-1]])
    b_off = np.concatenate([[0], np.cumsum(sizes[:, 2] * ldb)[:-1]])
    c_off = np.concatenate([[0], np.cumsum(sizes[:, 0] * ldc)[:-1]])
    Ah = rng.standard_normal(int((sizes[:, 0] * lda).sum())).astype(np.float32)
    Bh = rng.standard_normal(int((sizes[:, 2] * ldb).sum())).astype(np.float32)
    Ch = np.full(int((sizes[:, 0] * ldc).sum()), np.nan, np.float32)
    alpha = rng.uniform(-2, 2, len(sizes))
    A, B, C = (torch.from_numpy(x).cuda() for x in (Ah, Bh, Ch))
    gemm_grouped_general(A, B, C, sizes, a_off, b_off, c_off, lda, ldb, ldc, alpha=alpha,
                         beta=0.0, backend=be, precision=precision)
    torch.cuda.synchronize()
    got = C.cpu().numpy().astype(np.float64)

    def view(buf, off, ld, r, c):
        return buf[off:off + r * ld].reshape(r, ld)[:, :c].astype(np.float64)
    As = [view(Ah, a_off[g], lda[g], m, k) for g, (m, n, k) in enumerate(sizes)]
    Bs = [view(Bh, b_off[g], ldb[g], k, n) for g, (m, n, k) in enumerate(sizes)]
    Cs = [view(got, c_off[g], ldc[g], m, n) for g, (m, n, k) in enumerate(sizes)]
    check(Cs, As, Bs, [np.zeros_like(c) for c in Cs], alpha, np.zeros(len(sizes)),
          False, False, precision, f"seed {seed} {precision} packed general")
