"""Measure the device ceilings the planner's cost model reads, on the present CUDA
device, with tiny CuPy RawKernels, and write them as the arch's entry of
portgemm/occupancy/ceilings.json (the planner then uses them instead of the modelled
defaults).

    python -m portgemm bench --ceilings [--out DIR]      (or python -m portgemm.benchmark.ceilings)

What each figure is (all event-timed, warm-up then the median of several reps, in the
spirit of Triton's do_bench; the whole run takes well under 30 s):

- copy_bytes_per_s: a 16-byte-vector copy of 512 MiB, read + write bytes / time;
- smem_bytes_per_s_per_cu: every thread of 2 blocks x 1024 threads per SM reads
  16-byte vectors from shared memory at consecutive addresses (no bank conflicts) in a
  loop; bytes read / time / SMs;
- fp32_flops_per_s, fp64_flops_per_s: 8 independent FMA chains per thread, 8 blocks of
  256 threads per SM; 2 FLOP per FMA;
- launch_s: an empty kernel launched back to back from Python, time per launch (host
  work included, as a bound call pays it);
- latency_s: one thread chasing a random single-cycle permutation of 128 MiB (larger
  than L2), time per dependent load.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

SOURCE = r"""
extern "C" __global__ void pg_copy(const float4* __restrict__ src, float4* __restrict__ dst,
                                   long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) dst[i] = src[i];
}

extern "C" __global__ void __launch_bounds__(1024) pg_smem(float* out, int iters) {
    __shared__ float4 buf[1024];
    buf[threadIdx.x] = make_float4(threadIdx.x, 1.f, 2.f, 3.f);
    __syncthreads();
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    int j = threadIdx.x;
    for (int i = 0; i < iters; ++i) {
        const float4 v = buf[j];
        acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        j = (j + 32) & 1023;
    }
    if (acc.x + acc.y + acc.z + acc.w == -1.f) out[0] = acc.x;   // never true: keeps the loads
}

template <typename T>
__device__ void pg_fma(T* out, int iters) {
    T a[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) a[c] = T(threadIdx.x + c);
    const T b = T(0.999), d = T(0.001);
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < 8; ++c) a[c] = a[c] * b + d;
    }
    T s = 0;
#pragma unroll
    for (int c = 0; c < 8; ++c) s += a[c];
    if (s == T(-1)) out[0] = s;
}
extern "C" __global__ void pg_fma32(float* out, int iters) { pg_fma<float>(out, iters); }
extern "C" __global__ void pg_fma64(double* out, int iters) { pg_fma<double>(out, iters); }

extern "C" __global__ void pg_empty() {}

extern "C" __global__ void pg_chase(const unsigned* __restrict__ next, unsigned* out, int steps) {
    unsigned p = 0;
    for (int i = 0; i < steps; ++i) p = next[p];
    out[0] = p;
}
"""


def bench_ms(cp, fn, warmup=3, reps=10) -> float:
    """Median ms of fn() between events, after a warm-up."""
    for _ in range(warmup):
        fn()
    cp.cuda.get_current_stream().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    out = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(cp.cuda.get_elapsed_time(start, end))
    return float(np.median(out))


def measure(cp) -> dict:
    """Every figure of occupancy.ceilings.FIELDS on the current device."""
    mod = cp.RawModule(code=SOURCE, options=("-std=c++17",), name_expressions=None)
    dev = cp.cuda.runtime.getDevice()
    props = cp.cuda.runtime.getDeviceProperties(dev)
    sms = int(props["multiProcessorCount"])
    out32 = cp.zeros(1, cp.float32)

    n = (512 << 20) // 16
    src = cp.ones(n * 4, cp.float32)
    dst = cp.empty_like(src)
    copy = mod.get_function("pg_copy")
    ms = bench_ms(cp, lambda: copy((sms * 8,), (256,), (src, dst, np.int64(n))))
    copy_bw = 2 * n * 16 / (ms * 1e-3)
    del src, dst

    iters = 1 << 14
    smem = mod.get_function("pg_smem")
    ms = bench_ms(cp, lambda: smem((sms * 2,), (1024,), (out32, np.int32(iters))))
    smem_bw = sms * 2 * 1024 * iters * 16 / (ms * 1e-3) / sms

    fma = {}
    for name, dt in (("pg_fma32", cp.float32), ("pg_fma64", cp.float64)):
        k = mod.get_function(name)
        o = cp.zeros(1, dt)
        it = 1 << 14
        ms = bench_ms(cp, lambda: k((sms * 8,), (256,), (o, np.int32(it))))
        fma[name] = 2 * 8 * sms * 8 * 256 * it / (ms * 1e-3)

    empty = mod.get_function("pg_empty")
    launches = 200
    ms = bench_ms(cp, lambda: [empty((1,), (32,), ()) for _ in range(launches)], reps=5)
    launch_s = ms * 1e-3 / launches

    count = 32 << 20                                   # 128 MiB of uint32
    rng = np.random.default_rng(0)
    order = rng.permutation(count).astype(np.uint32)
    nxt = np.empty(count, np.uint32)
    nxt[order] = np.roll(order, -1)                    # one cycle through every element
    d_next = cp.asarray(nxt)
    out_u = cp.zeros(1, cp.uint32)
    chase = mod.get_function("pg_chase")
    steps = 20000
    ms = bench_ms(cp, lambda: chase((1,), (1,), (d_next, out_u, np.int32(steps))), warmup=1, reps=3)
    latency_s = ms * 1e-3 / steps

    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {"device": name,
            "source": "measured by portgemm/benchmark/ceilings.py (RawKernels, event timing)",
            "copy_bytes_per_s": copy_bw, "smem_bytes_per_s_per_cu": smem_bw,
            "fp32_flops_per_s": fma["pg_fma32"], "fp64_flops_per_s": fma["pg_fma64"],
            "launch_s": launch_s, "latency_s": latency_s}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m portgemm bench --ceilings",
                                 description="measure this CUDA device's ceilings for the "
                                             "planner's cost model")
    ap.add_argument("--out", metavar="DIR", help="also write ceilings-<arch>.json there")
    ap.add_argument("--no-write", action="store_true",
                    help="do not update portgemm/occupancy/ceilings.json")
    args = ap.parse_args(argv)
    from ..backends.base import get_backend
    from ..occupancy import ceilings
    be = get_backend("cuda")
    arch = be.arch()
    entry = measure(be.cp)
    for k, v in entry.items():
        print(f"{k:26s} {v:.4g}" if isinstance(v, float) else f"{k:26s} {v}")
    if not args.no_write:
        ceilings.write_measured(arch.name, entry)
        print(f"wrote the {arch.name} entry of {ceilings.PATH}")
    if args.out:
        d = Path(args.out)
        d.mkdir(parents=True, exist_ok=True)
        (d / f"ceilings-{arch.name}.json").write_text(json.dumps({arch.name: entry}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
