"""The host path's stage times without a GPU: the CUDA backend over a fake CuPy whose
arrays are plain slotted objects (pointers into no memory) and a cuLaunchKernel that
does nothing, so what is timed is portgemm's own host work. The fake's attribute reads
are cheaper than CuPy's (about 0.03 us against 0.07-0.12 us per read on the H100 host),
so per-array costs here are a lower bound; numpy and Python fixed costs are comparable.
Times are the least process (CPU) time of one call over many, so that other work on a
shared machine does not inflate them. "new arrays": new array objects (views of the same
memory) every call, rotated over more sets than the reuse path remembers. "torch": fake
torch tensors over the same memory (same tensors every call; "new tensors": new ones).

    PYTHONPATH=$PWD python tools/profile_host_fake.py [--batches 8 64 1024 5000] [--profile N]
        [--packed 8 64 1024] [--stages 8 64] [--rounds R] [--real-cupy]

--real-cupy: the user's arrays are real ``cupy.ndarray`` objects over memory nobody owns
(CuPy imports and builds arrays without a GPU; only its reads are timed, nothing touches
the memory), so that attribute reads cost what CuPy's do rather than the fake's.

--packed G ...: also the packed API (gemm_grouped, ragged M of up to 256 rows per group,
N = K = 128) with host and with device offsets, against the bound call over views of
the same buffers, per call (a repeated call: what bench/packed_overhead.py times).
"""
from __future__ import annotations

import argparse
import cProfile
import ctypes
import io
import itertools
import pstats
import sys
import time
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class Mem:
    __slots__ = ("ptr", "device_id")

    def __init__(self, ptr):
        self.ptr, self.device_id = ptr, 0

    def copy_from_host_async(self, src, n, stream):
        pass


class ndarray:  # noqa: N801 - CuPy's name
    __slots__ = ("data", "_shape", "_strides", "dtype", "_c_contiguous", "__weakref__")

    def __init__(self, ptr, shape, dtype):
        self.data, self.dtype = Mem(ptr), np.dtype(dtype)
        self._shape = tuple(map(int, shape))   # Python ints, as CuPy's (not NumPy scalars)
        self._strides = tuple(int(np.prod(shape[i + 1:])) * self.dtype.itemsize
                              for i in range(len(shape)))
        self._c_contiguous = True   # CuPy's flag (a slot, as here); these are contiguous

    # CuPy builds a new tuple on every read of these; so does the fake
    shape = property(lambda self: tuple(self._shape))
    strides = property(lambda self: tuple(self._strides))
    ndim = property(lambda self: len(self._shape))
    itemsize = property(lambda self: self.dtype.itemsize)

    def __len__(self):
        return self._shape[0]


make = ndarray   # builds one array: the fake's, or real CuPy's over no memory (real_cupy)
ARRAY = ndarray


def real_cupy() -> bool:
    """Make the profiled arrays real ``cupy.ndarray`` objects over memory nobody owns
    (CuPy imports and builds arrays without a GPU): their attribute reads then cost
    what CuPy's do, not what the fake's slots do. False where CuPy is not importable."""
    global make, ARRAY
    try:
        import cupy
        from cupy.cuda import memory
    except Exception:  # noqa: BLE001 - no CuPy (or a broken one): keep the fake
        return False

    def real(ptr, shape, dtype):
        mem = memory.UnownedMemory(ptr, max(int(np.prod(shape)) * np.dtype(dtype).itemsize,
                                            1), None, device_id=0)
        return cupy.ndarray(tuple(map(int, shape)), dtype, memptr=memory.MemoryPointer(mem, 0))
    make, ARRAY = real, cupy.ndarray
    return True


class Stream:
    """A stream context that does nothing (the fake launches nothing to order)."""
    ptr = 0
    __enter__ = lambda self: self  # noqa: E731
    __exit__ = lambda self, *exc: None  # noqa: E731
    wait_event = lambda self, event: None  # noqa: E731


def Event(**kw):  # noqa: N802 - CuPy's name
    return types.SimpleNamespace(record=lambda stream=None: None, synchronize=lambda: None)


class Pinned:
    """Pinned host memory: real host bytes (the staging upload memmoves into them)."""
    __slots__ = ("buf", "ptr")

    def __init__(self, n):
        self.buf = (ctypes.c_char * n)()
        self.ptr = ctypes.addressof(self.buf)

    def size(self):
        return len(self.buf)


_next = [1 << 32]


def _alloc(nbytes):
    p = _next[0]
    _next[0] += (nbytes + 255) // 256 * 256
    return p


def _device_empty(shape, dtype=np.uint8):
    """cupy.empty of the fake module (the backend's own buffers): always the fake's."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return ndarray(_alloc(int(np.prod(shape)) * np.dtype(dtype).itemsize), shape, dtype)


def empty(shape, dtype=np.uint8):
    """A user's array (the fake's, or real CuPy's with real_cupy)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return make(_alloc(int(np.prod(shape)) * np.dtype(dtype).itemsize), shape, dtype)


class Tensor:
    """A fake torch CUDA tensor: the reads portgemm makes of one (data_ptr(), shape,
    stride(), dtype, get_device()), each a Python-level call as torch's are C calls
    through its argument parser: relative costs only."""
    __slots__ = ("_ptr", "_shape", "_stride", "dtype", "__weakref__")
    device = "cuda:0"

    def __init__(self, ptr, shape, dtype):
        self._ptr, self._shape, self.dtype = ptr, tuple(map(int, shape)), dtype
        self._stride = (shape[1], 1)

    shape = property(lambda self: tuple(self._shape))   # torch builds a torch.Size per read

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return tuple(self._stride)

    def get_device(self):
        return 0


def fake_torch():
    """A fake torch module (Tensor above; float32 is its dtype object) in sys.modules."""
    stream = types.SimpleNamespace(cuda_stream=0)
    torch = types.SimpleNamespace(Tensor=Tensor, float32="f32", float64="f64", float16="f16",
                                  cuda=types.SimpleNamespace(current_stream=lambda d: stream))
    sys.modules["torch"] = torch
    return torch


def tensors(X):
    """Fake torch tensors over the fake CuPy arrays ``X`` (as torch.from_dlpack gives)."""
    return [Tensor(x.data.ptr, x.shape, "f32") for x in X]


def fake_cupy():
    stream = Stream()
    cuda = types.SimpleNamespace(
        get_current_stream=lambda: stream, ExternalStream=lambda p: stream,
        Stream=lambda **kw: stream, Event=Event, alloc_pinned_memory=Pinned,
        alloc=lambda nbytes: Mem(_alloc(nbytes)),   # CuPy's allocator: a MemoryPointer
        runtime=types.SimpleNamespace(
            getDevice=lambda: 0, getDeviceCount=lambda: 1,
            getDeviceProperties=lambda d: {"name": b"Fake H100", "major": 9, "minor": 0,
                                           "multiProcessorCount": 132}),
        driver=types.SimpleNamespace(CUDADriverError=RuntimeError))
    return types.SimpleNamespace(ndarray=ARRAY, uint8=np.uint8, empty=_device_empty, cuda=cuda,
                                 float32=np.float32, float64=np.float64)


def fake_backend():
    """(backend, cupy): the CUDA backend on the fake, its launches doing nothing."""
    cp = fake_cupy()
    sys.modules["cupy"] = cp
    from portgemm.backends import cuda as cudabe
    be = cudabe.CudaBackend(cp, launch_kernel=lambda *a: 0)
    count = iter(range(1000, 10**9))
    be.function = lambda variant: types.SimpleNamespace(ptr=next(count))
    return be, cp


def lists(rng, batch, dtype=np.float32):
    shapes = np.stack([rng.integers(16, 129, batch) for _ in range(3)], 1)
    A = [empty((m, k), dtype) for m, _, k in shapes]
    B = [empty((k, n), dtype) for _, n, k in shapes]
    C = [empty((m, n), dtype) for m, n, _ in shapes]
    return shapes, A, B, C


def cpu_us(fn, reps):
    """Least CPU time of one call (us) over ``reps`` calls: process time, so that other
    work on a shared machine does not count (wall time would)."""
    fn()
    out = []
    for _ in range(reps):
        t = time.process_time()
        fn()
        out.append(time.process_time() - t)
    return float(np.min(out)) * 1e6


def views(X):
    return [make(x.data.ptr, x.shape, x.dtype) for x in X]


def packed(be, rng, groups, n=128, k=128, max_m=256):
    """CPU us per call of gemm_grouped (host offsets, device offsets) and the bound call."""
    import portgemm
    m = rng.integers(0, max_m + 1, groups)
    offs = np.cumsum(m).astype(np.int32)
    T = int(offs[-1])
    A, B, C = empty((T, k), np.float32), empty((groups, k, n), np.float32), empty((T, n), np.float32)
    d_offs = empty((groups,), np.int32)
    starts = np.concatenate([[0], offs[:-1]])
    isz = 4
    la = [make(A.data.ptr + s * k * isz, (e - s, k), np.float32) for s, e in zip(starts, offs)]
    lb = [make(B.data.ptr + g * k * n * isz, (k, n), np.float32) for g in range(groups)]
    lc = [make(C.data.ptr + s * n * isz, (e - s, n), np.float32) for s, e in zip(starts, offs)]
    shapes = np.stack([m, np.full(groups, n), np.full(groups, k)], 1)
    bound = portgemm.plan(shapes, "float32", arch=be.arch()).bind(la, lb, lc, backend=be)
    reps = 300
    return {"host offsets": cpu_us(lambda: portgemm.gemm_grouped(A, B, C, offs, backend=be), reps),
            "device offsets": cpu_us(lambda: portgemm.gemm_grouped(A, B, C, d_offs, backend=be),
                                     reps),
            "bound": cpu_us(bound, reps)}


def stages(be, rng, batch):
    """tools/host_stages.py's stage times at ``batch`` GEMMs: a new-memory call (fresh
    arrays at new addresses, more sets than the caches keep) and a repeated call."""
    import host_stages
    _, A, B, C = lists(rng, batch)
    sets = [[[empty(x.shape, x.dtype) for x in X] for X in (A, B, C)] for _ in range(24)]
    host_stages.show(f"batch {batch}, new-memory call stages",
                     host_stages.miss_stages(be, sets))
    sets = [[[empty(x.shape, x.dtype) for x in X] for X in (A, B, C)] for _ in range(40)]
    host_stages.show(f"batch {batch}, new-memory gap probe", host_stages.gap_probe(be, sets))
    host_stages.show(f"batch {batch}, repeated call stages", host_stages.hit_stages(be, A, B, C))
    T = [tensors(X) for X in (A, B, C)]
    host_stages.show(f"batch {batch}, repeated call stages (torch)",
                     host_stages.hit_stages(be, *T))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, nargs="*", default=[8, 64, 1024, 5000])
    ap.add_argument("--profile", type=int, default=0, help="cProfile this batch size")
    ap.add_argument("--packed", type=int, nargs="*", default=[], help="group counts")
    ap.add_argument("--stages", type=int, nargs="*", default=[],
                    help="stage times of a new-memory call and of a repeated call at these "
                         "batch sizes (tools/host_stages.py)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure each stage this many times, keep the least")
    ap.add_argument("--real-cupy", action="store_true",
                    help="real cupy.ndarray objects (over no memory) in place of the fake's")
    args = ap.parse_args(argv)
    if args.real_cupy and not real_cupy():
        ap.error("--real-cupy: CuPy is not importable here")
    be, cp = fake_backend()
    fake_torch()
    for groups in args.packed:
        res = packed(be, np.random.default_rng(groups), groups)
        print(f"packed, {groups} groups: " + ", ".join(f"{k} {v:.1f}" for k, v in res.items())
              + " us per call", flush=True)
    for batch in args.stages:
        stages(be, np.random.default_rng(batch), batch)
    import portgemm
    from portgemm.api import _validate
    from portgemm.planner import plan as make_plan
    rng = np.random.default_rng(3)
    rows = []
    for batch in args.batches:
        shapes, A, B, C = lists(rng, batch)
        reps = max(20, min(300, 30000 // batch))
        b = _validate(be, A, B, C, 1.0, 0.0, False, False)
        p = make_plan(b.shapes, dtype=b.dtype, arch=be.arch())
        sets = itertools.cycle([[views(X) for X in (A, B, C)] for _ in range(16)])
        fresh = itertools.cycle([[[empty(x.shape, x.dtype) for x in X] for X in (A, B, C)]
                                 for _ in range(20)])   # more sets than the caches keep
        tl = [tensors(X) for X in (A, B, C)]
        tsets = itertools.cycle([[tensors(X) for X in (A, B, C)] for _ in range(16)])
        calls = {
            "validate": lambda: _validate(be, A, B, C, 1.0, 0.0, False, False),
            "plan hit": lambda: make_plan(b.shapes, dtype=b.dtype, arch=be.arch()),
            "execute": lambda: be.execute(p, b),
            "gemm_vbatched": lambda: portgemm.gemm_vbatched(A, B, C, backend=be),
            "gemm_vbatched (new arrays)": lambda: portgemm.gemm_vbatched(*next(sets),
                                                                         backend=be),
            "gemm_vbatched (new memory)": lambda: portgemm.gemm_vbatched(*next(fresh),
                                                                         backend=be),
            "Plan.run": lambda: p.run(A, B, C, backend=be),
            "torch": lambda: portgemm.gemm_vbatched(*tl, backend=be),
            "torch (new tensors)": lambda: portgemm.gemm_vbatched(*next(tsets), backend=be),
            "bound": p.bind(A, B, C, backend=be)}
        # the least over rounds: on a shared machine one round may be slowed throughout
        res = {k: min(cpu_us(fn, reps) for _ in range(args.rounds)) for k, fn in calls.items()}
        rows.append((batch, res))
        print(f"batch {batch}: " + ", ".join(f"{k} {v:.1f}" for k, v in res.items()) +
              f" us; per GEMM: gemm_vbatched {res['gemm_vbatched'] / batch:.2f}, new arrays "
              f"{res['gemm_vbatched (new arrays)'] / batch:.2f}, new memory "
              f"{res['gemm_vbatched (new memory)'] / batch:.2f}, torch {res['torch'] / batch:.2f}, "
              f"torch (new tensors) {res['torch (new tensors)'] / batch:.2f} us; over bound "
              f"(call - bound) / batch: " + ", ".join(
                  f"{k} {(v - res['bound']) / batch:.2f}" for k, v in res.items()
                  if k.startswith(("gemm_vbatched", "Plan.run", "torch"))), flush=True)
        if batch == args.profile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(reps):
                portgemm.gemm_vbatched(A, B, C, backend=be)
            prof.disable()
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
            print("\n".join(s.getvalue().splitlines()[:50]))


if __name__ == "__main__":
    main()
