"""Our SIMT kinds one at a time, against cuBLAS grouped, on the cells where they lose
(issue 9).

For each case: the bound call (``Plan.bind``, event-timed, bench/timing.py) of every
single kind of our family forced on the whole batch (tuning.model.one_kind_plan),
of our family per kind as the planner assigns it, and of the default plan; cuBLAS
grouped (arrays prepared) in the same run. Prints TFLOP/s, % of the fp32 (or fp64)
FMA roofline and the ratio to cuBLAS. Every timed plan's output is checked once
against a float64 reference (NaN-poisoned C, a few GEMMs of the batch).

``--dtype float16,bfloat16,tf32`` (any of them, alone or with float32/float64) runs the
tensor-core peer grid instead for those formats (portgemm/benchmark/half_cli.py): our
bound plan against cuBLAS grouped and padded torch.bmm over docs/design.md §6's grid,
GFLOP/s, ours over the best peer, % of the bf16 dense peak measured in the same run;
tf32 adds our fp32 SIMT plan and cuBLAS fp32 (IEEE) beside the tf32 columns; 3xtf32
runs ours against those two (no peer offers 3xTF32). portgemm
not taking a format yet shows as n/a. Written to half_grid.txt / half_grid.json.

``--config`` compares compile settings of the kernels in one process: each named
config overrides render.py's per-kind tables (minimum blocks, BK unroll, pipeline
stages; the k-major pipeline's set, KPIPE, grows by its entries) before its variants are
compiled, or plans without some families' measured kind factors (KIND_FACTORS_OFF),
or with the measured ceilings of another file (``before``: $PG_CEILINGS_BEFORE), or
weighs more partner families for batches of unaligned rows (ANY_ROWS: ``wgwin``, with
the wgmma kinds' aligned windows); ``base`` is the committed settings.

    python bench/kernel_bench.py [--config base,occ] [--quick] [--extra] [--out DIR]
    python bench/kernel_bench.py --dtype float16,bfloat16,tf32,3xtf32 [--quick] [--mode cold-l2]

About a minute on an H100 per config (compilation included).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import portgemm  # noqa: E402
from portgemm import tiles  # noqa: E402
from portgemm.backends import cuda as cuda_backend  # noqa: E402
from portgemm.benchmark.cublas import CublasGrouped  # noqa: E402
from portgemm.benchmark.half_cli import grid_main  # noqa: E402
from portgemm.kernels import render, resources  # noqa: E402
from portgemm.kernels.variants import variants_for  # noqa: E402
from portgemm.occupancy import ceilings  # noqa: E402
from portgemm.planner.wavefront_tlp import OUR_FAMILY  # noqa: E402
from portgemm.tuning.model import kinds_plan, one_kind_plan  # noqa: E402
from timing import do_bench, random_batch  # noqa: E402

TENSOR_CORE = ("float16", "bfloat16", "tf32", "3xtf32")   # formats of the peer grid (half_cli.py)
PEAK = {"float32": 55.6e12, "float64": 31.1e12}   # FMA peaks measured on the H100
OURS = OUR_FAMILY      # our families, per dtype (what the default plan weighs)

# (name, MaxMN, MaxK, batch) of random batches (M, N in [16, MaxMN], K in [16, MaxK]),
# or (name, (M, N, K), batch) of fixed ones.
CASES = {
    "float32": [
        ("512/128 b256", 512, 128, 256), ("512/128 b1024", 512, 128, 1024),
        ("1024/128 b256", 1024, 128, 256), ("1024/128 b1024", 1024, 128, 1024),
        ("1024/256 b256", 1024, 256, 256), ("1024/256 b1024", 1024, 256, 1024),
        ("1024/512 b64", 1024, 512, 64), ("1024/512 b256", 1024, 512, 256),
        ("128/128 b1024", 128, 128, 1024), ("256/512 b64", 256, 512, 64),
        ("64x1000^2x512", (1000, 1000, 512), 64), ("64x1008^2x512", (1008, 1008, 512), 64),
        ("16x1024^2x256", (1024, 1024, 256), 16),
    ],
    "float64": [
        ("f64 256/256 b256", 256, 256, 256), ("f64 512/256 b256", 512, 256, 256),
        ("f64 1024/512 b64", 1024, 512, 64), ("f64 128/128 b1024", 128, 128, 1024),
    ],
}
QUICK = {"512/128 b1024", "1024/128 b256", "1024/128 b1024", "1024/512 b256",
         "128/128 b1024", "64x1000^2x512", "16x1024^2x256", "f64 512/256 b256",
         "f64 1024/512 b64"}

# Compile settings to compare: {table name in render: {key: value}} merged over the
# committed tables.
F32, F64 = "float32", "float64"
# 128x128/8x8 on the pipeline under a 2-block cap (128 registers; its tn variant spills
# under the cap, so it keeps none)
CAP128 = {"STAGES": {("portgemm", "128x128/8x8", F32): 3},
          "MIN_BLOCKS": {("portgemm", "128x128/8x8", F32): 2,
                         ("portgemm", "128x128/8x8", F32, "tn"): 0}}
KPIPE_KINDS = ("64x128/8x8", "128x64/8x8", "64x64/8x4", "32x32/4x4")
CONFIGS = {
    "base": {},
    # the register double buffer everywhere (the kernel before the pipeline)
    "regbuf": {"STAGES": {k: 0 for k in render.STAGES}},
    "cap128": CAP128,
    # the pipeline for every kind of ours (3 stages), caps where they do not spill
    "allpipe": {"STAGES": {**{("portgemm", k.kind, F32): 3 for k in tiles.PORTGEMM},
                           **{("portgemm-f64", k.kind, F64): 3 for k in tiles.PORTGEMM_F64}},
                "MIN_BLOCKS": {**CAP128["MIN_BLOCKS"], ("portgemm", "128x64/8x8", F32): 3,
                               ("portgemm", "64x64/8x4", F32): 4}},
    # pipeline depth (4 falls back to 3 where 4 would pass 48 KiB)
    "st2": {"STAGES": {k: 2 for k in render.STAGES}},
    "st4": {"STAGES": {k: 4 for k in render.STAGES}},
    # the k-major cp.async pipeline (render.KPIPE) at 3 or 4 stages for the 128-thread 8x8
    # kinds, 64x64/8x4 (capped at 4 blocks) and 32x32/4x4; session 13 timed these against
    # the register path, before the first three took it (render.STAGES)
    **{f"kpipe{st}": {"STAGES": {("portgemm", k, F32): st for k in KPIPE_KINDS},
                      "KPIPE": {("portgemm", k, F32) for k in KPIPE_KINDS},
                      "MIN_BLOCKS": {("portgemm", "64x64/8x4", F32): 4}} for st in (3, 4)},
    # 128x128/16x8 with 3 stages instead of its 4
    "fat3": {"STAGES": {("portgemm", "128x128/16x8", F32): 3}},
    # every launch a block per planned tile run (backends/persistent.py off): the
    # launches before the persistent grid
    "flat": {"ENV": {"PORTGEMM_PERSISTENT": "0"}},
    # persistent launches of twice the resident blocks
    "pers2": {"ENV": {"PORTGEMM_PERSISTENT": "2"}},
    # measured on the register path (first H100 call): no BK unroll for the 8x8 kinds and
    # caps for one more block per SM: slower
    "occ": {"MIN_BLOCKS": {("portgemm", "128x128/8x8", F32): 2,
                           ("portgemm", "128x64/8x8", F32): 4,
                           ("portgemm", "64x128/8x8", F32): 4},
            "K_UNROLL": {("portgemm", "128x128/8x8", F32): 1,
                         ("portgemm", "128x64/8x8", F32): 1,
                         ("portgemm", "64x128/8x8", F32): 1}},
}
TABLES = ("MIN_BLOCKS", "K_UNROLL", "STAGES", "KPIPE", "LEAN_FAMILIES", "SHIFT16", "WGMMA_WINDOWS")
# fp64 MMA kinds: the 64x64 kind capped to 128 registers (4 blocks an SM, as its 48 KiB
# of shared memory allow), and with 3 stages instead of 4
CONFIGS["dmma-cap4"] = {"MIN_BLOCKS": {("portgemm-f64", "64x64/w32x32", F64): 4}}
CONFIGS["dmma-st3"] = {"STAGES": {("portgemm-f64", "64x64/w32x32", F64): 3,
                                  ("portgemm-f64", "32x32/w16x16", F64): 3}}

# session 15's 16-bit MMA kinds: the kernel before them ("session14": element copies of
# 2-byte rows, 32x32/w16x16 uncapped), the shifted word copies off or for rows of 64
# elements or more only (render.SHIFT16), and register caps: 32x32/w16x16 at 8 blocks an
# SM (64 registers; committed: 6), 64x64/w32x32 at 5 (96 registers; its 40 KiB of shared
# memory allow 5; uncapped 128, 4)
HALF16 = tuple(tiles.HALF_FAMILIES.items())
HALF16_MMA = [(f, k.kind, d) for f, d in HALF16 for k in tiles.FAMILIES[f] if k.engine == "mma"]
CONFIGS["sh_off"] = {"SHIFT16": {key: (0, 0) for key in HALF16_MMA}}
CONFIGS["sh_b64"] = {"SHIFT16": {key: (8, 64) for key in HALF16_MMA}}
CONFIGS["session14"] = {**CONFIGS["sh_off"],
                        "MIN_BLOCKS": {(f, "32x32/w16x16", d): 0 for f, d in HALF16}}
CONFIGS["h32cap8"] = {"MIN_BLOCKS": {(f, "32x32/w16x16", d): 8 for f, d in HALF16}}
CONFIGS["h64cap5"] = {"MIN_BLOCKS": {(f, "64x64/w32x32", d): 5 for f, d in HALF16}}
# session 16: the planner without the measured kind factors of the 16-bit families (theirs
# and the wgmma ones weighed beside them), as it planned before they were measured
CONFIGS["kf16off"] = {"KIND_FACTORS_OFF": tuple(f for fam, _ in HALF16
                                                for f in (fam, *tiles.WEIGHED_WITH.get(fam, ())))}
# session 17: the planner with the measured ceilings of another file (the committed ones
# before a measurement rewrote them: bench/half_factors.sh's floors run sets
# PG_CEILINGS_BEFORE), to time the plans before and after in one process
CONFIGS["before"] = {"CEILINGS_FROM": "PG_CEILINGS_BEFORE"}
# session 20: the 16-bit wgmma kinds with aligned windows for rows not 16-byte aligned
# (render.WGMMA_WINDOWS), weighed for every batch (tiles.ANY_ROWS), not only aligned ones
CONFIGS["wgwin"] = {"WGMMA_WINDOWS": set(render.WGMMA_16BIT),
                    "ANY_ROWS": {f for f, _, _ in render.WGMMA_16BIT}}

# --extra: shapes outside the catalogue timed beside it (family "bench-f64"), with their
# cp.async stages; a shape that wins goes into tiles.py (64x32/w32x16 did, and the SIMT
# 64x64/8x4). The SIMT ones: 128-thread fp64 8x8 kinds on the k-major pipeline
# (render.KPIPE), 3 stages, capped at 2 blocks an SM (246-254 registers, no spill on sm_90).
EXTRA = {"float64": tiles._family("bench-f64", [
    ("128x64/w32x32",  128,  64, 8, 256, 32, 32, "mma"),
    ("64x64/w32x16",    64,  64, 8, 256, 32, 16, "mma"),
    ("128x64/w64x32",  128,  64, 8, 128, 64, 32, "mma"),
    ("64x128/w32x64",   64, 128, 8, 128, 32, 64, "mma"),
    ("128x64/8x8",     128,  64, 8, 128,  8,  8),
    ("64x128/8x8",      64, 128, 8, 128,  8,  8),
])}
EXTRA_SIMT_BLOCKS = {"128x64/8x8": 2, "64x128/8x8": 2}
EXTRA_STAGES = {("bench-f64", k.kind, F64): 4 if k.engine == "mma" else 3
                for k in EXTRA["float64"]}
EXTRA_TABLES = {"STAGES": EXTRA_STAGES,
                "KPIPE": {("bench-f64", k, F64) for k in EXTRA_SIMT_BLOCKS},
                "MIN_BLOCKS": {("bench-f64", k, F64): b for k, b in EXTRA_SIMT_BLOCKS.items()},
                "LEAN_FAMILIES": ("bench-f64",)}
# fp64's 8x4 / 4x8 kinds back on the register path (before session 14's KPIPE)
CONFIGS["f64reg"] = {"STAGES": {(fam, k, F64): 0 for fam, kinds in render.F64_KPIPE_KINDS.items()
                                for k in kinds}}


COMMITTED_ANY_ROWS = tiles.ANY_ROWS


def merged(base, more):
    """A render table with ``more`` over ``base``: dicts updated, sets and tuples joined."""
    return ({**base, **more} if isinstance(base, dict) else
            base | more if isinstance(base, set) else base + more)


def drop_kind_factors(families) -> None:
    """Plan in this process with the measured ceilings (as apply_config has just re-read
    them from the file) less the kind factors of ``families``, on every arch that has
    them."""
    for arch, row in ceilings._load().get("measured", {}).items():
        row = dict(row)
        for field in (ceilings.KIND_FACTORS, ceilings.KIND_DEPTH_FACTORS,
                      ceilings.KIND_PATH_FACTORS):
            row[field] = {n: f for n, f in row.get(field, {}).items()
                          if n.split(".", 1)[0] not in families}
        ceilings.use_in_memory(arch, row)


def apply_config(name, committed):
    from portgemm.backends import persistent
    os.environ.pop(persistent.ENV, None)
    os.environ.update(CONFIGS[name].get("ENV", {}))
    ceilings.reload()
    if "KIND_FACTORS_OFF" in CONFIGS[name]:
        drop_kind_factors(CONFIGS[name]["KIND_FACTORS_OFF"])
    if "CEILINGS_FROM" in CONFIGS[name]:
        path = os.environ[CONFIGS[name]["CEILINGS_FROM"]]
        for arch, row in json.loads(Path(path).read_text()).get("measured", {}).items():
            ceilings.use_in_memory(arch, row)
    for table, base in committed.items():
        setattr(render, table, merged(base, CONFIGS[name][table]) if table in CONFIGS[name]
                else base)
    tiles.ANY_ROWS = COMMITTED_ANY_ROWS | CONFIGS[name].get("ANY_ROWS", set())
    render.render.cache_clear()
    resources._registered.clear()
    portgemm.planner.clear_cache()


def compile_half(formats):
    """Under the config just applied: compile the per-kind variants of each 16-bit
    format's family and of the families weighed with it (the wgmma kinds where the device
    builds them) on a fresh function cache of the CUDA backend, so the planner reads the
    figures of what runs, whether or not the recorded ones match this kernel source."""
    from portgemm.backends.base import get_backend
    from portgemm.benchmark.formats import parse_formats
    be = get_backend("cuda")
    be._functions.clear()
    storages = {fmt.storage for fmt in parse_formats(",".join(formats), TENSOR_CORE)}
    for fam, dtype in tiles.HALF_FAMILIES.items():
        if dtype in storages:
            for f in (fam, *tiles.WEIGHED_WITH.get(fam, ())):
                if tiles.family_builds_for(f, be.arch().name):
                    for v in variants_for(tiles.FAMILIES[f], "per-kind", dtype):
                        be.function(v)


def make_batch(cp, rng, case, dtype):
    name, *spec = case
    if isinstance(spec[0], tuple):
        (m, n, k), b = spec
        shapes = np.tile(np.array([m, n, k], np.int64), (b, 1))
        A = [cp.asarray(rng.random((m, k)) - 0.5, dtype=dtype) for _ in range(b)]
        B = [cp.asarray(rng.random((k, n)) - 0.5, dtype=dtype) for _ in range(b)]
        C = [cp.empty((m, n), dtype=dtype) for _ in range(b)]
        return shapes, A, B, C
    mmn, mk, b = spec
    return random_batch(cp, rng, b, mmn, mk, dtype)


class Reference:
    """float64 products of a few GEMMs of a batch, computed once per case."""

    def __init__(self, cp, A, B, sample=3):
        self.cp = cp
        self.idx = np.unique(np.linspace(0, len(A) - 1, sample).astype(int))
        self.ref = {i: cp.asnumpy(A[i]).astype(np.float64) @ cp.asnumpy(B[i]).astype(np.float64)
                    for i in self.idx}

    def error(self, C):
        worst = 0.0
        for i, r in self.ref.items():
            got = self.cp.asnumpy(C[i]).astype(np.float64)
            worst = max(worst, float(np.linalg.norm(got - r) / max(np.linalg.norm(r), 1e-300)))
        return worst   # NaN (poison left in C) compares false: reported as nan below


def checked(cp, call, C, ref):
    for c in C:
        c.fill(cp.nan)
    call()
    cp.cuda.get_current_stream().synchronize()
    err = ref.error(C)
    return err if np.isfinite(err) else float("nan")


def timed_kinds(dtype, extra=False):
    """Our family's kinds, and with ``extra`` the EXTRA shapes."""
    return tiles.FAMILIES[OURS[dtype]] + (EXTRA.get(dtype, ()) if extra else ())


def methods(dtype, extra=False):
    """(label, plan keywords, forced kind or None) of every timed plan."""
    out = [("default", {}, None), ("ours per-kind", dict(family=OURS[dtype], mode="per-kind"), None)]
    if dtype == "float64":   # issue 9's fp64 target: the planner on the SIMT kinds alone
        out.append(("ours SIMT", {"kinds": simt_kinds(dtype, extra)}, None))
    out += [(k.kind, None, k) for k in timed_kinds(dtype, extra)]
    return out


def simt_kinds(dtype, extra=False):
    """The SIMT kinds of timed_kinds, small -> large (as the planner's families run)."""
    return tuple(sorted((k for k in timed_kinds(dtype, extra) if k.engine == "simt"),
                        key=lambda k: k.area))


def _launches(plan, be):
    """The launches [(variant, first block, blocks)] the backend made for ``plan``."""
    from portgemm.backends.launch import plan_states
    for key, st in plan_states(plan).items():
        return list(st.get("launches", []))
    return []


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="base", help=f"comma list of {', '.join(CONFIGS)}")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cases", default="", help="comma list of case names (or prefixes)")
    ap.add_argument("--dtype", default="float32,float64")
    ap.add_argument("--rep-ms", type=float, default=25.0)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--extra", action="store_true", help="also time the EXTRA shapes")
    ap.add_argument("--mode", default="warm", choices=("warm", "cold-l2"),
                    help="timing mode of the tensor-core peer grid")
    ap.add_argument("--methods", default="",
                    help="tensor-core peer grid: comma list of its methods to run (default all)")
    ap.add_argument("--time-limit", type=float,
                    help="tensor-core peer grid: start no case after this many seconds")
    args = ap.parse_args(argv)
    dtypes = args.dtype.split(",")
    half = [d for d in dtypes if d in TENSOR_CORE]
    committed = {t: getattr(render, t) for t in TABLES}
    configs = args.config.split(",")
    if half:
        cells = [c.strip() for c in args.cases.split(",") if c.strip()] or None
        methods = args.methods.split(",") if args.methods else None
        for cfg in configs:
            apply_config(cfg, committed)
            compile_half(half)
            # the grid's own seed (0, as `python -m portgemm bench --grid`): the same shapes
            grid_main(",".join(half), args.out, args.quick, args.mode, seed=0,
                      time_limit_s=args.time_limit, cells=cells, methods=methods,
                      name="half_grid" if configs == ["base"] else f"half_grid_{cfg}")
        apply_config("base", committed)
    args.dtype = ",".join(d for d in dtypes if d not in TENSOR_CORE)
    if not args.dtype:
        return
    t0 = time.perf_counter()
    if args.extra:
        for table, more in EXTRA_TABLES.items():
            setattr(render, table, merged(getattr(render, table), more))
    base = cuda_backend.create()
    cp = base.cp
    cublas = CublasGrouped(cp)
    rng = np.random.default_rng(args.seed)
    batches = []
    for dtype in args.dtype.split(","):
        for case in CASES[dtype]:
            if args.quick and case[0] not in QUICK:
                continue
            if args.cases and not any(case[0].startswith(c) for c in args.cases.split(",")):
                continue
            shapes, A, B, C = make_batch(cp, rng, case, dtype)
            batches.append((case[0], dtype, shapes, A, B, C, Reference(cp, A, B)))
    rows, raw = [], []    # rows: case, config, plan, TFLOP/s, % peak, x cuBLAS, note, err
    for name, dtype, shapes, A, B, C, ref in batches:
        flops = 2.0 * float((shapes[:, 0] * shapes[:, 1] * shapes[:, 2]).sum())
        call = cublas.prepare(A, B, C)
        cub = do_bench(cp, call, warmup_ms=10.0, rep_ms=args.rep_ms)
        err = checked(cp, call, C, ref)
        rows.append([name, "-", "cuBLAS grouped", flops / cub / 1e9,
                     100 * flops / cub / 1e-3 / PEAK[dtype], 1.0, "", err])
        raw.append({"case": name, "config": "-", "method": "cublas", "ms": cub, "err": err})
    for cfg in configs:
        apply_config(cfg, committed)
        be = cuda_backend.CudaBackend(cp)       # fresh function cache for this config
        arch = be.arch()
        regs = {}
        for dtype in args.dtype.split(","):     # compile first: the planner reads the figures
            for v in variants_for(timed_kinds(dtype, args.extra), "per-kind", dtype):
                regs[(dtype, v.kinds[0].kind)] = be.function_attributes(be.function(v))["num_regs"]
        for i, (name, dtype, shapes, A, B, C, ref) in enumerate(batches):
            flops = 2.0 * float((shapes[:, 0] * shapes[:, 1] * shapes[:, 2]).sum())
            cub = raw[i]["ms"]
            for label, kw, kind in methods(dtype, args.extra):
                p = (one_kind_plan(shapes, kind, dtype, arch) if kind is not None
                     else kinds_plan(shapes, kw["kinds"], dtype, arch) if "kinds" in kw
                     else portgemm.plan(shapes, dtype, arch=arch, **kw))
                bound = p.bind(A, B, C, backend=be)
                err = checked(cp, bound, C, ref)
                ms = do_bench(cp, bound, warmup_ms=10.0, rep_ms=args.rep_ms)
                note = (f"{regs[(dtype, kind.kind)]} regs" if kind is not None else
                        " ".join(f"{k}:{v}" for k, v in p.tiles_per_kind().items()))
                rows.append([name, cfg, label, flops / ms / 1e9,
                             100 * flops / ms / 1e-3 / PEAK[dtype], cub / ms, note, err])
                raw.append({"case": name, "config": cfg, "method": label, "ms": ms,
                            "err": err, "note": note, "mode": p.mode,
                            "grids": [g for _, _, g in _launches(p, be)]})
            done = rows[-len(methods(dtype, args.extra)):]
            print(f"{cfg} {name}: " + ", ".join(f"{r[2]} {r[3]:.0f}" for r in done), flush=True)
    rows.sort(key=lambda r: [b[0] for b in batches].index(r[0]))
    lines = [f"device: {base.device_name()}; bound calls; TFLOP/s, % of the FMA peak "
             f"(fp32 {PEAK['float32'] / 1e12} / fp64 {PEAK['float64'] / 1e12} TFLOP/s), "
             f"speed-up over cuBLAS grouped; err: max relative error vs float64",
             tabulate(rows, headers=["case", "config", "plan", "TFLOP/s", "% peak",
                                     "x cuBLAS", "regs / tiles", "err"],
                      floatfmt=(None, None, None, ".1f", ".1f", ".2f", None, ".1e"))]
    for cfg in configs:
        for label in ("default", "ours per-kind", "ours SIMT"):
            r = [x for x in rows if x[1] == cfg and x[2] == label]
            if r:
                geo = float(np.exp(np.mean(np.log([x[5] for x in r]))))
                lines.append(f"{cfg} {label}: geomean {geo:.3f}x cuBLAS grouped, below 1.0x in "
                             f"{sum(x[5] < 1 for x in r)} of {len(r)}")
        best = {}
        for x in rows:
            if x[1] == cfg:
                best[x[0]] = max(best.get(x[0], 0.0), x[5])
        if best:
            geo = float(np.exp(np.mean(np.log(list(best.values())))))
            lines.append(f"{cfg} best single plan per case: geomean {geo:.3f}x cuBLAS grouped")
    bad = [x for x in rows if not (x[7] < (1e-5 if "f64" not in x[0] else 1e-12))]
    lines.append("max error: " + (f"{max(x[7] for x in rows):.2e}" if not bad else
                                  "FAILED " + "; ".join(f"{x[0]} {x[1]} {x[2]} {x[7]}" for x in bad)))
    lines.append(f"wall time {time.perf_counter() - t0:.0f} s")
    print("\n".join(lines))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for name, body in (("kernel_bench.txt", "\n".join(lines) + "\n"),
                       ("kernel_bench.json", json.dumps(raw, indent=1))):
        (Path(args.out) / name).write_text(body)


if __name__ == "__main__":
    main()
