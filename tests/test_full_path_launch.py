"""The CUDA backend's full path launches through CuPy's launchKernel binding too (issue 7,
round 2): execute (new descriptors), the tile-list expansion kernel, split-K's phases and
the ragged device-offsets launch all go through CudaBackend._run_item, which takes the
binding where CuPy has it and no launch function was injected; each gives the float64
reference over NaN-poisoned outputs on the stream current at the call, and a refused
launch is a DeviceError naming the kernel, whichever form refused it. No GPU: the fake
CuPy and cuLaunchKernel of test_cuda_backend_fake."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm
from portgemm.errors import DeviceError
from portgemm.kernels.variants import TileExpand
from test_cuda_backend_fake import FakeArray, FakeStream, backend, check  # noqa: F401
from test_grouped import close, fake_cuda, poison, ragged_operands, ragged_reference  # noqa: F401
from test_grouped import cuda_fake_backend  # noqa: F401  (fake_cuda's fixture)
from test_lean_launch import _through_cupys_binding, batch, want
from test_lean_launch import fresh_reuse  # noqa: F401  (autouse: caches emptied around each)

REFUSED = r"launch of \S+ failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"


def test_the_full_path_launches_through_the_binding_on_the_current_stream(backend):  # noqa: F811
    made = _through_cupys_binding(backend)
    hA, hB, hC, A, B, poisoned = batch(11)
    for ptr in (4, 0, 9):
        C = poisoned()   # new outputs each time: every call takes the full path
        before = len(made)
        with FakeStream(ptr):
            portgemm.gemm_vbatched(A, B, C, backend=backend)
        check(C, want(hA, hB, hC), "float32")
        assert made[before:] and set(made[before:]) == {ptr}
    # the plan's tile list was written by the expansion kernel, through the binding too
    assert backend.expansions and len(made) == len(backend.launches) + len(backend.expansions)


def test_a_full_path_launch_refused_by_the_binding_is_a_device_error(backend):  # noqa: F811
    fail = [False]
    _through_cupys_binding(backend, fail)
    hA, hB, hC, A, B, poisoned = batch(12)
    portgemm.gemm_vbatched(A, B, poisoned(), backend=backend)   # plan state made
    fail[0] = True
    with pytest.raises(DeviceError, match=REFUSED):
        portgemm.gemm_vbatched(A, B, poisoned(), backend=backend)
    fail[0] = False
    C = poisoned()
    portgemm.gemm_vbatched(A, B, C, backend=backend)   # the backend still works after it
    check(C, want(hA, hB, hC), "float32")


def test_a_refused_expansion_is_a_device_error_naming_its_kernel(backend):  # noqa: F811
    """The first call of a plan launches the expansion kernel (the plan's tile list,
    written on the device) before its GEMM launch: a refusal there names that kernel."""
    _through_cupys_binding(backend, [True])
    hA, hB, hC, A, B, poisoned = batch(13)
    with pytest.raises(DeviceError, match=rf"launch of {TileExpand.name} failed"):
        portgemm.gemm_vbatched(A, B, poisoned(), backend=backend)


def test_the_ctypes_form_stays_where_a_launch_function_is_injected(backend):  # noqa: F811
    """A backend made with launch_kernel= (or whose _cu_launch a test replaced) keeps the
    ctypes form on every path, the binding unused: its CUresult becomes the DeviceError."""
    made = _through_cupys_binding(backend)
    real = backend._cu_launch
    refuse = [False]
    backend._cu_launch = lambda *a: 719 if refuse[0] else real(*a)
    hA, hB, hC, A, B, poisoned = batch(14)
    C = poisoned()
    portgemm.gemm_vbatched(A, B, C, backend=backend)
    check(C, want(hA, hB, hC), "float32")
    assert made == []
    refuse[0] = True
    with pytest.raises(DeviceError, match=r"launch of \S+ failed: CUresult 719"):
        portgemm.gemm_vbatched(A, B, poisoned(), backend=backend)


def _binding_over(be, fail=None):
    """fake_cuda's launch taken as the backend's own (not injected), then the binding
    over it: the ragged launch goes through _run_item's CuPy form."""
    be._cu_launch_default = be._cu_launch
    return _through_cupys_binding(be, fail)


def test_device_offsets_launch_through_the_binding(fake_cuda):  # noqa: F811
    made = _binding_over(fake_cuda)
    rng = np.random.default_rng(15)
    sizes = [6, 0, 21, 3]
    A, B, C, offs = ragged_operands(rng, sizes, 13, 17, np.float32, False, False, spare=8)
    dA, dB, dC, d_offs = FakeArray(A), FakeArray(B), FakeArray(C), FakeArray(offs.copy())
    with FakeStream(52):
        for split in (sizes, [0, 30, 0, 0]):
            o = np.cumsum(split).astype(np.int32)
            d_offs.a[:] = o
            C[...] = np.nan
            poison(C, o, 0.0)
            portgemm.gemm_grouped(dA, dB, dC, d_offs, backend=fake_cuda)
            end = int(o[-1])
            close(C[:end], ragged_reference(A, B, C, o, 1.0, 0.0, False, False)[:end],
                  np.float32)
            assert np.isnan(C[end:]).all()
    ragged = [st for n, st in fake_cuda.launches if "_ragged_" in n]
    assert ragged == [52, 52] and made[-2:] == [52, 52]


def test_a_refused_device_offsets_launch_is_a_device_error(fake_cuda):  # noqa: F811
    fail = [True]
    _binding_over(fake_cuda, fail)
    rng = np.random.default_rng(16)
    A, B, C, offs = ragged_operands(rng, [3, 5], 7, 9, np.float64, False, False)
    dA, dB, dC, d_offs = FakeArray(A), FakeArray(B), FakeArray(C), FakeArray(offs.copy())
    with pytest.raises(DeviceError, match=r"launch of \S+_ragged_\S* failed: CUDA_ERROR"):
        portgemm.gemm_grouped(dA, dB, dC, d_offs, backend=fake_cuda)
