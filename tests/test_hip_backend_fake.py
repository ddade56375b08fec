"""The hip backend's launch contract, on a fake HIP runtime (no GPU, no ROCm): device
memory is host memory, and hipModuleLaunchKernel runs a NumPy emulation of the kernel
that reads only what the backend passed (descriptor, tile-list and block-pointer
addresses, base, grid, block size). A wrong pointer, layout or launch shows up as a
wrong C."""
from __future__ import annotations

import ctypes
import enum

import numpy as np
import pytest

import portgemm
from portgemm.backends import hip as hipbe
from portgemm.backends.expand import ROWS, emulate_expand
from portgemm.kernels import hiprtc_compile, resources
from portgemm.kernels.render import DEVICE_TILE_DTYPE, GEMM_DTYPE, REDUCE_DTYPE
from portgemm.kernels.variants import SplitReduce, TileExpand, catalogue_variants, variants_for
from portgemm.occupancy import KernelResources


class Err(enum.IntEnum):
    hipSuccess = 0
    hipErrorNoDevice = 100
    hipErrorInvalidImage = 200


def _read(ptr: int, dtype, count: int) -> np.ndarray:
    return np.frombuffer((ctypes.c_char * (count * np.dtype(dtype).itemsize)).from_address(ptr),
                         dtype).copy()


class FakeHip:
    hipError_t = Err

    class hipDeviceProp_t:
        name = b"Fake MI210"
        gcnArchName = b"gfx90a:sramecc+:xnack-"
        multiProcessorCount = 104

    def __init__(self, variants, devices=1):
        self.devices, self.launches, self._keep, self.sizes = devices, [], [], {}
        self.expansions = []   # the streams of tile-list expansion launches
        self.reductions = []   # (stream, {record: writes per element}) of split-K reductions
        self.variants = variants

    def hipGetDeviceCount(self):
        return (Err.hipSuccess, self.devices) if self.devices else (Err.hipErrorNoDevice, 0)

    def hipGetDevice(self):
        return Err.hipSuccess, 0

    def hipGetDeviceProperties(self, props, dev):
        return (Err.hipSuccess,)

    def hipMalloc(self, n):
        buf = np.zeros(n, np.uint8)
        self._keep.append(buf)
        self.sizes[buf.ctypes.data] = n
        return Err.hipSuccess, buf.ctypes.data

    def hipFree(self, ptr):
        return (Err.hipSuccess,)

    def hipMemcpyHtoD(self, dst, src, n):
        ctypes.memmove(dst, np.ascontiguousarray(src).ctypes.data, n)
        return (Err.hipSuccess,)

    def hipModuleLoadData(self, code):
        return Err.hipSuccess, "module"

    def hipModuleGetFunction(self, mod, name):
        return Err.hipSuccess, name.decode()

    def hipStreamSynchronize(self, stream):
        return (Err.hipSuccess,)

    def hipModuleLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        if fn == TileExpand.name:
            self.expansions.append(stream)
            run_expand(gx * bx, *(a.value or 0 for a in extra))
            return (Err.hipSuccess,)
        if fn.endswith("_split_reduce"):
            self.reductions.append((stream, run_reduce(fn, gx, bx, *(a.value or 0 for a in extra))))
            return (Err.hipSuccess,)
        gemms_p, tiles_p, bptr_p, base = (a.value or 0 for a in extra)
        v = self.variants[fn]
        self.launches.append((fn, (gx, gy, gz), bx, base))
        assert bx == v.threads and (by, bz, shared, params) == (1, 1, 0, None)
        g = _read(gemms_p, GEMM_DTYPE, self.sizes[gemms_p] // GEMM_DTYPE.itemsize)
        if v.layout == "grid-z":
            k = v.kinds[0]
            work = [(base + z, x * k.tm, y * k.tn, 0) for z in range(gz) for y in range(gy)
                    for x in range(gx)]
        else:
            bp = _read(bptr_p, np.int32, base + gx + 1)
            ntiles = int(bp[base + gx])
            tl = _read(tiles_p, DEVICE_TILE_DTYPE, ntiles)
            work = [tuple(int(x) for x in tl[t]) for b in range(base, base + gx)
                    for t in range(bp[b], bp[b + 1])]
        for gemm, m0, n0, kind in work:
            self._tile(g[gemm], v, v.kinds[kind], m0, n0)
        return (Err.hipSuccess,)

    @staticmethod
    def _tile(d, v, k, m0, n0):
        M, N, K = int(d["M"]), int(d["N"]), int(d["K"])
        if m0 >= M or n0 >= N:
            return
        dt = np.float32 if v.dtype == "float32" else np.float64

        def mat(ptr, rows, cols, ld):
            n = (rows - 1) * ld + cols if rows else 0
            return np.lib.stride_tricks.as_strided(_view(ptr, dt, n), (rows, cols),
                                                   (ld * dt().itemsize, dt().itemsize))
        A = mat(int(d["A"]), *((K, M) if v.trans_a else (M, K)), int(d["lda"]))
        B = mat(int(d["B"]), *((N, K) if v.trans_b else (K, N)), int(d["ldb"]))
        C = mat(int(d["C"]), M, N, int(d["ldc"]))
        opA, opB = (A.T if v.trans_a else A), (B.T if v.trans_b else B)
        rs, cs = slice(m0, min(M, m0 + k.tm)), slice(n0, min(N, n0 + k.tn))
        acc = opA[rs].astype(np.float64) @ opB[:, cs].astype(np.float64)
        out = d["alpha"] * acc
        if d["beta"] != 0:
            out = out + d["beta"] * C[rs, cs]
        C[rs, cs] = out


def run_expand(threads, table_p, spans, n_tiles, tiles_p, bptr_p):
    """The expansion kernel (PG_TILE_EXPAND), emulated on what a launch passed: reads
    the layout table at its address, writes the tile list and block pointers at theirs."""
    assert threads > n_tiles   # one thread per tile and one for the last pointer
    table = _read(table_p, np.int32, len(ROWS) * (spans + 1))
    tiles, bptr = emulate_expand(table, spans, n_tiles)
    ctypes.memmove(tiles_p, tiles.ctypes.data, tiles.nbytes)
    ctypes.memmove(bptr_p, bptr.ctypes.data, bptr.nbytes)


def run_reduce(name, blocks, threads, red_p, start_p, n_red):
    """The split-K reduction kernel (PG_SPLIT_REDUCE), emulated block by block on what a
    launch passed, written from the kernel's text (not from backends/split.py): block b
    serves the last record g with block_start[g] <= b, elements from (b - start[g])
    chunk on, up to chunk of them or the end of M x N. Returns {record: writes per
    element of its C}, so tests can check that every element is written exactly once."""
    v = SplitReduce("float32" if "_f32_" in name else "float64")
    assert threads == v.threads and blocks > 0
    dt = np.float32 if v.dtype == "float32" else np.float64
    red = _read(red_p, REDUCE_DTYPE, n_red)
    start = _read(start_p, np.int32, n_red)
    writes = {g: np.zeros(int(r["M"]) * int(r["N"]), np.int64) for g, r in enumerate(red)}
    for b in range(blocks):
        g = int(np.searchsorted(start, b, side="right")) - 1
        r = red[g]
        M, N, s, mn = int(r["M"]), int(r["N"]), int(r["s"]), int(r["M"]) * int(r["N"])
        e0 = (b - int(start[g])) * v.chunk
        e = np.arange(e0, min(e0 + v.chunk, mn))
        row, col = e // N, e % N
        W = _view(int(r["W"]), dt, s * mn).reshape(s, mn)
        C = np.lib.stride_tricks.as_strided(
            _view(int(r["C"]), dt, (M - 1) * int(r["ldc"]) + N), (M, N),
            (int(r["ldc"]) * dt().itemsize, dt().itemsize))
        alpha, beta = dt(r["alpha"]), dt(r["beta"])
        x = np.zeros(e.size, dt)
        if alpha != 0:
            acc = W[0, e].copy()
            for j in range(1, s):
                acc += W[j, e]
            x = alpha * acc
        if beta != 0:
            x = x + beta * C[row, col]
        C[row, col] = x
        writes[g][e] += 1
    return writes


def _view(ptr, dt, n):
    return np.frombuffer((ctypes.c_char * (n * np.dtype(dt).itemsize)).from_address(ptr), dt)


class DevArray:
    """Host memory posing as device memory (__cuda_array_interface__)."""

    def __init__(self, a):
        self.a = a

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.a.shape, "typestr": self.a.dtype.str, "version": 3,
                "data": (self.a.ctypes.data, False), "strides": self.a.strides}


@pytest.fixture
def backend(monkeypatch):
    # the fake device is a gfx90a: its catalogue holds the MFMA families too
    variants = {v.name: v for v in catalogue_variants(trans=((False, False), (False, True),
                                                             (True, False), (True, True)),
                                                      arch="gfx90a")}
    fake = FakeHip(variants)
    monkeypatch.setattr(hipbe, "hip", fake)
    monkeypatch.setattr(resources, "_registered", {})  # the fake figures stay in this test
    monkeypatch.setattr(hiprtc_compile, "compile", lambda src, name, arch, **kw: (
        b"code", KernelResources(registers=64, shared_bytes=8192, sgprs=40, source="fake")))
    be = hipbe.HipBackend()
    be.fake = fake
    return be


def test_device_description(backend):
    a = backend.arch()
    assert (a.name, a.compute_units, a.part) == ("gfx90a", 104, "Fake MI210")
    assert backend.gcn_arch() == "gfx90a"


def test_numpy_arrays_are_refused(backend):
    with pytest.raises(portgemm.DtypeError, match="device arrays"):
        backend.array_info(np.zeros((2, 2), np.float32))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("trans", [(False, False), (True, True)])
@pytest.mark.parametrize("strategy", [None, "magma"])
def test_launch_contract_gives_the_right_product(backend, dtype, trans, strategy):
    rng = np.random.default_rng(7)
    shapes = [(int(m), int(n), int(k)) for m, n, k in rng.integers(1, 90, (12, 3))]
    ta, tb = trans
    hA = [rng.random((k, m) if ta else (m, k)).astype(dtype) for m, n, k in shapes]
    hB = [rng.random((n, k) if tb else (k, n)).astype(dtype) for m, n, k in shapes]
    hC = [rng.random((m, n)).astype(dtype) for m, n, k in shapes]
    alpha, beta = rng.uniform(-2, 2, len(shapes)), np.where(np.arange(len(shapes)) % 2, 0.5, 0.0)
    want = [a_ * ((x.T if ta else x) @ (y.T if tb else y)) + b_ * c
            for x, y, c, a_, b_ in zip(hA, hB, hC, alpha, beta)]
    C = [DevArray(c) for c in hC]
    portgemm.gemm_vbatched([DevArray(x) for x in hA], [DevArray(y) for y in hB], C,
                           alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=backend,
                           strategy=strategy)
    assert backend.fake.launches, "nothing was launched"
    tol = 1e-4 if dtype == "float32" else 1e-12
    for i, (got, ref) in enumerate(zip(C, want)):
        np.testing.assert_allclose(got.a, ref, rtol=tol, atol=tol, err_msg=f"GEMM {i}")


def test_no_device_is_device_unavailable(monkeypatch):
    monkeypatch.setattr(hiprtc_compile, "load_hip", lambda: (FakeHip({}, devices=0), None))
    with pytest.raises(portgemm.DeviceUnavailable, match="no AMD GPU"):
        hipbe.create()


@pytest.mark.parametrize("strategy, mode", [(None, "fused"), (None, "per-kind"), ("magma", None)])
def test_every_mode_launches_its_variants(backend, strategy, mode):
    # Several tile kinds, so per-kind launches start at non-zero block offsets (base).
    # The paper's rule keeps the kinds apart on this batch (the cost model may not).
    shapes = [(16, 16, 16)] * 3 + [(512, 512, 32)] * 2 + [(33, 70, 20)]
    opts = {} if strategy == "magma" else {"tlp_model": "paper"}
    p = portgemm.plan(shapes, dtype="float32", arch=backend.arch(), strategy=strategy, mode=mode,
                      **opts)
    names = {v.name for v in variants_for(p.kinds, p.mode, "float32")}
    A = [DevArray(np.ones((m, k), np.float32)) for m, n, k in shapes]
    B = [DevArray(np.ones((k, n), np.float32)) for m, n, k in shapes]
    C = [DevArray(np.zeros((m, n), np.float32)) for m, n, k in shapes]
    p.run(A, B, C, backend=backend)
    assert {fn for fn, *_ in backend.fake.launches} <= names
    if p.mode == "per-kind":
        assert len(backend.fake.launches) > 1
        assert any(base > 0 for *_, base in backend.fake.launches)
    for (m, n, k), c in zip(shapes, C):
        assert np.all(c.a == k)


def test_grid_z_batches_beyond_the_grid_limit_are_split(backend):
    """MAGMA's layout puts GEMMs on grid.z (at most 65535 per launch): a larger batch runs
    as several launches with a base offset, and every GEMM is still computed."""
    rng = np.random.default_rng(3)
    n = 65535 + 20
    hA = rng.random((n, 1, 1)).astype(np.float32)
    hB = rng.random((n, 1, 2)).astype(np.float32)
    A = [DevArray(a) for a in hA]
    B = [DevArray(b) for b in hB]
    C = [DevArray(np.full((1, 2), np.nan, np.float32)) for _ in range(n)]
    portgemm.gemm_vbatched(A, B, C, backend=backend, strategy="magma")
    zs = [grid[2] for _, grid, *_ in backend.fake.launches]
    assert sorted(zs) == [20, 65535]
    got = np.stack([c.a for c in C])
    np.testing.assert_allclose(got, hA @ hB, rtol=1e-6)


def test_a_cached_code_object_that_does_not_load_is_rebuilt(backend, monkeypatch):
    """A cached code object whose digest checks out can still fail to load (another
    runtime wrote it, or it was damaged before its digest was taken): the backend
    recompiles once with the cache bypassed, and the call succeeds."""
    compiles = []

    def compile(src, name, arch, refresh=False, **kw):
        compiles.append(refresh)
        return (b"fresh" if refresh else b"stale"), KernelResources(
            registers=64, shared_bytes=8192, sgprs=40, source="fake")

    def load(code):
        if code == b"stale":
            return Err.hipErrorInvalidImage, None
        return Err.hipSuccess, "module"

    monkeypatch.setattr(hiprtc_compile, "compile", compile)
    monkeypatch.setattr(backend.fake, "hipModuleLoadData", load)
    shapes = [(20, 30, 40), (5, 6, 7)]
    A = [DevArray(np.ones((m, k), np.float32)) for m, n, k in shapes]
    B = [DevArray(np.ones((k, n), np.float32)) for m, n, k in shapes]
    C = [DevArray(np.full((m, n), np.nan, np.float32)) for m, n, k in shapes]
    portgemm.gemm_vbatched(A, B, C, backend=backend)
    assert compiles[:2] == [False, True]
    for (m, n, k), c in zip(shapes, C):
        assert np.all(c.a == k)
