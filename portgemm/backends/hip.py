"""ROCm backend through hip-python: hiprtc-compiled variants of the one kernel source
(compiled in a subprocess, see kernels/hiprtc_compile), loaded with hipModuleLoadData and
launched with hipModuleLaunchKernel on the caller's current stream (torch's for torch
tensors, else CuPy-ROCm's, else ``backend.stream``), over device arrays exposing
__cuda_array_interface__ (CuPy-ROCm, PyTorch-ROCm) or DLPack (kDLROCM).

The launch contract mirrors backends/cuda.py (except that per-kind launches run one
after another on that stream instead of side by side): per-GEMM descriptors (struct
PgGemm, render.GEMM_DTYPE) cached per plan by their bytes, the plan's tile list and block
pointers made once per plan (written on the device from the plan's per-GEMM layout where
it has one, backends/expand.py; else uploaded), and the kernel arguments
(const PgGemm*, const PgTile*, const int* block_ptr, int base).

Every HIP call goes through ``_check``. Untested on hardware so far: there was no AMD GPU
where this was written (the compile path is exercised by tests/test_amd_toolchain.py).
"""
from __future__ import annotations

import ctypes
import dataclasses
import sys

import numpy as np

from ..arrays import ArrayInfo, info as generic_info
from ..errors import DeviceError, DeviceUnavailable, DtypeError, LayoutError, ValidationError
from ..kernels import compile_cache, hiprtc_compile, resources as kres
from ..kernels.render import DEVICE_TILE_DTYPE, render
from ..kernels.variants import TileExpand
from .expand import expand_args
from .launch import (cached_descriptors, descriptors, plan_state, torch_device, torch_stream,
                     typed_args)
from .ragged import Scalars, gemm_args
from . import split, stage

KDL_ROCM = 10          # DLPack device type of ROCm memory

hip = None             # hip-python's runtime module, set by create()


def _check(result):
    """hip-python returns (status, *values): DeviceError on a bad status, else the values."""
    if (err := result[0]) != hip.hipError_t.hipSuccess:
        raise DeviceError(f"HIP call failed: {err.name}")
    return result[1] if len(result) == 2 else result[1:]


def create():
    global hip
    hip, _ = hiprtc_compile.load_hip()  # DeviceUnavailable without hip-python/libamdhip64
    try:
        n = _check(hip.hipGetDeviceCount())  # hipErrorNoDevice where there is none
    except DeviceError as e:
        raise DeviceUnavailable(f"hip backend: no AMD GPU ({e})") from None
    if n < 1:
        raise DeviceUnavailable("hip backend: no AMD GPU")
    return HipBackend()


class DeviceBuffer:
    """Bytes of device memory, freed with the object; exposes its address as ``ptr``."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self._mem = _check(hip.hipMalloc(max(nbytes, 1)))
        self.ptr = int(self._mem)

    def __del__(self):
        try:
            _check(hip.hipFree(self._mem))
        except Exception:  # noqa: BLE001 - a destructor, possibly at interpreter exit
            pass


class HipArray:
    """A minimal 2-D device array (used by to_device when CuPy-ROCm is absent)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.buffer = DeviceBuffer(int(np.prod(self.shape)) * self.dtype.itemsize)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.buffer.ptr, False),
                "strides": None, "version": 3}


class HipBackend:
    name = "hip"

    def __init__(self):
        self.stream = None  # used when neither torch nor CuPy names a current stream: null
        self._functions: dict[tuple[int, str], object] = {}
        self._modules: dict[tuple[int, str], object] = {}
        self._arch: dict[int, object] = {}
        self._ragged = Scalars()        # per-group alpha/beta of ragged calls

    # -- device ---------------------------------------------------------------------
    def _dev(self) -> int:
        return _check(hip.hipGetDevice())

    def _props(self):
        props = hip.hipDeviceProp_t()
        _check(hip.hipGetDeviceProperties(props, self._dev()))
        return props

    @staticmethod
    def _text(x) -> str:
        return x.decode(errors="replace").rstrip("\0") if isinstance(x, bytes) else str(x)

    def device_name(self) -> str:
        return self._text(self._props().name)

    def gcn_arch(self) -> str:
        """The device's processor, e.g. "gfx90a" (features such as :xnack- dropped, so
        the code object targets "any" and loads in either xnack mode)."""
        return self._text(self._props().gcnArchName).split(":")[0]

    def arch(self):
        dev = self._dev()
        if dev not in self._arch:
            from ..occupancy import get_arch
            p = self._props()
            a = get_arch(self._text(p.gcnArchName).split(":")[0])
            self._arch[dev] = dataclasses.replace(
                a, compute_units=int(p.multiProcessorCount), part=self._text(p.name))
        return self._arch[dev]

    def synchronize(self) -> None:
        _check(hip.hipStreamSynchronize(self.stream))

    def to_device(self, x):
        x = np.ascontiguousarray(x)
        try:
            import cupy  # a ROCm build of CuPy, where present, gives full-featured arrays
            return cupy.asarray(x)
        except ImportError:
            pass
        d = HipArray(x.shape, x.dtype)
        _check(hip.hipMemcpyHtoD(d.buffer.ptr, x, x.nbytes))
        return d

    def to_host(self, x):
        if hasattr(x, "get") and not isinstance(x, HipArray):  # CuPy-ROCm
            return x.get()
        a = self.array_info(x)
        if a.strides != (a.shape[1], 1):
            raise LayoutError("to_host copies contiguous arrays only")
        out = np.empty(a.shape, a.dtype)
        self.synchronize()
        _check(hip.hipMemcpyDtoH(out, a.ptr, out.nbytes))
        return out

    # -- arrays ---------------------------------------------------------------------
    def array_info(self, x) -> ArrayInfo:
        if isinstance(x, np.ndarray):
            raise DtypeError("hip backend takes device arrays (CuPy-ROCm, PyTorch-ROCm, "
                            "__cuda_array_interface__ or DLPack); got a NumPy array - copy it "
                            "with backend.to_device or use backend='numpy'")
        if hasattr(x, "__cuda_array_interface__"):
            return generic_info(x)._replace(device="hip")
        if hasattr(x, "__dlpack__"):
            return _dlpack_info(x)
        raise DtypeError(f"hip backend cannot take {type(x).__name__}")

    # -- kernels --------------------------------------------------------------------
    def function(self, variant):
        """Compiled, loaded entry point for ``variant`` on the current device; registers
        its resource usage (from the code object's metadata) for the occupancy model."""
        dev = self._dev()
        key = (dev, variant.name)
        fn = self._functions.get(key)
        if fn is None:
            arch = self.arch()
            r = render(variant)
            if r.dynamic_smem:   # only sm_90a's wgmma kinds render so (launches pass 0 here)
                raise DeviceError(f"{r.name} needs dynamic shared memory, which the hip "
                                  "backend does not launch with")
            mod, code, res = compile_cache.load(  # a cached code object that fails to load
                lambda refresh: hiprtc_compile.compile(r.source, r.name, arch.name, refresh=refresh),
                lambda code: _check(hip.hipModuleLoadData(code)))  # is rebuilt once
            fn = _check(hip.hipModuleGetFunction(mod, r.name.encode()))
            self._modules[key] = (mod, code)  # the function lives as long as its module
            kres.register(arch.name, variant.name, res)
            self._functions[key] = fn
        return fn

    # -- execution ------------------------------------------------------------------
    def _upload(self, host: np.ndarray) -> DeviceBuffer:
        host = np.ascontiguousarray(host)
        dev = DeviceBuffer(host.nbytes)
        if host.nbytes:
            _check(hip.hipMemcpyHtoD(dev.ptr, host, host.nbytes))
        return dev

    def _caller_stream(self, batch):
        """The caller's current stream: torch's when the arrays are torch tensors, else
        CuPy's (a ROCm build) when CuPy is loaded, else ``self.stream`` (None: null)."""
        return self._stream_for(torch_device(batch))

    def _stream_for(self, tdev):
        if tdev is not None:
            return torch_stream(tdev)
        cupy = sys.modules.get("cupy")
        # only a ROCm build's streams are HIP streams: a CUDA CuPy loaded beside (with
        # or without an NVIDIA driver) has none to give, and asking it may raise
        if cupy is not None and getattr(getattr(cupy.cuda, "runtime", None), "is_hip", False):
            return cupy.cuda.get_current_stream().ptr
        return self.stream

    def execute(self, plan, batch, gemms=None):
        if plan.n_tiles == 0:
            return None
        if plan.split is not None:   # split-K: two phases (backends/split.py)
            return split.execute(self, _SplitOps(self), plan, batch, gemms)
        if plan.staging is not None:   # alignment staging: two phases (backends/stage.py)
            return stage.execute(self, _SplitOps(self), plan, batch, gemms)
        # _upload copies synchronously, so the host descriptors can go at once; freeing an
        # evicted buffer (hipFree) waits for launches that may still read it.
        st = self._state(plan, batch)
        if gemms is None:
            gemms = cached_descriptors(st, batch, self._upload)
        self._launch(self._encode(st, gemms), self._caller_stream(batch))
        return gemms

    def prepare(self, plan, batch, gemms=None):
        """The bound call (Plan.bind): descriptors uploaded once (or ``gemms``, this
        batch's already uploaded), kernel arguments encoded once; each call launches them
        on the caller's current stream. A split-K plan's call holds its own workspace
        (backends/split.py)."""
        if plan.n_tiles == 0:
            return lambda: None
        if plan.split is not None:
            return split.prepare(self, _SplitOps(self), plan, batch)
        if plan.staging is not None:
            return stage.prepare(self, _SplitOps(self), plan, batch)
        st = self._state(plan, batch)
        if gemms is None:
            gemms = self._upload(descriptors(batch))
        enc = self._encode(st, gemms)
        # the call keeps the torch device, not the batch: it must not hold the arrays
        launch, stream, tdev = self._launch, self._stream_for, torch_device(batch)

        def call():
            launch(enc, stream(tdev))
        call.gemms = gemms  # the descriptors live as long as the call
        return call

    def relauncher(self, plan, batch, gemms):
        """A call that launches ``plan`` again over the descriptors ``gemms`` execute()
        returned for ``batch`` (the bound call's path, its descriptors given); None for
        a split-K plan (execute then reuses what it returned)."""
        if plan.split is not None or plan.staging is not None:
            return None
        return self.prepare(plan, batch, gemms)

    def _state(self, plan, batch):
        return plan_state(plan, ("hip", self._dev()), bool(batch.trans_a),
                          bool(batch.trans_b), self._upload,
                          lambda exp: self._expand(exp, self._caller_stream(batch)))

    def _expand(self, exp, stream):
        """A one-tile-per-block plan's tile list and block pointers, written on the device
        by the expansion kernel from the uploaded layout table (an upload that has
        completed: _upload copies synchronously), on the caller's stream. Returns the
        device (tiles, block_ptr, table); the table lives with the plan state."""
        table = self._upload(exp.table)
        tiles = DeviceBuffer(exp.n_tiles * DEVICE_TILE_DTYPE.itemsize)
        bptr = DeviceBuffer((exp.n_tiles + 1) * 4)
        variant = TileExpand()
        args = tuple(typed_args(expand_args(exp, table.ptr, tiles.ptr, bptr.ptr)))
        _check(hip.hipModuleLaunchKernel(self.function(variant), exp.blocks, 1, 1,
                                         variant.threads, 1, 1, 0, stream, None, args))
        return tiles, bptr, table

    def _encode(self, st, gemms):
        """[(function, grid, threads, kernel arguments)] for the plan's launches."""
        tiles = st["tiles"].ptr if st["tiles"] is not None else 0
        bptr = st["block_ptr"].ptr if st["block_ptr"] is not None else 0
        out = []
        for which, base, grid in st["launches"]:
            variant = st["variants"][which]
            fn = st["fns"].get(which) or st["fns"].setdefault(which, self.function(variant))
            grid = grid if isinstance(grid, tuple) else (grid, 1, 1)
            if min(grid) <= 0:
                continue
            args = tuple(typed_args((("p", gemms.ptr), ("p", tiles), ("p", bptr), ("i", base))))
            out.append((fn, grid, variant.threads, args))
        return out

    @staticmethod
    def _launch(enc, stream):
        for fn, grid, threads, args in enc:
            _check(hip.hipModuleLaunchKernel(fn, *grid, threads, 1, 1, 0, stream, None, args))

    # -- ragged M, group ends on the device ------------------------------------------
    def execute_ragged(self, job, arrays) -> None:
        """One launch of ``job.variant`` on the caller's current stream, whose blocks read
        the offsets on the device (see backends/cuda.py and backends/ragged.py); the
        arguments encoded once per job, device and stream."""
        stream = self._caller_stream(arrays)
        key = (id(self), self._dev(), int(stream or 0))
        enc = job.launches.get(key)
        if enc is None:
            if job.groups == 0 or job.n_tiles == 0:
                return None
            enc = job.launches[key] = self._encode_ragged(job)
        fn, blocks, threads, args = enc[0]
        _check(hip.hipModuleLaunchKernel(fn, blocks, 1, 1, threads, 1, 1, 0, stream, None, args))
        return None

    def _encode_ragged(self, job):
        alphas, betas = (self._ragged.get(self._dev(), x, self._upload)
                         for x in (job.alphas, job.betas))
        v = job.variant
        args = tuple(typed_args(gemm_args(job, _ptr(alphas), _ptr(betas))))
        return (self.function(v), job.n_tiles, v.threads, args), (alphas, betas)


def _ptr(buf) -> int:
    return 0 if buf is None else buf.ptr


class _SplitOps(split.Ops):
    """The device operations backends/split.py runs a split-K plan with (and
    backends/stage.py a staged one), on HIP."""

    def __init__(self, be):
        super().__init__(be, be._stream_for)

    @staticmethod
    def stream_key(stream) -> int:
        return int(stream or 0)

    @staticmethod
    def alloc(nbytes: int, stream):
        return DeviceBuffer(nbytes)

    def upload(self, host, stream):
        return self.be._upload(host)   # synchronous

    @staticmethod
    def ptr(buf) -> int:
        return buf.ptr

    def encode(self, variant, blocks: int, args):
        return (self.be.function(variant), (blocks, 1, 1), variant.threads,
                tuple(typed_args(args)))

    def launch(self, item, stream) -> None:
        self.be._launch([item], stream)


# -- DLPack (ROCm memory) ------------------------------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):  # the first member of DLManagedTensor
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DL_KINDS = {0: "i", 1: "u", 2: "f"}


def _dlpack_info(x) -> ArrayInfo:
    """ArrayInfo read from a DLPack capsule without consuming it (the capsule's own
    destructor releases it; the caller keeps ``x`` alive while the kernel runs)."""
    dev_type = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else None
    if dev_type != KDL_ROCM:
        raise DtypeError(f"hip backend takes ROCm device memory; DLPack device type {dev_type}")
    capsule = x.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    t = ctypes.cast(get(capsule, b"dltensor"), ctypes.POINTER(_DLTensor)).contents
    if t.ndim != 2:
        raise ValidationError(f"expected a 2-D array, got {t.ndim}-D")
    kind = _DL_KINDS.get(t.dtype.code)
    if kind is None or t.dtype.lanes != 1:
        raise DtypeError(f"unsupported DLPack dtype (code {t.dtype.code}, {t.dtype.bits} bits)")
    shape = (int(t.shape[0]), int(t.shape[1]))
    strides = (int(t.strides[0]), int(t.strides[1])) if t.strides else (shape[1], 1)
    return ArrayInfo((t.data or 0) + t.byte_offset, shape, strides,
                     np.dtype(f"{kind}{t.dtype.bits // 8}"), "hip")
