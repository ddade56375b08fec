"""The two tensor-core peer benches end to end: run (half_run), tabulate (half_report),
write <name>.txt and <name>.json under the output folder.

- grid: docs/design.md §6's grid (workloads.grid_cases, the cases of the other dtypes)
  in float16, bfloat16, tf32, 3xtf32 (and float64); portgemm's bound plan of the lists
  against cuBLAS grouped and padded bmm (bench/kernel_bench.py --dtype float16,bfloat16,tf32).
- moe: ragged-M mixture-of-experts batches (workloads.moe_cases) through portgemm's
  packed call against torch's grouped_mm, cuBLAS grouped and padded bmm
  (bench/moe_bench.py).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from .formats import parse_formats
from .half_report import format_table, notes
from .half_run import GRID_METHODS, MOE_METHODS, bf16_peak, open_context, run_cases, torch_info
from .workloads import QUICK_BATCHES, QUICK_RANGES, ROUTING_TEXT, grid_cases, moe_cases

# ours over these methods too, per format (tf32 and 3xtf32 against our IEEE SIMT path)
GRID_AGAINST = {"tf32": ("ours-ieee",), "3xtf32": ("ours-ieee",)}


def _write(out, name, lines, payload):
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"{name}.txt").write_text("\n".join(lines) + "\n")
    (Path(out) / f"{name}.json").write_text(json.dumps(payload, indent=1, default=str))
    print("\n".join(lines), flush=True)


def _header(ctx, dev, peak, what):
    info = torch_info(ctx.torch)
    return (f"{what}\ndevice: {dev.name()}; torch {info['torch']} (CUDA {info['torch_cuda']}, "
            f"{info['capability']}), grouped matmul: {info['grouped_mm'] or 'none'}; "
            f"cuBLAS grouped: {'yes' if not isinstance(ctx.cublas, str) else ctx.cublas}\n"
            f"bf16 dense peak, measured now (torch.matmul 8192^3): {peak / 1e12:.0f} TFLOP/s; "
            f"GFLOP/s per method (median of event-timed calls), '% peak' of that bf16 peak"), info


def grid_main(dtypes: str, out=".", quick=False, mode="warm", seed=0, name="half_grid",
              time_limit_s=None, cells=None, methods=None):
    """The grid in ``dtypes``; ``cells`` (names, e.g. "512/512 b256") keeps those cases
    only and ``methods`` (names) those methods only, of every format."""
    t0 = time.perf_counter()
    formats = parse_formats(dtypes, tuple(GRID_METHODS))
    ctx, dev = open_context()
    peak = bf16_peak(ctx, dev)
    cases = (grid_cases(seed, QUICK_RANGES, QUICK_BATCHES) if quick else grid_cases(seed))
    if cells:
        cases = [c for c in cases if c.name in cells]
    method_names = {f: tuple(m for m in GRID_METHODS[f] if methods is None or m in methods)
                    for f in GRID_METHODS}
    records = run_cases(ctx, dev, cases, formats, method_names.__getitem__, seed, mode,
                        time_limit_s=time_limit_s)
    head, info = _header(ctx, dev, peak, f"grid (M, N uniform in [16, MaxMN], K in [16, MaxK]), "
                                          f"{len(cases)} cases, timing mode {mode}")
    lines, summaries = [head], []
    for fmt in formats:
        text, s = format_table(records, fmt.name, method_names[fmt.name], "ours", peak,
                               GRID_AGAINST.get(fmt.name, ()))
        lines += ["", f"== {fmt.name}", text]
        summaries += s
    lines += ["", "notes:"] + [f"  {n}" for n in notes(records)]
    lines.append(f"wall time {time.perf_counter() - t0:.0f} s")
    _write(out, name, lines, {"info": info, "peak_flops": peak, "device": dev.name(),
                              "summaries": summaries, "records": records})
    return records


def moe_main(dtypes="bfloat16,float16", out=".", tokens=4096, experts=None, mode="warm",
             seed=0, name="moe", routing="uniform"):
    t0 = time.perf_counter()
    formats = parse_formats(dtypes, ("bfloat16", "float16"))
    ctx, dev = open_context()
    peak = bf16_peak(ctx, dev)
    cases = moe_cases(tokens, seed, experts, routing=routing)
    records = run_cases(ctx, dev, cases, formats, lambda f: MOE_METHODS, seed, mode)
    head, info = _header(ctx, dev, peak, f"MoE ragged-M batches: {tokens} tokens, each routed "
                                          f"to top_k distinct experts, {ROUTING_TEXT[routing]}; "
                                          f"timing mode {mode}")
    lines, summaries = [head], []
    for fmt in formats:
        text, s = format_table(records, fmt.name, MOE_METHODS, "ours-packed", peak,
                               ("torch-grouped-mm",))
        lines += ["", f"== {fmt.name}", text]
        summaries += s
    lines += ["", "notes:"] + [f"  {n}" for n in notes(records)]
    lines.append(f"wall time {time.perf_counter() - t0:.0f} s")
    _write(out, name, lines, {"info": info, "peak_flops": peak, "device": dev.name(),
                              "tokens": tokens, "routing": routing, "summaries": summaries, "records": records})
    return records
