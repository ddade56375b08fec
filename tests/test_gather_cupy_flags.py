"""arrays.gather on CuPy-like arrays that carry CuPy's ``_c_contiguous`` flag: where every
array is C-contiguous the strides are derived from the shapes (not read), otherwise read;
both describe the arrays as their real strides do."""
from __future__ import annotations

import types

import numpy as np
import pytest

from portgemm import arrays


class FlaggedArray:
    """A CuPy-like array over a NumPy one, with CuPy's ``_c_contiguous`` slot."""
    reads = 0

    def __init__(self, a):
        self.a = a
        self.data = types.SimpleNamespace(ptr=a.__array_interface__["data"][0], device_id=0)
        self.dtype, self.shape = a.dtype, a.shape
        self._c_contiguous = a.flags.c_contiguous

    @property
    def strides(self):
        FlaggedArray.reads += 1
        return self.a.strides


@pytest.fixture
def fake_cupy(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(ndarray=FlaggedArray))


def _arrays(rng, contiguous_only):
    out = []
    for i in range(40):
        m, n = (int(v) for v in rng.integers(0, 9, 2))
        a = np.zeros((m, n + 3), np.float32)
        out.append(a[:, :n] if (i % 4 == 0 and not contiguous_only) else a[:, :n].copy())
    out.append(np.zeros((1, 5), np.float32))
    return [FlaggedArray(a) for a in out]


@pytest.mark.parametrize("contiguous_only", [True, False])
def test_flagged_strides_agree_with_the_real_ones(fake_cupy, contiguous_only):
    X = _arrays(np.random.default_rng(4), contiguous_only)
    FlaggedArray.reads = 0
    op = arrays.gather(X)
    assert op is not None and op.device == "cuda:0"
    assert (FlaggedArray.reads == 0) == contiguous_only, "strides read only when needed"
    real = np.array([x.a.strides for x in X]) // 4
    shape = np.array([x.a.shape for x in X])
    np.testing.assert_array_equal(op.shape, shape)
    np.testing.assert_array_equal(op.ptr, [x.data.ptr for x in X])
    used = (shape[:, 0] > 1) & (shape[:, 1] > 1)   # a length-1 dimension's stride is unused
    np.testing.assert_array_equal(op.strides[used], real[used])
    multi_row = shape[:, 0] > 1
    np.testing.assert_array_equal(op.strides[multi_row, 0], real[multi_row, 0])
