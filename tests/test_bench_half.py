"""The tensor-core peer benches' CPU-side logic: format tolerances (checked against
simulated fp16, bf16 and tf32 GEMMs), MoE workloads, the report, cuBLAS type table."""
import math

import numpy as np
import pytest

import portgemm
from portgemm.benchmark import cublas, formats, half_peers, workloads
from portgemm.benchmark.check import TOLERANCE
from portgemm.benchmark.formats import FORMATS, parse_formats, tolerance
from portgemm.benchmark.half_report import best_peer, format_table, geomean, notes
from portgemm.benchmark.methods import Skip


def _round_bits(x32: np.ndarray, keep: int) -> np.ndarray:
    """fp32 values rounded (to nearest, ties away) to ``keep`` stored mantissa bits."""
    drop = 23 - keep
    u = x32.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + (1 << (drop - 1))) >> drop) << drop
    return u.astype(np.uint32).view(np.float32)


def _gemm_error(fmt, m=48, n=40, k=512, seed=0):
    """Relative Frobenius error of a simulated GEMM in the format: stored inputs,
    products rounded as the format does (tf32), fp32 accumulation, C rounded."""
    rng = np.random.default_rng(seed)
    store = {"float16": lambda x: x.astype(np.float16).astype(np.float32),
             "bfloat16": lambda x: _round_bits(x.astype(np.float32), 7),
             "tf32": lambda x: x.astype(np.float32), "float32": lambda x: x.astype(np.float32)}
    a = store[fmt.name](rng.random((m, k)) - 0.5)
    b = store[fmt.name](rng.random((k, n)) - 0.5)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    ma, mb = (_round_bits(a, 10), _round_bits(b, 10)) if fmt.name == "tf32" else (a, b)
    acc = np.zeros((m, n), np.float32)
    for j in range(k):      # fp32 accumulation, one rank-1 update at a time
        acc += np.outer(ma[:, j], mb[j, :]).astype(np.float32)
    c = store[fmt.name](acc) if fmt.name != "tf32" else acc
    return float(np.linalg.norm(c - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("name", ["float16", "bfloat16", "tf32", "float32"])
def test_tolerance_holds_a_simulated_gemm_of_the_format(name):
    fmt = FORMATS[name]
    err = _gemm_error(fmt)
    assert 0 < err <= tolerance(fmt, 512)
    assert err > tolerance(fmt, 512) / 30     # and is not absurdly loose


def test_fp32_through_tf32_misses_the_fp32_tolerance():
    """A peer computing fp32 on TF32 tensor cores behind our back is caught."""
    assert _gemm_error(FORMATS["tf32"]) > 10 * tolerance(FORMATS["float32"], 512)


def test_fp16_through_bf16_misses_the_fp16_tolerance():
    assert _gemm_error(FORMATS["bfloat16"]) > tolerance(FORMATS["float16"], 512)


def test_tolerances_order_and_agree_with_the_ieee_gate():
    t = {n: tolerance(f, 512) for n, f in FORMATS.items()}
    assert t["bfloat16"] > t["float16"] > t["float32"] > t["float64"]
    assert t["tf32"] > t["3xtf32"] > t["float32"] and t["3xtf32"] < 2 * t["float32"]
    assert t["float32"] <= TOLERANCE["float32"] and t["float64"] <= TOLERANCE["float64"]
    assert tolerance(FORMATS["float16"], 512) == pytest.approx(
        formats.SAFETY * (2 ** -11 + math.sqrt(512) * 2 ** -24))


def test_parse_formats():
    assert [f.name for f in parse_formats("float16, bfloat16")] == ["float16", "bfloat16"]
    with pytest.raises(ValueError, match="int8"):
        parse_formats("int8")
    with pytest.raises(ValueError, match="float64"):
        parse_formats("float64", ("float16",))


def test_moe_counts_route_every_token_to_top_k_distinct_experts():
    rng = np.random.default_rng(1)
    c = workloads.moe_counts(rng, 1000, 16, 4)
    assert c.shape == (16,) and c.sum() == 4000 and c.max() <= 1000
    assert abs(c.mean() - 250) < 1e-9 and c.min() > 150     # binomial(1000, 1/4)
    again = workloads.moe_counts(np.random.default_rng(1), 1000, 16, 4)
    assert (c == again).all()
    with pytest.raises(workloads.WorkloadError, match="top_k"):
        workloads.moe_counts(rng, 10, 4, 5)


def test_zipf_routing_favours_the_first_experts():
    pop = workloads.expert_popularity(64, "zipf")
    assert pop.sum() == pytest.approx(1.0) and pop[0] == pytest.approx(64 * pop[63])
    assert workloads.expert_popularity(8, "uniform") is None
    c = workloads.moe_counts(np.random.default_rng(2), 4000, 64, 8, pop)
    assert c.sum() == 32000 and c.max() <= 4000          # distinct experts per token
    assert c[:4].sum() > 4 * c[-4:].sum()
    with pytest.raises(workloads.WorkloadError, match="routing"):
        workloads.expert_popularity(8, "skewed")
    z = workloads.moe_cases(tokens=256, routing="zipf", experts={64})
    assert [c.shapes[:, 0].sum() for c in z] == [256 * 8, 256 * 8]


def test_moe_cases_are_up_and_down_projections_of_each_layer():
    cases = workloads.moe_cases(tokens=512, seed=3)
    assert len(cases) == 2 * len(workloads.MOE_LAYERS)
    experts = sorted({c.batch for c in cases})
    assert experts == [8, 16, 32, 64, 128]
    for (model, e, hidden, ffn, top_k), up, down in zip(workloads.MOE_LAYERS, cases[::2], cases[1::2]):
        assert up.name == f"{model} up E{e}" and down.name == f"{model} down E{e}"
        assert (up.shapes[:, 1:] == [ffn, hidden]).all() and (down.shapes[:, 1:] == [hidden, ffn]).all()
        assert (up.shapes[:, 0] == down.shapes[:, 0]).all() and up.shapes[:, 0].sum() == 512 * top_k
    only = workloads.moe_cases(tokens=64, experts={8, 128})
    assert [c.batch for c in only] == [8, 8, 128, 128]


def _rec(case, method, status, gflops=None, fmt="bfloat16", err=None):
    r = dict(case=case, batch=8, format=fmt, method=method, status=status, note="why")
    if gflops is not None:
        r["gflops"] = gflops
    if err is not None:
        r["err"] = err
    return r


def test_report_ratio_to_the_best_passing_peer():
    recs = [
        _rec("a", "ours", "ok", 300.0, err=1e-3), _rec("a", "cublas-grouped", "ok", 100.0),
        _rec("a", "torch-bmm", "failed", None, err=1.0),            # wrong: never the best
        _rec("b", "ours", "ok", 50.0), _rec("b", "cublas-grouped", "ok", 100.0),
        _rec("b", "torch-bmm", "ok", 200.0),
        _rec("c", "ours", "skipped"), _rec("c", "cublas-grouped", "ok", 10.0),
        _rec("x", "ours", "ok", 1.0, fmt="float16"),                # another format
    ]
    assert best_peer({r["method"]: r for r in recs[:3]}) == ("cublas-grouped", 100.0)
    text, sums = format_table(recs, "bfloat16", ("ours", "cublas-grouped", "torch-bmm"), "ours",
                              peak=1e12, against=("cublas-grouped",))
    best, cub = sums
    assert best["against"] == "best peer" and best["cases"] == 3
    assert best["below_1"] == 1 and best["no_ratio"] == 1
    assert best["geomean"] == pytest.approx(math.sqrt(3.0 * 0.25))
    assert cub["against"] == "cublas-grouped" and cub["geomean"] == pytest.approx(math.sqrt(3.0 * 0.5))
    rows = {line.split()[0]: line for line in text.splitlines()[2:5]}
    assert "FAIL" in rows["a"] and "3.00" in rows["a"] and "30.0" in rows["a"]  # 300 GF of 1 TF
    assert "n/a" in rows["c"]
    assert "ours / best peer: geomean 0.866x over 2 cases, below 1.0x in 1; no ratio in 1" in text
    assert "ours / cublas-grouped: geomean 1.225x" in text
    assert any("failed (a)" in n for n in notes(recs))


def test_geomean_ignores_missing():
    assert geomean([None, 2.0, 8.0]) == pytest.approx(4.0) and geomean([None]) is None


def test_cublas_type_table_and_operand_readers():
    assert cublas.TYPES["bfloat16"][1:3] == (14, 68) and cublas.TYPES["float16"][1:3] == (2, 68)
    assert cublas.TYPES["tf32"][:3] == ("float32", 0, 77)
    assert cublas.TYPES["float64"][1:3] == (1, 70)
    assert all(t[3] is np.float32 for k, t in cublas.TYPES.items() if k != "float64")
    assert cublas.dtype_name(np.zeros(2, np.float16)) == "float16"

    class TorchDtype:      # what a torch dtype looks like to dtype_name
        __module__ = "torch"

        def __str__(self):
            return "torch.bfloat16"

    class Tensor:
        dtype = TorchDtype()
        data = object()    # a torch tensor's .data has no .ptr

        def data_ptr(self):
            return 4096

    class Mem:
        ptr = 8192

    class CupyArray:
        data = Mem()

    assert cublas.dtype_name(Tensor()) == "bfloat16"
    assert cublas.data_ptr(Tensor()) == 4096 and cublas.data_ptr(CupyArray()) == 8192


def test_ours_not_taking_a_format_is_reported_na():
    """portgemm's typed error for a format it does not take becomes a Skip 'n/a'."""
    from portgemm.backends.base import get_backend

    class Ops:
        shapes = np.array([[32, 32, 32]])
        fmt = FORMATS["bfloat16"]
        A = B = C = []
    ctx = half_peers.Context(torch=None, cp=None, be=get_backend("numpy"), cublas="none")
    try:
        portgemm.plan(Ops.shapes, dtype="bfloat16", arch=ctx.be.arch())
    except portgemm.PortgemmError:
        with pytest.raises(Skip, match=r"^n/a \(not supported\)"):
            half_peers.MAKERS["ours"](ctx, Ops)
    with pytest.raises(Skip, match="cuBLAS grouped unavailable"):
        half_peers.MAKERS["cublas-grouped"](ctx, Ops)


def test_grouped_mm_detection_prefers_the_public_name():
    class NS:
        pass
    torch = NS()
    torch.nn = NS()
    torch.nn.functional = NS()
    assert half_peers.grouped_mm_function(torch) == (None, None)
    torch._grouped_mm = len
    assert half_peers.grouped_mm_function(torch) == ("torch._grouped_mm", len)
    torch.nn.functional.grouped_mm = max
    assert half_peers.grouped_mm_function(torch)[0] == "torch.nn.functional.grouped_mm"


def test_aligned_starts_put_every_matrix_on_the_boundary():
    from portgemm.benchmark.torch_operands import aligned_starts
    starts = aligned_starts([5, 128, 0, 129], 128)
    assert starts.tolist() == [0, 128, 256, 256, 512]
    assert aligned_starts([3, 4], 1).tolist() == [0, 3, 7]
