"""float16 and bfloat16 on a real device (marker ``gpu``): every kind of the 16-bit
families (tiles.HALF_FAMILIES: the m16n8k16 tensor-core kinds and the SIMT kind) alone,
every transpose pair, edge sizes (not multiples of 16 or 8), odd leading dimensions,
per-GEMM alpha/beta, beta = 0 over NaN, alpha = 0, K = 0; and the default plan through
gemm_vbatched. Operands are torch tensors on the GPU (torch has both dtypes; CuPy has no
bfloat16), compared against a float64 reference of the very 16-bit inputs.

Tolerance, from the formats: the inputs are exact in float64; each product of two
16-bit values is exact in fp32 (11 + 11 or 8 + 8 significant bits <= 24), the K-term sum
and alpha, beta are fp32 (unit roundoff 2^-24, K + 2 roundings), and the result is
rounded once to the output format (unit roundoff u = 2^-11 float16, 2^-8 bfloat16):

    |C - ref| <= 2 (u |ref| + tiny + (K + 2) 2^-24 (|alpha| |A| |B| + |beta| |C0|))

elementwise, |A| |B| the product of the absolute matrices, tiny half the subnormal
spacing (2^-25 float16, 2^-134 bfloat16; the factor 2: slack for the reference's own
order of summation).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from conftest import backend_or_skip
from gpu_batches import stable_seed
from portgemm.tiles import FAMILIES
from portgemm.tuning.model import family_kind_plan

pytestmark = pytest.mark.gpu

FAMILY = {"float16": "portgemm-f16", "bfloat16": "portgemm-bf16"}
UNIT = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
# Half the spacing of the format's subnormals: the absolute rounding error below its
# smallest normal, where u |ref| no longer bounds it.
TINY = {"float16": 2.0 ** -25, "bfloat16": 2.0 ** -134}
TRANS = [(False, False), (False, True), (True, False), (True, True)]
EDGE = [(1, 1, 1), (7, 9, 17), (16, 8, 16), (33, 65, 31), (129, 127, 70), (255, 130, 257),
        (64, 64, 0), (100, 3, 5)]


@pytest.fixture(scope="module")
def be():
    return backend_or_skip("cuda")


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def tdtype(torch, dtype):
    return {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]


def operand(torch, rng, rows, cols, dtype, odd):
    """A (rows, cols) view of a CUDA tensor; ``odd``: an odd leading dimension."""
    ld = cols + (1 if cols % 2 == 0 else 2) if odd else cols
    buf = torch.zeros((max(rows, 1), max(ld, 1)), dtype=tdtype(torch, dtype), device="cuda")
    vals = torch.from_numpy(rng.standard_normal((rows, cols)).astype(np.float32))
    buf[:rows, :cols] = vals.to(buf.dtype).cuda()
    return buf[:rows, :cols]


def host64(t):
    return t.detach().float().cpu().numpy().astype(np.float64)


def check(got, A, B, C0, alpha, beta, trans_a, trans_b, dtype, what):
    for i, (g, a, b, c0) in enumerate(zip(got, A, B, C0)):
        a = a.T if trans_a else a
        b = b.T if trans_b else b
        K = a.shape[1]
        ref = alpha[i] * (a @ b) + (beta[i] * c0 if beta[i] != 0 else 0.0)
        mag = abs(alpha[i]) * (np.abs(a) @ np.abs(b)) + (abs(beta[i]) * np.abs(c0)
                                                          if beta[i] != 0 else 0.0)
        tol = 2 * (UNIT[dtype] * np.abs(ref) + TINY[dtype] + (K + 2) * 2.0 ** -24 * mag)
        if not np.all(np.isfinite(g)):
            pytest.fail(f"GEMM {i} {a.shape[0]}x{b.shape[1]}x{K}: non-finite result ({what})")
        bad = np.abs(g - ref) > tol
        if bad.any():
            r, c = np.argwhere(bad)[0]
            pytest.fail(f"GEMM {i} {a.shape[0]}x{b.shape[1]}x{K}: C[{r},{c}] = {g[r, c]}, "
                        f"ref {ref[r, c]}, tol {tol[r, c]} ({what})")


def make_batch(torch, rng, shapes, dtype, trans_a, trans_b, odd):
    batch = len(shapes)
    alpha = rng.uniform(-2, 2, batch)
    alpha[rng.random(batch) < 0.15] = 0.0
    beta = np.where(rng.random(batch) < 0.5, 0.0, rng.uniform(-2, 2, batch))
    A, B, C = [], [], []
    for m, n, k in shapes:
        A.append(operand(torch, rng, *((k, m) if trans_a else (m, k)), dtype, odd))
        B.append(operand(torch, rng, *((n, k) if trans_b else (k, n)), dtype, odd))
        C.append(operand(torch, rng, m, n, dtype, odd))
    for c, b in zip(C, beta):
        if b == 0:
            c.fill_(float("nan"))     # must be overwritten, never read
    return A, B, C, alpha, beta


def kind_plan(shapes, dtype, arch, kind, family=None):
    """Every GEMM through kind ``kind`` of ``family`` (default: the dtype's FAMILY)."""
    return family_kind_plan(shapes, dtype, arch, family or FAMILY[dtype], kind, "test")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("kind", [k.kind for k in FAMILIES["portgemm-f16"]])
@pytest.mark.parametrize("trans", TRANS, ids=lambda t: ("t" if t[0] else "n") + ("t" if t[1] else "n"))
@pytest.mark.parametrize("odd", [False, True], ids=["aligned", "odd-ld"])
def test_every_half_kind(be, torch, dtype, kind, trans, odd):
    ta, tb = trans
    seed = stable_seed("half-kind", dtype, kind, ta, tb, odd)
    rng = np.random.default_rng(seed)
    A, B, C, alpha, beta = make_batch(torch, rng, EDGE, dtype, ta, tb, odd)
    run_kind_and_check(be, torch, EDGE, A, B, C, alpha, beta, dtype, kind, ta, tb,
                       f"seed {seed} {dtype} {kind} {ta}{tb} odd={odd}")


def run_kind_and_check(be, torch, shapes, A, B, C, alpha, beta, dtype, kind, ta, tb, what):
    """Every GEMM through one kind (kind_plan), checked against float64 from the very inputs."""
    h = [[host64(x) for x in X] for X in (A, B, C)]
    plan = kind_plan(shapes, dtype, be.arch(), kind)
    plan.run(A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=be)
    torch.cuda.synchronize()
    check([host64(c) for c in C], *h, alpha, beta, ta, tb, dtype, what)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_default_plan_random_batch(be, torch, dtype):
    seed = stable_seed("half-default", dtype)
    rng = np.random.default_rng(seed)
    shapes = [tuple(int(v) for v in s) for s in
              np.stack([rng.integers(1, 300, 60), rng.integers(1, 300, 60),
                        rng.integers(0, 400, 60)], axis=1)]
    check_default_plan(be, torch, rng, shapes, dtype, f"seed {seed}")


def check_default_plan(be, torch, rng, shapes, dtype, what):
    """``shapes`` through gemm_vbatched's default plan in every transpose pair (dense
    operands: leading dimensions of the stored rows), checked against float64."""
    import portgemm
    for ta, tb in TRANS:
        A, B, C, alpha, beta = make_batch(torch, rng, shapes, dtype, ta, tb, False)
        h = [[host64(x) for x in X] for X in (A, B, C)]
        portgemm.gemm_vbatched(A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb,
                               backend=be)
        torch.cuda.synchronize()
        check([host64(c) for c in C], *h, alpha, beta, ta, tb, dtype,
              f"{what} {dtype} default plan {ta}{tb}")


def test_mixed_half_dtypes_are_a_typed_error(be, torch):
    import portgemm
    from portgemm.errors import DtypeError
    a = torch.zeros((4, 4), dtype=torch.float16, device="cuda")
    b = torch.zeros((4, 4), dtype=torch.bfloat16, device="cuda")
    c = torch.zeros((4, 4), dtype=torch.float16, device="cuda")
    for A, B, C in itertools.permutations([a, b, c]):
        if A.dtype == B.dtype == C.dtype:
            continue
        with pytest.raises(DtypeError):
            portgemm.gemm_vbatched([A], [B], [C], backend=be)
    with pytest.raises(DtypeError):
        portgemm.gemm_vbatched([a], [a.float()], [c], backend=be)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("device_offs", [False, True], ids=["host-offs", "device-offs"])
def test_packed_ragged_api(be, torch, dtype, device_offs):
    check_packed_ragged(be, torch, dtype, device_offs,
                        stable_seed("half-ragged", dtype, device_offs), "")


def check_packed_ragged(be, torch, dtype, device_offs, seed, what):
    """8 groups of one packed batch (an empty group, an odd ldc, per-group alpha, beta = 0
    over NaN) through gemm_grouped, checked against float64."""
    from portgemm.grouped import gemm_grouped
    rng = np.random.default_rng(seed)
    G, K, N, T = 8, 200, 136, 700
    ends = np.sort(rng.integers(0, T - 20, G))
    ends[2] = ends[1]                                # an empty group
    ends = np.sort(ends)
    A = operand(torch, rng, T, K, dtype, False)
    B = torch.from_numpy(rng.standard_normal((G, K, N)).astype(np.float32)).to(
        tdtype(torch, dtype)).cuda()
    C = operand(torch, rng, T, N, dtype, True)      # an odd leading dimension
    C.fill_(float("nan"))
    alpha = rng.uniform(-2, 2, G)
    offs = torch.from_numpy(ends.astype(np.int32)).cuda() if device_offs else ends
    gemm_grouped(A, B, C, offs, alpha=alpha, beta=0.0, backend=be)
    torch.cuda.synchronize()
    hA, hB, hC = host64(A), [host64(B[g]) for g in range(G)], host64(C)
    starts = np.concatenate([[0], ends[:-1]])
    check([hC[s:e] for s, e in zip(starts, ends)], [hA[s:e] for s, e in zip(starts, ends)],
          hB, [np.zeros((e - s, N)) for s, e in zip(starts, ends)], alpha, np.zeros(G),
          False, False, dtype, f"seed {seed} {dtype} packed ragged device_offs={device_offs} {what}")
