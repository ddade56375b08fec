"""Alignment staging (planner/staging.py, backends/stage.py) on the host: the decision,
the workspace layout, the copy's table and block mapping, the NumPy backend's emulation
against float64 (every transpose pair, odd leading dimensions, beta = 0 over NaN C,
per-GEMM alpha and beta, K = 0, M = 0, bound calls, the packed API), nothing written when
validation fails, and the copy kernel compiling without warnings for every target."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm
from portgemm.backends.split import reduce_slots
from portgemm.backends.stage import copy_table, staged_in_call, stored_dims
from portgemm.errors import ShapeMismatch, ValidationError
from portgemm.kernels.variants import StageCopy
from portgemm.plan import staged_ld
from portgemm.planner import staging as staging_rule
from portgemm.planner.alignment import aligned_rows
from portgemm.problem import validate

from gpu_batches import stable_seed

TRANS = ((False, False), (False, True), (True, False), (True, True))
HALF = ("float16", "bfloat16")
# odd and even sizes (rows of 2, 4 and 16 bytes), K = 0, M = 0, N = 0, a 1 x 1
SHAPES = [(33, 17, 45), (64, 24, 30), (7, 9, 17), (20, 24, 0), (0, 8, 40), (8, 0, 40),
          (1, 1, 1), (40, 72, 64)]
ALPHA = np.array([1.5, 0.0, -0.75, 2.0, 1.0, 1.0, 1.25, 0.5])
BETA = np.array([0.0, 0.5, 2.0, 0.0, 1.0, 0.0, -1.0, 0.25])


def np_dtype(dtype):
    if dtype == "bfloat16":
        ml = pytest.importorskip("ml_dtypes")
        return np.dtype(ml.bfloat16)
    return np.dtype(dtype)


def host_operand(rng, rows, cols, dt, extra):
    """(rows, cols) values, a view with leading dimension cols + extra (0: dense)."""
    buf = np.zeros((max(rows, 1), cols + extra), dt)
    buf[:rows, :cols] = rng.standard_normal((rows, cols)).astype(np.float32).astype(dt)
    return buf[:rows, :cols]


def host_case(dtype, ta, tb, extra=0, shapes=SHAPES, alpha=ALPHA, beta=BETA):
    dt = np_dtype(dtype)
    rng = np.random.default_rng(stable_seed("staging", dtype, ta, tb, extra))
    A = [host_operand(rng, *((k, m) if ta else (m, k)), dt, extra) for m, n, k in shapes]
    B = [host_operand(rng, *((n, k) if tb else (k, n)), dt, extra) for m, n, k in shapes]
    C = [host_operand(rng, m, n, dt, 0) for m, n, k in shapes]
    for i, b in enumerate(beta):
        if b == 0:
            C[i][...] = np.nan
    ref = []
    for i, (a, b, c) in enumerate(zip(A, B, C)):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        r = alpha[i] * ((a64.T if ta else a64) @ (b64.T if tb else b64))
        if beta[i] != 0:
            r = r + beta[i] * c.astype(np.float64)
        ref.append(r)
    return A, B, C, ref


def check(got, ref, dtype, K):
    tol = {"float16": 2e-2, "bfloat16": 1e-1}[dtype]
    for i, (g, r) in enumerate(zip(got, ref)):
        g = g.astype(np.float64)
        assert np.isfinite(g).all(), f"GEMM {i}: non-finite"
        scale = 1.0 + np.abs(r).max(initial=0.0)
        assert np.abs(g - r).max(initial=0.0) <= tol * scale * max(1.0, np.sqrt(K[i]) / 4), i


# -- the decision ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", HALF)
def test_forced_staging_reserves_the_unaligned_live_operands(dtype):
    p = portgemm.plan(SHAPES, dtype, arch="sm_90", staging=True)
    st = p.staging
    assert st is not None and p.split is None and st.plan.staging is None
    s = np.array(SHAPES)
    live = (s > 0).all(axis=1)
    want = ~aligned_rows(s, dtype) & live[:, None]
    np.testing.assert_array_equal(st.reserved, want)
    assert st.plan.shapes.tolist() == p.shapes.tolist()
    assert "staging" in p.describe() and "staged=" in repr(p)
    assert p.predicted_ms == st.predicted_ms
    with pytest.raises(ValueError):
        st.offset[0, 0] = 5   # read-only


def test_staging_false_and_other_dtypes():
    assert portgemm.plan(SHAPES, "float16", arch="sm_90", staging=False).staging is None
    for dtype in ("float32", "float64"):
        assert portgemm.plan(SHAPES, dtype, arch="sm_90").staging is None
        with pytest.raises(ValidationError):
            portgemm.plan(SHAPES, dtype, arch="sm_90", staging=True)
    with pytest.raises(ValidationError):
        portgemm.plan(SHAPES, "float16", arch="sm_90", staging="yes")
    # the 16-bit dtypes never split, so a staged plan never is
    with pytest.raises(ValidationError):
        portgemm.plan(SHAPES, "float16", arch="sm_90", split_k=True, staging=True)


def test_options_tell_plans_apart():
    a = portgemm.plan(SHAPES, "float16", arch="sm_90", staging=True)
    b = portgemm.plan(SHAPES, "float16", arch="sm_90", staging=False)
    c = portgemm.plan(SHAPES, "float16", arch="sm_90")
    assert a is not b and a.staging is not None and b.staging is None
    assert c is portgemm.plan(SHAPES, "float16", arch="sm_90")


def _counting(monkeypatch):
    calls = []
    real = staging_rule.consider

    def spy(direct, lds, replan, force=False):
        def counted(rows):
            calls.append(rows)
            return replan(rows)
        return real(direct, lds, counted, force)
    monkeypatch.setattr(staging_rule, "consider", spy)
    portgemm.planner.clear_cache()
    return calls


def test_short_k_batch_of_1024_is_staged_onto_the_wgmma_tiles():
    """1024 GEMMs of K up to 128: with the 16-bit kind factors measured (session 16), the
    model prices the wgmma tiles on staged rows well below the mma.sync tiles on the
    batch's own rows, and stages. H100, one process: 0.72 ms staged, 1.13 ms for the plan
    before the factors (direct, mixed tiles); predicted 0.66 staged, 1.14 direct.
    (Session 9's kernel, staging onto the mma.sync tiles, measured 0.90-0.92x here.)"""
    from portgemm.benchmark.workloads import grid_cases
    case = next(c for c in grid_cases(0) if c.name == "1024/128 b1024")
    p = portgemm.plan(case.shapes, "float16", arch="sm_90")
    assert p.staging is not None
    assert any(n.startswith("staging:") and "g64x128" in n for n in p.notes), p.notes


def test_aligned_batch_is_never_replanned(monkeypatch):
    calls = _counting(monkeypatch)
    shapes = [(64, 128, 256), (40, 16, 8), (512, 512, 512)]   # every lda, ldb % 8 == 0
    p = portgemm.plan(shapes, "float16", arch="sm_90")
    assert p.staging is None and not calls
    assert not any(n.startswith("staging") for n in p.notes)


def test_small_batch_is_ruled_out_by_the_bound(monkeypatch):
    """One tiny unaligned GEMM: the copy's launch alone reaches the direct plan's time,
    so the bound says so without planning again."""
    calls = _counting(monkeypatch)
    p = portgemm.plan([(9, 7, 5)], "float16", arch="sm_90")
    assert p.staging is None and not calls
    assert any(n.startswith("staging: not weighed") for n in p.notes), p.notes


def test_large_unaligned_batch_is_staged_by_the_model():
    """The grid's 1024/512 batch of 256 (random sizes, tight leading dimensions): the
    measured speedup of aligned rows outweighs the copy, so the model stages it (it
    measured 1.19x staged on the H100, bench/NOTES.md session 9)."""
    from portgemm.benchmark.workloads import grid_cases
    case = next(c for c in grid_cases(0) if c.name == "1024/512 b256")
    p = portgemm.plan(case.shapes, "bfloat16", arch="sm_90")
    assert p.staging is not None, p.notes
    st = p.staging
    assert st.predicted_ms < st.direct_ms and st.copy_ms > 0


def test_model_needs_figures_for_the_arch():
    """No measured narrow-copy figures for sm_80: the model sees no gain and never
    stages there by itself (staging=True still does)."""
    from portgemm.benchmark.workloads import grid_cases
    case = next(c for c in grid_cases(0) if c.name == "1024/512 b256")
    assert portgemm.plan(case.shapes, "float16", arch="sm_80").staging is None
    assert portgemm.plan(case.shapes, "float16", arch="sm_80", staging=True).staging is not None


def test_lds_decide_what_is_reserved():
    shapes = [(64, 64, 64), (64, 64, 64)]
    lds = np.array([[64, 65], [67, 64]])
    p = portgemm.plan(shapes, "float16", arch="sm_90", lds=lds, staging=True)
    np.testing.assert_array_equal(p.staging.reserved, [[False, True], [True, False]])
    assert portgemm.plan(shapes, "float16", arch="sm_90", staging=True).staging is None


# -- the workspace and the table ------------------------------------------------------

@pytest.mark.parametrize("dtype", HALF)
def test_workspace_offsets_are_aligned_and_disjoint(dtype):
    p = portgemm.plan(SHAPES, dtype, arch="sm_90", staging=True)
    st = p.staging
    isz = p.dtype.itemsize
    s = np.array(SHAPES)
    spans = staging_rule.staged_span(s, isz)
    off = st.offset[st.reserved]
    assert (off * isz % 16 == 0).all()
    assert (st.offset[~st.reserved] == -1).all()
    size = spans[st.reserved]
    order = np.argsort(off)
    ends = off[order] + size[order]
    assert (ends[:-1] <= off[order][1:]).all() and ends[-1] <= st.workspace_elems
    # either orientation fits: M x staged_ld(K) and K x staged_ld(M) for A
    M, K = s[:, 0], s[:, 2]
    assert (spans[:, 0] >= M * staged_ld(K, isz)).all()
    assert (spans[:, 0] >= K * staged_ld(M, isz)).all()


def _batch(A, B, C, alpha, beta, ta, tb):
    return validate(A, B, C, alpha, beta, ta, tb)


@pytest.mark.parametrize("trans", TRANS)
def test_copy_table_covers_every_unit_once(trans):
    ta, tb = trans
    A, B, C, _ = host_case("float16", ta, tb, extra=3)
    batch = _batch(A, B, C, ALPHA, BETA, ta, tb)
    p = portgemm.plan(SHAPES, "float16", arch="sm_90", staging=True)
    st = p.staging
    ws = 1 << 20
    rec, start, staged = copy_table(st, batch, ws, chunk=64)
    rows, cols = stored_dims(batch)
    np.testing.assert_array_equal(staged, staged_in_call(st, batch))
    assert not staged[ALPHA == 0].any()                  # alpha = 0 never reads A or B
    assert not staged[(rows == 0) | (cols == 0)].any()   # empty matrices are not copied
    assert rec.shape[0] == int(staged.sum()) and rec.shape[0] > 0
    assert ((rec["dst"] - ws) % 16 == 0).all() and (rec["dst_ld"] % 8 == 0).all()
    assert (rec["dst_ld"] >= rec["cols"]).all() and (rec["dst_ld"] - rec["cols"] < 8).all()
    units = rec["rows"].astype(np.int64) * (rec["dst_ld"] // 8)
    r, e = reduce_slots(start, units, 64)
    for k in range(rec.shape[0]):
        np.testing.assert_array_equal(np.sort(e[r == k]), np.arange(units[k]))


def test_run_time_alignment_decides_the_copy():
    """A reserved operand whose rows are aligned in the call (a padded view) is read in
    place; one not reserved is never copied."""
    shapes = [(16, 16, 17), (16, 16, 17)]
    p = portgemm.plan(shapes, "float16", arch="sm_90", staging=True)
    assert p.staging.reserved[:, 0].all()
    rng = np.random.default_rng(3)
    A = [host_operand(rng, 16, 17, np.float16, 7), host_operand(rng, 16, 17, np.float16, 0)]
    B = [host_operand(rng, 17, 16, np.float16, 0) for _ in range(2)]
    C = [np.zeros((16, 16), np.float16) for _ in range(2)]
    batch = _batch(A, B, C, np.ones(2), np.zeros(2), False, False)
    staged = staged_in_call(p.staging, batch)
    assert staged[:, 0].tolist() == [False, True] and not staged[:, 1].any()


# -- results on the NumPy backend -----------------------------------------------------

@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("extra", [0, 1], ids=["dense", "odd-ld"])
@pytest.mark.parametrize("entry", ["run", "bind"])
def test_numpy_results_match_float64(dtype, trans, extra, entry):
    ta, tb = trans
    A, B, C, ref = host_case(dtype, ta, tb, extra)
    p = portgemm.plan(SHAPES, dtype, arch="sm_90", staging=True)
    kw = dict(alpha=ALPHA, beta=BETA, trans_a=ta, trans_b=tb, backend="numpy")
    if entry == "run":
        p.run(A, B, C, **kw)
    else:
        p.bind(A, B, C, **kw)()
    check(C, ref, dtype, [s[2] for s in SHAPES])


def test_numpy_staged_equals_direct():
    A, B, C, _ = host_case("float16", False, True, 1)
    C2 = [c.copy() for c in C]
    kw = dict(alpha=ALPHA, beta=BETA, trans_b=True, backend="numpy")
    portgemm.plan(SHAPES, "float16", arch="sm_90", staging=True).run(A, B, C, **kw)
    portgemm.plan(SHAPES, "float16", arch="sm_90", staging=False).run(A, B, C2, **kw)
    for a, b in zip(C, C2):
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=2e-3,
                                   atol=2e-3)


def test_packed_api_on_numpy(monkeypatch):
    """gemm_grouped_general (host offsets, odd leading dimensions) through a staged plan:
    the planner is made to stage every unaligned operand."""
    from portgemm import planner
    from portgemm.grouped import gemm_grouped_general
    monkeypatch.setattr(planner, "_staging_option",
                        lambda s, dt: True if dt in staging_rule.STAGED_DTYPES else s)
    planner.clear_cache()
    rng = np.random.default_rng(11)
    sizes = np.array([[5, 9, 13], [16, 8, 7], [0, 4, 4], [11, 3, 0]])
    lda, ldb, ldc = 15, 11, 9
    a_off, b_off, c_off = [0, 80, 300, 310], [0, 150, 250, 300], [0, 50, 200, 210]
    A = rng.standard_normal(400).astype(np.float16)
    B = rng.standard_normal(400).astype(np.float16)
    C = np.full(400, np.nan, np.float16)
    gemm_grouped_general(A, B, C, sizes, a_off, b_off, c_off, lda, ldb, ldc, alpha=1.5,
                         beta=0.0, backend="numpy")
    written = np.zeros(400, bool)
    for g, (m, n, k) in enumerate(sizes):
        if m == 0 or n == 0:
            continue
        for r in range(m):
            written[c_off[g] + r * ldc:c_off[g] + r * ldc + n] = True
        a = np.lib.stride_tricks.as_strided(A[a_off[g]:], (m, k), (2 * lda, 2)).astype(np.float64)
        b = np.lib.stride_tricks.as_strided(B[b_off[g]:], (k, n), (2 * ldb, 2)).astype(np.float64)
        c = np.lib.stride_tricks.as_strided(C[c_off[g]:], (m, n), (2 * ldc, 2)).astype(np.float64)
        np.testing.assert_allclose(c, 1.5 * a @ b, rtol=2e-2, atol=2e-2)
    assert np.isnan(C[~written]).all()   # nothing outside the C's


def test_nothing_written_when_validation_fails():
    A, B, C, _ = host_case("float16", False, False, 1)
    before = [c.copy() for c in C]
    bad = list(A)
    bad[0] = np.zeros((33, 44), np.float16)   # K 45 expected
    p = portgemm.plan(SHAPES, "float16", arch="sm_90", staging=True)
    with pytest.raises(ShapeMismatch):
        p.run(bad, B, C, alpha=ALPHA, beta=BETA, backend="numpy")
    for c, b in zip(C, before):
        np.testing.assert_array_equal(c, b)


# -- the kernel -----------------------------------------------------------------------

def test_one_copy_entry_point_for_both_16_bit_dtypes():
    assert StageCopy("float16").name == StageCopy("bfloat16").name == "pg_stage_copy_16bit"
