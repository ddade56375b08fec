"""The CUDA backend's one-closure launches (CudaBackend._lean) without a GPU: bound calls,
reuse-path hits and layout-cache hits launch on the stream current at *call* time (CuPy's,
or torch's for tensors), give the float64 reference over NaN-poisoned outputs, raise a
DeviceError naming the kernel when the driver refuses a launch, and keep the per-kind
and several-launch forms (fake CuPy and cuLaunchKernel of test_cuda_backend_fake)."""
from __future__ import annotations

import types

import numpy as np
import pytest

import portgemm
from portgemm import reuse
from portgemm.errors import DeviceError
from test_cuda_backend_fake import (FakeArray, FakeStream, backend, check, host_batch,  # noqa: F401
                                    install_fake_torch, reference)

SHAPES = [(40, 30, 20), (17, 9, 33), (64, 64, 16)]


def batch(seed, wrap=FakeArray):
    """(host A, B, C; device-like A, B; a function making a NaN-poisoned C)."""
    hA, hB, hC = host_batch(np.random.default_rng(seed), SHAPES, "float32", False, False)
    return hA, hB, hC, [wrap(x) for x in hA], [wrap(x) for x in hB], \
        lambda: [wrap(np.full_like(c, np.nan)) for c in hC]


def want(hA, hB, hC, alpha=1.0):
    return reference(hA, hB, hC, [alpha] * len(hA), [0] * len(hA), False, False)


@pytest.fixture(autouse=True)
def fresh_reuse():
    reuse.clear()
    portgemm.api._layouts.clear()
    yield
    reuse.clear()
    portgemm.api._layouts.clear()


def test_bound_call_follows_the_stream_current_at_each_call(backend):  # noqa: F811
    hA, hB, hC, A, B, poisoned = batch(1)
    C = poisoned()
    call = portgemm.plan(SHAPES, "float32", arch=backend.arch()).bind(A, B, C, backend=backend)
    backend.launches.clear()
    for ptr in (5, 0, 77, 5):
        for c in C:
            c.a[...] = np.nan
        with FakeStream(ptr):
            assert call() is C
        check(C, want(hA, hB, hC), "float32")
    assert [st for _, st in backend.launches] == [5, 0, 77, 5]


def test_reuse_hits_launch_on_the_current_stream_with_the_right_result(backend):  # noqa: F811
    hA, hB, hC, A, B, poisoned = batch(2)
    C = poisoned()
    streams = (3, 3, 3, 9, 0, 9)   # the first two calls make the entry; then hits
    for ptr in streams:
        for c in C:
            c.a[...] = np.nan
        with FakeStream(ptr):
            portgemm.gemm_vbatched(A, B, C, alpha=2.0, backend=backend)
        check(C, want(hA, hB, hC, 2.0), "float32")
    assert reuse.cache_info()["hits"] >= 3
    assert [st for _, st in backend.launches][-4:] == [3, 9, 0, 9]


def test_layout_hits_launch_on_the_current_stream(backend):  # noqa: F811
    hA, hB, hC, A, B, poisoned = batch(3)
    hC0 = [np.full_like(c, np.nan) for c in hC]
    streams = []
    for ptr in (11, 12, 13, 12):   # new array objects over the same memory every call
        for c in hC0:
            c[...] = np.nan
        with FakeStream(ptr):
            portgemm.gemm_vbatched([FakeArray(x.a) for x in A], [FakeArray(x.a) for x in B],
                                   [FakeArray(c) for c in hC0], backend=backend)
        check(hC0, want(hA, hB, hC), "float32")
        streams.append(backend.launches[-1][1])
    assert streams == [11, 12, 13, 12]   # the full path, then layout-cache hits
    entry, = portgemm.api._layouts._d.values()
    assert entry.relaunch is not None   # the hits took the encoded relaunch


def test_torch_bound_and_repeated_calls_read_torchs_stream_at_call_time(backend,  # noqa: F811
                                                                        monkeypatch):
    torch = install_fake_torch(monkeypatch, stream_handle=555)
    hA, hB, hC, A, B, poisoned = batch(4, wrap=torch.Tensor)
    C = poisoned()
    call = portgemm.plan(SHAPES, "float32", arch=backend.arch()).bind(A, B, C, backend=backend)
    stream = types.SimpleNamespace(cuda_stream=555)
    torch.cuda.current_stream = lambda d: stream
    seen = []
    for handle in (555, 600, 601):
        stream.cuda_stream = handle
        for c in C:
            c.a[...] = np.nan
        call()
        check([c.a for c in C], want(hA, hB, hC), "float32")
        seen.append(backend.launches[-1][1])
        for _ in range(3):   # the full path, then reuse hits
            for c in C:
                c.a[...] = np.nan
            portgemm.gemm_vbatched(A, B, C, backend=backend)
            check([c.a for c in C], want(hA, hB, hC), "float32")
            seen.append(backend.launches[-1][1])
    assert seen == [555] * 4 + [600] * 4 + [601] * 4


def test_a_refused_launch_raises_a_device_error_naming_the_kernel(backend):  # noqa: F811
    hA, hB, hC, A, B, poisoned = batch(5)
    C = poisoned()
    real, refuse = backend._cu_launch, [False]
    backend._cu_launch = lambda *a: 700 if refuse[0] else real(*a)
    bound = portgemm.plan(SHAPES, "float32", arch=backend.arch()).bind(A, B, C, backend=backend)
    for _ in range(2):   # the second call makes the reuse entry
        portgemm.gemm_vbatched(A, B, C, backend=backend)
    refuse[0] = True
    failed = r"launch of \S+ failed: CUresult 700"
    with pytest.raises(DeviceError, match=failed):
        bound()
    hits = reuse.cache_info()["hits"]
    with pytest.raises(DeviceError, match=failed):
        portgemm.gemm_vbatched(A, B, C, backend=backend)   # a reuse hit
    assert reuse.cache_info()["hits"] == hits   # a launch that failed is no hit
    with pytest.raises(DeviceError, match=failed):   # a layout-cache hit: new objects
        portgemm.gemm_vbatched([FakeArray(x.a) for x in A], [FakeArray(x.a) for x in B],
                               [FakeArray(c.a) for c in C], backend=backend)
    refuse[0] = False
    for c in C:
        c.a[...] = np.nan
    bound()
    check(C, want(hA, hB, hC), "float32")


def test_several_launches_in_one_stream_go_in_order(backend):  # noqa: F811
    """_lean's form for a plan of several launches that are not per-kind (MAGMA's grid-z
    chunks): each encoded launch in turn, on the stream current at the call."""
    done = []
    backend._cu_launch = lambda fn, *a: done.append((fn, a[7])) or 0
    enc = [(f, (1, 1, 1), 64, 0, None, None, f"k{f}") for f in (7, 8, 9)]
    call = backend._lean({"mode": "fused"}, enc, None)
    with FakeStream(31):
        call()
    assert done == [(7, 31), (8, 31), (9, 31)]
    backend._cu_launch = lambda *a: 5
    call = backend._lean({"mode": "fused"}, enc, None)
    with pytest.raises(DeviceError, match="launch of k7 failed: CUresult 5"):
        call()


def test_per_kind_launches_keep_their_side_streams(backend):  # noqa: F811
    """A per-kind plan's launches are not made one closure: each goes to a side stream
    forked from (and joined back to) the caller's (CudaBackend._launch)."""
    done = []
    backend._cu_launch = lambda fn, *a: done.append((fn, a[7])) or 0
    enc = [(f, (1, 1, 1), 64, 0, None, None, f"k{f}") for f in (7, 8)]
    call = backend._lean({"mode": "per-kind"}, enc, None)
    with FakeStream(21):
        call()
    assert done == [(7, 77), (8, 77)]   # the fake's side streams are all handle 77


def test_torch_raw_handle_is_looked_up_once_and_read_per_call(backend, monkeypatch):  # noqa: F811
    torch = install_fake_torch(monkeypatch, stream_handle=1)
    current = {0: 40}
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda i: current[i])
    hA, hB, hC, A, B, poisoned = batch(7, wrap=torch.Tensor)
    monkeypatch.setattr(torch.Tensor, "device", _Device())
    C = poisoned()
    call = portgemm.plan(SHAPES, "float32", arch=backend.arch()).bind(A, B, C, backend=backend)
    seen = []
    for handle in (40, 41, 40):
        current[0] = handle
        call()
        seen.append(backend.launches[-1][1])
    assert seen == [40, 41, 40]
    check([c.a for c in C], want(hA, hB, hC), "float32")


class _Device:
    """A torch.device's reads: ``index`` (hashable, as torch's is)."""
    index = 0


def _through_cupys_binding(backend, fail=None):
    """Make ``backend`` launch through the CuPy launchKernel form (integers; the argument
    array by address; raises on failure) over the fake's launch: every launch, the
    lean closures' and the full path's (execute, the expansion kernel, ragged)."""
    import ctypes
    real, made = backend._cu_launch, []

    def launch_kernel(fn, gx, gy, gz, bx, by, bz, shmem, stream, at, extra):
        assert type(at) is int and extra == 0
        made.append(stream)
        if fail is not None and fail[0]:
            raise RuntimeError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")   # the fake's error
        # a view of the argument array (nothing is read past the kernel's own arguments;
        # 18: the most any entry point takes, the ragged one's)
        params = (ctypes.c_void_p * 18).from_address(at)
        assert real(fn, gx, gy, gz, bx, by, bz, shmem, stream, params, None) == 0
    backend._cu_raising = launch_kernel
    return made


def test_cupys_launch_binding_gives_the_reference_on_the_current_stream(backend):  # noqa: F811
    made = _through_cupys_binding(backend)
    hA, hB, hC, A, B, poisoned = batch(8)
    C = poisoned()
    bound = portgemm.plan(SHAPES, "float32", arch=backend.arch()).bind(A, B, C, backend=backend)
    for ptr in (6, 0, 6):
        for entry in (bound, lambda: portgemm.gemm_vbatched(A, B, C, backend=backend)):
            for c in C:
                c.a[...] = np.nan
            with FakeStream(ptr):
                entry()
            check(C, want(hA, hB, hC), "float32")
    assert reuse.cache_info()["hits"] >= 1
    # bound 6, the first call (the full path) 6, bound 0, the second call (a layout-cache
    # hit) 0, bound 6, a reuse hit 6; and every launch, the expansions' too, went
    # through the binding
    assert [st for _, st in backend.launches][-6:] == [6, 6, 0, 0, 6, 6]
    assert len(made) == len(backend.launches) + len(backend.expansions)


def test_cupys_launch_binding_failure_is_a_device_error(backend):  # noqa: F811
    fail = [False]
    _through_cupys_binding(backend, fail)
    hA, hB, hC, A, B, poisoned = batch(9)
    C = poisoned()
    bound = portgemm.plan(SHAPES, "float32", arch=backend.arch()).bind(A, B, C, backend=backend)
    fail[0] = True
    with pytest.raises(DeviceError, match=r"launch of \S+ failed: CUDA_ERROR_LAUNCH_OUT_OF"):
        bound()
