"""Stage times of one gemm_vbatched call, taken inside the call's own sequence of steps
(shared by tools/profile_host.py on a device and tools/profile_host_fake.py without one).

``miss_stages`` replays api.gemm_vbatched's full path step by step on arrays at new
addresses every call (reuse key, reuse snapshot, one pass of reads, layout key and
lookup, validation, plan-cache hit, execute with new descriptors, the two caches' puts)
and times each step with perf_counter, so that the parts add up to one real call (a
stage timed alone, on warm arrays, in a loop of its own, need not). ``hit_stages`` does
the same for a repeated call (the reuse path): key, lookup and in-place check, launch.
Medians over the calls; ``before`` runs ahead of each call untimed (a device sync).
"""
from __future__ import annotations

import itertools
import time

import numpy as np


def _median_us(rows):
    return [float(np.median(col)) * 1e6 for col in zip(*rows)]


def miss_stages(be, sets, calls=200, before=lambda: None, whole_calls=True):
    """{stage: median us} of the full path over ``sets`` (lists (A, B, C), rotated; more
    sets than the caches keep, so every call misses both), plus "sum" and "whole call"
    (gemm_vbatched itself over the same rotation, timed in the same loop; with
    ``whole_calls`` False none: the staged calls back to back, as the host table's)."""
    from portgemm import api, reuse
    from portgemm.call_cache import LayoutCall, layout_key
    from portgemm.planner import plan as make_plan
    from portgemm.problem import gather_lists

    names = ("reuse.key", "reuse.snapshot", "gather_lists (reads)", "layout key + get",
             "validate (given the reads)", "plan (cache hit)", "execute (new descriptors)",
             "layout put + reuse.remember")
    rotation = itertools.cycle(sets)
    fast = getattr(be, "fast_devices", ())
    rows, whole = [], []
    for i in range(calls + 10):
        A, B, C = next(rotation)
        before()
        t0 = time.perf_counter()
        k, X = reuse.key(be, None, A, B, C, 1.0, 0.0, False, False)
        t1 = time.perf_counter()
        snap = reuse.snapshot(k, X) if k is not None else None
        t2 = time.perf_counter()
        gathered = gather_lists(A, B, C, fast)
        t3 = time.perf_counter()
        lk = layout_key(be, None, gathered, C, 1.0, 0.0, False, False)
        hit = api._layouts.get(lk) if lk is not None else None
        t4 = time.perf_counter()
        batch = api._validate(be, A, B, C, 1.0, 0.0, False, False, gathered)
        t5 = time.perf_counter()
        p = make_plan(batch.shapes, dtype=batch.dtype, arch=be.arch())
        t6 = time.perf_counter()
        gemms = be.execute(p, batch)
        t7 = time.perf_counter()
        api._layouts.put(lk, LayoutCall(be, p, batch, gemms))
        if k is not None:
            reuse.remember(k, be, batch, p, gemms, snap)
        t8 = time.perf_counter()
        if hit is not None:
            raise RuntimeError("miss_stages: a layout-cache hit (give more sets)")
        if i >= 10:
            t = (t0, t1, t2, t3, t4, t5, t6, t7, t8)
            rows.append([b - a for a, b in zip(t, t[1:])])
        if not whole_calls:
            continue
        took = _one_call(be, next(rotation), before)
        if i >= 10:
            whole.append(took)
    res = dict(zip(names, _median_us(rows)))
    res["sum"] = sum(res.values())
    if whole:
        res["whole call"] = float(np.median(whole)) * 1e6
    return res


def _one_call(be, arrays, before) -> float:
    """Seconds of one gemm_vbatched over ``arrays`` (A, B, C), ``before()`` run first,
    untimed. (portgemm.gemm_vbatched is looked up per call: _inside wraps it.)"""
    import portgemm
    A, B, C = arrays
    before()
    t = time.perf_counter()
    portgemm.gemm_vbatched(A, B, C, backend=be)
    return time.perf_counter() - t


def gap_probe(be, sets, calls=200, before=lambda: None):
    """Where a new-memory call's time differs back to back (the host table's way) from
    the same call interleaved with a staged one (miss_stages): {row: median us} of
    gemm_vbatched over ``sets`` rotated back to back, as is, with the collector off,
    over the even and the odd sets alone (tools/profile_host.py shifts set j by 64 j
    bytes: alignment), with no ``before`` (no device sync); the steps of those real
    calls timed in place (_inside: which step grows, and what lies outside every
    step); CuPy's pool growth over a loop; and the staged calls back to back. Plus the
    collector's runs per call."""
    import gc
    from portgemm import api, reuse
    runs = [0]

    def count(phase, info):
        runs[0] += phase == "start"

    def loop(rot, pre=before, n=calls):
        api._layouts.clear()   # no set left in a cache by the loop before
        reuse.clear()
        rot, out = itertools.cycle(rot), []
        for i in range(n + 10):
            took = _one_call(be, next(rot), pre)
            if i >= 10:
                out.append(took)
        return float(np.median(out)) * 1e6

    res = {}
    gc.callbacks.append(count)
    try:
        runs[0] = 0
        res["back to back"] = loop(sets)
        res["gc runs a call"] = runs[0] / (calls + 10)
        gc.disable()
        try:
            res["back to back, gc off"] = loop(sets)
        finally:
            gc.enable()
    finally:
        gc.callbacks.remove(count)
    if len(sets) >= 2 * 18:   # each half still more sets than the caches keep
        res["even sets"], res["odd sets"] = loop(sets[0::2]), loop(sets[1::2])
    res["no sync before"] = loop(sets, pre=lambda: None)
    res.update(_inside(be, lambda: loop(sets)))
    pool = _pool_bytes()
    loop(sets)
    if pool is not None:   # the pool grows: freed blocks did not come back (cudaMalloc)
        res["pool growth over a loop (kB)"] = (_pool_bytes() - pool) / 1024
    api._layouts.clear()
    reuse.clear()
    staged = miss_stages(be, sets, calls, before, whole_calls=False)
    res.update({f"staged b2b: {k}": v for k, v in staged.items()})
    return res


def _inside(be, run):
    """{"inside: step": median us} of the steps of real gemm_vbatched calls made by
    ``run()``, each step's function wrapped by one perf_counter pair where the call looks
    it up (module globals, the backend's attributes), plus "inside: rest" (the whole call
    less its timed steps). Restored afterwards."""
    import portgemm
    from portgemm import api, reuse
    steps = [(reuse, "key"), (reuse, "snapshot"), (api, "_layout_lookup"), (api, "_validate"),
             (api, "make_plan"), (be, "execute"), (api._layouts, "put"), (reuse, "remember")]
    if getattr(be, "_staging", None) is not None:
        steps.append((be._staging, "upload"))   # inside execute: not in the rest's sum
    times = {name: [] for _, name in steps}
    saved = [(owner, name, vars(owner).get(name, _ABSENT)) for owner, name in steps]

    def wrap(real, out):
        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                out.append(time.perf_counter() - t)
        return timed
    whole, call = [], portgemm.gemm_vbatched
    for owner, name in steps:
        setattr(owner, name, wrap(getattr(owner, name), times[name]))
    portgemm.gemm_vbatched = wrap(call, whole)
    try:
        run()
    finally:
        portgemm.gemm_vbatched = call
        for owner, name, old in saved:
            if old is _ABSENT:
                delattr(owner, name)   # a bound method again
            else:
                setattr(owner, name, old)
    res = {f"inside: {name}": float(np.median(t)) * 1e6 for name, t in times.items() if t}
    res["inside: whole call"] = float(np.median(whole)) * 1e6 if whole else float("nan")
    res["inside: rest"] = res["inside: whole call"] - sum(
        v for k, v in res.items() if k not in ("inside: whole call", "inside: upload"))
    return res


_ABSENT = object()


def _pool_bytes():
    """CuPy's default pool's total bytes, or None (no CuPy, or a fake)."""
    import sys
    cp = sys.modules.get("cupy")
    try:
        return int(cp.get_default_memory_pool().total_bytes())
    except Exception:  # noqa: BLE001 - no pool to read
        return None


def hit_stages(be, A, B, C, calls=300, before=lambda: None):
    """{stage: median us} of a repeated call on the same arrays and lists (the reuse
    path's recorded hit, reuse.fast: the record's lookup by the lists' ids and its
    identity checks, the arrays' ids against the record's, the in-place check, the
    launch), plus "whole call" timed alike, and "reuse.key (no record)": the full key
    a hit without a record computes instead of the first two stages."""
    import portgemm
    from portgemm import api, reuse
    for _ in range(4):
        portgemm.gemm_vbatched(A, B, C, backend=be)   # the third call hits and records
    rows, whole = [], []
    for _ in range(calls):
        before()
        t0 = time.perf_counter()
        bk = api.backend_of(be)
        r = reuse._by_lists.get((id(A), id(B), id(C)))
        ok = r is not None and r.be is bk and r.how is None and r.entry.live
        t1 = time.perf_counter()
        X = [*A, *B, *C]
        e = r.entry   # by-value entries (torch, by columns) compare no ids
        ok = ok and (e.same in reuse.BY_VALUE or list(map(id, X)) == r.ids)
        t2 = time.perf_counter()
        ok = ok and e.same(X, e.meta)
        t3 = time.perf_counter()
        e.call(A, B, C) if e.lists else e.call()
        t4 = time.perf_counter()
        reuse.key(be, None, A, B, C, 1.0, 0.0, False, False)
        t5 = time.perf_counter()
        if not ok:
            raise RuntimeError("hit_stages: not a recorded reuse hit")
        rows.append([t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4])
        before()
        t0 = time.perf_counter()
        portgemm.gemm_vbatched(A, B, C, backend=be)
        whole.append(time.perf_counter() - t0)
    res = dict(zip(("backend + record lookup", "array ids", "in-place check",
                    "launch (the bound call)", "reuse.key (no record)"), _median_us(rows)))
    res["sum"] = sum(v for k, v in res.items() if k != "reuse.key (no record)")
    res["whole call"] = float(np.median(whole)) * 1e6
    return res


def show(title, res):
    print(f"{title}: " + ", ".join(f"{k} {v:.1f}" for k, v in res.items()) + " us", flush=True)
