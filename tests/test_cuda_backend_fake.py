"""The GPU backends' host path without a GPU: the CUDA backend on a fake CuPy and a fake
cuLaunchKernel, the HIP backend on test_hip_backend_fake's fake runtime. Arrays
are host memory posing as device memory, and each raw launch runs the NumPy emulation of
the kernel from test_hip_backend_fake on exactly the encoded arguments (descriptor,
tile-list and block-pointer addresses, base), grid and block size. A wrong pointer,
argument encoding, stream or upload shows up as a wrong C or a wrong stream."""
from __future__ import annotations

import ctypes
import sys
import types

import numpy as np
import pytest

import portgemm
from portgemm.backends import cuda as cudabe
from portgemm.kernels import resources
from portgemm.kernels.variants import TileExpand, catalogue_variants
from test_hip_backend_fake import DevArray, FakeHip, run_expand, run_reduce
from test_hip_backend_fake import backend as hip_backend  # noqa: F401  (a fixture)

TRANS = ((False, False), (False, True), (True, False), (True, True))


class FakeMem:
    def __init__(self, owner):
        self.owner, self.device_id = owner, 0

    @property
    def ptr(self):
        return self.owner.a.__array_interface__["data"][0]

    def copy_from_host_async(self, src, n, stream):
        ctypes.memmove(self.ptr, src.value, n)
        stream.log.append(("copy", n))


class FakeArray:
    """A CuPy-like ndarray over host memory (the fake module's ``ndarray`` type)."""

    def __init__(self, a):
        self.a = a

    data = property(lambda self: FakeMem(self))
    shape = property(lambda self: self.a.shape)
    strides = property(lambda self: self.a.strides)
    dtype = property(lambda self: self.a.dtype)
    ndim = property(lambda self: self.a.ndim)
    itemsize = property(lambda self: self.a.itemsize)
    size = property(lambda self: self.a.size)
    T = property(lambda self: FakeArray(self.a.T))

    def __getitem__(self, i):
        return FakeArray(self.a[i])

    def __len__(self):   # CuPy's: the first dimension (TypeError for a 0-d array)
        return len(self.a)


class FakeStream:
    def __init__(self, ptr=0):
        self.ptr, self.log = ptr, []

    def __enter__(self):
        FAKE["stack"].append(self)
        return self

    def __exit__(self, *exc):
        FAKE["stack"].pop()

    def wait_event(self, e):
        pass


class FakeEvent:
    def __init__(self, **kw):
        pass

    def record(self, stream=None):
        pass

    def synchronize(self):
        pass


class Pinned(bytearray):
    ptr = property(lambda self: ctypes.addressof((ctypes.c_char * len(self)).from_buffer(self)))

    def size(self):
        return len(self)


FAKE: dict = {}


def make_cupy(hip):
    null = FakeStream(0)
    FAKE.update(stack=[null], null=null)

    def empty(n, dtype):
        a = np.zeros(n, np.uint8)
        hip._keep.append(a)
        hip.sizes[a.ctypes.data] = n
        return FakeArray(a)

    cuda = types.SimpleNamespace(
        get_current_stream=lambda: FAKE["stack"][-1], Stream=lambda **kw: FakeStream(77),
        ExternalStream=FakeStream, Event=FakeEvent, alloc_pinned_memory=Pinned,
        runtime=types.SimpleNamespace(
            getDevice=lambda: 0, getDeviceCount=lambda: 1,
            getDeviceProperties=lambda d: {"name": b"Fake H100", "major": 9, "minor": 0,
                                           "multiProcessorCount": 132}),
        driver=types.SimpleNamespace(CUDADriverError=RuntimeError))
    return types.SimpleNamespace(ndarray=FakeArray, uint8=np.uint8, empty=empty, cuda=cuda,
                                 asarray=lambda x: FakeArray(np.array(x)))


@pytest.fixture
def backend(monkeypatch):
    variants = {v.name: v for v in catalogue_variants(trans=TRANS)}
    hip = FakeHip(variants)
    cp = make_cupy(hip)
    monkeypatch.setitem(sys.modules, "cupy", cp)   # arrays.gather's CuPy reader
    monkeypatch.setattr(resources, "_registered", {})
    portgemm.planner.clear_cache()  # cached plans hold device state of earlier fakes
    names = {}
    launches = []

    def launch(fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        if names[fn] == TileExpand.name:   # (table, spans, n_tiles, tiles, block_ptr)
            get = [ctypes.c_uint64, ctypes.c_int32, ctypes.c_int32, ctypes.c_uint64,
                   ctypes.c_uint64]
            be.expansions.append(stream)
            run_expand(gx * bx, *(c.from_address(params[i]).value for i, c in enumerate(get)))
            return 0
        if names[fn].endswith("_split_reduce"):   # (table, block_start, n_red)
            get = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32]
            launches.append((names[fn], stream))
            be.reductions.append((stream, run_reduce(names[fn], gx, bx, *(
                c.from_address(params[i]).value for i, c in enumerate(get)))))
            return 0
        g, t, b = (ctypes.c_uint64.from_address(params[i]).value for i in range(3))
        base = ctypes.c_int32.from_address(params[3]).value
        launches.append((names[fn], stream))
        hip.hipModuleLaunchKernel(names[fn], gx, gy, gz, bx, by, bz, shmem, None, None,
                                  [ctypes.c_uint64(g), ctypes.c_uint64(t), ctypes.c_uint64(b),
                                   ctypes.c_int32(base)])
        return 0

    be = cudabe.CudaBackend(cp, launch_kernel=launch)

    def function(variant):
        fn = types.SimpleNamespace(ptr=1000 + len(names))
        names[fn.ptr] = variant.name
        return fn
    be.function = function
    be.launches = launches
    be.expansions = []   # the streams of tile-list expansion launches
    be.reductions = []   # (stream, writes per element) of split-K reductions
    return be


def host_batch(rng, shapes, dtype, ta, tb):
    A = [(rng.random((k, m) if ta else (m, k)) - 0.5).astype(dtype) for m, n, k in shapes]
    B = [(rng.random((n, k) if tb else (k, n)) - 0.5).astype(dtype) for m, n, k in shapes]
    C = [(rng.random((m, n)) - 0.5).astype(dtype) for m, n, k in shapes]
    return A, B, C


def reference(A, B, C, alpha, beta, ta, tb):
    return [a_ * ((x.T if ta else x).astype(np.float64) @ (y.T if tb else y)) +
            (b_ * c if b_ else 0) for x, y, c, a_, b_ in zip(A, B, C, alpha, beta)]


def call_entry(entry, shapes, dtype, strategy, mode, A, B, C, kw):
    """One call: gemm_vbatched (the strategy's default mode), or a plan's run or bound
    call; ``kw`` holds the scalars, flags and backend."""
    if entry == "gemm_vbatched":
        portgemm.gemm_vbatched(A, B, C, strategy=strategy, **kw)
    else:
        p = portgemm.plan(shapes, dtype=dtype, arch=kw["backend"].arch(), strategy=strategy,
                          mode=mode)
        p.run(A, B, C, **kw) if entry == "run" else p.bind(A, B, C, **kw)()


def check(C, want, dtype):
    tol = 1e-4 if dtype == "float32" else 1e-12
    for i, (got, ref) in enumerate(zip(C, want)):
        got = got.a if isinstance(got, FakeArray) else got
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol, err_msg=f"GEMM {i}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("strategy, mode", [(None, None), (None, "per-kind"), ("magma", None)])
def test_lists_run_and_bound_agree_with_the_reference(backend, dtype, trans, strategy, mode):
    rng = np.random.default_rng(11)
    shapes = [tuple(int(v) for v in s) for s in rng.integers(0, 70, (10, 3))] + \
        [(130, 140, 20), (16, 16, 16)]
    ta, tb = trans
    hA, hB, hC = host_batch(rng, shapes, dtype, ta, tb)
    alpha = rng.uniform(-2, 2, len(shapes))
    beta = np.where(np.arange(len(shapes)) % 2, 0.5, 0.0)
    for c, b_ in zip(hC, beta):
        if b_ == 0:
            c[...] = np.nan  # never read when beta == 0
    want = reference(hA, hB, hC, alpha, beta, ta, tb)
    A, B = [FakeArray(x) for x in hA], [FakeArray(x) for x in hB]
    kw = dict(alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=backend)
    for entry in ("gemm_vbatched", "run", "bind"):
        C = [FakeArray(c.copy()) for c in hC]
        call_entry(entry, shapes, dtype, strategy, mode, A, B, C, kw)
        check(C, want, dtype)


def test_stacks_equal_lists_and_the_reference(backend):
    rng = np.random.default_rng(5)
    a = (rng.random((9, 7, 5)) - 0.5).astype(np.float32)
    b = (rng.random((9, 6, 5)) - 0.5).astype(np.float32)   # stored (N, K): trans_b
    c = np.full((9, 7, 6), np.nan, np.float32)
    portgemm.gemm_vbatched(FakeArray(a), FakeArray(b), FakeArray(c), alpha=2.0, trans_b=True,
                           backend=backend)
    ref = 2.0 * a.astype(np.float64) @ b.transpose(0, 2, 1)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)
    c2 = [FakeArray(np.full((7, 6), np.nan, np.float32)) for _ in range(9)]
    portgemm.gemm_vbatched([FakeArray(x) for x in a], FakeArray(b), c2, alpha=2.0,
                           trans_b=True, backend=backend)
    np.testing.assert_array_equal(np.stack([x.a for x in c2]), c)


def test_launches_go_to_the_current_stream(backend):
    shapes = [(40, 30, 20)] * 3
    hA, hB, hC = host_batch(np.random.default_rng(1), shapes, "float32", False, False)
    A, B, C = ([FakeArray(x) for x in xs] for xs in (hA, hB, hC))
    p = portgemm.plan(shapes, dtype="float32", arch=backend.arch())
    call = p.bind(A, B, C, backend=backend)
    with FakeStream(4242) as s:
        p.run(A, B, C, backend=backend)
        call()
    call()
    assert [st for _, st in backend.launches] == [4242, 4242, 0]
    # the run's descriptors (3 x 64 bytes) went to the caller's stream; the bound call's
    # were uploaded at bind and its calls upload nothing
    assert s.log == [("copy", 192)]


def test_run_uploads_descriptors_only_when_they_change(backend):
    shapes = [(16, 16, 16)] * 4
    hA, hB, hC = host_batch(np.random.default_rng(2), shapes, "float32", False, False)
    A, B, C = ([FakeArray(x) for x in xs] for xs in (hA, hB, hC))
    p = portgemm.plan(shapes, dtype="float32", arch=backend.arch())
    with FakeStream(9) as s:
        p.run(A, B, C, backend=backend)   # tiles, block pointers, descriptors
        first = len(s.log)
        p.run(A, B, C, backend=backend)   # nothing changed: no upload
        assert len(s.log) == first
        p.run(A, B, C, alpha=3.0, backend=backend)   # new scalars: one descriptor upload
        assert len(s.log) == first + 1
    check(C, reference(hA, hB, hC, [3.0] * 4, [0] * 4, False, False), "float32")


class FakeTensor:
    """The reads portgemm makes of a torch CUDA tensor, over a NumPy array; set_ re-points
    it in place, as torch's does."""

    def __init__(self, a):
        self.a = a

    shape = property(lambda self: self.a.shape)
    ndim = property(lambda self: self.a.ndim)
    dtype = property(lambda self: "f32" if self.a.dtype == np.float32 else "f64")
    device = "cuda:0"

    def data_ptr(self):   # not a.ctypes.data: that leaves a reference cycle per read
        return self.a.__array_interface__["data"][0]

    def stride(self):
        return tuple(np.floor_divide(self.a.strides, self.a.itemsize).tolist())

    def get_device(self):
        return 0

    def is_contiguous(self):   # torch's rule: length-1 dimensions' strides are free
        return all(s == 1 or st == want for s, st, want in zip(
            self.a.shape, self.a.strides,
            (self.a.shape[1] * self.a.itemsize, self.a.itemsize)))

    def set_(self, other):
        self.a = other


class FakeTensorGuards:
    """torch's ``_C._dynamo.guards.TensorGuards`` as the reuse path uses it (no dynamic
    dimensions): check() says whether each tensor has the type, dtype, device, shape
    and strides it had when the guards were made (torch's compares them in C++)."""

    def __init__(self, *X, dynamic_dims_sizes, dynamic_dims_strides):
        assert dynamic_dims_sizes is None and dynamic_dims_strides is None
        self.rows = list(map(self._row, X))

    @staticmethod
    def _row(x):
        return type(x), x.dtype, x.get_device(), x.shape, x.stride()

    def check(self, *X):
        if len(X) != len(self.rows):
            raise TypeError("wrong length")
        return list(map(self._row, X)) == self.rows


def fake_ptrs_equal(tensors, data_ptrs, indices):
    """torch's ``_C._tensors_data_ptrs_at_indices_equal``."""
    return all(tensors[i].data_ptr() == data_ptrs[i] for i in indices)


def fake_torch_guards():
    """A fake ``torch._C`` with the two checks the reuse path prefers (reuse.TORCH_GUARDS)."""
    return types.SimpleNamespace(
        _dynamo=types.SimpleNamespace(guards=types.SimpleNamespace(TensorGuards=FakeTensorGuards)),
        _tensors_data_ptrs_at_indices_equal=fake_ptrs_equal)


def install_fake_torch(monkeypatch, stream_handle=0):
    """A fake ``torch`` module in sys.modules: FakeTensor as its Tensor, and a current
    stream whose handle is ``stream_handle``; no ``_C`` (the reuse path compares tensors
    by columns; add fake_torch_guards() as ``_C`` for its guard form)."""
    stream = types.SimpleNamespace(cuda_stream=stream_handle)
    torch = types.SimpleNamespace(Tensor=FakeTensor, float32="f32", float64="f64",
                                  float16="f16",
                                  cuda=types.SimpleNamespace(current_stream=lambda d: stream))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(portgemm.arrays, "_TORCH_DTYPES", {})
    return torch


def test_torch_tensors_launch_on_torchs_stream(backend, monkeypatch):
    Tensor = install_fake_torch(monkeypatch, stream_handle=555).Tensor
    shapes = [(8, 9, 10), (3, 4, 5)]
    hA, hB, hC = host_batch(np.random.default_rng(3), shapes, "float32", False, False)
    C = [Tensor(c) for c in hC]
    portgemm.gemm_vbatched([Tensor(x) for x in hA], [Tensor(x) for x in hB], C,
                           backend=backend)
    assert {st for _, st in backend.launches} == {555}
    check([c.a for c in C], reference(hA, hB, hC, [1, 1], [0, 0], False, False), "float32")


def test_aliased_outputs_are_refused_and_nothing_launches(backend):
    shapes = [(8, 8, 8)] * 3
    hA, hB, hC = host_batch(np.random.default_rng(4), shapes, "float32", False, False)
    A, B = [FakeArray(x) for x in hA], [FakeArray(x) for x in hB]
    buf = np.zeros((8, 16), np.float32)
    for C in ([FakeArray(hC[0])] * 3,
              [FakeArray(buf[:, :8]), FakeArray(buf[:, 4:12]), FakeArray(hC[2])]):
        p = portgemm.plan(shapes, dtype="float32", arch=backend.arch())
        for call in (lambda: portgemm.gemm_vbatched(A, B, C, backend=backend),
                     lambda: p.run(A, B, C, backend=backend),
                     lambda: p.bind(A, B, C, backend=backend)):
            with pytest.raises(portgemm.LayoutError, match="C overlaps C"):
                call()
    assert backend.launches == []


def test_hip_launches_on_the_callers_stream(hip_backend, monkeypatch):
    streams = []
    launch = hip_backend.fake.hipModuleLaunchKernel

    def spy(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        streams.append(stream)
        return launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
    monkeypatch.setattr(hip_backend.fake, "hipModuleLaunchKernel", spy)
    shapes = [(8, 9, 10), (30, 4, 5)]
    hA, hB, hC = host_batch(np.random.default_rng(6), shapes, "float32", False, False)
    A, B, C = ([DevArray(x) for x in xs] for xs in (hA, hB, hC))
    p = portgemm.plan(shapes, dtype="float32", arch=hip_backend.arch())
    call = p.bind(A, B, C, backend=hip_backend)
    p.run(A, B, C, backend=hip_backend)
    assert set(streams) == {None}   # neither torch nor CuPy: the backend's stream (null)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(
        ndarray=type("ndarray", (), {}),
        cuda=types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=31),
                                   runtime=types.SimpleNamespace(is_hip=True))))
    del streams[:]
    p.run(A, B, C, backend=hip_backend)
    call()
    assert streams and set(streams) == {31}   # CuPy(-ROCm)'s current stream, both paths
    sys.modules["cupy"].cuda.runtime.is_hip = False   # a CUDA build of CuPy: not its streams
    del streams[:]
    p.run(A, B, C, backend=hip_backend)
    call()
    assert set(streams) == {None}
    check([c.a for c in C], reference(hA, hB, hC, [1, 1], [0, 0], False, False), "float32")
