"""The public host path on the NumPy backend: backend/strategy arguments, refused array
types, 3-D stacks, the column-major recipe, aliased outputs on every entry point, the
fast (gathered) path against the per-array path, the exact overlap check against brute
force, and the one-way imports."""
from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import portgemm
from portgemm.arrays import info
from portgemm.backends.base import get_backend
from portgemm.errors import ArgumentTypeError, LayoutError, PortgemmError, UnknownBackend
from portgemm.problem import validate

F32 = np.float32
ROOT = pathlib.Path(portgemm.__file__).parent


def batch(shapes, dtype=F32, seed=0, ta=False, tb=False):
    rng = np.random.default_rng(seed)
    A = [(rng.random((k, m) if ta else (m, k)) - 0.5).astype(dtype) for m, n, k in shapes]
    B = [(rng.random((n, k) if tb else (k, n)) - 0.5).astype(dtype) for m, n, k in shapes]
    C = [np.full((m, n), np.nan, dtype) for m, n, k in shapes]
    return A, B, C


def ref(A, B, alpha, ta=False, tb=False):
    return [a_ * (x.T if ta else x).astype(np.float64) @ (y.T if tb else y).astype(np.float64)
            for x, y, a_ in zip(A, B, alpha)]


# ---- backend= and strategy= ----------------------------------------------------------------

def test_unknown_backend_is_a_usage_error():
    A, B, C = batch([(2, 2, 2)])
    with pytest.raises(UnknownBackend, match="'metal'.*known: cuda, hip, numpy") as ei:
        portgemm.gemm_vbatched(A, B, C, backend="metal")
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, PortgemmError)
    assert not isinstance(ei.value, portgemm.DeviceUnavailable)
    assert np.isnan(C[0]).all()


@pytest.mark.parametrize("bad", [["numpy"], 3, 2.5, b"numpy"])
def test_non_string_backend_is_a_type_error(bad):
    A, B, C = batch([(2, 2, 2)])
    with pytest.raises(ArgumentTypeError, match="backend must be") as ei:
        portgemm.gemm_vbatched(A, B, C, backend=bad)
    assert isinstance(ei.value, TypeError)


@pytest.mark.parametrize("bad", [["magma"], 1, ("wavefront-tlp",)])
def test_non_string_strategy_is_a_type_error(bad):
    A, B, C = batch([(2, 2, 2)])
    with pytest.raises(ArgumentTypeError, match="strategy must be") as ei:
        portgemm.gemm_vbatched(A, B, C, backend="numpy", strategy=bad)
    assert isinstance(ei.value, TypeError) and np.isnan(C[0]).all()
    with pytest.raises(ArgumentTypeError):
        portgemm.plan([(2, 2, 2)], strategy=bad)


def test_a_backend_object_is_used_as_it_is():
    be = get_backend("numpy")
    assert get_backend(be) is be
    A, B, C = batch([(3, 4, 5)])
    portgemm.gemm_vbatched(A, B, C, backend=be)
    np.testing.assert_allclose(C[0], ref(A, B, [1.0])[0], rtol=1e-5)


# ---- array types refused up front ------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")   # np.matrix
@pytest.mark.parametrize("operand, make", [
    ("C", lambda x: np.ma.masked_array(x, mask=np.zeros(x.shape, bool))),
    ("A", np.asmatrix), ("B", lambda x: np.ma.masked_greater(x, 0.4))])
def test_ndarray_subclasses_are_refused_and_nothing_is_written(operand, make):
    A, B, C = batch([(4, 5, 6)] * 4)
    ops = {"A": A, "B": B, "C": C}
    ops[operand][3] = make(ops[operand][3])   # the last GEMM: earlier ones must stay unwritten
    with pytest.raises(portgemm.DtypeError, match=f"GEMM 3: {operand}: .*subclass") as ei:
        portgemm.gemm_vbatched(A, B, C, backend="numpy")
    assert isinstance(ei.value, TypeError)
    assert all(np.isnan(np.asarray(c)).all() for c in C)


def test_memmap_is_an_ordinary_array(tmp_path):
    A, B, C = batch([(4, 5, 6)])
    mm = np.memmap(tmp_path / "c.bin", dtype=F32, mode="w+", shape=(4, 5))
    portgemm.gemm_vbatched(A, B, [mm], backend="numpy")
    np.testing.assert_allclose(mm, ref(A, B, [1.0])[0], rtol=1e-5)


# ---- 3-D stacks ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_stacks_equal_lists_and_the_reference(dtype, ta, tb):
    rng = np.random.default_rng(3)
    b, m, n, k = 6, 9, 7, 5
    a = (rng.random((b, k, m) if ta else (b, m, k)) - 0.5).astype(dtype)
    bb = (rng.random((b, n, k) if tb else (b, k, n)) - 0.5).astype(dtype)
    c0 = (rng.random((b, m, n)) - 0.5).astype(dtype)
    alpha = rng.uniform(-2, 2, b)
    beta = np.where(np.arange(b) % 2, 0.5, 0.0)
    c = c0.copy()
    c[beta == 0] = np.nan
    want = np.stack(ref(list(a), list(bb), alpha, ta, tb)) + beta[:, None, None] * np.where(
        np.isnan(c), 0, c0)
    lists = [x.copy() for x in c]
    kw = dict(alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend="numpy")
    portgemm.gemm_vbatched(a, bb, c, **kw)
    portgemm.gemm_vbatched(list(a), list(bb), lists, **kw)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(c, want, rtol=tol, atol=tol)
    np.testing.assert_array_equal(c, np.stack(lists))


def test_strided_stacks_and_mixed_containers():
    rng = np.random.default_rng(4)
    big = (rng.random((10, 8, 12)) - 0.5).astype(F32)
    a = big[::2, 1:7, 2:11]          # (5, 6, 9): batch stride 2 matrices, padded rows
    bb = [(rng.random((9, 4)) - 0.5).astype(F32) for _ in range(5)]
    c = np.full((4, 5, 6), np.nan, F32).transpose(1, 2, 0)[:, :, :4]   # inner stride != 1
    with pytest.raises(LayoutError, match="GEMM 0: C has inner"):
        portgemm.gemm_vbatched(a, bb, c, backend="numpy")
    c = np.full((5, 6, 4), np.nan, F32)
    portgemm.gemm_vbatched(a, bb, c, backend="numpy")
    np.testing.assert_allclose(c, np.stack(ref(list(a), bb, [1.0] * 5)), rtol=1e-5, atol=1e-6)
    batch_ = validate(a, bb, c)
    assert batch_.A is a and batch_.ld[0, 0] == 12


def test_stack_with_a_zero_batch_stride_is_legal_for_a_not_for_c():
    x = np.ones((1, 4, 3), F32)
    a = np.broadcast_to(x, (5, 4, 3))                 # one A for every GEMM: legal
    c = np.zeros((5, 4, 2), F32)
    portgemm.gemm_vbatched(a, np.ones((5, 3, 2), F32), c, backend="numpy")
    assert (c == 3).all()
    cz = np.lib.stride_tricks.as_strided(np.zeros((4, 2), F32), (5, 4, 2), (0, 8, 4))
    with pytest.raises(LayoutError, match="C overlaps C"):
        portgemm.gemm_vbatched(a, np.ones((5, 3, 2), F32), cz, backend="numpy")


def test_stack_count_and_dimension_errors():
    with pytest.raises(portgemm.ShapeMismatch, match="hold 3, 2 and 3"):
        validate(np.ones((3, 2, 2), F32), np.ones((2, 2, 2), F32), np.ones((3, 2, 2), F32))
    with pytest.raises(portgemm.ShapeMismatch, match="GEMM 0: inner"):
        validate(np.ones((3, 2, 4), F32), np.ones((3, 2, 2), F32), np.ones((3, 2, 2), F32))
    with pytest.raises(portgemm.DtypeError, match="GEMM 0: A: .*MaskedArray"):
        validate(np.ma.ones((3, 2, 2), F32), np.ones((3, 2, 2), F32), np.ones((3, 2, 2), F32))


# ---- column-major data -----------------------------------------------------------------------

@pytest.mark.parametrize("operand", "AB")
def test_column_major_a_or_b_hint_flips_its_flag(operand):
    A, B, C = batch([(5, 6, 7)])
    X = A if operand == "A" else B
    X[0] = np.asfortranarray(X[0])
    with pytest.raises(LayoutError, match=f"pass {operand}.T and flip trans_{operand.lower()}"):
        portgemm.gemm_vbatched(A, B, C, backend="numpy")
    flags = {"trans_a": operand == "A", "trans_b": operand == "B"}
    X[0] = X[0].T   # the hint, followed
    portgemm.gemm_vbatched(A, B, C, backend="numpy", **flags)
    np.testing.assert_allclose(C[0], ref([A[0].T if operand == "A" else A[0]],
                                         [B[0].T if operand == "B" else B[0]], [1.0])[0],
                               rtol=1e-5)


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True)])
def test_column_major_c_recipe_gives_the_product(ta, tb):
    A, B, _ = batch([(5, 6, 7)], ta=ta, tb=tb)
    C = np.full((5, 6), np.nan, F32, order="F")
    with pytest.raises(LayoutError, match=r"C\^T = op\(B\)\^T op\(A\)\^T") as ei:
        portgemm.gemm_vbatched(A, B, [C], trans_a=ta, trans_b=tb, backend="numpy")
    assert "pass C.T as C, B as A with trans_a = not trans_b" in str(ei.value)
    # the recipe, followed literally
    portgemm.gemm_vbatched(B, A, [C.T], trans_a=not tb, trans_b=not ta, backend="numpy")
    np.testing.assert_allclose(C, ref(A, B, [1.0], ta, tb)[0], rtol=1e-5)


# ---- aliased outputs, every entry point -------------------------------------------------------

def _aliased_cases():
    buf = np.full((8, 16), np.nan, F32)
    same = np.full((8, 8), np.nan, F32)
    yield [same, same, np.full((8, 8), np.nan, F32)]                 # the same C twice
    yield [buf[:, :8], buf[:, 4:12], np.full((8, 8), np.nan, F32)]   # sharing columns
    yield [buf[:, 0:8:1], buf[1:, 8:16][:7].copy(), buf[::1, :8]]    # equal views


@pytest.mark.parametrize("case", range(3))
@pytest.mark.parametrize("entry", ["gemm_vbatched", "run", "bind"])
def test_aliased_outputs_are_refused_on_every_entry_point(case, entry):
    C = list(_aliased_cases())[case]
    shapes = [(c.shape[0], c.shape[1], 4) for c in C]
    A, B, _ = batch(shapes)
    before = [c.copy() for c in C]
    p = portgemm.plan(shapes, dtype="float32")
    call = {"gemm_vbatched": lambda: portgemm.gemm_vbatched(A, B, C, backend="numpy"),
            "run": lambda: p.run(A, B, C, backend="numpy"),
            "bind": lambda: p.bind(A, B, C, backend="numpy")}[entry]
    with pytest.raises(LayoutError, match="C overlaps C of GEMM"):
        call()
    for x, y in zip(before, C):
        np.testing.assert_array_equal(x, y)


# ---- the fast path describes batches exactly as the per-array path ----------------------------

@pytest.mark.parametrize("seed", range(5))
def test_gathered_and_per_array_paths_agree(seed):
    rng = np.random.default_rng(seed)
    shapes = [tuple(int(v) for v in s) for s in rng.integers(0, 20, (30, 3))]
    A, B, C = batch(shapes, seed=seed)
    A = [np.pad(a, ((0, 0), (0, 3)))[:, :a.shape[1]] if i % 3 == 0 else a
         for i, a in enumerate(A)]   # some padded row strides
    fast = validate(A, B, C, 1.0, 0.5, False, False, info, ("cpu",))
    slow = validate(A, B, C, 1.0, 0.5, False, False, info, ())
    for f in ("shapes", "ptr", "ld", "alpha", "beta"):
        np.testing.assert_array_equal(getattr(fast, f), getattr(slow, f))
    assert (fast.dtype, fast.device, fast.size) == (slow.dtype, slow.device, slow.size)


# ---- exact overlap check against brute force --------------------------------------------------

ROWS, COLS = 16, 24


@st.composite
def slices(draw):
    rows = draw(st.integers(1, 5))
    cols = draw(st.integers(1, 8))
    step = draw(st.integers(1, 3))
    r0 = draw(st.integers(0, ROWS - 1 - step * (rows - 1)))
    c0 = draw(st.integers(0, COLS - cols))
    return r0, c0, rows, cols, step


@settings(max_examples=300, deadline=None)
@given(st.lists(slices(), min_size=1, max_size=6))
def test_overlap_check_is_exact(cs):
    """Interleaved row/column slices of one buffer as C (A and B elsewhere): rejected
    exactly when two C share an element."""
    buf = np.zeros((ROWS, COLS), F32)
    C = [buf[r0:r0 + step * (rows - 1) + 1:step, c0:c0 + cols] for r0, c0, rows, cols, step in cs]
    cells = [{(r0 + step * i, c0 + j) for i in range(rows) for j in range(cols)}
             for r0, c0, rows, cols, step in cs]
    clash = any(cells[i] & cells[j] for i in range(len(cs)) for j in range(i))
    A = [np.zeros((c.shape[0], 2), F32) for c in C]
    B = [np.zeros((2, c.shape[1]), F32) for c in C]
    if clash:
        with pytest.raises(LayoutError, match="C overlaps C"):
            validate(A, B, C)
    else:
        validate(A, B, C)


# ---- layering --------------------------------------------------------------------------------

def _imports(path):
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_plan_and_lower_layers_do_not_import_the_api():
    for path in [ROOT / "plan.py", ROOT / "problem.py", ROOT / "arrays.py",
                 *(ROOT / "planner").glob("*.py"), *(ROOT / "backends").glob("*.py")]:
        assert not {m for m in _imports(path) if m.endswith("api")}, path


def test_plan_methods_are_the_api_functions():
    assert portgemm.Plan.run is portgemm.run and portgemm.Plan.bind is portgemm.bind


def test_host_pointers_read_from_the_array_struct(tmp_path):
    from portgemm.arrays import _host_pointers
    base = np.arange(60, dtype=np.float64).reshape(6, 10)
    mm = np.memmap(tmp_path / "m.bin", dtype=F32, mode="w+", shape=(3, 3))
    xs = [base, base[2:, 3:], base[::-1], base[:, ::-2], base[5:5], np.zeros((0, 3), F32),
          np.broadcast_to(base[:1], (4, 10)), mm, base.T]
    assert _host_pointers(xs) == [x.ctypes.data for x in xs]


def test_interface_only_objects_are_not_stacks():
    class Dev:   # __cuda_array_interface__ and nothing else: no shape, no indexing
        def __init__(self, shape):
            self.__cuda_array_interface__ = dict(shape=shape, typestr="<f4", strides=None,
                                                 data=(0x7000_0000_0000, False), version=3)
    for shape in [(2, 3, 3), (3, 3)]:
        with pytest.raises(portgemm.DtypeError, match="A must be a list") as ei:
            validate(Dev(shape), [np.ones((3, 3), F32)] * 2, [np.ones((3, 3), F32)] * 2)
        assert isinstance(ei.value, TypeError)


# ---- the common-case shortcuts of validation agree with the general checks ---------------------

@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.data())
def test_layout_shortcut_agrees_with_the_general_checks(n, data):
    """_layout_2x2 (every matrix 2+ x 2+) either gives _layout_general's spans or defers
    to it (which then raises); _disjoint never calls overlapping spans disjoint."""
    from portgemm.problem import MAX_SPAN, _disjoint, _layout_2x2, _layout_general
    ints = lambda lo, hi: data.draw(st.lists(st.integers(lo, hi), min_size=3 * n,  # noqa: E731
                                             max_size=3 * n))
    shp = np.array([ints(2, 9), ints(2, 9)], np.int64).T
    st_ = np.array([ints(-2, 12), ints(0, 2)], np.int64).T
    if data.draw(st.booleans()):
        st_[:, 0] = 10**10 if data.draw(st.booleans()) else shp[:, 1]
    ptr = np.array(ints(0, 400), np.int64) * data.draw(st.sampled_from([1, 4]))
    ro = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    fast = _layout_2x2(shp, st_, ptr, ro, 4, n)
    try:
        ld, lo, hi = _layout_general(shp, st_, ptr, ro, 4, n)
    except LayoutError:
        assert fast is None
        return
    assert fast is not None
    np.testing.assert_array_equal(fast, hi)
    np.testing.assert_array_equal(ld, st_[:, 0])
    assert (hi - lo).max() <= MAX_SPAN * 4
    shared = any(max(lo[i], lo[j]) < min(hi[i], hi[j])
                 for i in range(3 * n) for j in range(i))
    assert not (shared and _disjoint(lo, hi))
    assert shared or _disjoint(lo, hi)
