"""Device timing in the spirit of Triton's do_bench: warm-up, then events around each
rep, median over reps; budgets in milliseconds."""
from __future__ import annotations

import numpy as np


def do_bench(cp, fn, warmup_ms=20.0, rep_ms=100.0, min_reps=5, max_reps=200):
    """Median ms of ``fn()`` (back-to-back calls; host overhead counts)."""
    fn()
    cp.cuda.get_current_stream().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    fn()
    end.record()
    end.synchronize()
    one = max(cp.cuda.get_elapsed_time(start, end), 1e-3)
    for _ in range(int(warmup_ms / one)):
        fn()
    reps = int(min(max_reps, max(min_reps, rep_ms / one)))
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return float(np.median(times))


def random_batch(cp, rng, batch, max_mn, max_k, dtype="float32", min_size=16, align=1):
    """Random M, N in [min_size, max_mn], K in [min_size, max_k] (each rounded up to a
    multiple of ``align``), operands uniform in [-0.5, 0.5)."""
    m = rng.integers(min_size, max_mn + 1, batch)
    n = rng.integers(min_size, max_mn + 1, batch)
    k = rng.integers(min_size, max_k + 1, batch)
    shapes = -(-np.stack([m, n, k], 1) // align) * align
    A = [cp.asarray(rng.random((a, c), dtype=np.float64) - 0.5, dtype=dtype) for a, _, c in shapes]
    B = [cp.asarray(rng.random((c, b), dtype=np.float64) - 0.5, dtype=dtype) for _, b, c in shapes]
    C = [cp.empty((a, b), dtype=dtype) for a, b, _ in shapes]
    return shapes, A, B, C


def graph_bench(cp, fn, **kw):
    """Median ms of one CUDA-graph replay of ``fn`` (its launches, without host work)."""
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        fn()  # first call uploads; the captured one only launches
        stream.synchronize()
        stream.begin_capture()
        fn()
        graph = stream.end_capture()
        ms = do_bench(cp, graph.launch, **kw)
        stream.synchronize()
    return ms


def profile_once(cp, fn, warmup=3):
    """``fn`` run ``warmup`` times, then once between cudaProfilerStart and Stop: what
    ``ncu --profile-from-start off`` profiles (the first calls compile and upload)."""
    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    cp.cuda.runtime.profilerStart()
    fn()
    cp.cuda.Device().synchronize()
    cp.cuda.runtime.profilerStop()
