"""Our own tile kinds on a real device (marker ``gpu``): tiles.PORTGEMM (float32) and
tiles.PORTGEMM_F64 (float64), every kind alone (per-kind) and all together (fused), every
transpose pair, edge sizes, and the kernel's three memory paths:

- "aligned": 16-byte aligned base and a leading dimension of whole 16-byte units, so A
  and B are staged with 16-byte loads and C written with 16-byte stores;
- "odd": an odd leading dimension (the scalar fallback for every operand);
- "offset": an aligned leading dimension but the base one element past an aligned
  address (a view starting at column 1): the scalar fallback again, never a misaligned
  16-byte access;
- "tight": leading dimension = columns (aligned for some sizes, not for others).

No planner chooses these kinds yet, so the plans are built here from the planner's own
tiling helpers. Every check poisons C with NaN where beta == 0, fills the C buffer's
padding (outside the view) with a sentinel that must survive, and compares against a
float64 host reference. Seeds come from the case's name (gpu_batches.stable_seed) and
every failure message prints it.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from conftest import backend_or_skip
from gpu_batches import FAMILY, TOL, family_plan, max_rel_error, reference, stable_seed
from portgemm.tiles import FAMILIES

pytestmark = pytest.mark.gpu

TRANS = [(False, False), (False, True), (True, False), (True, True)]
LAYOUTS = ("aligned", "odd", "offset", "tight")
EDGE = (1, 7, 127, 129, 255)
SENTINEL = 7.0   # what the C buffer holds outside the view; no result equals it exactly


@pytest.fixture(scope="module", params=["cuda", "hip"])
def be(request):
    return backend_or_skip(request.param)


def _ld(cols, layout, dtype):
    v = 16 // np.dtype(dtype).itemsize
    whole = -(-cols // v) * v
    if layout == "tight":
        return cols
    if layout == "odd":
        return cols + 1 if (cols + 1) % 2 else cols + 2
    return whole + v       # aligned / offset: whole 16-byte units, one spare


def make_operand(rng, rows, cols, dtype, layout, fill=None):
    """(host buffer, (row slice, column slice)): a (rows, ld) buffer whose view is the
    operand; "offset" starts the view at column 1."""
    ld = max(_ld(cols, layout, dtype), 1)
    off = 1 if layout == "offset" else 0
    assert off + cols <= ld
    buf = np.full((max(rows, 1), ld), SENTINEL, dtype=dtype)
    view = (slice(0, rows), slice(off, off + cols))
    buf[view] = (rng.random((rows, cols)) - 0.5) if fill is None else fill
    return buf, view


def run_family_case(be, shapes, dtype, trans_a, trans_b, layouts, mode, kind=None, name="",
                    tiles_per_block=1, resident=None, plan=None):
    """One batch through a family plan; ``layouts`` gives each GEMM's layout (one name
    for all, or a list). Asserts the result, the untouched padding of C, and the seed."""
    seed = stable_seed(name, dtype, trans_a, trans_b, mode, kind, str(layouts),
                       np.asarray(shapes).tobytes())
    rng = np.random.default_rng(seed)
    batch = len(shapes)
    if isinstance(layouts, str):
        layouts = [layouts] * batch
    alpha = rng.uniform(-2, 2, batch)
    alpha[rng.random(batch) < 0.1] = 0.0                 # alpha == 0: C = beta * C
    beta = np.where(rng.random(batch) < 0.5, 0.0, rng.uniform(-2, 2, batch))
    hA, hB, hC, bufs_c, views_c, dA, dB, dC, dbufs_c = ([] for _ in range(9))
    for (m, n, k), lay in zip(shapes, layouts):
        a, av = make_operand(rng, *((k, m) if trans_a else (m, k)), dtype, lay)
        b, bv = make_operand(rng, *((n, k) if trans_b else (k, n)), dtype, lay)
        c, cv = make_operand(rng, m, n, dtype, lay)
        hA.append(a[av])
        hB.append(b[bv])
        hC.append(c[cv].copy())
        bufs_c.append(c)
        views_c.append(cv)
        for host, view, dst in ((a, av, dA), (b, bv, dB)):
            dev = be.to_device(host)
            if not hasattr(dev, "__getitem__"):
                pytest.skip(f"{be.name}: device arrays without slicing (install CuPy)")
            dst.append(dev[view])
    for i in range(batch):
        if beta[i] == 0:
            bufs_c[i][views_c[i]] = np.nan   # must be overwritten, never read
    ref = reference(hA, hB, hC, alpha, beta, trans_a, trans_b)
    for c, cv in zip(bufs_c, views_c):
        dev = be.to_device(c)
        dbufs_c.append(dev)
        dC.append(dev[cv])
    if plan is None:
        plan = family_plan(shapes, dtype, be.arch(), mode, kind, seed, tiles_per_block,
                           resident)
    plan.run(dA, dB, dC, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b, backend=be)
    what = (f"seed {seed}, {dtype} {'t' if trans_a else 'n'}{'t' if trans_b else 'n'} "
            f"{mode} kind={kind} tiles/block={tiles_per_block} resident={resident}")
    whole = [be.to_host(d) for d in dbufs_c]
    got = [w[cv] for w, cv in zip(whole, views_c)]
    for i, (w, cv) in enumerate(zip(whole, views_c)):
        outside = np.ones(w.shape, bool)
        outside[cv] = False
        if not np.all(w[outside] == SENTINEL):
            pytest.fail(f"GEMM {i} {tuple(shapes[i])} ({layouts[i]}): written outside C's "
                        f"view ({what})")
    bad = [i for i, (g, r) in enumerate(zip(got, ref)) if max_rel_error([g], [r]) >= TOL[dtype]]
    if bad:
        i = bad[0]
        pytest.fail(f"{len(bad)} of {batch} GEMMs wrong, first GEMM {i} {tuple(shapes[i])} "
                    f"({layouts[i]}, alpha {alpha[i]:g}, beta {beta[i]:g}): relative error "
                    f"{max_rel_error([got[i]], [ref[i]]):.3e} ({what})")


def edge_shapes():
    return np.array(list(itertools.product(EDGE, EDGE, EDGE)), dtype=np.int64)


def kind_names(dtype):
    return [k.kind for k in FAMILIES[FAMILY[dtype]]]


KIND_CASES = [(d, k) for d in ("float32", "float64") for k in kind_names(d)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("dtype, kind", KIND_CASES, ids=[f"{d}-{k}" for d, k in KIND_CASES])
def test_every_kind_per_kind(be, dtype, kind, trans, layout):
    """Each kind alone on every edge-size combination (125 GEMMs: partial tiles in M, N
    and K, K below one k step, K of one step plus one)."""
    run_family_case(be, edge_shapes(), dtype, *trans, layout, "per-kind", kind,
                    name="per-kind")


@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["fused", "per-kind"])
def test_mixed_kinds_and_layouts(be, mode, dtype, trans):
    """Every kind in one plan, each GEMM with its own layout, alpha and beta; shapes from
    the edge sizes and a few whole-tile multiples, K = 0 included."""
    rng = np.random.default_rng(stable_seed("mixed", mode, dtype, trans))
    sizes = (*EDGE, 32, 64, 128, 256)
    shapes = rng.choice(sizes, size=(150, 3))
    shapes[:3, 2] = 0   # K == 0: C = beta * C only
    layouts = list(rng.choice(LAYOUTS, size=150))
    run_family_case(be, shapes, dtype, *trans, layouts, mode, name="mixed")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_large_gemms(be, dtype):
    """Few GEMMs of many tiles (the largest kinds' main loop over hundreds of k steps)."""
    shapes = np.array([[1024, 1024, 1024], [1000, 1030, 777], [513, 2048, 96],
                       [2048, 64, 2000]], dtype=np.int64)
    for layout in ("aligned", "odd"):
        run_family_case(be, shapes, dtype, False, False, layout, "fused", name="large")
        run_family_case(be, shapes, dtype, True, True, layout, "per-kind",
                        kind_names(dtype)[-1], name="large")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_offset_views_of_one_buffer(be, dtype):
    """A and B views starting 1, 2 and 3 elements into one aligned buffer (every
    misalignment of float32 within 16 bytes); C aligned, so only A and B fall back."""
    cp = getattr(be, "cp", None)
    if cp is None:
        pytest.skip(f"{be.name}: needs CuPy arrays")
    seed = stable_seed("offset-views", dtype)
    rng = np.random.default_rng(seed)
    m = n = k = 129
    kinds = kind_names(dtype)
    for off in (1, 2, 3):
        host = (rng.random(2 * (m * k + 8)) - 0.5).astype(dtype)
        dev = cp.asarray(host)
        a = dev[off:off + m * k].reshape(m, k)
        b = dev[m * k + 8 + off:m * k + 8 + off + k * n].reshape(k, n)
        c = cp.full((m, n), cp.nan, dtype=dtype)
        ha, hb = cp.asnumpy(a), cp.asnumpy(b)
        ref = reference([ha], [hb], [np.zeros((m, n))], [1.0], [0.0], False, False)
        for kind in (kinds[0], kinds[-1]):
            c.fill(cp.nan)
            plan = family_plan(np.array([[m, n, k]]), dtype, be.arch(), "per-kind", kind)
            plan.run([a], [b], [c], backend=be)
            err = max_rel_error([cp.asnumpy(c)], ref)
            assert err < TOL[dtype], f"offset {off} kind {kind}: error {err:.3e} (seed {seed})"


def pipeline_k(kind):
    """K around the cp.async pipeline's edges for ``kind`` (render.STAGES stages of BK on
    sm_80+; the register path sees the same steps): below one step, one step, just past
    the steps the prologue puts in flight, and many steps with a ragged last one."""
    from portgemm.kernels import render
    from portgemm.kernels.variants import Variant
    bk = kind.tk
    st = max(render.stages(Variant((kind,), "float64" if kind.family.endswith("f64")
                                   else "float32")), 2)
    return sorted({1, bk - 1, bk, bk + 1, (st - 1) * bk, (st - 1) * bk + 1, st * bk - 1,
                   st * bk, st * bk + 1, 2 * st * bk + 3, 37 * bk + 5})


@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("dtype, kind", KIND_CASES, ids=[f"{d}-{k}" for d, k in KIND_CASES])
def test_pipeline_k_edges(be, dtype, kind, trans):
    """Every kind over K at the pipeline's edges (K not a multiple of BK * stages, K < BK,
    K == 0, alpha == 0 among the GEMMs), with M and N one off the tile, in every layout."""
    k = next(t for t in FAMILIES[FAMILY[dtype]] if t.kind == kind)
    ks = [0, *pipeline_k(k)]
    shapes = np.array([[k.tm + 1, k.tn - 1, kk] for kk in ks]
                      + [[k.tm - 3, 2 * k.tn + 5, kk] for kk in ks], dtype=np.int64)
    layouts = [LAYOUTS[i % len(LAYOUTS)] for i in range(len(shapes))]
    run_family_case(be, shapes, dtype, *trans, layouts, "per-kind", kind, name="pipeline-k")


@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_several_tiles_per_block(be, dtype, trans):
    """Three tiles one after the other in each block, so a tile's first copies go into
    stages the previous tile has just read (the pipeline drains between tiles)."""
    for kind in kind_names(dtype):
        k = next(t for t in FAMILIES[FAMILY[dtype]] if t.kind == kind)
        shapes = np.array([[3 * k.tm - 1, 2 * k.tn, 5 * k.tk + 3], [k.tm, k.tn + 1, 2],
                           [2 * k.tm, k.tn, 9 * k.tk]], dtype=np.int64)
        run_family_case(be, shapes, dtype, *trans, "odd", "per-kind", kind,
                        name="tiles-per-block", tiles_per_block=3)
        run_family_case(be, shapes, dtype, *trans, "aligned", "per-kind", kind,
                        name="tiles-per-block", tiles_per_block=3)


@pytest.fixture
def pipelined_be(be):
    """A CUDA backend whose variants of our families all run the cp.async pipeline
    (render.STAGES for every kind, 128x128/8x8 under its 2-block cap, as the bench's
    "allpipe" config), so its edges are tested whatever the committed table enables."""
    if be.name != "cuda":
        pytest.skip("the cp.async pipeline is CUDA-only (sm_80+)")
    from portgemm.backends.cuda import CudaBackend
    from portgemm.kernels import render, resources
    saved = dict(render.STAGES), dict(render.MIN_BLOCKS)
    render.STAGES.update({(FAMILY[d], k, d): 3 for d, k in KIND_CASES})
    render.MIN_BLOCKS.update({("portgemm", "128x128/8x8", "float32"): 2,
                              ("portgemm", "128x128/8x8", "float32", "tn"): 0})
    render.render.cache_clear()
    try:
        yield CudaBackend(be.cp)
    finally:
        render.STAGES.clear()
        render.STAGES.update(saved[0])
        render.MIN_BLOCKS.clear()
        render.MIN_BLOCKS.update(saved[1])
        render.render.cache_clear()
        resources._registered.clear()   # figures of the pipelined variants: forget them


@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_forced_pipeline(pipelined_be, dtype, trans):
    """Every kind on the pipeline: K at its edges, M and N off the tile, every layout,
    then several tiles per block (B^T falls back to the register path)."""
    for kind in kind_names(dtype):
        k = next(t for t in FAMILIES[FAMILY[dtype]] if t.kind == kind)
        ks = [0, *pipeline_k(k)]
        shapes = np.array([[k.tm + 1, k.tn - 1, kk] for kk in ks]
                          + [[k.tm - 3, 2 * k.tn + 5, kk] for kk in ks], dtype=np.int64)
        layouts = [LAYOUTS[i % len(LAYOUTS)] for i in range(len(shapes))]
        run_family_case(pipelined_be, shapes, dtype, *trans, layouts, "per-kind", kind,
                        name="forced-pipeline")
        run_family_case(pipelined_be, shapes[::3], dtype, *trans, "odd", "per-kind", kind,
                        name="forced-pipeline-packed", tiles_per_block=3)


FAT = "128x128/16x8"   # 128 accumulators a thread, 4 cp.async stages, 2 blocks an SM


@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
def test_fat_kind_builds_without_spill(be, trans):
    """The 128-accumulator kind compiles to at most 255 registers with no local memory,
    and two 128-thread blocks fit an SM, every transpose pair (CUDA: the driver's figures)."""
    from portgemm.kernels.variants import Variant
    if not hasattr(be, "function_attributes"):
        pytest.skip(f"{be.name}: no function attributes")
    k = next(t for t in FAMILIES["portgemm"] if t.kind == FAT)
    fn = be.function(Variant((k,), "float32", "tile-list", *trans))
    attrs = be.function_attributes(fn)
    assert attrs["local_size_bytes"] == 0, attrs
    assert attrs["num_regs"] <= 255, attrs
    assert be.max_active_blocks(fn, k.threads) >= 2, attrs


@pytest.mark.parametrize("layouts", [["aligned", "odd", "offset", "tight"], "aligned", "odd"],
                         ids=["mixed", "aligned", "odd"])
@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
def test_fat_kind_edges(be, trans, layouts):
    """128x128/16x8 over M, N and K off the tile and the pipeline (K < BK, K == 0, K past
    its four stages), per-GEMM alpha and beta (beta == 0 over NaN C), aligned leading
    dimensions (16-byte copies) and unaligned ones (4-byte copies) in one batch."""
    ks = (0, 1, 7, 8, 9, 24, 31, 32, 33, 67, 300)
    mn = ((128, 128), (1, 1), (127, 129), (129, 127), (255, 3), (3, 257), (200, 130))
    shapes = np.array([[m, n, k] for k in ks for m, n in mn], dtype=np.int64)
    if isinstance(layouts, list):
        layouts = [layouts[i % len(layouts)] for i in range(len(shapes))]
    run_family_case(be, shapes, "float32", *trans, layouts, "per-kind", FAT, name="fat")


# The SIMT kinds of both families (session 9's load, copy and epilogue paths).
SIMT_CASES = [(d, k.kind) for d in ("float32", "float64") for k in FAMILIES[FAMILY[d]]
              if k.engine == "simt"]


@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("dtype, kind", SIMT_CASES, ids=[f"{d}-{k}" for d, k in SIMT_CASES])
def test_short_k_random_batch(be, dtype, kind, trans):
    """A short-K random batch as the grid's losing cells draw them, scaled down: M, N in
    [1, 300], K in [1, 40] (a few k steps, so the first and last step and the epilogue
    carry most of the work), each GEMM with its own layout (aligned, odd, offset, tight:
    16-byte and element loads and copies, units that straddle a matrix edge, vector and
    element stores of C), alpha and beta (beta == 0 over NaN C, alpha == 0)."""
    rng = np.random.default_rng(stable_seed("short-k", dtype, kind, trans))
    shapes = np.stack([rng.integers(1, 301, 32), rng.integers(1, 301, 32),
                       rng.integers(1, 41, 32)], axis=1).astype(np.int64)
    shapes[0] = (256, 256, 32)          # whole tiles and whole k steps: every unit inside
    layouts = [LAYOUTS[i % len(LAYOUTS)] for i in range(len(shapes))]
    run_family_case(be, shapes, dtype, *trans, layouts, "per-kind", kind, name="short-k")
    # three tiles a block: a tile's epilogue (staged through shared memory where C is
    # unaligned) runs while the block's other warps start the next tile
    run_family_case(be, shapes[::2], dtype, *trans, layouts[::2], "per-kind", kind,
                    name="short-k-packed", tiles_per_block=3)


@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("dtype, kind", SIMT_CASES, ids=[f"{d}-{k}" for d, k in SIMT_CASES])
def test_lean_steps_long_k(be, dtype, kind, trans):
    """Many k steps wholly inside the matrix between edge ones: the lean main loop loads
    those from per-tile unit offsets with no checks (PG_LEAN_STEP) and switches to the
    checked loads at the matrix edge (edge tiles, a partial last step) and for the next
    tile's carried first step. M, N in [1, 300], K in [8, 300] (whole and partial last
    steps), each layout, three tiles a block."""
    rng = np.random.default_rng(stable_seed("lean-steps", dtype, kind, trans))
    shapes = np.stack([rng.integers(1, 301, 16), rng.integers(1, 301, 16),
                       rng.integers(8, 301, 16)], axis=1).astype(np.int64)
    shapes[0] = (256, 256, 256)         # every step of every tile inside
    shapes[1] = (257, 255, 263)         # edge tiles both ways, a partial last step
    layouts = [LAYOUTS[i % len(LAYOUTS)] for i in range(len(shapes))]
    run_family_case(be, shapes, dtype, *trans, layouts, "per-kind", kind, name="lean-steps",
                    tiles_per_block=3)


# 128-thread 8x8 kinds capped at 3 resident blocks an SM on sm_90 (kernels/render.py)
CAPPED_KINDS = ("128x64/8x8", "64x128/8x8")


@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("kind", CAPPED_KINDS)
def test_capped_kinds_keep_three_blocks(be, kind, trans):
    """On sm_90 the capped kinds keep 3 resident blocks an SM with no local memory, every
    transpose pair (the driver's figures for the compiled kernel)."""
    from portgemm.kernels.variants import Variant
    if not hasattr(be, "function_attributes") or be.arch() != "sm_90":
        pytest.skip(f"{be.name} {be.arch()}: the cap applies on sm_90 only")
    k = next(t for t in FAMILIES["portgemm"] if t.kind == kind)
    fn = be.function(Variant((k,), "float32", "tile-list", *trans))
    attrs = be.function_attributes(fn)
    assert attrs["local_size_bytes"] == 0, attrs
    assert be.max_active_blocks(fn, k.threads) >= 3, attrs


MMA_KINDS = [k.kind for k in FAMILIES["portgemm-f64"] if k.engine == "mma"]


@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("kind", MMA_KINDS)
def test_mma_kinds_elementwise(be, kind, trans):
    """Each fp64 MMA kind forced (DMMA on sm_80+), elementwise against a reference of
    exact products summed in long double: |C - ref| <= 1e-12 (|alpha| sum_k |a||b| +
    |beta| |c|) per element, which fp64 FMA accumulation over K <= 1000 meets with
    room to spare. Edge sizes: M, N, K not multiples of 8 or BK, K < BK, K == 0,
    M or N == 1; odd and aligned leading dimensions; per-GEMM alpha and beta, alpha == 0,
    beta == 0 over NaN C."""
    cp = getattr(be, "cp", None)
    if cp is None:
        pytest.skip(f"{be.name}: needs CuPy arrays")
    k = next(t for t in FAMILIES["portgemm-f64"] if t.kind == kind)
    ta, tb = trans
    seed = stable_seed("mma-elementwise", kind, ta, tb)
    rng = np.random.default_rng(seed)
    shapes = np.array([[k.tm, k.tn, k.tk], [1, 1, 1], [1, 37, 5], [37, 1, 9], [9, 7, 3],
                       [k.tm + 3, k.tn - 5, k.tk - 1], [2 * k.tm + 1, k.tn + 7, 0],
                       [130, 65, 1000], [64, 64, 17], [17, 129, 4 * k.tk + 3]], dtype=np.int64)
    batch = len(shapes)
    alpha = rng.uniform(-2, 2, batch)
    alpha[3] = 0.0
    beta = rng.uniform(-2, 2, batch)
    beta[::2] = 0.0
    A, B, C, refs, bounds = [], [], [], [], []
    for i, (m, n, kk) in enumerate(shapes):
        lay = "odd" if i % 3 == 0 else "aligned"
        a, av = make_operand(rng, *((kk, m) if ta else (m, kk)), "float64", lay)
        b, bv = make_operand(rng, *((n, kk) if tb else (kk, n)), "float64", lay)
        c, cv = make_operand(rng, m, n, "float64", lay)
        ha, hb, hc = a[av].astype(np.longdouble), b[bv].astype(np.longdouble), c[cv].copy()
        ha, hb = (ha.T if ta else ha), (hb.T if tb else hb)
        exact = np.einsum("ik,kj->ij", ha, hb) if kk else np.zeros((m, n), np.longdouble)
        scale = np.abs(ha) @ np.abs(hb) if kk else np.zeros((m, n), np.longdouble)
        refs.append(alpha[i] * exact + (beta[i] * hc if beta[i] else 0))
        bounds.append(1e-12 * (abs(alpha[i]) * scale + abs(beta[i]) * np.abs(hc)) + 1e-300)
        if beta[i] == 0:
            c[cv] = np.nan
        da, db, dc = cp.asarray(a), cp.asarray(b), cp.asarray(c)
        A.append(da[av])
        B.append(db[bv])
        C.append(dc[cv])
    plan = family_plan(shapes, "float64", be.arch(), "per-kind", kind)
    plan.run(A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=be)
    for i in range(batch):
        got = cp.asnumpy(C[i]).astype(np.longdouble)
        err = np.abs(got - refs[i])
        assert np.all(np.isfinite(got)) and np.all(err <= bounds[i]), (
            f"GEMM {i} {tuple(shapes[i])} alpha {alpha[i]:g} beta {beta[i]:g}: worst "
            f"{float(np.max(err / bounds[i])) if err.size else 0:.3g} x the bound (seed {seed})")


@pytest.mark.parametrize("kind", MMA_KINDS)
def test_mma_kinds_build_without_spill(be, kind):
    """The MMA kinds use no local memory (CUDA: the driver's figures), every transpose."""
    from portgemm.kernels.variants import Variant
    if not hasattr(be, "function_attributes"):
        pytest.skip(f"{be.name}: no function attributes")
    k = next(t for t in FAMILIES["portgemm-f64"] if t.kind == kind)
    for trans in TRANS:
        attrs = be.function_attributes(be.function(Variant((k,), "float64", "tile-list", *trans)))
        assert attrs["local_size_bytes"] == 0, (trans, attrs)

# --- persistent launches (backends/persistent.py) and the carried first k step ------

def _persistent_launches(plan) -> int:
    """Launches of ``plan`` made persistent on any device so far (fewer blocks than
    tiles)."""
    from portgemm.backends.launch import plan_states
    n = 0
    for st in plan_states(plan).values():
        for _, base, grid in st["launches"]:
            n += grid < plan.n_tiles
    return n


def _mixed_k(k):
    """K values around a kind's K step: none, less than one step, one step, just over,
    several with a remainder."""
    return np.array([0, 1, k.tk - 1, k.tk, k.tk + 1, 3 * k.tk + 5, 9 * k.tk])


@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_persistent_many_tiles_per_block(be, dtype, trans, monkeypatch):
    """Every SIMT kind run persistent with one resident block per CU, so each block runs
    several tiles of mixed K (K = 0, K < BK, remainders) and edge sizes one after the
    other, each prefetching the next one's first k step (float32); layouts mixed per
    GEMM, alpha = 0 and beta = 0 (NaN-poisoned C) among them. An MMA kind's launch of the
    same batch stays a block per planned block (persistent MMA launches not measured),
    and is checked as well."""
    from portgemm.backends import persistent
    monkeypatch.setattr(persistent, "MIN_LAUNCHES", 1)   # one kind's launch goes too
    cus = int(be.arch().compute_units)
    for kind in kind_names(dtype):
        k = next(t for t in FAMILIES[FAMILY[dtype]] if t.kind == kind)
        rng = np.random.default_rng(stable_seed("persistent", dtype, kind, trans))
        shapes, tiles = [], 0
        while tiles < 4 * cus:
            m, n = (int(x) for x in rng.integers(1, 3 * k.tm + 2, 2))
            kk = int(rng.choice(_mixed_k(k)))
            shapes.append((m, n, kk))
            tiles += -(-m // k.tm) * -(-n // k.tn)
        shapes = np.array(shapes, dtype=np.int64)
        layouts = list(rng.choice(LAYOUTS, len(shapes)))
        plan = family_plan(shapes, dtype, be.arch(), "per-kind", kind, 0, 1, resident=1)
        run_family_case(be, shapes, dtype, *trans, layouts, "per-kind", kind,
                        name="persistent", resident=1, plan=plan)
        if k.engine == "mma":
            assert _persistent_launches(plan) == 0, "an MMA kind's launch ran persistent"
        else:
            assert _persistent_launches(plan) >= 1, "the launch did not run persistent"


@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
def test_persistent_default_plan(be, trans):
    """The planner's own plan of a random batch (per-kind, several waves, at least
    persistent.MIN_LAUNCHES kinds' launches: the first such batch of a few seeds), run
    as the backend launches it: persistent where the occupancy model says so. Where no
    batch of the search takes several kinds (measured kind factors plan many as one kind
    alone), the last one runs, and its lone launch must not be persistent."""
    from portgemm.backends import persistent
    from portgemm.planner import plan as make_plan
    batch = 192
    # size and K bounds cycled: with measured kind factors many batches plan one kind
    # alone (one launch, never persistent), so the search looks a little wider
    bounds = [(400, 100), (400, 400), (300, 600), (1024, 256)]
    for attempt in range(32):
        rng = np.random.default_rng(stable_seed("persistent-default", trans, attempt))
        hi, khi = bounds[attempt % len(bounds)]
        shapes = np.stack([rng.integers(1, hi, batch), rng.integers(1, hi, batch),
                           rng.integers(0, khi, batch)], axis=1).astype(np.int64)
        plan = make_plan(shapes, "float32", be.arch())
        several = (plan.tile_counts() > 0).sum() >= persistent.MIN_LAUNCHES
        if plan.mode == "per-kind" and several:
            break
    assert plan.mode == "per-kind", plan.mode
    layouts = list(rng.choice(LAYOUTS, batch))
    run_family_case(be, shapes, "float32", *trans, layouts, "per-kind",
                    name="persistent-default", plan=plan)
    if several:
        assert _persistent_launches(plan) >= 1, "no launch ran persistent"
    else:   # none of the search's batches took several kinds: one launch, never persistent
        assert _persistent_launches(plan) == 0, "a lone launch ran persistent"
