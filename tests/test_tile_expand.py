"""One-tile-per-block plans keep a per-GEMM layout (O(batch)); the tile list is expanded
from it lazily on the host (Plan.tiles) or by the expansion kernel on the device.

CPU: the lazy list equals build_tiles' byte for byte (every strategy and mode); a plan
answers its summaries without expanding; the kernel's emulation (backends/expand.py)
and its own source compiled for the host write exactly the list the host path uploads;
planning and first calls on the fake CUDA and HIP backends never build a tile list on
the host and still compute the float64 reference. GPU (marker gpu): the list the
kernel writes equals the host's byte for byte, and results match float64."""
from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

import portgemm
import portgemm.planner as planner
from portgemm.backends import launch
from portgemm.backends.expand import ROWS, emulate_expand, expand_args, expansion, per_kind_launches
from portgemm.kernels.render import DEVICE_TILE_DTYPE, render
from portgemm.kernels.variants import TileExpand
from portgemm.plan import Plan
from portgemm.planner import magma, tiling, wavefront_tlp
from portgemm.tile_layout import TileLayout
from test_cuda_backend_fake import backend  # noqa: F401  (a fixture: the fake CUDA backend)
from test_hip_backend_fake import backend as hip_backend  # noqa: F401  (the fake HIP one)

ONE_TILE = [("wavefront-tlp", "fused"), ("wavefront-tlp", "per-kind"),
            ("workgroup-tlp", "fused"), ("workgroup-tlp", "per-kind"), ("magma", "grid-z")]
DEVICE_MODES = [(s, m) for s, m in ONE_TILE if m != "grid-z"]


def random_batches(seed, n=6):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        batch, hi = int(rng.integers(1, 80)), int(rng.choice([40, 300, 1100]))
        s = rng.integers(0, hi, (batch, 3))
        s[rng.random(batch) < 0.1, int(rng.integers(0, 3))] = 0   # empty GEMMs too
        out.append(s)
    out.append(np.array([[1008, 1008, 512]] * 4))
    return out


# ---- the lazy host list ---------------------------------------------------------------------

@pytest.mark.parametrize("strategy,mode", ONE_TILE)
def test_lazy_tiles_equal_build_tiles(strategy, mode, monkeypatch):
    """The same plan with the list built at once by build_tiles (as before layouts; for
    magma, build_tiles of its one kind, GEMMs in order, column-major): equal tiles and
    block pointers, byte for byte, and equal everything else."""
    batches = random_batches(hash((strategy, mode)) % 2**32)
    lazy = [planner.plan(s, strategy=strategy, mode=mode, use_cache=False) for s in batches]
    monkeypatch.setattr(wavefront_tlp, "tile_layout", tiling.build_tiles)
    for s, p in zip(batches, lazy):
        assert p.layout is not None and vars(p).get("_tiles") is None   # not expanded yet
        if strategy == "magma":
            tiles = tiling.build_tiles(s, p.kinds, np.zeros(len(s), np.int64), m_fastest=True)
            r = Plan(**{**{f: getattr(p, f) for f in ("strategy", "arch", "dtype", "shapes",
                                                       "kinds", "mode", "tlp", "tlp_threshold",
                                                       "tlp_model", "occupancy", "grid",
                                                       "notes")},
                        "tiles": tiles, "block_ptr": tiling.single_tile_blocks(len(tiles))})
        else:
            r = planner.plan(s, strategy=strategy, mode=mode, use_cache=False)
        assert r.layout is None
        assert (p.n_tiles, p.n_blocks, p.tiles_per_kind()) == (r.n_tiles, r.n_blocks,
                                                                r.tiles_per_kind())
        assert p.predicted_occupancy() == r.predicted_occupancy()
        assert p.tiles.dtype == r.tiles.dtype and p.tiles.tobytes() == r.tiles.tobytes()
        assert p.block_ptr.dtype == r.block_ptr.dtype
        assert p.block_ptr.tobytes() == r.block_ptr.tobytes()
        assert not p.tiles.flags.writeable and not p.block_ptr.flags.writeable
        assert p.tiles is p.tiles   # expanded once, kept
        assert p.describe() == r.describe()


def test_summaries_do_not_expand(monkeypatch):
    monkeypatch.setattr(TileLayout, "tiles", lambda self: pytest.fail("expanded"))
    for strategy, mode in ONE_TILE:
        p = planner.plan(random_batches(1)[0], strategy=strategy, mode=mode, use_cache=False)
        repr(p), p.describe(), p.tiles_per_kind(), p.predicted_occupancy(), p.spills()
        assert p.n_tiles == p.layout.n_tiles == p.n_blocks


def test_a_list_given_outright_wins_over_the_layout():
    import dataclasses
    p = planner.plan([[100, 70, 9], [3, 300, 4]], use_cache=False)
    q = dataclasses.replace(p, tiles=p.tiles[:-1])
    assert q.layout is None and q.n_tiles == p.n_tiles - 1
    with pytest.raises(ValueError, match="tiles or a layout"):
        dataclasses.replace(p, tiles=None, layout=None)


# ---- the device expansion: emulation and kernel source ---------------------------------------

@pytest.mark.parametrize("strategy,mode", DEVICE_MODES)
def test_emulated_expansion_equals_the_host_upload(strategy, mode):
    for s in random_batches(hash((mode, strategy, 2)) % 2**32):
        p = planner.plan(s, strategy=strategy, mode=mode, use_cache=False)
        want_tiles, want_ptr, want_launches = launch.host_device_tiles(p)
        exp = expansion(p.layout, kind_zero=mode == "per-kind")
        assert exp.table.dtype == np.int32 and exp.table.shape == (len(ROWS), exp.spans + 1)
        tiles, bptr = emulate_expand(exp.table, exp.spans, exp.n_tiles)
        assert tiles.tobytes() == want_tiles.tobytes()
        assert bptr.tobytes() == want_ptr.tobytes()
        assert exp.blocks * TileExpand.threads > exp.n_tiles
        if mode == "per-kind":
            assert per_kind_launches(p.layout) == want_launches


def _layout(kinds_per_gemm, tiles_per_gemm):
    k = np.array(kinds_per_gemm, np.int64)
    n = np.array(tiles_per_gemm, np.int64)
    first = np.concatenate([[0], np.cumsum(n)])
    one = np.ones_like(k)
    return TileLayout(np.arange(k.size), k, 16 * one, 16 * one, n, one, first)


def test_per_kind_launches_need_contiguous_kinds():
    assert per_kind_launches(_layout([2, 2, 0, 0, 1], [3, 0, 4, 1, 2])) == \
        [(2, 0, 3), (0, 3, 5), (1, 8, 2)]
    assert per_kind_launches(_layout([2, 0, 2], [3, 1, 1])) is None       # kind 2 twice
    assert per_kind_launches(_layout([2, 0, 2], [3, 1, 0])) == [(2, 0, 3), (0, 3, 1)]
    assert per_kind_launches(_layout([], [])) == []


def test_a_layout_with_split_kinds_takes_the_host_path():
    """Per-kind launches over a layout whose kinds are not contiguous: the state falls
    back to the host list (reordered by per_kind_layout), never expands on the device."""
    base = planner.plan([[64, 64, 8], [16, 16, 8]], mode="per-kind", use_cache=False)
    lay = _layout([1, 0, 1], [2, 3, 1])
    p = Plan(base.strategy, base.arch, base.dtype, np.array([[32, 16, 8], [48, 16, 8],
                                                              [16, 16, 8]]),
             base.kinds, None, None, "per-kind", 0.0, 0.0, "-", {}, layout=lay)
    uploads = []
    st = launch.plan_state(p, "dev", False, False, lambda a: uploads.append(a) or a,
                           lambda exp: pytest.fail("expanded on the device"))
    assert st["launches"] == [(1, 0, 3), (0, 3, 3)]
    assert st["tiles"]["gemm"].tolist() == [0, 0, 2, 1, 1, 1]


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    """The expansion kernel's own source compiled for the host (CUDA built-ins stubbed),
    run thread by thread."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    from test_grouped import HOST_PRELUDE   # CUDA built-ins as host stubs
    r = render(TileExpand())
    out = tmp_path_factory.mktemp("expand") / "expand.so"
    subprocess.run([cxx, "-std=c++17", "-O1", "-shared", "-fPIC", "-x", "c++", "-", "-o",
                    str(out)], input=(HOST_PRELUDE + r.source).encode(), check=True)
    lib = ctypes.CDLL(str(out))
    return lib, getattr(lib, r.name)


def test_kernel_source_agrees_with_its_emulation(host_kernel):
    lib, kernel = host_kernel
    n_threads = TileExpand.threads
    for i, s in enumerate(random_batches(41, n=8)[:-1]):
        mode = ("fused", "per-kind")[i % 2]
        p = planner.plan(s[:20], mode=mode, use_cache=False)
        exp = expansion(p.layout, kind_zero=mode == "per-kind")
        table = np.ascontiguousarray(exp.table)
        tiles = np.full(exp.n_tiles, -7, DEVICE_TILE_DTYPE)   # poisoned: all must be written
        bptr = np.full(exp.n_tiles + 1, -7, np.int32)
        args = launch.typed_args(expand_args(exp, table.ctypes.data, tiles.ctypes.data,
                                             bptr.ctypes.data))
        for t in range(exp.blocks * n_threads):
            lib.pg_set_thread(t // n_threads, t % n_threads, n_threads)
            kernel(*args)
        want_tiles, want_ptr = emulate_expand(table, exp.spans, exp.n_tiles)
        assert tiles.tobytes() == want_tiles.tobytes() and bptr.tobytes() == want_ptr.tobytes()


def test_expand_arguments_match_the_kernel_signature():
    import re

    from portgemm.kernels.render import SOURCE_FILE
    src = SOURCE_FILE.read_text()
    body = src[src.index("#if PG_TILE_EXPAND"):]
    params = re.search(r"PG_NAME\(([^)]*)\)", body).group(1).split(",")
    kinds = ["p" if "*" in q else {"int": "i"}[" ".join(q.split()).rsplit(" ", 1)[0]]
             for q in params]
    exp = expansion(planner.plan([[5, 5, 5]], use_cache=False).layout)
    assert [k for k, _ in expand_args(exp, 1, 2, 3)] == kinds


# ---- the hot path never touches per-tile arrays on the host -----------------------------------

@pytest.fixture
def no_host_tiles(monkeypatch):
    """Every way to a per-tile array on the host raises."""
    def boom(*a, **k):
        raise AssertionError("a tile list was built on the host")
    monkeypatch.setattr(tiling, "build_tiles", boom)
    monkeypatch.setattr(TileLayout, "tiles", boom)
    monkeypatch.setattr(launch, "per_kind_layout", boom)
    monkeypatch.setattr(launch, "host_device_tiles", boom)


def _fake_case(seed, dtype, wrap):
    from test_cuda_backend_fake import host_batch, reference
    rng = np.random.default_rng(seed)
    shapes = [tuple(int(v) for v in s) for s in rng.integers(0, 90, (14, 3))] + \
        [(130, 140, 20), (16, 16, 16), (0, 5, 5)]
    hA, hB, hC = host_batch(rng, shapes, dtype, False, True)
    alpha = rng.uniform(-2, 2, len(shapes))
    beta = np.where(np.arange(len(shapes)) % 2, 0.5, 0.0)
    for c, b_ in zip(hC, beta):
        if b_ == 0:
            c[...] = np.nan
    want = reference(hA, hB, hC, alpha, beta, False, True)
    return shapes, [wrap(x) for x in hA], [wrap(x) for x in hB], hC, alpha, beta, want


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("strategy,mode", DEVICE_MODES)
def test_fake_cuda_plans_and_runs_without_host_tiles(backend, no_host_tiles, dtype, strategy,
                                                     mode):
    from test_cuda_backend_fake import FakeArray, FakeStream, call_entry, check
    shapes, A, B, hC, alpha, beta, want = _fake_case(3, dtype, FakeArray)
    kw = dict(alpha=alpha, beta=beta, trans_b=True, backend=backend)
    for entry in ("run", "bind", "gemm_vbatched"):
        planner.clear_cache()
        C = [FakeArray(c.copy()) for c in hC]
        with FakeStream(606):
            call_entry(entry, shapes, dtype, strategy, mode, A, B, C, kw)
        check(C, want, dtype)
    # one expansion per plan state, on the caller's stream, before its GEMM launches
    assert backend.expansions == [606] * 3
    assert {s for _, s in backend.launches} == {606}


def test_fake_cuda_expands_once_per_plan_state(backend):
    from test_cuda_backend_fake import FakeArray
    shapes, A, B, hC, alpha, beta, want = _fake_case(4, "float32", FakeArray)
    p = portgemm.plan(shapes, arch=backend.arch(), use_cache=False)
    C = [FakeArray(c.copy()) for c in hC]
    for _ in range(3):
        p.run(A, B, C, trans_b=True, backend=backend)
    p.run(A, [FakeArray(np.ascontiguousarray(b.a.T)) for b in B], C, backend=backend)
    assert len(backend.expansions) == 2   # (trans_a, trans_b) pairs are separate states


@pytest.mark.parametrize("strategy,mode", DEVICE_MODES)
def test_fake_hip_plans_and_runs_without_host_tiles(hip_backend, no_host_tiles, strategy, mode):
    from test_cuda_backend_fake import check
    from test_hip_backend_fake import DevArray
    shapes, A, B, hC, alpha, beta, want = _fake_case(5, "float64", DevArray)
    C = [DevArray(c.copy()) for c in hC]
    p = portgemm.plan(shapes, dtype="float64", arch=hip_backend.arch(), strategy=strategy,
                      mode=mode, use_cache=False)
    p.run(A, B, C, alpha=alpha, beta=beta, trans_b=True, backend=hip_backend)
    check([c.a for c in C], want, "float64")
    assert hip_backend.fake.expansions == [None]


# ---- on the device ---------------------------------------------------------------------------

def _device_bytes(be, buf, nbytes):
    if hasattr(buf, "data"):      # CuPy
        return be.cp.asnumpy(buf)[:nbytes].tobytes()
    from portgemm.backends import hip as hipbe
    out = np.empty(nbytes, np.uint8)
    be.synchronize()
    hipbe._check(hipbe.hip.hipMemcpyDtoH(out, buf.ptr, nbytes))
    return out.tobytes()


@pytest.mark.gpu
@pytest.mark.parametrize("backend_name", ["cuda", "hip"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["fused", "per-kind"])
def test_device_expansion_on_the_gpu(backend_name, dtype, mode, monkeypatch):
    """The list the kernel writes equals the host's byte for byte (tiles and block
    pointers), and the GEMMs it drives match a float64 reference (C NaN-poisoned where
    beta is 0)."""
    # a persistent per-kind launch uploads a reordered list instead (backends/persistent.py)
    monkeypatch.setenv("PORTGEMM_PERSISTENT", "0")
    from conftest import backend_or_skip
    from gpu_batches import TOL, make_host_batch, max_rel_error, random_shapes, reference
    be = backend_or_skip(backend_name)
    for seed, (batch, max_mn, max_k) in enumerate([(60, 300, 200), (500, 1024, 64),
                                                    (2000, 128, 32), (7, 40, 9)]):
        rng = np.random.default_rng(100 + seed)
        shapes = random_shapes(rng, batch, max_mn, max_k)
        hA, hB, hC = make_host_batch(rng, shapes, dtype)
        alpha = rng.uniform(-2, 2, batch)
        beta = np.where(rng.random(batch) < 0.5, 0.0, rng.uniform(-2, 2, batch))
        for i in np.flatnonzero(beta == 0):
            hC[i][...] = np.nan
        want = reference(hA, hB, hC, alpha, beta, False, False)
        A, B, C = ([be.to_device(x) for x in xs] for xs in (hA, hB, hC))
        p = portgemm.plan(shapes, dtype=dtype, arch=be.arch(), mode=mode, use_cache=False)
        assert p.layout is not None
        p.run(A, B, C, alpha=alpha, beta=beta, backend=be)
        err = max_rel_error([be.to_host(c) for c in C], want)
        assert err < TOL[dtype], f"max relative error {err:.3e}"
        st = next(iter(launch.plan_states(p).values()))
        assert "expand_table" in st   # the list was written on the device
        tiles, bptr, launches = launch.host_device_tiles(p)
        assert _device_bytes(be, st["tiles"], tiles.nbytes) == tiles.tobytes()
        assert _device_bytes(be, st["block_ptr"], bptr.nbytes) == bptr.tobytes()
        assert st["launches"] == launches
