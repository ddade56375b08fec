"""The benchmark's parts on the CPU: roofline arithmetic, the timing protocol, the
NaN-poisoned check, the runner's check-before-time rule, reports, workloads, ncu output."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm
from portgemm.benchmark import check as chk
from portgemm.benchmark import ncu, report, roofline as rl, timing, workloads as wl
from portgemm.benchmark.device import open_device
from portgemm.benchmark.entries import methods as entry_methods
from portgemm.benchmark.methods import Method, Prepared
from portgemm.benchmark.operands import make_operands
from portgemm.benchmark.runner import run_cases


# --- roofline -------------------------------------------------------------------------
def test_case_bytes_counts_a_b_read_and_c_written():
    assert rl.case_bytes([[2, 3, 4]], 4) == 4 * (2 * 4 + 4 * 3 + 2 * 3)
    assert rl.case_bytes([[2, 3, 4], [1, 1, 1]], 8) == 8 * (26 + 3)


@pytest.mark.parametrize("flops, nbytes, limiter, seconds", [
    (1e12, 1e6, "compute", 0.1),       # 1e12 / 1e13
    (1e6, 1e10, "memory", 0.01),       # 1e10 / 1e12
    (1e3, 1e3, "launch", 5e-6),
])
def test_roofline_takes_the_largest_term(flops, nbytes, limiter, seconds):
    c = rl.Ceilings(flops_per_s=1e13, bytes_per_s=1e12, launch_s=5e-6)
    s, lim = rl.roofline(flops, nbytes, c)
    assert lim == limiter and s == pytest.approx(seconds)


def test_fraction_of_roofline():
    assert rl.fraction_of_roofline(2.0, 1.0) == 0.5
    assert np.isnan(rl.fraction_of_roofline(0.0, 1.0))


# --- timing ---------------------------------------------------------------------------
class FakeClock:
    """A device whose calls take ``ms`` each; counts calls and flushes."""
    def __init__(self, ms):
        self.ms, self.calls, self.flushes = ms, 0, 0

    def time_calls(self, fn, n, flush=False):
        self.calls += n
        self.flushes += n if flush else 0
        return [self.ms] * n


def test_reps_for_is_clamped():
    assert timing.reps_for(100, 10, 3, 50) == 10
    assert timing.reps_for(100, 1000, 3, 50) == 3
    assert timing.reps_for(100, 0.001, 3, 50) == 50


@pytest.mark.parametrize("mode, flushes", [("warm", 0), ("cold-l2", 1 + 4 + 8)])
def test_measure_budgets_and_flushes(mode, flushes):
    dev = FakeClock(ms=5.0)
    ms, reps = timing.measure(dev, None, mode, timing.Budget(warmup_ms=20, rep_ms=40,
                                                             min_reps=3, max_reps=100))
    assert (ms, reps) == (5.0, 8)
    assert dev.calls == 1 + 4 + 8 and dev.flushes == flushes


def test_measure_rejects_an_unknown_mode():
    with pytest.raises(ValueError, match="unknown timing mode"):
        timing.measure(FakeClock(1.0), None, "hot", timing.Budget())


# --- check ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dev():
    return open_device("numpy")


def _ops(dev, shapes=((3, 4, 5), (0, 2, 3), (6, 1, 2))):
    return make_operands(dev, np.array(shapes, np.int64), "float32", seed=1)


def test_check_passes_a_correct_method_and_fails_nan_and_wrong(dev):
    ops = _ops(dev)

    def good():
        for a, b, c in zip(ops.A, ops.B, ops.C):
            np.matmul(a, b, out=c)
    assert chk.check(dev, ops, Prepared(good))[0] <= chk.TOLERANCE["float32"]

    def skips_last():
        for a, b, c in list(zip(ops.A, ops.B, ops.C))[:-1]:
            np.matmul(a, b, out=c)
    err, worst = chk.check(dev, ops, Prepared(skips_last))
    assert err == np.inf and worst == 2   # the NaN left in C is caught

    def off_by_a_bit():
        good()
        ops.C[0][1, 1] += 1e-2
    err, worst = chk.check(dev, ops, Prepared(off_by_a_bit))
    assert err > chk.TOLERANCE["float32"] and worst == 0


def test_per_gemm_errors_empty_gemm_is_zero():
    ref = np.array([1.0, 2.0])
    err = chk.per_gemm_errors(np, np.array([1.0, 2.0], np.float32), ref, np.array([0, 0, 2]))
    assert err.tolist() == [0.0, 0.0]


def test_runner_never_times_a_method_that_failed_its_check(dev):
    calls = []

    def broken(dev_, ops):
        return Prepared(lambda: calls.append(1))   # writes nothing: C stays NaN
    case = wl.Case("t", np.array([[4, 4, 4]], np.int64))
    res = run_cases(dev, [case], [Method("broken", "peer", broken)], "float32", ["warm"],
                    timing.QUICK, rl.Ceilings(1e9, 1e9, 1e-6), show_progress=False)
    (rec,) = res.records
    assert rec["status"] == "failed" and "GEMM 0" in rec["error"] and "ms" not in rec
    assert len(calls) == 1   # the check's call only


def test_runner_reports_a_method_that_raises(dev):
    def raises(dev_, ops):
        raise RuntimeError("no\nsecond line")
    case = wl.Case("t", np.array([[4, 4, 4]], np.int64))
    res = run_cases(dev, [case], [Method("r", "peer", raises)], "float32", ["warm"],
                    timing.QUICK, rl.Ceilings(1e9, 1e9, 1e-6), show_progress=False)
    assert res.records[0]["error"] == "RuntimeError: no"


def test_grouped_entry_packs_ragged_m(dev, monkeypatch):
    """The packed entry hands gemm_grouped A (sum M, K), B (G, K, N), C (sum M, N) and
    offs = cumulative row ends; a reference gemm_grouped built on that contract passes."""
    seen = {}

    def fake(A, B, C, offs, backend=None, **kw):
        ends = np.asarray(offs)
        seen["offs"] = ends.tolist()
        start = 0
        for g, end in enumerate(ends):
            np.matmul(A[start:end], B[g], out=C[start:end])
            start = end
    monkeypatch.setattr(portgemm, "gemm_grouped", fake, raising=False)
    from portgemm.benchmark import entries
    (m,) = entries.methods(["grouped"], ["wavefront-tlp"])
    ops = _ops(dev, ((3, 4, 5), (0, 4, 5), (6, 4, 5)))
    assert chk.check(dev, ops, m.make(dev, ops))[0] <= 1e-5
    assert seen["offs"] == [3, 3, 9]
    from portgemm.benchmark.methods import Skip
    with pytest.raises(Skip, match="one N and one K"):
        m.make(dev, _ops(dev))


def test_entries_carry_their_plan(dev):
    ops = _ops(dev)
    for m in entry_methods(["bound", "run", "gemm_vbatched"], ["coordinated"]):
        p = m.make(dev, ops)
        assert p.plan.strategy == "coordinated" and 0 <= p.plan.predicted_occupancy() <= 1


# --- reports --------------------------------------------------------------------------
def _rec(case, method, ms, kind="peer", mode="warm"):
    return dict(case=case, range=case, batch=1, method=method, kind=kind, mode=mode, ms=ms,
                status="ok", gflops=1.0 / ms, flops=1e6, roofline_ms=0.5,
                roofline_fraction=0.5 / ms, limiter="launch")


def test_speedups_geomean_and_losing_cells():
    recs = [_rec("a", "ours", 1.0, "portgemm"), _rec("a", "peer", 4.0),
            _rec("b", "ours", 2.0, "portgemm"), _rec("b", "peer", 1.0)]
    assert report.speedups(recs, "ours", "peer", "warm") == [("a", 4.0), ("b", 0.5)]
    assert report.geomean([4.0, 0.25]) == pytest.approx(1.0)
    text = "\n".join(report.summary_lines(recs))
    assert "| warm | peer | 1.41x | 2 | 1 |" in text
    assert "| warm | b | peer | 0.50x | launch | 25% |" in text
    table = report.table(recs, "warm")
    assert "4.00x" in table and "0.50x" in table


# --- workloads ------------------------------------------------------------------------
def test_grid_is_12_ranges_by_4_batches_and_subsets_draw_the_same_shapes():
    full = wl.grid_cases(seed=3)
    assert len(full) == 48 and {c.batch for c in full} == {8, 64, 256, 1024}
    by_name = {c.name: c for c in full}
    for c in wl.grid_cases(3, wl.QUICK_RANGES, wl.QUICK_BATCHES):
        assert np.array_equal(c.shapes, by_name[c.name].shapes)
    c = by_name["1024/128 b256"]
    assert c.shapes[:, :2].min() >= 16 and c.shapes[:, :2].max() <= 1024
    assert c.shapes[:, 2].min() >= 16 and c.shapes[:, 2].max() <= 128
    assert not np.array_equal(wl.grid_cases(4)[0].shapes, full[0].shapes)


def test_inception_is_table_6():
    cases = wl.inception_cases()
    assert [c.batch for c in cases] == [4, 3, 4, 3, 3, 4, 3, 5, 5]
    assert all((c.shapes[:, 2] == 192).all() for c in cases)
    assert cases[8].shapes[2].tolist() == [49, 384, 192]


def test_shapes_file_forms(tmp_path):
    (tmp_path / "a.json").write_text('{"shapes": [{"M": 1, "N": 2, "K": 3}, [4, 5, 6]]}')
    assert wl.read_shapes_file(tmp_path / "a.json").shapes.tolist() == [[1, 2, 3], [4, 5, 6]]
    (tmp_path / "b.csv").write_text("m, n, k\n 7, 8, 9 \n\n")
    assert wl.read_shapes_file(tmp_path / "b.csv").shapes.tolist() == [[7, 8, 9]]


# --- ncu ------------------------------------------------------------------------------
def test_ncu_csv_is_duration_weighted():
    head = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'
    rows = ['"0","k","sm__warps_active.avg.pct_of_peak_sustained_active","%","20"',
            '"0","k","gpu__time_duration.sum","ns","1,000"',
            '"1","k","sm__warps_active.avg.pct_of_peak_sustained_active","%","80"',
            '"1","k","gpu__time_duration.sum","ns","3,000"']
    text = "==PROF== Connected\n" + "\n".join([head, *rows]) + "\n==PROF== Disconnected\n"
    assert ncu.parse_csv(text) == pytest.approx(65.0)
    assert ncu.parse_csv("==PROF== nothing\n") is None
    assert ncu.find_ncu("off") is None


# --- the Triton peer compiles (where Triton is installed; no device needed) -------------
@pytest.mark.toolchain
def test_triton_grouped_kernel_compiles_for_sm_90():
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from portgemm.benchmark import triton_grouped as tg
    sig = {"a_ptrs": "*i64", "b_ptrs": "*i64", "c_ptrs": "*i64", "sizes": "*i32",
           "lds": "*i32", "group_count": "i32", "NUM_PROGRAMS": "constexpr",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}
    consts = {"NUM_PROGRAMS": 132, "BLOCK_M": tg.BLOCK_M, "BLOCK_N": tg.BLOCK_N,
              "BLOCK_K": tg.BLOCK_K}
    k = triton.compile(ASTSource(fn=tg._grouped_kernel, signature=sig, constexprs=consts),
                       target=GPUTarget("cuda", 90, 32))
    assert "tf32" not in k.asm["ptx"]   # IEEE fp32: no TF32 MMA
