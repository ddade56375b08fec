"""CUDA backend through CuPy: NVRTC-compiled variants of the one kernel source, launched
on the current CuPy stream over device arrays (CuPy, PyTorch, anything exposing
__cuda_array_interface__ or DLPack), with no host round trip.

After the first call with a given set of arrays, Plan.run neither allocates nor
synchronises: the plan's tile arrays are uploaded once per plan, and the per-GEMM
descriptors (pointers, strides, alpha, beta) are cached by their bytes, so the call can
be captured in a CUDA graph.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..arrays import ArrayInfo, _new, info as generic_info
from ..errors import (DeviceError, DeviceUnavailable, DtypeError, LayoutError, UnknownArch,
                      ValidationError)
from ..kernels import nvrtc, resources as kres
from ..kernels.render import render
from ..occupancy.resources import KernelResources
from .launch import cached_descriptors, plan_state
from .ragged import Scratch, prologue_args



def _cupy():
    try:
        import cupy
    except ImportError as e:
        raise DeviceUnavailable("cuda backend needs CuPy (pip install 'portgemm[cuda]')") from e
    return cupy


def create():
    cupy = _cupy()
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # no driver, or a driver without a device
        raise DeviceUnavailable(f"cuda backend: no CUDA device ({e})") from e
    if n < 1:
        raise DeviceUnavailable("cuda backend: no CUDA device")
    be = CudaBackend(cupy)
    try:
        be.arch()
    except UnknownArch as e:  # no occupancy-model row: plans could not be made for it
        raise DeviceUnavailable(f"cuda backend: {be.device_name()} is not in the "
                                f"architecture table ({e})") from e
    return be


class CudaBackend:
    name = "cuda"

    def __init__(self, cupy):
        self.cp = cupy
        self._functions: dict[tuple[int, str], object] = {}
        self._modules: dict[tuple[int, str], object] = {}
        self._side: dict[int, list] = {}
        self._arch: dict[int, object] = {}
        self._ragged = Scratch()

    # -- device ---------------------------------------------------------------------
    def _dev(self) -> int:
        return self.cp.cuda.runtime.getDevice()

    def _props(self):
        return self.cp.cuda.runtime.getDeviceProperties(self._dev())

    def device_name(self) -> str:
        name = self._props()["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    def arch(self):
        dev = self._dev()
        if dev not in self._arch:
            from ..occupancy import get_arch
            p = self._props()
            a = get_arch(f"sm_{p['major']}{p['minor']}")
            self._arch[dev] = dataclasses.replace(
                a, compute_units=int(p["multiProcessorCount"]), part=self.device_name())
        return self._arch[dev]

    def synchronize(self) -> None:
        self.cp.cuda.get_current_stream().synchronize()

    def to_device(self, x):
        return self.cp.asarray(x)

    def to_host(self, x):
        return self.cp.asnumpy(x)

    # -- arrays ---------------------------------------------------------------------
    def array_info(self, x) -> ArrayInfo:
        cp = self.cp
        if type(x) is cp.ndarray:  # fast path: plain attribute reads, no interface dict
            if x.ndim != 2:
                raise ValidationError(f"expected a 2-D array, got shape {x.shape}")
            item = x.itemsize
            s0, s1 = x.strides
            if s0 % item or s1 % item:
                raise LayoutError("strides are not a multiple of the item size")
            return _new(ArrayInfo, (x.data.ptr, x.shape, (s0 // item, s1 // item),
                                    x.dtype, f"cuda:{x.data.device_id}", False))
        if isinstance(x, cp.ndarray):  # a subclass: take the same path via the base type
            return self.array_info(x.view(cp.ndarray))
        if isinstance(x, np.ndarray):
            raise DtypeError("cuda backend takes device arrays (CuPy, PyTorch CUDA, "
                            "__cuda_array_interface__ or DLPack); got a NumPy array - "
                            "copy it with cupy.asarray or use backend='numpy'")
        if hasattr(x, "__cuda_array_interface__"):
            return generic_info(x)
        if hasattr(x, "__dlpack__"):
            try:
                view = cp.from_dlpack(x)  # a view: no copy
            except Exception as e:  # e.g. host memory, or another vendor's device
                raise DtypeError(f"cuda backend cannot take this DLPack array: {e}") from None
            return self.array_info(view)
        raise DtypeError(f"cuda backend cannot take {type(x).__name__}")

    # -- kernels --------------------------------------------------------------------
    def function(self, variant):
        """Compiled, loaded entry point for ``variant`` on the current device; registers
        its real resource usage (kernel attributes) for the occupancy model."""
        dev = self._dev()
        key = (dev, variant.name)
        fn = self._functions.get(key)
        if fn is None:
            arch = self.arch()
            r = render(variant)
            cubin, res = nvrtc.compile(r.source, r.name, arch.name)
            mod = self.cp.cuda.function.Module()
            mod.load(cubin)
            fn = mod.get_function(r.name)
            self._modules[key] = mod  # the function lives as long as its module
            attrs = self.function_attributes(fn)
            kres.register(arch.name, variant.name, KernelResources(
                registers=attrs["num_regs"], shared_bytes=attrs["shared_size_bytes"],
                spill_bytes=res.spill_bytes,
                source=f"{nvrtc.version()} ({arch.name}, kernel attributes)"))
            self._functions[key] = fn
        return fn

    def function_attributes(self, fn) -> dict:
        drv = self.cp.cuda.driver
        # CUfunction_attribute: 1 shared, 3 local, 4 registers (cuda.h)
        get = lambda attr: int(drv.funcGetAttribute(attr, fn.ptr))
        return {"shared_size_bytes": get(1), "local_size_bytes": get(3), "num_regs": get(4)}

    def max_active_blocks(self, fn, threads: int) -> int:
        return int(self.cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(fn.ptr, threads, 0))

    # -- execution ------------------------------------------------------------------
    def _upload(self, host: np.ndarray):
        cp = self.cp
        dev = cp.empty(host.nbytes, dtype=cp.uint8)
        dev.set(host.view(np.uint8).reshape(-1))
        return dev

    def execute(self, plan, batch, gemms=None):
        """Launch; returns the device descriptors used, which a caller that repeats the
        same batch (BoundGemm) passes back as ``gemms`` and keeps alive."""
        if plan.n_tiles == 0:
            return None
        dev = self._dev()
        if batch.device.startswith("cuda:") and batch.device != f"cuda:{dev}":
            raise ValidationError(f"the arrays are on {batch.device}, the current device is "
                                  f"cuda:{dev}")
        st = plan_state(plan, ("cuda", dev), bool(batch.trans_a), bool(batch.trans_b),
                        self._upload)
        if gemms is None:
            gemms = cached_descriptors(st, batch, self._upload)
        stream = self.cp.cuda.get_current_stream()
        tiles = st["tiles"].data.ptr if st["tiles"] is not None else 0
        bptr = st["block_ptr"].data.ptr if st["block_ptr"] is not None else 0
        launches = st["launches"]
        # Per-kind launches run side by side (fork/join on side streams), so each kind
        # keeps its own registers and block size and no launch waits for another's tail.
        fork = plan.mode == "per-kind" and len(launches) > 1
        if fork:
            # Events per calling stream: callers on other streams must not wait on (or
            # release work on) each other's fork and join points.
            events = st.setdefault("events", {}).get(stream.ptr)
            if events is None:
                events = st["events"][stream.ptr] = [
                    self.cp.cuda.Event(block=False, disable_timing=True)
                    for _ in range(len(launches) + 1)]
            events[0].record(stream)
            side = self._side_streams(len(launches))
        for i, (which, base, grid) in enumerate(launches):
            variant = st["variants"][which]
            fn = st["fns"].get(which) or st["fns"].setdefault(which, self.function(variant))
            grid = grid if isinstance(grid, tuple) else (grid, 1, 1)
            s = stream
            if fork:
                s = side[i]
                s.wait_event(events[0])
            try:  # CuPy checks cuLaunchKernel's status and raises CUDADriverError
                fn(grid, (variant.threads, 1, 1),
                   (np.uint64(gemms.data.ptr), np.uint64(tiles), np.uint64(bptr), np.int32(base)),
                   stream=s)
            except self.cp.cuda.driver.CUDADriverError as e:
                raise DeviceError(f"launch of {variant.name} failed: {e}") from e
            if fork:
                events[i + 1].record(s)
                stream.wait_event(events[i + 1])
        return gemms

    def _side_streams(self, n: int):
        pool = self._side.setdefault(self._dev(), [])
        while len(pool) < n:
            pool.append(self.cp.cuda.Stream(non_blocking=True))
        return pool[:n]

    # -- ragged M, group ends on the device ------------------------------------------
    def execute_ragged(self, job) -> None:
        """Two launches on the current stream, no host round trip (graph-capturable):
        the prologue writes descriptors and the tile list from ``job.offs`` on the
        device, then ``job.variant`` runs the upper-bound list, one tile per block."""
        if job.groups == 0 or job.n_tiles == 0:
            return None
        cp = self.cp
        stream = cp.cuda.get_current_stream()
        gemms, tiles, bptr = self._ragged.get(
            (self._dev(), stream.ptr), job.groups, job.n_tiles,
            lambda n: cp.empty(n, dtype=cp.uint8), self._upload)
        alphas, betas = (self._ragged.scalars(self._dev(), x, self._upload)
                         for x in (job.alphas, job.betas))
        kinds = {"p": np.uint64, "i": np.int32, "q": np.int64, "d": np.float64}
        args = [kinds[k](v) for k, v in prologue_args(
            job, gemms.data.ptr, tiles.data.ptr, _ptr(alphas), _ptr(betas))]
        steps = ((job.prologue, job.prologue_blocks(), args),
                 (job.variant, job.n_tiles, (np.uint64(gemms.data.ptr), np.uint64(tiles.data.ptr),
                                              np.uint64(bptr.data.ptr), np.int32(0))))
        for variant, blocks, a in steps:
            try:
                self.function(variant)((blocks, 1, 1), (variant.threads, 1, 1), tuple(a),
                                       stream=stream)
            except self.cp.cuda.driver.CUDADriverError as e:
                raise DeviceError(f"launch of {variant.name} failed: {e}") from e
        return None


def _ptr(buf) -> int:
    return 0 if buf is None else buf.data.ptr
