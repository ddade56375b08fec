"""Cases x methods for the 16-bit, tf32 and fp64 peer benches (bench/kernel_bench.py
--dtype float16,bfloat16,tf32 and bench/moe_bench.py), on the CUDA device through torch.

For each case and format: fresh operands and their float64 reference; for each method,
make it (a Skip is recorded with its reason), run it once over NaN-poisoned C and
compare with the reference under the format's tolerance (formats.py); only a method
that passed is timed (timing.measure: warm-up, then event-timed calls, median; "warm"
back-to-back calls or "cold-l2" with an L2 flush before each). Every method of a case
runs in the same process on the same operands. The bf16 dense peak (torch.matmul of
8192^3 bf16) is measured in the same run.
"""
from __future__ import annotations

import time

import numpy as np

from .formats import tolerance
from .half_peers import MAKERS, Context
from .methods import Skip
from .timing import Budget, measure
from .torch_operands import make_torch_operands

GRID_METHODS = {
    "float16": ("ours", "cublas-grouped", "torch-bmm"),
    "bfloat16": ("ours", "cublas-grouped", "torch-bmm"),
    "tf32": ("ours", "ours-ieee", "cublas-grouped", "cublas-grouped-ieee", "torch-bmm"),
    # no peer offers 3xTF32 here: the IEEE peer and our SIMT path beside it
    "3xtf32": ("ours", "ours-ieee", "cublas-grouped-ieee"),
    "float64": ("ours", "cublas-grouped", "torch-bmm"),
}
MOE_METHODS = ("ours-packed", "torch-grouped-mm", "cublas-grouped", "torch-bmm")
BUDGET = Budget(warmup_ms=5.0, rep_ms=25.0, min_reps=3, max_reps=50)


def open_context():
    """(Context, CudaDevice): torch, CuPy, portgemm's cuda backend, cuBLAS grouped."""
    import torch

    from ..backends.base import get_backend
    from .cublas import CublasGrouped
    from .device import CudaDevice
    be = get_backend("cuda")
    try:
        cublas = CublasGrouped(be.cp)
    except OSError as e:
        cublas = str(e)
    torch.backends.cuda.matmul.allow_tf32 = False   # IEEE fp32 unless a tf32 method asks
    return Context(torch, be.cp, be, cublas), CudaDevice(be)


def torch_info(torch) -> dict:
    from .half_peers import grouped_mm_function
    cc = torch.cuda.get_device_capability()
    return {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
            "capability": f"sm_{cc[0]}{cc[1]}", "grouped_mm": grouped_mm_function(torch)[0]}


def bf16_peak(ctx, dev, n=8192) -> float:
    """FLOP/s of one n^3 bf16 torch.matmul (the dense tensor-core rate, measured)."""
    torch = ctx.torch
    a = torch.rand((n, n), device="cuda", dtype=torch.float32).to(torch.bfloat16)
    c = torch.empty_like(a)
    ms, _ = measure(dev, lambda: torch.matmul(a, a, out=c), "warm",
                    Budget(warmup_ms=50.0, rep_ms=200.0, min_reps=10, max_reps=100))
    return 2.0 * n ** 3 / (ms * 1e-3)


def check(ctx, ops, prep) -> tuple[float, int | None]:
    """Poison C (and the method's own output), run once, collect, compare."""
    ops.poison()
    if prep.poison is not None:
        prep.poison()
    prep.call()
    if prep.collect is not None:
        prep.collect()
    ctx.torch.cuda.synchronize()
    err = ops.errors(ctx.cp)
    if err.size == 0:
        return 0.0, None
    worst = int(np.argmax(err))
    return float(err[worst]), worst


def run_case(ctx, dev, ops, names, base: dict, mode="warm", budget=BUDGET) -> list[dict]:
    """One record per method: status ok (timed), skipped (reason) or failed (reason)."""
    tol = tolerance(ops.fmt, int(ops.shapes[:, 2].max()) if ops.batch else 1)
    out = []
    for name in names:
        rec = dict(base, method=name, tol=tol)
        try:
            prep = MAKERS[name](ctx, ops)
        except Skip as e:
            out.append(dict(rec, status="skipped", note=str(e)))
            continue
        except Exception as e:   # a peer that cannot be set up is a failure, reported
            out.append(dict(rec, status="failed", note=_one_line(e)))
            continue
        try:
            err, worst = check(ctx, ops, prep)
        except Exception as e:   # likewise a peer that raises on these operands
            out.append(dict(rec, status="failed", note=_one_line(e)))
            continue
        rec["err"] = err
        if not err <= tol:
            out.append(dict(rec, status="failed",
                            note=f"GEMM {worst}: relative error {err:.2e} > {tol:.1e}"))
            continue
        ms, reps = measure(dev, prep.call, mode, budget)
        out.append(dict(rec, status="ok", mode=mode, ms=ms, reps=reps,
                        gflops=ops.flops / (ms * 1e-3) / 1e9))
        del prep
    return out


def run_cases(ctx, dev, cases, formats, methods_of, seed=0, mode="warm", budget=BUDGET,
              log=print, time_limit_s=None) -> list[dict]:
    """Every case in every format; methods_of(format name) -> method names. With
    time_limit_s, no case starts after that many seconds (logged: what was left out)."""
    records, t0 = [], time.perf_counter()
    for ci, case in enumerate(cases):
        if time_limit_s is not None and time.perf_counter() - t0 > time_limit_s:
            log(f"time limit {time_limit_s:.0f} s: {len(cases) - ci} cases not run", flush=True)
            break
        for fmt in formats:
            ops = make_torch_operands(ctx.torch, case.shapes, fmt, seed=seed * 100003 + ci)
            base = dict(case=case.name, batch=case.batch, format=fmt.name, flops=ops.flops)
            recs = run_case(ctx, dev, ops, methods_of(fmt.name), base, mode, budget)
            records += recs
            log(f"{fmt.name} {case.name}: " + ", ".join(
                f"{r['method']} {r['gflops']:,.0f}" if r["status"] == "ok" else
                f"{r['method']} {r['status']}" for r in recs), flush=True)
            del ops
    return records


def _one_line(e: Exception) -> str:
    text = f"{type(e).__name__}: {e}"
    return text.splitlines()[0][:200]
