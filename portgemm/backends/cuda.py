"""CUDA backend through CuPy: NVRTC-compiled variants of the one kernel source, launched
with the driver's cuLaunchKernel (arguments encoded once per descriptor buffer; every
launch through CuPy's Cython binding of it where CuPy has one, else through ctypes) on the
caller's current stream (torch's when the arrays are torch tensors, else
CuPy's), over device arrays (CuPy, PyTorch, anything exposing __cuda_array_interface__
or DLPack), with no host round trip.

After the first call with a given set of arrays, Plan.run neither allocates nor
synchronises: the plan's tile arrays are made once per plan (a one-tile-per-block plan's
written on the device by the expansion kernel from its O(batch) layout, on the first
call's stream; others uploaded), and the per-GEMM
descriptors (pointers, strides, alpha, beta) are cached by their bytes; a new set is
uploaded asynchronously from a pinned staging ring. A bound call (Plan.bind) is only
the raw launches, so it can be captured in a CUDA graph.
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import sys
import threading

import numpy as np

from ..arrays import ArrayInfo, _new, info as generic_info
from ..errors import (DeviceError, DeviceUnavailable, DtypeError, LayoutError, UnknownArch,
                      ValidationError)
from ..kernels import compile_cache, nvrtc, resources as kres
from ..kernels.render import DEVICE_TILE_DTYPE, render
from ..kernels.variants import TileExpand
from ..memo import kept
from .expand import expand_args
from ..occupancy.resources import KernelResources
from .launch import (DESCRIPTOR_CACHE, cached_descriptors, descriptors, plan_state,
                     torch_device, torch_stream, typed_args)
from .ragged import Scalars, gemm_args
from . import split, stage



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
    fast_devices = ("cuda:",)   # lists of CuPy / torch CUDA arrays take the fast path

    def __init__(self, cupy, launch_kernel=None):
        self.cp = cupy
        self._cu_launch = launch_kernel or _cu_launch_kernel()
        # CuPy's own cuLaunchKernel binding (Cython: integer arguments, no ctypes
        # conversion; raises on failure; 3.5 against 5.8 us a launch through ctypes on
        # the H100 host) for every launch (_run_item, _lean), where the driver's through
        # ctypes is not injected
        self._cu_raising = None if launch_kernel is not None else _cupy_launch_kernel(cupy)
        self._cu_launch_default = self._cu_launch   # replaced later (a test): ctypes form
        self._staging = _Staging(cupy)
        self._functions: dict[tuple[int, str], object] = {}
        self._modules: dict[tuple[int, str], object] = {}
        self._side: dict[int, list] = {}
        self._arch: dict[int, object] = {}
        self._ragged = Scalars()        # per-group alpha/beta of ragged calls
        self._external: dict = {}       # (torch stream handle, device) -> CuPy stream

    # -- device ---------------------------------------------------------------------
    def _dev(self) -> int:
        return self.cp.cuda.runtime.getDevice()

    def _current(self, where: str) -> int:
        """The current device, where arrays on ``where`` ("cuda:N", or anything else for
        no CUDA device of their own) may run: a ValidationError if N is another."""
        dev = self._dev()
        if where.startswith("cuda:") and where != f"cuda:{dev}":
            raise ValidationError(f"the arrays are on {where}, the current device is "
                                  f"cuda:{dev}")
        return dev

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
            def load(cubin):
                mod = self.cp.cuda.function.Module()
                mod.load(cubin)
                return mod

            try:  # a cached cubin that does not load is rebuilt once (compile_cache.load)
                mod, _, res = compile_cache.load(
                    lambda refresh: nvrtc.compile(r.source, r.name, arch.name, refresh=refresh), load)
            except self.cp.cuda.driver.CUDADriverError as e:
                raise DeviceError(f"loading {r.name} failed on a fresh compile: {e}") from e
            fn = mod.get_function(r.name)
            self._modules[key] = mod  # the function lives as long as its module
            if r.dynamic_smem:   # past 48 KiB a kernel must opt in (CUDA's rule)
                self.cp.cuda.driver.funcSetAttribute(
                    fn.ptr, _MAX_DYNAMIC_SHARED_SIZE_BYTES, r.dynamic_smem)
            attrs = self.function_attributes(fn)
            kres.register(arch.name, variant.name, KernelResources(
                registers=attrs["num_regs"],
                shared_bytes=attrs["shared_size_bytes"] + r.dynamic_smem,
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
        """A device copy of ``host``, enqueued on the current stream (no synchronisation)."""
        return self._staging.upload(host, self.cp.cuda.get_current_stream())

    def _upload_descriptors(self, host: np.ndarray):
        """_upload for per-GEMM descriptors, which are only ever used by address: no
        CuPy array is made around them (a microsecond or more a call on the full path)."""
        return self._staging.upload(host, self.cp.cuda.get_current_stream(), raw=True)

    def _state(self, plan, batch, upload=True):
        """The plan's launch state on the current device (made, with its uploads, when
        missing; with upload=False only looked up: None when missing)."""
        dev = self._current(batch.device)
        return plan_state(plan, ("cuda", dev), bool(batch.trans_a), bool(batch.trans_b),
                          self._upload if upload else None, self._expand)

    def _expand(self, exp):
        """A one-tile-per-block plan's tile list and block pointers, written on the device
        by the expansion kernel from the uploaded layout table, on the current stream
        (the uploads' and launches' stream), with no synchronisation. Returns the device
        (tiles, block_ptr, table); the table lives with the plan state."""
        cp = self.cp
        table = self._upload(exp.table)
        tiles = cp.empty(max(exp.n_tiles, 1) * DEVICE_TILE_DTYPE.itemsize, dtype=cp.uint8)
        bptr = cp.empty((exp.n_tiles + 1) * 4, dtype=cp.uint8)
        variant = TileExpand()
        launch = _encoded(self.function(variant).ptr, exp.blocks, variant.threads,
                          expand_args(exp, table.data.ptr, tiles.data.ptr, bptr.data.ptr),
                          variant.name)
        self._run_item(launch, cp.cuda.get_current_stream().ptr)
        return tiles, bptr, table

    def _stream(self, tdev):
        """The caller's current stream: torch's when the arrays are torch tensors (tdev is
        their device), else CuPy's."""
        if tdev is None:
            return self.cp.cuda.get_current_stream()
        # the tensors' device must be the current one: CuPy takes a stream it did not
        # make as the current device's, and the launch runs there
        index = getattr(tdev, "index", None)
        dev = self._current(f"cuda:{index}" if type(index) is int else "")
        handle = torch_stream(tdev)
        # One CuPy stream per (handle, device), kept (making one costs microseconds a
        # call); it holds only the handle, so one kept past its stream's end names the
        # same handle a later stream reuses. The device too: the null stream's handle
        # (0) is every device's.
        return kept(self._external, (handle, dev), 64, lambda: external_stream(self.cp, handle))

    def execute(self, plan, batch, gemms=None):
        """Launch on the caller's current stream; returns the device descriptors used,
        which a caller repeating the same batch may pass back as ``gemms``."""
        if plan.n_tiles == 0:
            return None
        if plan.split is not None:   # split-K: two phases (backends/split.py)
            return split.execute(self, _SplitOps(self), plan, batch, gemms)
        if plan.staging is not None:   # alignment staging: two phases (backends/stage.py)
            return stage.execute(self, _SplitOps(self), plan, batch, gemms)
        tdev = torch_device(batch)
        stream = self._stream(tdev)
        st = self._state(plan, batch, upload=False)
        if st is None or (gemms is None and tdev is not None):
            # Uploads go to the launch's stream, and torch's stream is made CuPy's current
            # one while they allocate: CuPy's pool hands a freed block only to later
            # allocations on the stream it was allocated on, so a descriptor buffer
            # freed while a launch on torch's stream reads it is not reused early. For
            # CuPy arrays the stream *is* CuPy's current one: no stream context (about a
            # microsecond) on a call whose plan state is made.
            with stream:
                st = self._state(plan, batch)
                if gemms is None:
                    gemms = cached_descriptors(st, batch, self._upload_descriptors)
        elif gemms is None:
            gemms = cached_descriptors(st, batch, self._upload_descriptors)
        self._launch(st, self._encoded(st, gemms), stream)
        return gemms

    def relauncher(self, plan, batch, gemms):
        """A call that launches ``plan`` again over the descriptors ``gemms`` that
        execute() returned for ``batch``: arguments encoded once, nothing uploaded, no
        synchronisation, on the caller's current stream at call time; it refuses to run
        while another device is current (as execute does). None when the plan has no
        launch state here yet, or splits K (execute then reuses what it returned)."""
        if plan.n_tiles == 0 or gemms is None:
            return _nothing
        if plan.split is not None or plan.staging is not None:
            return None
        st = self._state(plan, batch, upload=False)
        if st is None:
            return None
        dev, where = self._dev(), batch.device
        launch, current = self._lean(st, self._encoded(st, gemms), torch_device(batch)), self._dev

        def call():
            if current() != dev:
                raise ValidationError(f"the arrays are on {where}, the current device is "
                                      f"cuda:{current()}")
            launch()
        call.gemms = gemms  # the descriptors live as long as the call
        return call

    def prepare(self, plan, batch, gemms=None):
        """The bound call (Plan.bind): descriptors uploaded once into a buffer of its own
        (or ``gemms``, descriptors of this batch already uploaded), kernel arguments
        encoded once; each call is only the raw launches, on the caller's stream at call
        time (so it can be captured in a CUDA graph). A split-K plan's call holds its own
        workspace (backends/split.py)."""
        if plan.n_tiles == 0:
            return lambda: None
        if plan.split is not None:
            return split.prepare(self, _SplitOps(self), plan, batch)
        if plan.staging is not None:
            return stage.prepare(self, _SplitOps(self), plan, batch)
        tdev = torch_device(batch)
        here = self._stream(tdev)
        with here:
            st = self._state(plan, batch)
            if gemms is None:
                gemms = self._upload_descriptors(descriptors(batch))
        # Later calls may come on other streams: wait here, once, until the uploads have
        # landed, so no call can read them early. Not while ``here`` is being captured
        # (a graph may not synchronise; the captured uploads precede the launches in it).
        if not _capturing(here):
            uploaded = self.cp.cuda.Event(block=False, disable_timing=True)
            uploaded.record(here)
            uploaded.synchronize()
        call = self._lean(st, self._encode(st, gemms), tdev)
        call.gemms = gemms  # the descriptors live as long as the call
        return call

    def _lean(self, st, enc, tdev):
        """The encoded launches ``enc`` as one call with no arguments, on the caller's
        current stream at call time (torch's for device ``tdev``, else CuPy's): where the
        plan is one launch (or several in one stream, not per-kind side streams), the
        call is the raw cuLaunchKernel of each and nothing else (the stream read as its
        handle: no stream object, no layers of calls), so a repeated or bound call of a
        small batch pays for the launch, not for Python around it."""
        if len(enc) != 1 and st.get("mode") == "per-kind":
            launch, stream = self._launch, self._stream
            return lambda: launch(st, enc, stream(tdev))
        cu = self._cu_launch
        current = None
        if tdev is None:
            current = self.cp.cuda.get_current_stream
            handle = lambda: current().ptr  # noqa: E731
        else:
            handle = _torch_handle(tdev)
        if len(enc) == 1 and self._cu_raising is not None and cu is self._cu_launch_default:
            return _lean_cupy(self._cu_raising, self.cp.cuda.driver.CUDADriverError, enc,
                              handle, current)
        if len(enc) == 1:
            (fn, (gx, gy, gz), threads, smem, params, _, name), = enc

            def one():
                if rc := cu(fn, gx, gy, gz, threads, 1, 1, smem, handle(), params, None):
                    raise _launch_failed(name, f"CUresult {rc}")
            one.encoded = enc   # the argument values live as long as the call
            return one

        run = self._run_item

        def each():
            sp = handle()
            for item in enc:
                run(item, sp)
        return each

    def _encoded(self, st, gemms):
        """Encoded launches for one descriptor buffer, kept per plan state by address
        (they hold only addresses, so a reused address encodes the same arguments)."""
        return kept(st.setdefault("encoded", {}), gemms.data.ptr, 4 * DESCRIPTOR_CACHE,
                     lambda: self._encode(st, gemms))

    def _encode(self, st, gemms):
        """The plan's launches, encoded once (_encoded; tinygrad's CUDAProgram way)."""
        tiles = st["tiles"].data.ptr if st["tiles"] is not None else 0
        bptr = st["block_ptr"].data.ptr if st["block_ptr"] is not None else 0
        consts = st.setdefault("launch_consts", {})
        out = []
        for which, base, grid in st["launches"]:
            c = consts.get(which)
            if c is None:   # a variant's name and threads are computed properties: once
                variant = st["variants"][which]
                fn = st["fns"].get(which) or st["fns"].setdefault(which, self.function(variant))
                c = consts[which] = (fn.ptr, variant.threads, variant.name,
                                     render(variant).dynamic_smem)
            out.append(_encoded_gemm(c[0], grid, c[1], gemms.data.ptr, tiles, bptr, base, c[2],
                                     c[3]))
        return out

    def _run_item(self, item, stream_ptr) -> None:
        """Launch one _encoded item on ``stream_ptr``: the one launch of every path that
        is not a _lean closure (execute, execute_ragged, the expansion kernel, split-K's
        phases), through CuPy's binding where it has one and no launch function was
        injected, else cuLaunchKernel through ctypes; a DeviceError naming the kernel
        when the driver refuses it."""
        raising = self._cu_raising
        if raising is not None and self._cu_launch is self._cu_launch_default:
            _run_cupy(raising, self.cp.cuda.driver.CUDADriverError, item, stream_ptr)
        else:
            _run(self._cu_launch, item, stream_ptr)

    def _launch(self, st, enc, stream):
        run = self._run_item
        if len(enc) == 1 or st.get("mode") != "per-kind":
            sp = stream.ptr
            for item in enc:
                run(item, sp)
            return
        # Per-kind launches run side by side (fork/join on side streams), so each kind
        # keeps its own registers and block size and no launch waits for another's tail.
        # Events per calling stream: callers on other streams must not wait on (or
        # release work on) each other's fork and join points.
        events = st.setdefault("events", {}).get(stream.ptr)
        if events is None:
            events = st["events"][stream.ptr] = [
                self.cp.cuda.Event(block=False, disable_timing=True)
                for _ in range(len(enc) + 1)]
        events[0].record(stream)
        side = self._side_streams(len(enc))
        for i, item in enumerate(enc):
            s = side[i]
            s.wait_event(events[0])
            run(item, s.ptr)
            events[i + 1].record(s)
            stream.wait_event(events[i + 1])

    def _side_streams(self, n: int):
        pool = self._side.setdefault(self._dev(), [])
        while len(pool) < n:
            pool.append(self.cp.cuda.Stream(non_blocking=True))
        return pool[:n]

    # -- ragged M, group ends on the device ------------------------------------------
    def execute_ragged(self, job, arrays) -> None:
        """One raw launch on the caller's current stream, no host round trip
        (graph-capturable): ``job.variant``'s blocks read the offsets on the device and
        each finds its group and tile (backends/ragged.py). The launch is encoded once
        per job, device and stream (kept on the job), so a repeated call uploads nothing
        and only launches."""
        tdev = torch_device(arrays)   # CuPy's stream read in place: one call fewer
        stream = self.cp.cuda.get_current_stream() if tdev is None else self._stream(tdev)
        key = (id(self), self._dev(), stream.ptr)
        enc = job.launches.get(key)
        if enc is None:
            if job.groups == 0 or job.n_tiles == 0:
                return None
            with stream:  # the scalars' upload goes to the stream of the launch
                enc = job.launches[key] = self._encode_ragged(job)
        self._run_item(enc[0], stream.ptr)
        return None

    def _encode_ragged(self, job):
        """(the encoded launch (_encoded), the device scalars it reads)."""
        alphas, betas = (self._ragged.get(self._dev(), x, self._upload)
                         for x in (job.alphas, job.betas))
        v = job.variant
        args = gemm_args(job, _ptr(alphas), _ptr(betas))
        return (_encoded(self.function(v).ptr, job.n_tiles, v.threads, args, v.name,
                         render(v).dynamic_smem), (alphas, betas))


class _SplitOps(split.Ops):
    """The device operations backends/split.py runs a split-K plan with (and
    backends/stage.py a staged one), on CUDA."""

    def __init__(self, be):
        super().__init__(be, be._stream)

    @staticmethod
    def capturing(stream) -> bool:
        return _capturing(stream)

    @staticmethod
    def stream_key(stream) -> int:
        return stream.ptr

    def alloc(self, nbytes: int, stream):
        with stream:
            return self.be.cp.empty(max(nbytes, 1), dtype=self.be.cp.uint8)

    def upload(self, host, stream):
        with stream:
            return self.be._upload(host)

    @staticmethod
    def ptr(buf) -> int:
        return buf.data.ptr

    def encode(self, variant, blocks: int, args):
        return _encoded(self.be.function(variant).ptr, blocks, variant.threads, args,
                        variant.name, render(variant).dynamic_smem)

    def launch(self, item, stream) -> None:
        self.be._run_item(item, stream.ptr)


class _Staging:
    """Pinned host buffers for asynchronous uploads: a ring of SLOTS, each refilled only
    after the copy that last read it has run (its event). A call waits only when it is
    SLOTS uploads ahead of the device; buffers are allocated during warm-up only."""

    SLOTS = 4

    def __init__(self, cp):
        self.cp = cp
        self.slots = [None] * self.SLOTS   # (pinned memory, its numpy view, event)
        self.next = 0
        self.lock = threading.Lock()

    def upload(self, host: np.ndarray, stream, raw: bool = False):
        """A device copy of ``host``, enqueued on ``stream``: a CuPy uint8 array, or with
        ``raw`` a _DeviceBytes (CuPy's allocator without an ndarray around the memory:
        what descriptor buffers need is their address) where CuPy has cuda.alloc. The
        bytes go to the pinned slot by one memmove (no NumPy view, slice or copy: each
        costs a microsecond or more on the small uploads of small batches)."""
        cp = self.cp
        data = host.tobytes()   # C order, whatever the array's layout
        n = len(data)
        alloc = getattr(cp.cuda, "alloc", None) if raw else None
        dev = _DeviceBytes(alloc(max(n, 1))) if alloc is not None else \
            cp.empty(max(n, 1), dtype=cp.uint8)
        if not n:
            return dev
        with self.lock:
            k = self.next
            self.next = (k + 1) % self.SLOTS
            slot = self.slots[k]
            if slot is None or slot[1] < n:
                mem = cp.cuda.alloc_pinned_memory(max(n, 4096))
                slot = self.slots[k] = (mem, mem.size(),
                                        cp.cuda.Event(block=False, disable_timing=True))
            else:
                slot[2].synchronize()  # the copy that last read this slot has run
            ctypes.memmove(slot[0].ptr, data, n)
            dev.data.copy_from_host_async(ctypes.c_void_p(slot[0].ptr), n, stream)
            slot[2].record(stream)
        return dev


class _DeviceBytes:
    """Device memory from CuPy's allocator (its pool, on the current stream, as an
    array's), held as ``data`` (a MemoryPointer, as an ndarray's ``data`` is): freed when
    this object goes, like an array."""
    __slots__ = ("data",)

    def __init__(self, mem):
        self.data = mem


def _cu_launch_kernel():
    """cuLaunchKernel from the driver library CuPy has already loaded, through ctypes:
    one foreign call per launch, arguments already encoded."""
    lib = ctypes.CDLL("libcuda.so.1")
    fn = lib.cuLaunchKernel
    u = ctypes.c_uint
    fn.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def _encoded(fn_ptr, grid, threads, args, name, smem=0):
    """One launch as cuLaunchKernel takes it, built once: (CUfunction, (gx, gy, gz),
    threads, dynamic shared bytes, kernelParams, the values it points at, name).
    ``args``: (kind, value) pairs (launch.ARG_CTYPES)."""
    values = typed_args(args)
    params = (ctypes.c_void_p * len(values))(*(ctypes.addressof(v) for v in values))
    return (fn_ptr, grid if isinstance(grid, tuple) else (grid, 1, 1), threads, smem, params,
            values, name)


class _GemmArgs(ctypes.Structure):
    """The GEMM kernels' four arguments (descriptors, tile list, block pointers, first
    block) in one ctypes object: a launch encodes as two ctypes objects, not five."""
    _fields_ = [("gemms", ctypes.c_void_p), ("tiles", ctypes.c_void_p),
                ("block_ptr", ctypes.c_void_p), ("base", ctypes.c_int32)]


# CUfunction_attribute (cuda.h): the dynamic shared memory a kernel may be launched with
_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

_GEMM_OFFSETS = tuple(getattr(_GemmArgs, f).offset for f, _ in _GemmArgs._fields_)
_GemmParams = ctypes.c_void_p * len(_GEMM_OFFSETS)


def _encoded_gemm(fn_ptr, grid, threads, gemms, tiles, block_ptr, base, name, smem=0):
    """_encoded for a GEMM kernel's (gemms, tiles, block_ptr, base): the same launch
    item, its argument values held in one _GemmArgs."""
    values = _GemmArgs(gemms, tiles, block_ptr, base)
    at = ctypes.addressof(values)
    params = _GemmParams(*(at + off for off in _GEMM_OFFSETS))
    return (fn_ptr, grid if isinstance(grid, tuple) else (grid, 1, 1), threads, smem, params,
            values, name)


def _run(launch, item, stream_ptr) -> None:
    """Launch one _encoded item on ``stream_ptr`` with cuLaunchKernel ``launch`` (ctypes
    form: the argument array as is, a CUresult back)."""
    fn, (gx, gy, gz), threads, smem, params, _, name = item
    if rc := launch(fn, gx, gy, gz, threads, 1, 1, smem, stream_ptr, params, None):
        raise _launch_failed(name, f"CUresult {rc}")


def _run_cupy(launch, error, item, stream_ptr) -> None:
    """_run through CuPy's launchKernel ``launch`` (integers: the argument array by
    address; raises ``error`` on failure)."""
    fn, (gx, gy, gz), threads, smem, params, _, name = item
    try:
        launch(fn, gx, gy, gz, threads, 1, 1, smem, stream_ptr, ctypes.addressof(params), 0)
    except error as e:
        raise _launch_failed(name, e) from None


def _launch_failed(name, why) -> DeviceError:
    """The error of a launch the driver refused, naming the kernel (every launch form)."""
    return DeviceError(f"launch of {name} failed: {why}")


def _cupy_launch_kernel(cupy):
    """cupy.cuda.driver.launchKernel where this CuPy has it (f, grid, block, shared
    bytes, stream, params, extra: integers), else None."""
    return getattr(getattr(getattr(cupy, "cuda", None), "driver", None), "launchKernel", None)


def _lean_cupy(launch, error, enc, handle, current=None):
    """_lean's one-launch call through CuPy's launchKernel (``launch``, raising
    ``error``): the argument array passed by address, held by the call. ``current``:
    CuPy's get_current_stream, whose ``ptr`` the call reads in place of ``handle()``
    (one Python call fewer a launch: the repeated calls of CuPy arrays)."""
    (fn, (gx, gy, gz), threads, smem, params, _, name), = enc
    at = ctypes.addressof(params)
    if current is not None:
        def on_cupys_stream():
            try:
                launch(fn, gx, gy, gz, threads, 1, 1, smem, current().ptr, at, 0)
            except error as e:
                raise _launch_failed(name, e) from None
        on_cupys_stream.encoded = enc
        return on_cupys_stream

    def one():
        try:
            launch(fn, gx, gy, gz, threads, 1, 1, smem, handle(), at, 0)
        except error as e:
            raise _launch_failed(name, e) from None
    one.encoded = enc   # the argument values live as long as the call
    return one


def _torch_handle(device):
    """A call reading torch's current stream on ``device`` as a raw handle: where torch has
    ``_C._cuda_getCurrentRawStream`` and the device an index, that function itself
    (bound to the index), looked up once rather than on every launch; else
    launch.torch_stream's general read."""
    raw = getattr(getattr(sys.modules.get("torch"), "_C", None), "_cuda_getCurrentRawStream",
                  None)
    index = getattr(device, "index", None)
    if raw is not None and type(index) is int:
        return functools.partial(raw, index)
    return functools.partial(torch_stream, device)


def _capturing(stream) -> bool:
    """Whether ``stream`` is being captured into a graph (unknown: assume it is, so that
    nothing synchronises)."""
    try:
        return bool(stream.is_capturing())   # CuPy's Stream and ExternalStream
    except Exception:  # noqa: BLE001 - a stream object without the query
        return True


def _nothing():
    pass


def _ptr(buf) -> int:
    return 0 if buf is None else buf.data.ptr


class _RawStream:
    """A raw stream handle as the CUDA stream protocol hands it over (``__cuda_stream__``:
    version 0 and the cudaStream_t as an int)."""

    __slots__ = ("handle",)

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self):
        return 0, self.handle


def external_stream(cp, handle: int):
    """CuPy's stream object for a stream of the current device that CuPy did not make
    (torch's): ``Stream.from_external`` through the CUDA stream protocol where CuPy has
    it (CuPy 14 on, which deprecates ExternalStream), else ``ExternalStream``."""
    from_external = getattr(cp.cuda.Stream, "from_external", None)
    if from_external is None:
        return cp.cuda.ExternalStream(handle)
    return from_external(_RawStream(handle))
