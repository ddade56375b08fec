"""How much of a lists call the garbage collector takes, on the present CUDA device.

gemm_vbatched on CuPy arrays (M, N, K in [16, 128]) at batches 1024 and 5000, repeated on
the same arrays (the reuse path) and on fresh views of the same memory (the layout
cache), each with the collector on and off, with a small heap and with two million
extra live objects (an application's). Prints us per GEMM and collections per call.

    python tools/gc_probe.py
"""
from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import portgemm  # noqa: E402


def batch(cp, rng, n):
    s = rng.integers(16, 129, (n, 3))
    A = [cp.random.random((m, k), dtype=cp.float32) for m, _, k in s]
    B = [cp.random.random((k, nn), dtype=cp.float32) for _, nn, k in s]
    C = [cp.empty((m, nn), dtype=cp.float32) for m, nn, _ in s]
    return A, B, C


def median_us(cp, fn, reps=30):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    cp.cuda.Device().synchronize()
    return float(np.median(times)) * 1e6


def main():
    import cupy as cp
    rng = np.random.default_rng(1)
    runs = [0]
    gc.callbacks.append(lambda phase, info: runs.__setitem__(0, runs[0] + (phase == "start")))
    live = None
    for heap in ("small", "big"):
        if heap == "big":
            live = [[i] for i in range(2_000_000)]   # noqa: F841 - kept alive on purpose
        for n in (1024, 5000):
            A, B, C = batch(cp, rng, n)
            views = [([a[:] for a in A], [b[:] for b in B], [c[:] for c in C]) for _ in range(20)]
            turn = iter(range(10 ** 9))
            calls = (("repeat", lambda: portgemm.gemm_vbatched(A, B, C)),
                     ("new views", lambda: portgemm.gemm_vbatched(*views[next(turn) % 20])))
            for name, fn in calls:
                runs[0] = 0
                on = median_us(cp, fn)
                per_call = runs[0] / 33
                gc.disable()
                try:
                    off = median_us(cp, fn)
                finally:
                    gc.enable()
                print(f"heap {heap} n {n} {name}: gc on {on / n:.2f} us/GEMM "
                      f"({per_call:.1f} collections/call), gc off {off / n:.2f}", flush=True)


if __name__ == "__main__":
    main()
