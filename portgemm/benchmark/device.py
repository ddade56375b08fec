"""The device a benchmark runs on: its array module, its clock and its L2 flush.

CudaDevice times with CUDA events on the current CuPy stream; HostDevice (the NumPy
backend, for dry runs and CI) with perf_counter. Both flush the cache by writing a
buffer larger than it before a cold-L2 call, as Triton's do_bench does.
"""
from __future__ import annotations

import platform
import time
from importlib import metadata

import numpy as np

from ..errors import DeviceUnavailable

HOST_FLUSH_BYTES = 16 << 20   # a host "L2" flush: a write larger than a core's L2


def open_device(backend: str | None):
    """The device for a backend name (None: cuda when present, else numpy)."""
    from ..backends.base import get_backend
    if backend is None:
        try:
            return CudaDevice(get_backend("cuda"))
        except DeviceUnavailable:
            return HostDevice(get_backend("numpy"))
    be = get_backend(backend)
    if be.name == "cuda":
        return CudaDevice(be)
    if be.name == "numpy":
        return HostDevice(be)
    raise DeviceUnavailable(f"bench runs on the cuda and numpy backends, not {be.name}")


def versions(names=("portgemm", "numpy", "cupy-cuda13x", "cupy-cuda12x", "torch", "triton",
                    "cuda-bindings", "tabulate")) -> dict:
    out = {"python": platform.python_version()}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            pass
    return out


class HostDevice:
    """The NumPy backend: host arrays, wall clock."""
    kind = "host"

    def __init__(self, be):
        self.be, self.xp = be, np
        self._flush_buf = np.empty(HOST_FLUSH_BYTES, np.uint8)

    def name(self) -> str:
        return self.be.device_name()

    def info(self) -> dict:
        return {"device": self.name(), "backend": self.be.name, "arch": self.be.arch().name,
                "host": platform.node(), "versions": versions()}

    def asarray(self, host):
        return np.asarray(host)

    def to_host(self, x):
        return np.asarray(x)

    def synchronize(self):
        pass

    def flush_l2(self):
        self._flush_buf.fill(1)

    def time_calls(self, fn, n: int, flush: bool = False) -> list[float]:
        """Milliseconds of each of n calls of fn (a flush before each when asked)."""
        out = []
        for _ in range(n):
            if flush:
                self.flush_l2()
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
        return out

    def empty_launch(self):
        return lambda: None

    def gemm_probe(self, dtype):
        n = 512
        a = np.ones((n, n), dtype)
        c = np.empty((n, n), dtype)
        return 2.0 * n ** 3, lambda: np.matmul(a, a, out=c)

    def copy_probe(self):
        src = np.ones(64 << 20, np.uint8)
        dst = np.empty_like(src)
        return 2.0 * src.nbytes, lambda: np.copyto(dst, src)


class CudaDevice:
    """The CUDA backend: CuPy arrays, CUDA events on the current stream."""
    kind = "cuda"

    def __init__(self, be):
        self.be, self.xp = be, be.cp
        cp = self.xp
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
        self.l2_bytes = int(props.get("l2CacheSize", 50 << 20))
        # twice L2, at least 256 MiB (Triton's do_bench uses 256 MB)
        self._flush_buf = cp.empty(max(2 * self.l2_bytes, 256 << 20), cp.uint8)
        self._start, self._end = cp.cuda.Event(), cp.cuda.Event()

    def name(self) -> str:
        return self.be.device_name()

    def info(self) -> dict:
        rt = self.xp.cuda.runtime
        return {"device": self.name(), "backend": "cuda", "arch": self.be.arch().name,
                "sms": self.be.arch().compute_units, "l2_bytes": self.l2_bytes,
                "driver": rt.driverGetVersion(), "runtime": rt.runtimeGetVersion(),
                "host": platform.node(), "versions": versions()}

    def asarray(self, host):
        return self.xp.asarray(host)

    def to_host(self, x):
        return self.xp.asnumpy(x)

    def synchronize(self):
        self.xp.cuda.get_current_stream().synchronize()

    def flush_l2(self):
        self._flush_buf.fill(1)

    def time_calls(self, fn, n: int, flush: bool = False) -> list[float]:
        """Milliseconds between events around each of n calls; a flush, when asked,
        runs on the stream before the start event and is waited for, so neither it is
        timed nor does it hide the call's host work (which would overlap it)."""
        cp, start, end = self.xp, self._start, self._end
        out = []
        for _ in range(n):
            if flush:
                self.flush_l2()
                cp.cuda.get_current_stream().synchronize()
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(cp.cuda.get_elapsed_time(start, end))
        return out

    def empty_launch(self):
        k = self.xp.RawKernel(r'extern "C" __global__ void portgemm_empty() {}', "portgemm_empty")
        return lambda: k((1,), (32,), ())

    def gemm_probe(self, dtype):
        cp, n = self.xp, 8192
        a = cp.ones((n, n), dtype)
        c = cp.empty((n, n), dtype)
        return 2.0 * n ** 3, lambda: cp.matmul(a, a, out=c)

    def copy_probe(self):
        src = self.xp.ones(1 << 30, self.xp.uint8)
        dst = self.xp.empty_like(src)
        return 2.0 * src.nbytes, lambda: dst.__setitem__(Ellipsis, src)
