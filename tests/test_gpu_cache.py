"""A damaged kernel cache on a real CUDA device (marker ``gpu``): every damaged entry,
and a binary whose digest checks out but which the driver refuses, is recompiled and the
call gives the right answer (no untyped driver error)."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import portgemm
from portgemm.errors import DeviceUnavailable
from portgemm.kernels import compile_cache

from gpu_batches import TOL, make_host_batch, max_rel_error, reference
from test_compile_cache import DAMAGE

pytestmark = pytest.mark.gpu
SHAPES = [(70, 33, 20), (16, 16, 16), (128, 100, 64), (5, 300, 17)]


@pytest.fixture
def cuda(tmp_path, monkeypatch):
    try:
        be = portgemm.backends.base.get_backend("cuda")
    except DeviceUnavailable as e:
        pytest.skip(str(e))
    monkeypatch.setenv("PORTGEMM_CACHE_DIR", str(tmp_path))
    _forget(be)
    yield be
    _forget(be)


def _forget(be):
    """Drop every compiled kernel this process holds, so the next call reads the disk."""
    compile_cache.clear_memory()
    be._functions.clear()
    be._modules.clear()


def _gemm_is_right(be, seed):
    cp = be.cp
    rng = np.random.default_rng(seed)
    hA, hB, hC = make_host_batch(rng, SHAPES, "float32")
    alpha = np.ones(len(SHAPES))
    beta = np.zeros(len(SHAPES))
    ref = reference(hA, hB, hC, alpha, beta, False, False)
    A, B = [cp.asarray(a) for a in hA], [cp.asarray(b) for b in hB]
    C = [cp.full(c.shape, cp.nan, cp.float32) for c in hC]
    p = portgemm.plan(SHAPES, dtype="float32", arch=be.arch(), use_cache=False)
    p.run(A, B, C, backend=be)
    assert max_rel_error([cp.asnumpy(c) for c in C], ref) < TOL["float32"]


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_cache_recovers(cuda, tmp_path, damage):
    _gemm_is_right(cuda, 1)
    keys = [p.stem for p in tmp_path.glob("*.json")]
    assert keys
    for k in keys:
        DAMAGE[damage](tmp_path, k)
    _forget(cuda)
    _gemm_is_right(cuda, 2)


def test_binary_the_driver_refuses_is_rebuilt(cuda, tmp_path):
    _gemm_is_right(cuda, 3)
    for meta_path in tmp_path.glob("*.json"):
        garbage = b"\x7fELF" + bytes(range(256)) * 4
        (tmp_path / f"{meta_path.stem}.bin").write_bytes(garbage)
        meta = json.loads(meta_path.read_text())
        meta["sha256"] = hashlib.sha256(garbage).hexdigest()  # the digest checks out
        meta_path.write_text(json.dumps(meta))
    _forget(cuda)
    _gemm_is_right(cuda, 4)
    compile_cache.clear_memory()
    for meta_path in tmp_path.glob("*.json"):  # and the entries were rewritten whole
        hit = compile_cache.get(meta_path.stem)
        assert hit is not None and hit[0] != garbage
