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
from gpu_batches import TRANS, check_within, stable_seed, torch_batch, torch_operand, trans_id
from gpu_batches import check_packed_ragged as packed_ragged
from gpu_batches import torch_host64 as host64
from portgemm.tiles import FAMILIES
from portgemm.tuning.model import family_kind_plan

pytestmark = pytest.mark.gpu

FAMILY = {"float16": "portgemm-f16", "bfloat16": "portgemm-bf16"}
UNIT = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
# Half the spacing of the format's subnormals: the absolute rounding error below its
# smallest normal, where u |ref| no longer bounds it.
TINY = {"float16": 2.0 ** -25, "bfloat16": 2.0 ** -134}
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
    return torch_operand(torch, rng, rows, cols, tdtype(torch, dtype), odd)


def tolerance(dtype):
    """The module docstring's bound for ``dtype``, as check_within takes it."""
    def tol(a, b, c0, alpha, beta, ref):
        mag = abs(alpha) * (np.abs(a) @ np.abs(b)) + (abs(beta) * np.abs(c0)
                                                      if beta != 0 else 0.0)
        return 2 * (UNIT[dtype] * np.abs(ref) + TINY[dtype] + (a.shape[1] + 2) * 2.0 ** -24 * mag)
    return tol


def check(got, A, B, C0, alpha, beta, trans_a, trans_b, dtype, what):
    check_within(got, A, B, C0, alpha, beta, trans_a, trans_b, tolerance(dtype), what)


def make_batch(torch, rng, shapes, dtype, trans_a, trans_b, odd):
    return torch_batch(torch, rng, shapes, tdtype(torch, dtype), trans_a, trans_b, odd)


def kind_plan(shapes, dtype, arch, kind, family=None):
    """Every GEMM through kind ``kind`` of ``family`` (default: the dtype's FAMILY)."""
    return family_kind_plan(shapes, dtype, arch, family or FAMILY[dtype], kind, "test")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("kind", [k.kind for k in FAMILIES["portgemm-f16"]])
@pytest.mark.parametrize("trans", TRANS, ids=trans_id)
@pytest.mark.parametrize("odd", [False, True], ids=["aligned", "odd-ld"])
def test_every_half_kind(be, torch, dtype, kind, trans, odd):
    ta, tb = trans
    seed = stable_seed("half-kind", dtype, kind, ta, tb, odd)
    rng = np.random.default_rng(seed)
    A, B, C, alpha, beta = make_batch(torch, rng, EDGE, dtype, ta, tb, odd)
    run_kind_and_check(be, torch, EDGE, A, B, C, alpha, beta, dtype, kind, ta, tb,
                       f"seed {seed} {dtype} {kind} {ta}{tb} odd={odd}")


def run_kind_and_check(be, torch, shapes, A, B, C, alpha, beta, dtype, kind, ta, tb, what,
                       family=None):
    """Every GEMM through one kind (kind_plan, of ``family``: default the dtype's), checked
    against float64 from the very inputs."""
    h = [[host64(x) for x in X] for X in (A, B, C)]
    plan = kind_plan(shapes, dtype, be.arch(), kind, family)
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
    """8 groups of one packed batch through gemm_grouped (gpu_batches.check_packed_ragged),
    checked against float64."""
    def chk(*args):
        check(*args[:-1], dtype, f"{dtype} {args[-1]}")
    packed_ragged(be, torch, tdtype(torch, dtype), device_offs, seed, chk, what)
