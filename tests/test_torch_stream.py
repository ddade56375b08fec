"""torch tensors launch on torch's current stream, read without making a Stream object
where torch offers the raw handle, and one CuPy stream is kept per handle and device:
Stream.from_external where CuPy has it, ExternalStream on older CuPy (no GPU: fake torch
and fake CuPy, as in test_cuda_backend_fake)."""
from __future__ import annotations

import types

import numpy as np
import pytest

import portgemm
from portgemm.backends import launch
from test_cuda_backend_fake import FakeStream, backend, check, host_batch, install_fake_torch, reference  # noqa: F401


class Device:
    """A torch.device's reads: ``index`` (and hashable, as torch's is)."""

    def __init__(self, index):
        self.index = index


def test_raw_handle_is_read_where_torch_has_it(monkeypatch):
    torch = install_fake_torch(monkeypatch, stream_handle=7)
    assert launch.torch_stream(Device(0)) == 7            # no torch._C: current_stream
    asked = []
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda i: asked.append(i) or 90 + i)
    assert launch.torch_stream(Device(1)) == 91
    assert launch.torch_stream(Device(None)) == 7         # no index: current_stream
    assert asked == [1]


@pytest.mark.parametrize("cupy14", [True, False])
def test_external_streams_are_kept_per_handle_and_device(backend, monkeypatch, cupy14):  # noqa: F811
    Tensor = install_fake_torch(monkeypatch, stream_handle=555).Tensor
    made = []
    if cupy14:   # Stream.from_external(obj): obj.__cuda_stream__() is (0, handle)
        def from_external(obj):
            version, handle = obj.__cuda_stream__()
            assert version == 0
            made.append(handle)
            return FakeStream(handle)
        monkeypatch.setattr(backend.cp.cuda.Stream, "from_external", from_external,
                            raising=False)
        monkeypatch.setattr(backend.cp.cuda, "ExternalStream", None)   # deprecated: unused
    else:
        external = backend.cp.cuda.ExternalStream
        monkeypatch.setattr(backend.cp.cuda, "ExternalStream",
                            lambda h, *a: made.append(h) or external(h, *a))
    shapes = [(8, 9, 10), (3, 4, 5)]
    hA, hB, hC = host_batch(np.random.default_rng(3), shapes, "float32", False, False)
    A, B = [Tensor(x) for x in hA], [Tensor(x) for x in hB]
    for _ in range(4):   # full path, layout hit, reuse path: one stream object made
        C = [Tensor(c.copy()) for c in hC]
        portgemm.gemm_vbatched(A, B, C, backend=backend)
        check([c.a for c in C], reference(hA, hB, hC, [1, 1], [0, 0], False, False),
              "float32")
    assert made == [555]
    assert {st for _, st in backend.launches} == {555}


def test_tensors_on_another_device_are_refused_before_any_stream(backend, monkeypatch):  # noqa: F811
    """Tensors on a device that is not the current one: a typed error, no stream object
    made (CuPy would take it as the current device's) and nothing launched."""
    Tensor = install_fake_torch(monkeypatch, stream_handle=555).Tensor
    monkeypatch.setattr(Tensor, "device", Device(1), raising=False)
    made = []
    monkeypatch.setattr(backend.cp.cuda, "ExternalStream", lambda h, *a: made.append(h))
    hA, hB, hC = host_batch(np.random.default_rng(5), [(8, 9, 10)], "float32", False, False)
    with pytest.raises(portgemm.ValidationError, match="cuda:1, the current device is cuda:0"):
        portgemm.gemm_vbatched([Tensor(x) for x in hA], [Tensor(x) for x in hB],
                               [Tensor(c) for c in hC], backend=backend)
    assert made == [] and backend.launches == []
