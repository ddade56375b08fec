"""Random irregular batches and a float64 reference, for the GPU tests."""
from __future__ import annotations

import zlib

import numpy as np

from portgemm.planner.tiling import Request, build_tiles, make_plan, pack_blocks
from portgemm.planner.wavefront_tlp import initial_kinds
from portgemm.tiles import FAMILIES

FAMILY = {"float32": "portgemm", "float64": "portgemm-f64"}   # our SIMT family per dtype


def stable_seed(*parts) -> int:
    """A seed that is the same in every process for the same parts (hash() of a string is
    randomised per process, so a failure seeded by it could not be reproduced)."""
    return zlib.crc32(repr(parts).encode())


def make_host_batch(rng, shapes, dtype, trans_a=False, trans_b=False, strided=False):
    """Host operands for (M, N, K) shapes: A stored (K, M) when trans_a, B (N, K) when
    trans_b; strided=True makes every operand a view with a padded row stride and an
    offset start (inner stride stays 1)."""
    A, B, C = [], [], []
    for m, n, k in shapes:
        a_shape = (k, m) if trans_a else (m, k)
        b_shape = (n, k) if trans_b else (k, n)
        A.append(_rand(rng, a_shape, dtype, strided))
        B.append(_rand(rng, b_shape, dtype, strided))
        C.append(_rand(rng, (m, n), dtype, strided))
    return A, B, C


def _rand(rng, shape, dtype, strided):
    if not strided:
        return (rng.random(shape) - 0.5).astype(dtype)
    r, c = shape
    # rows 2 apart, columns from offset 3: a view with ld = 2 * (c + 5)
    buf = (rng.random((2 * r + 1, c + 5)) - 0.5).astype(dtype)
    return buf[1::2, 3:3 + c]


def reference(A, B, C, alpha, beta, trans_a, trans_b):
    out = []
    for i, (a, b, c) in enumerate(zip(A, B, C)):
        a64 = np.asarray(a, np.float64)
        b64 = np.asarray(b, np.float64)
        a64 = a64.T if trans_a else a64
        b64 = b64.T if trans_b else b64
        r = alpha[i] * (a64 @ b64)
        if beta[i] != 0:
            r = r + beta[i] * np.asarray(c, np.float64)
        out.append(r)
    return out


def max_rel_error(got, ref) -> float:
    worst = 0.0
    for g, r in zip(got, ref):
        if r.size == 0:
            continue
        g = np.asarray(g, np.float64)
        if not np.all(np.isfinite(g)):
            return float("inf")
        denom = np.linalg.norm(r)
        err = np.linalg.norm(g - r) / (denom if denom > 0 else 1.0)
        worst = max(worst, float(err))
    return worst


def random_shapes(rng, batch, max_mn, max_k, low=1):
    m = rng.integers(low, max_mn + 1, batch)
    n = rng.integers(low, max_mn + 1, batch)
    k = rng.integers(low, max_k + 1, batch)
    return np.stack([m, n, k], axis=1)


EDGE_SIZES = (0, 1, 15, 16, 17, 31, 61, 127)
TOL = {"float32": 1e-5, "float64": 1e-12}


def captured(stream, call):
    """The CUDA graph of ``call()`` captured on ``stream`` (current in the caller). The
    capture ends whatever the call does: a failed call must not leave the stream
    capturing, which would fail every later test's synchronisation."""
    stream.begin_capture()
    try:
        call()
    except BaseException:
        stream.end_capture()
        raise
    return stream.end_capture()


def replay_over_nan(cp, stream, graph, C):
    """C poisoned with NaN, then ``graph`` replayed on ``stream`` and waited for: what C
    holds afterwards is the replay's own work."""
    for c in C:
        c.fill(cp.nan)
    with stream:
        graph.launch()
    stream.synchronize()


def replay_second_run(cp, run, C):
    """``run()`` once on a fresh stream (its compiles, allocations and uploads), the
    second call captured there, and that graph replayed over C poisoned with NaN."""
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        run()
        graph = captured(stream, run)
    replay_over_nan(cp, stream, graph, C)


# Torch operands on the GPU for the tensor-core tests (torch has fp16, bf16 and fp32
# views with any leading dimension; CuPy has no bfloat16).

TRANS = [(False, False), (False, True), (True, False), (True, True)]


def trans_id(trans) -> str:
    """A transpose pair's test id: nn, nt, tn, tt."""
    return ("t" if trans[0] else "n") + ("t" if trans[1] else "n")


def torch_operand(torch, rng, rows, cols, tdtype, odd=False):
    """A (rows, cols) view of a CUDA tensor of ``tdtype``, standard normal values
    rounded to it; ``odd``: an odd leading dimension."""
    ld = cols + (1 if cols % 2 == 0 else 2) if odd else cols
    buf = torch.zeros((max(rows, 1), max(ld, 1)), dtype=tdtype, device="cuda")
    vals = torch.from_numpy(rng.standard_normal((rows, cols)).astype(np.float32))
    buf[:rows, :cols] = vals.to(tdtype).cuda()
    return buf[:rows, :cols]


def torch_host64(t):
    """A torch tensor's values as float64 on the host."""
    return t.detach().float().cpu().numpy().astype(np.float64)


def torch_batch(torch, rng, shapes, tdtype, trans_a, trans_b, odd):
    """Operands for (M, N, K) shapes (A stored (K, M) when trans_a, B (N, K) when
    trans_b), per-GEMM alpha (some 0) and beta (half 0, their C poisoned with NaN: it
    must be overwritten, never read)."""
    batch = len(shapes)
    alpha = rng.uniform(-2, 2, batch)
    alpha[rng.random(batch) < 0.15] = 0.0
    beta = np.where(rng.random(batch) < 0.5, 0.0, rng.uniform(-2, 2, batch))
    A, B, C = [], [], []
    for m, n, k in shapes:
        A.append(torch_operand(torch, rng, *((k, m) if trans_a else (m, k)), tdtype, odd))
        B.append(torch_operand(torch, rng, *((n, k) if trans_b else (k, n)), tdtype, odd))
        C.append(torch_operand(torch, rng, m, n, tdtype, odd))
    for c, b in zip(C, beta):
        if b == 0:
            c.fill_(float("nan"))
    return A, B, C, alpha, beta


def check_within(got, A, B, C0, alpha, beta, trans_a, trans_b, tolerance, what):
    """Each result against float64 from the very inputs (host arrays), elementwise
    within ``tolerance(a, b, c0, alpha, beta, ref)`` (a, b as op(A), op(B)); fails the
    test at the first GEMM with a non-finite or out-of-bound entry."""
    import pytest
    for i, (g, a, b, c0) in enumerate(zip(got, A, B, C0)):
        a = a.T if trans_a else a
        b = b.T if trans_b else b
        ref = alpha[i] * (a @ b) + (beta[i] * c0 if beta[i] != 0 else 0.0)
        tol = tolerance(a, b, c0, alpha[i], beta[i], ref)
        shape = f"{a.shape[0]}x{b.shape[1]}x{a.shape[1]}"
        if not np.all(np.isfinite(g)):
            pytest.fail(f"GEMM {i} {shape}: non-finite result ({what})")
        bad = np.abs(g - ref) > tol
        if bad.any():
            r, c = np.argwhere(bad)[0]
            pytest.fail(f"GEMM {i} {shape}: C[{r},{c}] = {g[r, c]}, ref {ref[r, c]}, "
                        f"tol {tol[r, c]} ({what})")


def check_packed_ragged(be, torch, tdtype, device_offs, seed, check, what, **options):
    """8 groups of one packed batch (an empty group, an odd ldc, per-group alpha, beta =
    0 over NaN) through gemm_grouped (``options``: e.g. precision), checked by
    ``check(got, A, B, C0, alpha, beta, trans_a, trans_b, what)``."""
    from portgemm.grouped import gemm_grouped
    rng = np.random.default_rng(seed)
    G, K, N, T = 8, 200, 136, 700
    ends = np.sort(rng.integers(0, T - 20, G))
    ends[2] = ends[1]                                # an empty group
    ends = np.sort(ends)
    A = torch_operand(torch, rng, T, K, tdtype)
    B = torch.from_numpy(rng.standard_normal((G, K, N)).astype(np.float32)).to(tdtype).cuda()
    C = torch_operand(torch, rng, T, N, tdtype, odd=True)
    C.fill_(float("nan"))
    alpha = rng.uniform(-2, 2, G)
    offs = torch.from_numpy(ends.astype(np.int32)).cuda() if device_offs else ends
    gemm_grouped(A, B, C, offs, alpha=alpha, beta=0.0, backend=be, **options)
    torch.cuda.synchronize()
    hA, hB, hC = torch_host64(A), [torch_host64(B[g]) for g in range(G)], torch_host64(C)
    starts = np.concatenate([[0], ends[:-1]])
    check([hC[s:e] for s, e in zip(starts, ends)], [hA[s:e] for s, e in zip(starts, ends)],
          hB, [np.zeros((e - s, N)) for s, e in zip(starts, ends)], alpha, np.zeros(G),
          False, False, f"seed {seed} packed ragged device_offs={device_offs} {what}")


def family_plan(shapes, dtype, arch, mode, kind=None, seed=0, tiles_per_block=1,
                resident=None, family=None):
    """A plan over our family for ``dtype`` (or ``family``): every GEMM on ``kind`` (its
    name), or, when None, Eq. 10's choice for half the GEMMs and a random kind for the
    rest (so a fused launch mixes every kind); ``tiles_per_block`` consecutive tiles run
    in one block, one after the other (needs one kind)."""
    family = family or FAMILY[dtype]
    kinds = FAMILIES[family]
    shapes = np.ascontiguousarray(shapes, dtype=np.int64)
    shapes.flags.writeable = False
    batch = shapes.shape[0]
    if kind is not None:
        kidx = np.full(batch, [k.kind for k in kinds].index(kind), dtype=np.int64)
    else:
        rng = np.random.default_rng(seed)
        kidx = initial_kinds(shapes, kinds)
        mix = rng.random(batch) < 0.5
        kidx = np.where(mix, rng.integers(0, len(kinds), batch), kidx)
    tiles = build_tiles(shapes, kinds, kidx)
    tiles, block_ptr = pack_blocks(tiles, np.arange(tiles.shape[0]) // tiles_per_block,
                                   shapes[:, 2],
                                   by_kind=(mode == "per-kind"))
    req = Request(shapes, dtype, arch, mode)
    # ``resident``: workgroups per CU each kind is said to keep, so a per-kind launch
    # with more tiles than that many per CU runs persistent (backends/persistent.py)
    occ = {} if resident is None else {k.name: _Resident(resident) for k in kinds}
    return make_plan(req, "test-" + family, kinds, tiles, block_ptr, 0.0, 0.0,
                     "none", occ, [])


class _Resident:
    """The part of an occupancy figure the persistent launch reads."""

    def __init__(self, active):
        self.active_workgroups = active
        self.occupancy = 0.0
