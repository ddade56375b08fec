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
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import portgemm  # noqa: E402
from host_overhead import device_batch, host_us  # noqa: E402

REPS = 30


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
            _, A, B, C = device_batch(cp, rng, n, 128, 128)
            views = [([a[:] for a in A], [b[:] for b in B], [c[:] for c in C]) for _ in range(20)]
            turn = iter(range(10 ** 9))
            calls = (("repeat", lambda: portgemm.gemm_vbatched(A, B, C)),
                     ("new views", lambda: portgemm.gemm_vbatched(*views[next(turn) % 20])))
            for name, fn in calls:
                runs[0] = 0
                fn()    # two calls make the reuse path's entry; host_us warms up once more
                fn()
                on = host_us(cp, fn, REPS)
                per_call = runs[0] / (REPS + 3)
                gc.disable()
                try:
                    fn()
                    fn()
                    off = host_us(cp, fn, REPS)
                finally:
                    gc.enable()
                print(f"heap {heap} n {n} {name}: gc on {on / n:.2f} us/GEMM "
                      f"({per_call:.1f} collections/call), gc off {off / n:.2f}", flush=True)


if __name__ == "__main__":
    main()
