"""The NumPy backend executes plans tile by tile; check it against a float64 reference for
every strategy, both dtypes, all transpose pairs, edge sizes and strided views, and check
that it exposes plans that miss or double-cover a tile."""
import dataclasses
import itertools
import zlib

import numpy as np
import pytest

import portgemm
from portgemm.backends.base import get_backend
from portgemm.errors import ShapeMismatch, ValidationError

TOL = {np.float32: 1e-5, np.float64: 1e-12}
EDGE = [1, 15, 16, 17, 31, 61, 127]
TRANS = list(itertools.product([False, True], repeat=2))


@pytest.fixture(scope="module")
def be():
    return get_backend("numpy")


def operand(rng, rows, cols, dtype, t, strided):
    """A rows x cols operand (stored transposed when t), optionally a strided view."""
    shape = (cols, rows) if t else (rows, cols)
    if not strided:
        return (rng.random(shape) - 0.5).astype(dtype)
    r, c = shape
    off = int(rng.integers(0, 5))
    big = (rng.random((2 * r, c + off + 3)) - 0.5).astype(dtype)
    return big[::2, off:off + c]  # non-contiguous rows, a column slice


def make(rng, shapes, dtype, ta=False, tb=False, strided=False):
    A = [operand(rng, m, k, dtype, ta, strided) for m, n, k in shapes]
    B = [operand(rng, k, n, dtype, tb, strided) for m, n, k in shapes]
    C = [operand(rng, m, n, dtype, False, strided) for m, n, k in shapes]
    return A, B, C


def reference(A, B, C0, alpha, beta, ta, tb):
    out = []
    for i, (a, b, c) in enumerate(zip(A, B, C0)):
        a = (a.T if ta else a).astype(np.float64)
        b = (b.T if tb else b).astype(np.float64)
        r = alpha[i] * (a @ b)
        if beta[i] != 0:
            r = r + beta[i] * c.astype(np.float64)
        out.append(r)
    return out


def max_rel_err(C, R):
    worst = 0.0
    for c, r in zip(C, R):
        nr = np.linalg.norm(r)
        d = np.linalg.norm(c.astype(np.float64) - r)
        err = d / nr if nr > 0 else d
        worst = max(worst, err if np.isfinite(err) else np.inf)
    return worst


def scalars(rng, n):
    alpha = rng.choice([1.0, -0.5, 2.0, 0.75], n)
    beta = rng.choice([0.0, 1.0, -1.5, 0.5], n)
    beta[0] = 0.0
    return alpha, beta


def poison(C, beta):
    for c, b in zip(C, beta):
        if b == 0:
            c[...] = np.nan


def edge_shapes(rng, n=14):
    s = rng.choice(EDGE, (n, 3))
    s[:, 2] = rng.choice(EDGE[:-1], n)
    return s


@pytest.mark.parametrize("strategy", portgemm.strategies())
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta,tb", TRANS)
def test_strategies_match_reference(be, strategy, dtype, ta, tb):
    seed = zlib.crc32(f"{strategy} {dtype.__name__} {ta} {tb}".encode())
    rng = np.random.default_rng(seed)
    shapes = edge_shapes(rng)
    A, B, C = make(rng, shapes, dtype, ta, tb)
    alpha, beta = scalars(rng, len(shapes))
    C0 = [c.copy() for c in C]
    ref = reference(A, B, C0, alpha, beta, ta, tb)
    poison(C, beta)
    p = portgemm.plan(shapes, dtype=dtype, arch=be.arch(), strategy=strategy)
    out = p.run(A, B, C, alpha, beta, ta, tb, backend="numpy")
    assert out is C
    assert all(c.dtype == dtype for c in C)
    assert max_rel_err(C, ref) < TOL[dtype]


@pytest.mark.parametrize("strategy", portgemm.strategies())
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", [1, 2])
def test_strided_views(be, strategy, dtype, seed):
    rng = np.random.default_rng(100 + seed)
    shapes = edge_shapes(rng, 10)
    ta, tb = TRANS[seed + 1]
    A, B, C = make(rng, shapes, dtype, ta, tb, strided=True)
    assert not any(a.flags.c_contiguous for a in A + C if a.shape[0] > 1)
    alpha, beta = scalars(rng, len(shapes))
    bufs = [c.base for c in C]
    C0 = [c.copy() for c in C]
    before = [b.copy() for b in bufs]
    ref = reference(A, B, C0, alpha, beta, ta, tb)
    poison(C, beta)
    portgemm.gemm_vbatched(A, B, C, alpha, beta, ta, tb, backend="numpy", strategy=strategy)
    assert max_rel_err(C, ref) < TOL[dtype]
    for c, buf, old in zip(C, bufs, before):  # nothing outside the views was written
        mask = np.ones(buf.shape, bool)
        mask[np.unravel_index(_offsets(c, buf), buf.shape)] = False
        np.testing.assert_array_equal(buf[mask], old[mask])


def _offsets(view, buf):
    r = np.arange(view.shape[0])[:, None] * view.strides[0]
    c = np.arange(view.shape[1])[None, :] * view.strides[1]
    return ((view.ctypes.data - buf.ctypes.data + r + c) // buf.itemsize).ravel()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_random_irregular_batch(dtype):
    rng = np.random.default_rng(7)
    shapes = np.stack([rng.integers(16, 200, 40), rng.integers(16, 200, 40),
                       rng.integers(16, 100, 40)], axis=1)
    A, B, C = make(rng, shapes, dtype)
    ref = reference(A, B, C, np.ones(40), np.zeros(40), False, False)
    poison(C, np.zeros(40))
    portgemm.gemm_vbatched(A, B, C, backend="numpy")
    assert max_rel_err(C, ref) < TOL[dtype]


def test_float32_accumulates_in_float32():
    rng = np.random.default_rng(12)
    A, B, C = make(rng, [(64, 64, 256)], np.float32)
    portgemm.gemm_vbatched(A, B, C, backend="numpy")
    rounded = (A[0].astype(np.float64) @ B[0].astype(np.float64)).astype(np.float32)
    assert C[0].dtype == np.float32
    assert (C[0] != rounded).any()  # a float64 accumulation would round to exactly this
    assert max_rel_err(C, [rounded]) < 1e-5


def test_beta_zero_never_reads_c():
    rng = np.random.default_rng(3)
    shapes = [(17, 33, 9), (64, 64, 16)]
    A, B, C = make(rng, shapes, np.float32)
    for c in C:
        c[...] = np.inf  # inf * 0 is NaN: reading C would show
    portgemm.gemm_vbatched(A, B, C, 1.0, 0.0, backend="numpy")
    assert all(np.isfinite(c).all() for c in C)


def test_alpha_zero_does_not_read_a_or_b():
    rng = np.random.default_rng(4)
    shapes = [(17, 33, 9), (5, 6, 7)]
    A, B, C = make(rng, shapes, np.float64)
    for x in A + B:
        x[...] = np.nan
    C0 = [c.copy() for c in C]
    portgemm.gemm_vbatched(A, B, C, 0.0, [2.0, 0.0], backend="numpy")
    np.testing.assert_array_equal(C[0], 2.0 * C0[0])
    np.testing.assert_array_equal(C[1], np.zeros_like(C0[1]))


@pytest.mark.parametrize("beta", [0.0, 1.0, -2.5])
def test_k_zero_gives_beta_c(beta):
    rng = np.random.default_rng(5)
    shapes = [(17, 33, 0), (5, 6, 3), (16, 16, 0)]
    A, B, C = make(rng, shapes, np.float32)
    C0 = [c.copy() for c in C]
    ref = reference(A, B, C0, [1.0] * 3, [beta] * 3, False, False)
    if beta == 0:
        poison(C, [0.0] * 3)
    portgemm.gemm_vbatched(A, B, C, 1.0, beta, backend="numpy")
    assert max_rel_err(C, ref) < 1e-6
    if beta == 0:
        assert not C[0].any() and not C[2].any()


def test_m_or_n_zero_and_empty_batch():
    rng = np.random.default_rng(6)
    shapes = [(0, 5, 4), (7, 0, 3), (9, 8, 7)]
    A, B, C = make(rng, shapes, np.float64)
    ref = reference(A, B, C, [1.0] * 3, [0.0] * 3, False, False)
    portgemm.gemm_vbatched(A, B, C, backend="numpy")
    assert max_rel_err(C, ref) < 1e-12
    assert portgemm.gemm_vbatched([], [], [], backend="numpy") == []


def test_plan_run_checks_shapes(be):
    rng = np.random.default_rng(8)
    shapes = np.array([(20, 30, 10), (31, 17, 5)])
    p = portgemm.plan(shapes, dtype="float64", arch=be.arch())
    A, B, C = make(rng, shapes, np.float64)
    ref = reference(A, B, C, [1.5] * 2, [0.0] * 2, False, False)
    p.run(A, B, C, alpha=1.5, backend="numpy")
    assert max_rel_err(C, ref) < 1e-12
    A2, B2, C2 = make(rng, [(20, 30, 10), (31, 17, 6)], np.float64)
    before = [c.copy() for c in C2]
    with pytest.raises(ShapeMismatch, match="GEMM 1"):
        p.run(A2, B2, C2, backend="numpy")
    for x, y in zip(before, C2):
        np.testing.assert_array_equal(x, y)


def test_arch_follows_environment(be, monkeypatch):
    assert be.arch().name == "sm_90"
    monkeypatch.setenv("PORTGEMM_ARCH", "gfx90a")
    assert be.arch().name == "gfx90a"
    assert be.name == "numpy" and be.device_name() == "NumPy (host)"
    be.synchronize()
    x = np.ones((2, 3))
    y = be.to_device(x)
    assert isinstance(y, np.ndarray) and y is not x and np.array_equal(be.to_host(y), x)


# ---- the reference must expose wrong plans ------------------------------------------------

def _broken(p, tiles):
    return dataclasses.replace(p, tiles=tiles)


def _setup(seed, strategy):
    rng = np.random.default_rng(seed)
    shapes = np.array([(40, 50, 20), (33, 17, 9)])
    be = get_backend("numpy")
    p = portgemm.plan(shapes, dtype="float64", arch=be.arch(), strategy=strategy)
    A, B, C = make(rng, shapes, np.float64)
    return p, A, B, C


@pytest.mark.parametrize("strategy", portgemm.strategies())
def test_missing_tile_is_exposed(strategy):
    p, A, B, C = _setup(9, strategy)
    ref = reference(A, B, C, [1.0] * 2, [0.0] * 2, False, False)
    poison(C, [0.0] * 2)
    _broken(p, np.delete(p.tiles, p.n_tiles // 2)).run(A, B, C, backend="numpy")
    assert not max_rel_err(C, ref) < 1e-12


@pytest.mark.parametrize("strategy", portgemm.strategies())
def test_double_covered_tile_is_exposed(strategy):
    p, A, B, C = _setup(10, strategy)
    ref = reference(A, B, C, [1.0] * 2, [0.5] * 2, False, False)
    tiles = np.concatenate([p.tiles, p.tiles[-1:]])
    _broken(p, tiles).run(A, B, C, beta=0.5, backend="numpy")
    assert not max_rel_err(C, ref) < 1e-12


def test_malformed_tile_is_refused():
    p, A, B, C = _setup(11, None)
    tiles = p.tiles.copy()
    tiles["gemm"][0] = 2
    with pytest.raises(ValidationError, match="tile 0"):
        _broken(p, tiles).run(A, B, C, backend="numpy")
