"""The full path's launches through CuPy's launchKernel binding on the device (issue 7,
round 2): a new-memory call (execute with new descriptors), a new plan's tile-list
expansion and a device-offsets ragged call all launch through CudaBackend._run_item's
binding form and give the float64 reference over NaN-poisoned outputs; a launch the
driver refuses is a DeviceError naming the kernel."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm
from portgemm.errors import DeviceError
from gpu_batches import make_host_batch, max_rel_error, random_shapes, reference
from test_grouped import poison, ragged_operands, ragged_reference

pytestmark = pytest.mark.gpu


@pytest.fixture
def counted(cuda, monkeypatch):
    """The backend's binding wrapped to count its launches (the full path reads it at
    each launch; closures made before keep the real one)."""
    real = cuda._cu_raising
    if real is None:
        pytest.skip("this CuPy has no cupy.cuda.driver.launchKernel")
    made = []

    def launch_kernel(*a):
        made.append(a[0])
        return real(*a)
    monkeypatch.setattr(cuda, "_cu_raising", launch_kernel)
    return made


def test_new_memory_calls_launch_through_the_binding(cuda, cp, counted):
    from portgemm import api, reuse
    reuse.clear()
    api._layouts.clear()
    rng = np.random.default_rng(71)
    shapes = random_shapes(rng, 9, 90, 77)   # a batch no earlier test planned: expansion
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    ref = reference(hA, hB, hC, np.ones(len(shapes)), np.zeros(len(shapes)), False, False)
    for call in range(3):   # new memory every call: the full path each time
        A, B = [cp.asarray(x) for x in hA], [cp.asarray(x) for x in hB]
        C = [cp.full(c.shape, cp.nan, cp.float32) for c in hC]
        before = len(counted)
        portgemm.gemm_vbatched(A, B, C, backend="cuda")
        cp.cuda.get_current_stream().synchronize()
        assert len(counted) > before, f"call {call} did not launch through the binding"
        assert max_rel_error([cp.asnumpy(c) for c in C], ref) < 1e-5, f"call {call}"


def test_device_offsets_launch_through_the_binding(cuda, cp, counted):
    rng = np.random.default_rng(72)
    A, B, C, offs = ragged_operands(rng, [7, 0, 40, 3, 19], 33, 28, np.float64, False, False)
    poison(C, offs, 0.0)
    ref = ragged_reference(A, B, C, offs, 1.0, 0.0, False, False)
    dC = cp.asarray(C)
    portgemm.gemm_grouped(cp.asarray(A), cp.asarray(B), dC, cp.asarray(offs), backend="cuda")
    got = cp.asnumpy(dC)
    end = int(offs[-1])
    assert counted
    assert np.abs(got[:end] - ref[:end]).max() <= 1e-10 * max(1.0, np.abs(ref).max())
    assert np.isnan(got[end:]).all(), "rows past offs[-1] were written"


def test_a_refused_launch_is_a_device_error_naming_the_kernel(cuda, cp):
    """A block of 4,096 threads is more than any CUDA device takes: the driver refuses
    the launch (not a sticky error), through the binding as through ctypes."""
    from portgemm.backends.cuda import _encoded
    from portgemm.backends.expand import Expansion, expand_args
    from portgemm.kernels.variants import TileExpand
    fn = cuda.function(TileExpand())
    exp = Expansion(np.zeros((6, 1), np.int32), 0, 0)
    item = _encoded(fn.ptr, 1, 4096, expand_args(exp, 0, 0, 0), TileExpand.name)
    with pytest.raises(DeviceError, match=rf"launch of {TileExpand.name} failed"):
        cuda._run_item(item, cp.cuda.get_current_stream().ptr)
    # the device still works afterwards
    rng = np.random.default_rng(73)
    shapes = random_shapes(rng, 4, 64, 64)
    hA, hB, hC = make_host_batch(rng, shapes, "float32")
    C = [cp.full(c.shape, cp.nan, cp.float32) for c in hC]
    portgemm.gemm_vbatched([cp.asarray(x) for x in hA], [cp.asarray(x) for x in hB], C,
                           backend="cuda")
    ref = reference(hA, hB, hC, np.ones(len(shapes)), np.zeros(len(shapes)), False, False)
    assert max_rel_error([cp.asnumpy(c) for c in C], ref) < 1e-5
