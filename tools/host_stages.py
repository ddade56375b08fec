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


def miss_stages(be, sets, calls=200, before=lambda: None):
    """{stage: median us} of the full path over ``sets`` (lists (A, B, C), rotated; more
    sets than the caches keep, so every call misses both), plus "sum" and "whole call"
    (gemm_vbatched itself over the same rotation, timed in the same loop)."""
    import portgemm
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
        A, B, C = next(rotation)
        before()
        t0 = time.perf_counter()
        portgemm.gemm_vbatched(A, B, C, backend=be)
        if i >= 10:
            whole.append(time.perf_counter() - t0)
    res = dict(zip(names, _median_us(rows)))
    res["sum"] = sum(res.values())
    res["whole call"] = float(np.median(whole)) * 1e6
    return res


def hit_stages(be, A, B, C, calls=300, before=lambda: None):
    """{stage: median us} of a repeated call on the same arrays (the reuse path's hit:
    key, entry lookup and in-place check, launch), plus "whole call" timed alike."""
    import portgemm
    from portgemm import reuse
    for _ in range(3):
        portgemm.gemm_vbatched(A, B, C, backend=be)   # from the third call on: hits
    rows, whole = [], []
    for _ in range(calls):
        before()
        t0 = time.perf_counter()
        k, X = reuse.key(be, None, A, B, C, 1.0, 0.0, False, False)
        t1 = time.perf_counter()
        e = reuse._entries.get(k)
        same = e.same(X, e.meta)
        t2 = time.perf_counter()
        e.call(A, B, C) if e.lists else e.call()
        t3 = time.perf_counter()
        if not same:
            raise RuntimeError("hit_stages: not a reuse hit")
        rows.append([t1 - t0, t2 - t1, t3 - t2])
        before()
        t0 = time.perf_counter()
        portgemm.gemm_vbatched(A, B, C, backend=be)
        whole.append(time.perf_counter() - t0)
    res = dict(zip(("reuse.key", "lookup + in-place check", "launch (the bound call)"),
                   _median_us(rows)))
    res["sum"] = sum(res.values())
    res["whole call"] = float(np.median(whole)) * 1e6
    return res


def show(title, res):
    print(f"{title}: " + ", ".join(f"{k} {v:.1f}" for k, v in res.items()) + " us", flush=True)
