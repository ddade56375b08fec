"""Host overhead per GEMM of each public entry point, and gemm_vbatched against cuBLAS
grouped built from the same lists on every call (one run, one device).

Host overhead of an entry point: the wall time of one call on the host (the device idle
before it, no synchronisation inside it), median over reps, divided by the batch size.
Entry points: ``gemm_vbatched`` and ``Plan.run`` with lists of CuPy arrays (and of torch
tensors where torch is installed), repeated on the same arrays (so from the third call on
they take the reuse path, portgemm/reuse.py); ``gemm_vbatched (new arrays)``: the same
call on new array objects every time (fresh views of the same memory, rotated over more
sets than the reuse path remembers: each call reads every array, and finds its layout in
the layout cache, portgemm/call_cache.py); ``gemm_vbatched (new memory)``: arrays at new
addresses every call (rotated over more sets than the layout cache keeps: each call is
read, validated, planned and uploaded in full; timed, not checked; the sets are views
made before timing, so nothing the benchmark allocates is inside a timed call); the bound call (``Plan.bind(...)()``), and a user
building cuBLAS grouped GEMM's pointer and size arrays from the same lists and calling
``cublasGemmGroupedBatchedEx`` (bench/cublas_grouped.py) on every call. If portgemm has
``gemm_grouped`` (the packed API), its ragged-M form is timed too, with host and with
device offsets (marked "packed" below).

``--grid`` adds the peer grid of bench/peers.py (MaxMN x MaxK x batch, 48 cases):
event-timed back-to-back calls (bench/timing.do_bench, host overhead included) of gemm_vbatched
(same arrays, and new arrays each call), cuBLAS-from-lists, the bound call and a prepared
cuBLAS call, and the speed-up of gemm_vbatched over cuBLAS-from-lists per case (geometric
mean at the end; for new arrays too). Every entry point's output is checked over
NaN-poisoned C against float64 on its third call (after the reuse path has set in).

    python bench/host_overhead.py [--grid] [--quick] [--out host_overhead.json]
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import portgemm  # noqa: E402
from portgemm import reuse  # noqa: E402
from portgemm.backends.base import get_backend  # noqa: E402
from portgemm.benchmark.cublas import CublasGrouped  # noqa: E402
from peers import MAX_K, MAX_MN  # noqa: E402
from peers import checked as checked_once  # noqa: E402
from timing import do_bench  # noqa: E402

BATCHES = (8, 64, 256, 1024, 5000)
GRID_BATCHES = (8, 64, 256, 1024)


def device_batch(cp, rng, batch, max_mn, max_k):
    """M, N uniform in [16, max_mn], K in [16, max_k]; operands drawn on the device."""
    m, n, k = (rng.integers(16, hi + 1, batch) for hi in (max_mn, max_mn, max_k))
    shapes = np.stack([m, n, k], 1)
    A = [cp.random.random((a, c), dtype=cp.float32) - 0.5 for a, _, c in shapes]
    B = [cp.random.random((c, b), dtype=cp.float32) - 0.5 for _, b, c in shapes]
    C = [cp.empty((a, b), dtype=cp.float32) for a, b, _ in shapes]
    return shapes, A, B, C


def host_us(cp, fn, reps):
    """Median host wall time (us) of one call, the device idle before each."""
    fn()  # warm-up: compile, plan, uploads
    dev = cp.cuda.Device()
    times = []
    for _ in range(reps):
        dev.synchronize()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    dev.synchronize()
    return float(np.median(times)) * 1e6


def checked(cp, fn, A, B, C):
    """Max relative error of ``fn``'s third call (the first two warm it up: a repeated
    call takes the reuse path from its third call on, which must be right too)."""
    fn()
    fn()
    return checked_once(cp, fn, A, B, C)


def new_arrays(A, B, C, be):
    """gemm_vbatched on new array objects every call: views of the same memory, rotated
    over more sets than the reuse path remembers, so every call takes the full path."""
    sets = itertools.cycle([[[x.view() for x in X] for X in (A, B, C)]
                            for _ in range(reuse.SEEN + 4)])

    def call():
        portgemm.gemm_vbatched(*next(sets), backend=be)
    return call


def new_memory(cp, shapes, be, sets=None):
    """gemm_vbatched on arrays at new addresses every call: ``sets`` sets of views into
    one pool per operand, set j shifted by 64 bytes j, rotated over more sets than the
    layout cache (portgemm/call_cache.py) and the reuse path keep, so every call is read,
    validated, planned and uploaded in full. (Timed only: the pools overlap across
    sets, so no one set's output can be checked after the rotation.)"""
    from portgemm import api
    sets = sets or max(api._layouts.kept, reuse.SEEN) + 4

    def pool(dims):
        dims = list(dims)       # read twice below
        sizes = [int(r) * int(c) for r, c in dims]
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
        buf = cp.zeros(int(sum(sizes)) + 16 * sets, cp.float32)
        return [[buf[s + 16 * j:s + 16 * j + n].reshape(r, c)
                 for s, n, (r, c) in zip(starts, sizes, dims)] for j in range(sets)]
    m, n, k = shapes[:, 0], shapes[:, 1], shapes[:, 2]
    A, B, C = pool(zip(m, k)), pool(zip(k, n)), pool(zip(m, n))
    rotation = itertools.cycle(list(zip(A, B, C)))

    def call():
        portgemm.gemm_vbatched(*next(rotation), backend=be)
    return call


def cublas_from_lists(cublas, A, B, C):
    """What a cuBLAS user does per call with lists: build the arrays, then call."""
    return lambda: cublas.prepare(A, B, C)()


def entry_points(cp, be, cublas, shapes, A, B, C, torch):
    """name -> (call, C it writes) for every entry point on this batch."""
    p = portgemm.plan(shapes, "float32", arch=be.arch())
    out = {"gemm_vbatched": (lambda: portgemm.gemm_vbatched(A, B, C, backend=be), C),
           "gemm_vbatched (new arrays)": (new_arrays(A, B, C, be), C),
           "Plan.run": (lambda: p.run(A, B, C, backend=be), C),
           "bound": (p.bind(A, B, C, backend=be), C),
           "cuBLAS from lists": (cublas_from_lists(cublas, A, B, C), C)}
    if torch is not None:
        tA, tB, tC = ([torch.from_dlpack(x) for x in xs] for xs in (A, B, C))
        out["gemm_vbatched (torch)"] = (
            lambda: portgemm.gemm_vbatched(tA, tB, tC, backend=be), C)  # tC views C
    return out


# ---- hook: the packed API (portgemm.gemm_grouped, issue 7 items 2-3) -----------------------

def packed_points(cp, be, rng, groups, max_mn, max_k):
    """Ragged M (mixture of experts): A (sum M, K), B (G, K, N), C (sum M, N), offsets as
    in torch._grouped_mm (int32 cumulative row ends), host and device. Timed only where
    portgemm has gemm_grouped; the lists entry point on views of the same buffers is
    timed beside it for reference."""
    if not hasattr(portgemm, "gemm_grouped"):
        return {}
    m = rng.integers(0, max_mn + 1, groups)
    n, k = int(max_mn), int(max_k)
    offs = np.cumsum(m).astype(np.int32)
    A = cp.random.random((int(offs[-1]), k), dtype=cp.float32) - 0.5
    B = cp.random.random((groups, k, n), dtype=cp.float32) - 0.5
    C = cp.empty((int(offs[-1]), n), cp.float32)
    d_offs = cp.asarray(offs)
    starts = np.concatenate([[0], offs[:-1]])
    views = lambda X: [X[s:e] for s, e in zip(starts, offs)]  # noqa: E731
    lists = (views(A), list(B), views(C))
    host = lambda: portgemm.gemm_grouped(A, B, C, offs=offs, backend=be)  # noqa: E731
    dev = lambda: portgemm.gemm_grouped(A, B, C, offs=d_offs, backend=be)  # noqa: E731
    as_lists = lambda: portgemm.gemm_vbatched(*lists, backend=be)  # noqa: E731
    return {"packed, host offsets": (host, lists), "packed, device offsets": (dev, lists),
            "lists of the packed views": (as_lists, lists)}


def overhead_table(cp, be, cublas, torch, rng, quick):
    rows, raw = [], []
    names = None
    for batch in (BATCHES[:3] if quick else BATCHES):
        shapes, A, B, C = device_batch(cp, rng, batch, 128, 128)
        points = entry_points(cp, be, cublas, shapes, A, B, C, torch)
        packed = packed_points(cp, be, rng, batch, 128, 128)
        reps = max(5, min(200, 20000 // batch))
        res = {}
        for name, (fn, outC) in points.items():
            err = checked(cp, fn, A, B, outC)
            res[name] = {"host_us_per_gemm": host_us(cp, fn, reps) / batch, "err": err}
        for name, (fn, (la, lb, lc)) in packed.items():
            err = checked(cp, fn, la, lb, lc)
            res[name] = {"host_us_per_gemm": host_us(cp, fn, reps) / batch, "err": err}
        fresh = new_memory(cp, shapes, be)
        res["gemm_vbatched (new memory)"] = {"host_us_per_gemm": host_us(cp, fresh, reps) / batch,
                                             "err": None}   # timed only (new_memory)
        del fresh
        _over_bound(res)
        names = names or list(res)
        rows.append([batch] + [v for n in names for v in _cells(res.get(n), n)])
        raw.append({"batch": batch, "max_mn": 128, "max_k": 128, **res})
        del A, B, C, points, packed
    print("host overhead per GEMM (us), M, N, K uniform in [16, 128]; \"over bound\": "
          "(call - bound call) / batch, the per-GEMM cost beyond the launches:")
    print(tabulate(rows, headers=["batch"] + [h for n in names for h in _headers(n)],
                   floatfmt=".2f"))
    worst = max(r["err"] for case in raw for k, r in case.items()
                if isinstance(r, dict) and r["err"] is not None)
    print(f"max relative error over every entry point and batch: {worst:.1e}")
    return raw


def _over_bound(res):
    """Add to each entry point its host time beyond the bound call's, per GEMM: what the
    entry point costs on top of the launches (the fixed launch cost shows in "bound")."""
    bound = res.get("bound", {}).get("host_us_per_gemm")
    for name, r in res.items():
        if name != "bound" and bound is not None:
            r["over_bound_us_per_gemm"] = r["host_us_per_gemm"] - bound


def _headers(name):
    return [name] if name == "bound" else [name, "over bound"]


def _cells(r, name):
    if r is None:
        return [None] * len(_headers(name))
    if name == "bound":
        return [r["host_us_per_gemm"]]
    return [r["host_us_per_gemm"], r.get("over_bound_us_per_gemm")]


def grid_table(cp, be, cublas, rng, quick):
    rows, raw, ratios, where_bound_wins, new_ratios = [], [], [], [], []
    grid = [(m, k) for m in MAX_MN for k in MAX_K]
    for mmn, mk in (grid[::4] if quick else grid):
        for batch in GRID_BATCHES:
            shapes, A, B, C = device_batch(cp, rng, batch, mmn, mk)
            pts = entry_points(cp, be, cublas, shapes, A, B, C, None)
            prepared = cublas.prepare(A, B, C)
            timed = ("gemm_vbatched", "gemm_vbatched (new arrays)", "cuBLAS from lists")
            for name in timed:
                err = checked(cp, pts[name][0], A, B, C)
                assert err < 1e-4, f"{name}: max relative error {err:.1e}"
            t = {name: do_bench(cp, pts[name][0]) for name in timed + ("bound",)}
            t["cuBLAS prepared"] = do_bench(cp, prepared)
            speedup = t["cuBLAS from lists"] / t["gemm_vbatched"]
            ratios.append(speedup)
            new_ratios.append(t["cuBLAS from lists"] / t["gemm_vbatched (new arrays)"])
            if t["bound"] <= t["cuBLAS prepared"]:
                where_bound_wins.append(speedup)
            us = {k: v * 1e3 for k, v in t.items()}
            rows.append([f"{mmn}/{mk}", batch, us["gemm_vbatched"],
                         us["gemm_vbatched (new arrays)"], us["cuBLAS from lists"],
                         us["bound"], us["cuBLAS prepared"], speedup, new_ratios[-1]])
            raw.append({"max_mn": mmn, "max_k": mk, "batch": batch,
                        **{f"{k}_ms": v for k, v in t.items()}})
            del A, B, C, pts, prepared
    print("\npeer grid (bench/peers.py), us per call (event-timed back-to-back, host work "
          "included):")
    print(tabulate(rows, headers=["maxMN/maxK", "batch", "gemm_vbatched",
                                  "gemm_vbatched (new arrays)", "cuBLAS from lists", "bound",
                                  "cuBLAS prepared", "vbatched speed-up",
                                  "new arrays speed-up"],
                   floatfmt=(".0f", ".0f", ",.1f", ",.1f", ",.1f", ",.1f", ",.1f", ".2f",
                             ".2f")))
    geo = float(np.exp(np.mean(np.log(ratios))))
    print(f"gemm_vbatched over cuBLAS-from-lists: geomean {geo:.2f}x over {len(ratios)} cases, "
          f"faster in {sum(r > 1 for r in ratios)}; where bound <= cuBLAS prepared "
          f"({len(where_bound_wins)} cases) faster in {sum(r > 1 for r in where_bound_wins)}")
    geo_new = float(np.exp(np.mean(np.log(new_ratios))))
    print(f"gemm_vbatched on new arrays each call over cuBLAS-from-lists: geomean "
          f"{geo_new:.2f}x, faster in {sum(r > 1 for r in new_ratios)} of {len(new_ratios)}")
    return raw


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", action="store_true",
                    help="also the peer grid of bench/peers.py (48 cases)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    be = get_backend("cuda")
    cp = be.cp
    cp.random.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    try:
        import torch
    except ImportError:
        torch = None
    cublas = CublasGrouped(cp)
    arch = be.arch()
    print(f"device: {be.device_name()} ({arch.name}, {arch.compute_units} SMs); fp32, beta = 0")
    out = {"device": be.device_name(), "overhead": overhead_table(cp, be, cublas, torch, rng,
                                                                  args.quick)}
    if args.grid:
        out["grid"] = grid_table(cp, be, cublas, rng, args.quick)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
