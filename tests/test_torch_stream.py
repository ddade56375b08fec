"""torch tensors launch on torch's current stream, read without making a Stream object
where torch offers the raw handle, and one CuPy ExternalStream is kept per handle and
device (no GPU: fake torch and fake CuPy, as in test_cuda_backend_fake)."""
from __future__ import annotations

import types

import numpy as np

import portgemm
from portgemm.backends import launch
from test_cuda_backend_fake import backend, check, host_batch, install_fake_torch, reference  # noqa: F401


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


def test_external_streams_are_kept_per_handle_and_device(backend, monkeypatch):  # noqa: F811
    Tensor = install_fake_torch(monkeypatch, stream_handle=555).Tensor
    made = []
    external = backend.cp.cuda.ExternalStream
    monkeypatch.setattr(backend.cp.cuda, "ExternalStream",
                        lambda h, *a: made.append(h) or external(h, *a))
    shapes = [(8, 9, 10), (3, 4, 5)]
    hA, hB, hC = host_batch(np.random.default_rng(3), shapes, "float32", False, False)
    A, B = [Tensor(x) for x in hA], [Tensor(x) for x in hB]
    for _ in range(4):   # full path, layout hit, reuse path: one ExternalStream made
        C = [Tensor(c.copy()) for c in hC]
        portgemm.gemm_vbatched(A, B, C, backend=backend)
        check([c.a for c in C], reference(hA, hB, hC, [1, 1], [0, 0], False, False),
              "float32")
    assert made == [555]
    assert {st for _, st in backend.launches} == {555}
