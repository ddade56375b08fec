"""The packed API on the NumPy backend: gemm_grouped (ragged M, host offsets and the
emulated device-offsets launch) and gemm_grouped_general, against the lists API and a
float64 reference over NaN-poisoned outputs; typed errors that name the group and leave
C untouched; the device-offsets launch's blocks cover any split exactly once (the
kernel's own slot lookup compiled for the host, against its emulation)."""
import itertools

import numpy as np
import pytest

import portgemm
from portgemm.backends.ragged import RaggedJob, emulate_slots, gemm_args
from portgemm.errors import DtypeError, LayoutError, ShapeMismatch, ValidationError
from portgemm.kernels.render import DEVICE_TILE_DTYPE as DEVICE_TILE
from portgemm.kernels.variants import TileExpand, Variant, catalogue_variants
from portgemm.tiles import ZHANG2025
from test_cuda_backend_fake import backend as cuda_fake_backend  # noqa: F401  (a fixture)
from test_hip_backend_fake import FakeHip
from test_hip_backend_fake import backend as hip_backend  # noqa: F401  (a fixture)

TOL = {np.float32: 2e-5, np.float64: 1e-12}
TRANS = list(itertools.product([False, True], repeat=2))
SEEDS = itertools.count(7000)


def scalars(rng, G, per_group):
    if not per_group:
        return 1.25, 0.0
    alpha = rng.uniform(-2, 2, G)
    beta = np.where(rng.random(G) < 0.5, 0.0, rng.uniform(-2, 2, G))
    return alpha, beta


def close(got, ref, dtype):
    got = np.asarray(got, np.float64)
    assert np.isfinite(got).all(), "NaN or inf where a result belongs"
    scale = max(1.0, float(np.abs(ref).max(initial=0.0)))
    assert np.abs(got - ref).max(initial=0.0) <= TOL[dtype] * scale * 10


# ---- ragged M ------------------------------------------------------------------------------

def ragged_operands(rng, sizes, K, N, dtype, ta, tb, spare=3):
    """A, B, C (C NaN where beta is 0 or past the last group) and offs."""
    G = len(sizes)
    offs = np.cumsum(sizes).astype(np.int32)
    T = int(offs[-1]) + spare if G else spare
    A = (rng.random((K, T) if ta else (T, K)) - 0.5).astype(dtype)
    B = (rng.random((G, N, K) if tb else (G, K, N)) - 0.5).astype(dtype)
    C = (rng.random((T, N)) - 0.5).astype(dtype)
    return A, B, C, offs


def ragged_reference(A, B, C, offs, alpha, beta, ta, tb):
    G = len(offs)
    alpha, beta = np.broadcast_to(alpha, (G,)), np.broadcast_to(beta, (G,))
    opA = (A.T if ta else A).astype(np.float64)
    out, start = C.astype(np.float64), 0
    for g, end in enumerate(offs):
        b = (B[g].T if tb else B[g]).astype(np.float64)
        r = alpha[g] * opA[start:end] @ b
        if beta[g] != 0:
            r += beta[g] * C[start:end]
        out[start:end] = r
        start = end
    return out


def poison(C, offs, beta):
    """NaN into every row whose beta is 0 and every row past the last group."""
    G, start = len(offs), 0
    beta = np.broadcast_to(beta, (G,))
    for g, end in enumerate(offs):
        if beta[g] == 0:
            C[start:end] = np.nan
        start = end
    C[start:] = np.nan


@pytest.mark.parametrize("device_offs", [False, True])
@pytest.mark.parametrize("per_group", [False, True])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ragged_matches_lists_and_reference(dtype, trans, per_group, device_offs):
    ta, tb = trans
    rng = np.random.default_rng(next(SEEDS))
    sizes = [5, 0, 70, 1, 33, 0, 16, 129]
    K, N = 37, 50
    A, B, C, offs = ragged_operands(rng, sizes, K, N, dtype, ta, tb)
    alpha, beta = scalars(rng, len(sizes), per_group)
    poison(C, offs, beta)
    ref = ragged_reference(A, B, C, offs, alpha, beta, ta, tb)
    C_lists = C.copy()

    out = portgemm.gemm_grouped(A, B, C, offs, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb,
                                backend="numpy", device_offs=device_offs)
    assert out is C
    end = int(offs[-1])
    close(C[:end], ref[:end], dtype)
    assert np.isnan(C[end:]).all(), "rows past offs[-1] were written"

    starts = np.concatenate([[0], offs[:-1]])
    views = [(A[:, s:e] if ta else A[s:e]) for s, e in zip(starts, offs)]
    portgemm.gemm_vbatched(views, list(B), [C_lists[s:e] for s, e in zip(starts, offs)],
                           alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend="numpy")
    close(C[:end], C_lists[:end].astype(np.float64), dtype)


@pytest.mark.parametrize("device_offs", [False, True])
def test_ragged_empty_groups_and_edges(device_offs):
    rng = np.random.default_rng(3)
    kw = dict(backend="numpy", device_offs=device_offs)
    # every group empty: nothing is written
    A, B, C, offs = ragged_operands(rng, [0, 0, 0], 4, 5, np.float32, False, False)
    C[...] = np.nan
    portgemm.gemm_grouped(A, B, C, offs, **kw)
    assert np.isnan(C).all()
    # K = 0: C = beta * C (and beta = 0 never reads C)
    A, B, C, offs = ragged_operands(rng, [3, 0, 4], 0, 5, np.float64, False, False)
    C0 = C.copy()
    portgemm.gemm_grouped(A, B, C, offs, beta=[2.0, 1.0, 0.5], **kw)
    np.testing.assert_array_equal(C[:3], 2.0 * C0[:3])
    np.testing.assert_array_equal(C[3:7], 0.5 * C0[3:7])
    np.testing.assert_array_equal(C[7:], C0[7:])
    C[:7] = np.nan
    portgemm.gemm_grouped(A, B, C, offs, beta=0.0, **kw)
    assert (C[:7] == 0).all()
    # N = 0 and no groups at all: no-ops
    A, B, C, offs = ragged_operands(rng, [3, 4], 6, 0, np.float32, False, False)
    portgemm.gemm_grouped(A, B, C, offs, **kw)
    A, B, C, _ = ragged_operands(rng, [], 6, 2, np.float32, False, False)
    assert portgemm.gemm_grouped(A, B, C, np.zeros(0, np.int32), **kw) is C


def test_ragged_offsets_may_be_a_list_and_alpha_zero_never_reads_a():
    rng = np.random.default_rng(4)
    A, B, C, offs = ragged_operands(rng, [2, 3], 4, 3, np.float32, False, False)
    A[...] = np.nan
    portgemm.gemm_grouped(A, B, C, offs.tolist(), alpha=0.0, beta=0.0, backend="numpy")
    assert (C[:5] == 0).all()


# ---- general (MAGMA vbatched) form ---------------------------------------------------------

def general_operands(rng, sizes, dtype, ta, tb, pad=3):
    """Flat buffers with every matrix at its own offset, rows padded by ``pad``."""
    stored = {"A": [(k, m) if ta else (m, k) for m, n, k in sizes],
              "B": [(n, k) if tb else (k, n) for m, n, k in sizes],
              "C": [(m, n) for m, n, k in sizes]}
    bufs, offs, lds, mats = {}, {}, {}, {}
    for name, shapes in stored.items():
        ld = [c + pad for r, c in shapes]
        length = [r * l for (r, c), l in zip(shapes, ld)]
        off = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64) + 1
        buf = (rng.random(int(off[-1] + length[-1]) + 2) - 0.5).astype(dtype)
        bufs[name], offs[name], lds[name] = buf, off, np.array(ld)
        mats[name] = [np.lib.stride_tricks.as_strided(buf[o:], s, (l * buf.itemsize, buf.itemsize))
                      for o, s, l in zip(off, shapes, ld)]
    return bufs, offs, lds, mats


@pytest.mark.parametrize("per_group", [False, True])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_general_matches_lists_and_reference(dtype, trans, per_group):
    ta, tb = trans
    rng = np.random.default_rng(next(SEEDS))
    sizes = np.array([[5, 7, 3], [0, 4, 2], [64, 33, 17], [1, 1, 1], [20, 0, 5], [9, 31, 0]])
    G = len(sizes)
    bufs, offs, lds, mats = general_operands(rng, sizes, dtype, ta, tb)
    alpha, beta = scalars(rng, G, per_group)
    b = np.broadcast_to(beta, (G,))
    for g in range(G):
        if b[g] == 0:
            mats["C"][g][...] = np.nan
    al = np.broadcast_to(alpha, (G,))
    ref = []
    for g in range(G):
        a = mats["A"][g].astype(np.float64)
        bb = mats["B"][g].astype(np.float64)
        r = al[g] * (a.T if ta else a) @ (bb.T if tb else bb)
        ref.append(r + b[g] * mats["C"][g] if b[g] != 0 else r)
    C_lists = bufs["C"].copy()
    lists_c = [np.lib.stride_tricks.as_strided(C_lists[o:], c.shape, c.strides)
               for o, c in zip(offs["C"], mats["C"])]
    untouched = np.ones(bufs["C"].size, bool)
    for o, c in zip(offs["C"], mats["C"]):
        for r in range(c.shape[0]):
            untouched[o + r * c.strides[0] // c.itemsize:][:c.shape[1]] = False
    before = bufs["C"][untouched].copy()

    out = portgemm.gemm_grouped_general(
        bufs["A"], bufs["B"], bufs["C"], sizes, offs["A"], offs["B"], offs["C"],
        lds["A"], lds["B"], lds["C"], alpha=alpha, beta=beta, trans_a=ta, trans_b=tb,
        backend="numpy")
    assert out is bufs["C"]
    for g in range(G):
        close(mats["C"][g], ref[g], dtype)
    np.testing.assert_array_equal(bufs["C"][untouched], before)  # padding and gaps

    portgemm.gemm_vbatched(mats["A"], mats["B"], lists_c, alpha=alpha, beta=beta,
                           trans_a=ta, trans_b=tb, backend="numpy")
    for g in range(G):
        close(mats["C"][g], lists_c[g].astype(np.float64), dtype)


def test_general_scalar_leading_dimensions():
    rng = np.random.default_rng(5)
    A, B = rng.random(40).astype(np.float32), rng.random(40).astype(np.float32)
    C = np.full(40, np.nan, np.float32)
    sizes = [[2, 3, 4], [2, 3, 4]]
    portgemm.gemm_grouped_general(A, B, C, sizes, [0, 8], [0, 12], [0, 6], 4, 3, 3,
                                  backend="numpy")
    for g, (ao, bo, co) in enumerate([(0, 0, 0), (8, 12, 6)]):
        ref = A[ao:ao + 8].reshape(2, 4).astype(np.float64) @ B[bo:bo + 12].reshape(4, 3)
        close(C[co:co + 6].reshape(2, 3), ref, np.float32)
    assert np.isnan(C[12:]).all()


# ---- errors: typed, naming the group, nothing written ---------------------------------------

def expect(cls, group, fn, *args, match=None, **kw):
    with pytest.raises(cls, match=match) as info:
        fn(*args, backend="numpy", **kw)
    e = info.value
    assert isinstance(e, (ValueError, TypeError)) and isinstance(e, portgemm.PortgemmError)
    if group is not None:
        assert e.gemm == group and str(e).startswith(f"group {group}:"), str(e)
    return e


def ragged_fixture():
    rng = np.random.default_rng(11)
    A, B, C, offs = ragged_operands(rng, [3, 5, 2, 4], 6, 7, np.float32, False, False)
    C[...] = 42.0
    return A, B, C, offs


@pytest.mark.parametrize("device_offs", [False, True])
def test_ragged_input_errors(device_offs):
    A, B, C, offs = ragged_fixture()
    f = portgemm.gemm_grouped
    kw = {"device_offs": device_offs}
    expect(ShapeMismatch, None, f, A, B, C, offs[:3], **kw)                     # wrong length
    expect(ShapeMismatch, None, f, A, B, C, offs.reshape(2, 2), **kw)
    expect(DtypeError, None, f, A, B, C, offs.astype(np.float32), **kw)
    expect(ShapeMismatch, None, f, A[:, :5], B, C, offs, **kw)                  # K differs
    expect(ShapeMismatch, None, f, A, B, C[:-1], offs, **kw)                    # rows differ
    expect(DtypeError, None, f, A.astype(np.float64), B, C, offs, **kw)         # mixed dtypes
    expect(DtypeError, None, f, A.astype(np.int32), B.astype(np.int32), C.astype(np.int32),
           offs, **kw)
    expect(ValidationError, None, f, A, B[0], C, offs, **kw)                    # B not 3-D
    expect(ShapeMismatch, None, f, A, B, C, offs, beta=[0.0] * 3, **kw)
    expect(ValidationError, 2, f, A, B, C, offs, alpha=[1.0, 1.0, np.nan, 1.0], **kw)
    ro = C.copy()
    ro.flags.writeable = False
    expect(LayoutError, None if device_offs else 0, f, A, B, ro, offs, **kw)

    class OnDevice:  # a device array handed to the NumPy backend
        __cuda_array_interface__ = {"shape": C.shape, "typestr": "<f4", "data": (0, False),
                                    "version": 3}
    expect(DtypeError, None, f, A, B, OnDevice(), offs, match="takes host arrays", **kw)
    assert (C == 42.0).all()


def test_ragged_offset_value_errors_name_the_group():
    A, B, C, offs = ragged_fixture()
    f = portgemm.gemm_grouped
    bad = offs.copy()
    bad[2] = bad[1] - 1
    expect(ValidationError, 2, f, A, B, C, bad, match="non-decreasing")
    bad = offs.copy()
    bad[0] = -1
    expect(ValidationError, 0, f, A, B, C, bad, match="negative")
    bad = offs.copy()
    bad[3] = A.shape[0] + 1
    expect(ValidationError, 3, f, A, B, C, bad, match="past")
    assert (C == 42.0).all()


@pytest.mark.parametrize("device_offs", [False, True])
def test_ragged_c_overlapping_a_or_b_is_rejected(device_offs):
    A, B, C, offs = ragged_fixture()
    buf = np.zeros((A.shape[0], 13), np.float32)
    A2, C2 = buf[:, :6], buf[:, 6:]   # interleaved columns of one buffer: legal
    portgemm.gemm_grouped(A2, B, C2, offs, backend="numpy")
    if device_offs:   # groups unknown on the host: C may share no span with A or B
        expect(LayoutError, None, portgemm.gemm_grouped, A2, B, C2, offs, device_offs=True)
    C3 = buf[:, 5:12]   # shares column 5 with A
    C3_before = C3.copy()
    e = expect(LayoutError, None if device_offs else 0, portgemm.gemm_grouped, A2, B, C3, offs,
               device_offs=device_offs)
    assert "overlaps" in str(e)
    np.testing.assert_array_equal(C3, C3_before)
    Bbuf = np.zeros((4 * 6 * 7 + 100,), np.float32)
    Bv = Bbuf[:4 * 42].reshape(4, 6, 7)
    Cv = Bbuf[100:100 + A.shape[0] * 7].reshape(-1, 7)   # inside B[2] and B[3]
    expect(LayoutError, None if device_offs else 1, portgemm.gemm_grouped, A, Bv, Cv, offs,
           device_offs=device_offs)


def general_fixture():
    rng = np.random.default_rng(12)
    sizes = np.array([[3, 4, 5], [2, 2, 2], [4, 3, 1]])
    bufs, offs, lds, _ = general_operands(rng, sizes, np.float64, False, False)
    bufs["C"][...] = 42.0
    return bufs, offs, lds, sizes


def call_general(bufs_, offs_, lds_, sizes_, **kw):
    """gemm_grouped_general on the fixture, with the arguments named in kw replaced."""
    args = [bufs_["A"], bufs_["B"], bufs_["C"], sizes_, offs_["A"], offs_["B"], offs_["C"],
            lds_["A"], lds_["B"], lds_["C"]]
    for k in list(kw):
        if k in ("A", "B", "C", "sizes", "a_off", "b_off", "c_off", "lda", "ldb", "ldc"):
            i = ["A", "B", "C", "sizes", "a_off", "b_off", "c_off", "lda", "ldb", "ldc"].index(k)
            args[i] = kw.pop(k)
    return portgemm.gemm_grouped_general(*args, **kw)


def test_general_input_errors():
    bufs, offs, lds, sizes = general_fixture()
    c = bufs["C"]
    f = lambda backend, **kw: call_general(bufs, offs, lds, sizes, backend=backend, **kw)
    expect(ShapeMismatch, None, f, sizes=sizes[:, :2])                # sizes (G, 2)
    expect(ShapeMismatch, None, f, sizes=sizes.ravel())
    expect(DtypeError, None, f, sizes=sizes.astype(float))
    neg = sizes.copy()
    neg[1, 2] = -1
    expect(ValidationError, 1, f, sizes=neg)
    expect(ShapeMismatch, None, f, a_off=offs["A"][:2])               # offsets per group
    o = offs["B"].copy()
    o[2] = -4
    expect(ValidationError, 2, f, b_off=o, match="negative")
    o = offs["A"].copy()
    o[1] = bufs["A"].size - 3                                          # past the buffer
    expect(ValidationError, 1, f, a_off=o, match="past")
    ld = lds["C"].copy()
    ld[2] = 2                                                          # < 3 columns of C_2
    expect(LayoutError, 2, f, ldc=ld)
    expect(DtypeError, None, f, lda=lds["A"].astype(float))
    expect(ShapeMismatch, None, f, ldb=[5, 5])
    expect(DtypeError, None, f, B=bufs["B"].astype(np.float32))       # mixed dtypes
    expect(ValidationError, None, f, A=bufs["A"].reshape(1, -1))      # not a flat buffer
    expect(LayoutError, None, f, A=bufs["A"][::2])                    # not contiguous
    expect(ShapeMismatch, None, f, beta=[0.0, 1.0])
    assert (c == 42.0).all()


def test_general_overlapping_outputs_are_rejected():
    bufs, offs, lds, sizes = general_fixture()
    c_off = offs["C"].copy()
    c_off[2] = c_off[1] + 1           # C_2 starts inside C_1
    e = expect(LayoutError, 1, call_general, bufs, offs, lds, sizes, c_off=c_off)
    assert "group 2" in str(e) and "overlaps" in str(e)
    e = expect(LayoutError, None, call_general, bufs, offs, lds, sizes, C=bufs["A"])
    assert "overlaps" in str(e)
    assert (bufs["C"] == 42.0).all()
    # interleaved rows that share no element are legal: C_1 in C_0's row padding
    c_off = offs["C"].copy()
    c_off[1] = c_off[0] + 4           # C_0 rows are 4 wide with ld 7; C_1 2 wide, ld 7
    ld = lds["C"].copy()
    ld[1] = ld[0]
    call_general(bufs, offs, lds, sizes, c_off=c_off, ldc=ld, backend="numpy")


# ---- the device-offsets launch: which group and tile each block runs -------------------------

def job_for(kind, offs, rows, N):
    return RaggedJob(kind, np.dtype(np.float32), False, False, len(offs), rows, N, 3, 0,
                     0, 0, 0, 3, N, N, 3, N, 1.0, 0.0, None, None)


@pytest.mark.parametrize("kind", [ZHANG2025[0], ZHANG2025[3], ZHANG2025[4]])
def test_blocks_cover_every_split_exactly_once(kind):
    rng = np.random.default_rng(21)
    for _ in range(300):
        G = int(rng.integers(1, 12))
        rows = int(rng.integers(0, 300))
        cuts = np.sort(rng.integers(0, rows + 1, G))
        if rng.random() < 0.3:
            cuts[rng.random(G) < 0.5] = cuts[0]   # many empty groups
            cuts = np.sort(cuts)
        N = int(rng.integers(1, 150))
        job = job_for(kind, cuts.astype(np.int32), rows, N)
        starts, M, slots = emulate_slots(job, cuts)
        assert slots.size == job.n_tiles == (rows // kind.tm + G) * -(-N // kind.tn)
        np.testing.assert_array_equal(M, np.diff(np.concatenate([[0], cuts])))
        real = slots[slots["gemm"] >= 0]
        got = sorted(zip(real["gemm"].tolist(), real["m0"].tolist(), real["n0"].tolist()))
        want = sorted((g, m0, n0) for g in range(G) for m0 in range(0, int(M[g]), kind.tm)
                      for n0 in range(0, N, kind.tn))
        assert got == want


def test_bad_offsets_stay_inside_the_buffers():
    rng = np.random.default_rng(22)
    kind = ZHANG2025[1]
    for _ in range(300):
        G, rows, N = int(rng.integers(1, 10)), int(rng.integers(0, 200)), 40
        offs = rng.integers(-50, rows + 80, G).astype(np.int32)   # any order, out of range
        starts, M, slots = emulate_slots(job_for(kind, offs, rows, N), offs)
        assert ((starts >= 0) & (M >= 0) & (starts + M <= rows)).all()
        real = slots[slots["gemm"] >= 0]
        g = real["gemm"]
        assert ((g < G) & (real["m0"] >= 0) & (real["m0"] < M[g])).all()


def _ragged_params():
    """The ragged entry point's parameter list in vbatched_gemm.cu, as ctypes kinds."""
    import re

    from portgemm.kernels.render import SOURCE_FILE
    src = SOURCE_FILE.read_text()
    body = src[src.index("// Ragged M, device offsets (pg_ragged_slot)"):]
    params = re.search(r"PG_NAME\(([^)]*)\)", body).group(1).split(",")

    def kind(p):
        p = " ".join(p.split())
        if "*" in p:
            return "p"
        return {"int": "i", "long long": "q", "double": "d"}[p.rsplit(" ", 1)[0]]
    return [kind(p) for p in params]


def test_ragged_arguments_match_the_kernel_signature():
    """backends/ragged.gemm_args lists the entry point's parameters in the order and with
    the types of vbatched_gemm.cu (a mismatch would only show on a GPU)."""
    job = job_for(ZHANG2025[0], np.zeros(2, np.int32), 10, 5)
    assert [k for k, _ in gemm_args(job, 3, 4)] == _ragged_params()


HOST_PRELUDE = """
#include <algorithm>
using std::min; using std::max;
struct PgDim { unsigned x = 0, y = 0, z = 0; };
static PgDim blockIdx, blockDim, threadIdx;
extern "C" void pg_set_thread(unsigned b, unsigned t, unsigned n)
{ blockIdx.x = b; threadIdx.x = t; blockDim.x = n; }
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__
#include <cmath>
using std::fma;
// compat.h's warp-MMA emulation must compile in this host build (it never runs here)
template <class T> T __shfl_sync(unsigned, T v, int, int) { return v; }
// and its 16-bit storage types (compat.h PgHalf, PgBf16)
#include <cstring>
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
template <class T> T __ldg(const T* p) { return *p; }
"""

HOST_WRAPPER = """
extern "C" int pg_slot_on_host(
    const int* offs, int groups, int rows, int tm, int tn, int tiles_n, int slot,
    long long A, long long B, long long C, long long a_step, long long b_stride,
    int ldc, PgGemm* g, int* m0n0)
{
    return pg_ragged_slot(offs, groups, rows, tm, tn, tiles_n, slot, (const PG_T*)A,
                          (const PG_T*)B, (PG_T*)C, a_step, b_stride, 3, 5, ldc, 7, 9, 1.5,
                          0.5, nullptr, nullptr, *g, m0n0[0], m0n0[1]);
}
"""


@pytest.fixture(scope="module")
def host_slot(tmp_path_factory):
    """The kernel's own slot lookup (the PG_RAGGED section of vbatched_gemm.cu, with the
    descriptor struct) compiled for the host, so its logic runs block by block on any
    machine with a C++ compiler."""
    import ctypes
    import re
    import shutil
    import subprocess

    from portgemm.kernels.render import SOURCE_FILE
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    src = SOURCE_FILE.read_text()
    struct = re.search(r"struct PgGemm \{.*?\n\};\n", src, re.S).group(0)
    a = src.index("#if PG_RAGGED\n")
    section = src[a + len("#if PG_RAGGED\n"):src.index("#endif  // PG_RAGGED (slot lookup)")]
    out = tmp_path_factory.mktemp("ragged") / "slot.so"
    subprocess.run([cxx, "-std=c++17", "-O1", "-shared", "-fPIC", "-x", "c++", "-", "-o", str(out)],
                   input=(HOST_PRELUDE + "#define PG_T float\n" + struct + section
                          + HOST_WRAPPER).encode(), check=True)
    return ctypes.CDLL(str(out)).pg_slot_on_host


def test_slot_lookup_source_agrees_with_its_emulation(host_slot):
    import ctypes

    from portgemm.kernels.render import GEMM_DTYPE
    rng = np.random.default_rng(23)
    A0, B0, C0 = 1 << 20, 1 << 30, 1 << 40   # never read: only addresses are formed
    for trial in range(60):
        kind = ZHANG2025[int(rng.integers(len(ZHANG2025)))]
        G, rows, N = int(rng.integers(1, 9)), int(rng.integers(0, 120)), int(rng.integers(1, 90))
        if trial % 4 == 3:   # bad offsets too: both must still agree
            offs = rng.integers(-20, rows + 30, G).astype(np.int32)
        else:
            offs = np.sort(rng.integers(0, rows + 1, G)).astype(np.int32)
        job = job_for(kind, offs, rows, N)
        starts, M, want = emulate_slots(job, offs)
        g = np.zeros(1, GEMM_DTYPE)
        m0n0 = np.zeros(2, np.int32)
        for slot in range(job.n_tiles):
            real = host_slot(offs.ctypes.data_as(ctypes.c_void_p), G, rows, kind.tm, kind.tn,
                             job.tiles_n, slot, ctypes.c_longlong(A0), ctypes.c_longlong(B0),
                             ctypes.c_longlong(C0), ctypes.c_longlong(job.a_step),
                             ctypes.c_longlong(job.b_stride), job.ldc,
                             g.ctypes.data_as(ctypes.c_void_p),
                             m0n0.ctypes.data_as(ctypes.c_void_p))
            w = want[slot]
            assert bool(real) == (w["gemm"] >= 0), (trial, slot)
            if not real:
                continue
            grp = int(w["gemm"])
            assert (m0n0[0], m0n0[1]) == (w["m0"], w["n0"])
            assert g["M"][0] == M[grp] and (g["N"][0], g["K"][0]) == (7, 9)
            assert g["A"][0] == A0 + starts[grp] * job.a_step * 4
            assert g["B"][0] == B0 + grp * job.b_stride * 4
            assert g["C"][0] == C0 + starts[grp] * job.ldc * 4
            assert (g["alpha"][0], g["beta"][0]) == (1.5, 0.5)


def test_unreadable_sizes_and_offsets_are_type_errors():
    class NotHost:  # numpy cannot turn it into an array (as with a CuPy array)
        def __array__(self, *a, **k):
            raise TypeError("implicit conversion to a NumPy array is not allowed")

    bufs, offs, lds, sizes = general_fixture()
    expect(DtypeError, None, call_general, bufs, offs, lds, sizes, a_off=NotHost())
    expect(DtypeError, None, call_general, bufs, offs, lds, NotHost())
    A, B, C, o = ragged_fixture()
    expect(DtypeError, None, portgemm.gemm_grouped, A, B, C, NotHost())
    expect(DtypeError, None, portgemm.gemm_grouped, A, B, C, NotHost(), device_offs=True)
    assert (C == 42.0).all() and (bufs["C"] == 42.0).all()


# ---- repeated calls: the call cache -----------------------------------------------------------

def test_repeated_calls_revalidate_what_changed():
    """A repeated call skips validation only when nothing it checks changed: offsets by
    value (also changed in place), scalars, and each array's address, layout and
    writability."""
    rng = np.random.default_rng(31)
    A, B, C, offs = ragged_operands(rng, [3, 4, 5], 6, 7, np.float64, False, False)
    for _ in range(2):
        portgemm.gemm_grouped(A, B, C, offs, backend="numpy")
    bad = offs.copy()
    offs[1] = offs[0] - 1                         # in place: no longer non-decreasing
    before = C.copy()
    expect(ValidationError, 1, portgemm.gemm_grouped, A, B, C, offs)
    np.testing.assert_array_equal(C, before)
    offs[:] = bad
    ref = ragged_reference(A, B, C, offs, 2.5, 0.0, False, False)
    portgemm.gemm_grouped(A, B, C, offs, alpha=2.5, backend="numpy")   # new alpha: new result
    close(C[:12], ref[:12], np.float64)
    C.flags.writeable = False                     # same address, now read-only
    expect(LayoutError, 0, portgemm.gemm_grouped, A, B, C, offs, match="read-only")
    C.flags.writeable = True
    expect(ValidationError, 0, portgemm.gemm_grouped, A, B, C, offs, alpha=np.nan)
    sizes = np.array([[2, 3, 4], [2, 3, 4]])
    buf = np.zeros(40)
    for ldc in (3, 3, 2):                         # ldc < N only on the third call
        if ldc == 2:
            expect(LayoutError, None, portgemm.gemm_grouped_general, buf, buf.copy(),
                   np.zeros(12), sizes, [0, 8], [0, 12], [0, 6], 4, 3, ldc)
        else:
            portgemm.gemm_grouped_general(buf, buf.copy(), np.zeros(12), sizes, [0, 8],
                                          [0, 12], [0, 6], 4, 3, ldc, backend="numpy")


def test_the_call_cache_keeps_no_array_alive():
    import gc
    import weakref
    rng = np.random.default_rng(32)
    A, B, C, offs = ragged_operands(rng, [3, 4], 5, 6, np.float32, False, False)
    refs = [weakref.ref(x) for x in (A, B, C)]
    for device_offs in (False, True, False):
        portgemm.gemm_grouped(A, B, C, offs, backend="numpy", device_offs=device_offs)
    bufs, offs_, lds, sizes = general_fixture()
    refs += [weakref.ref(x) for x in bufs.values()]
    call_general(bufs, offs_, lds, sizes, backend="numpy")
    del A, B, C, bufs
    gc.collect()
    assert all(r() is None for r in refs)


# ---- the CUDA backend's packed paths on a fake CuPy (no GPU) -----------------------------------

_VARIANTS = {v.name: v for v in catalogue_variants(trans=TRANS)}


def _ragged_variants():
    from portgemm.grouped.ragged_kind import candidate_kinds
    return {v.name: v for v in (Variant((k,), dt, "ragged", ta, tb)
                                for dt in ("float32", "float64") for k in candidate_kinds(dt)
                                for ta, tb in TRANS)}


class FakeKernels:
    """The kernels of the packed calls on host memory posing as device memory: the
    ragged entry point of a device-offsets call (each block's group and tile by
    emulate_slots, from exactly the arguments a backend passed, then that tile by
    FakeHip's tile emulation; blocks past their group's rows do nothing) and the
    tile-list GEMM kernels of a host-offsets call's plan."""

    def __init__(self, variants):
        self.variants = {**variants, **_ragged_variants()}
        self.kinds = _ragged_params()

    def gemm(self, name, gx, g_p, t_p, b_p):
        from test_hip_backend_fake import _read

        from portgemm.kernels.render import GEMM_DTYPE
        v = self.variants[name]
        bp = _read(b_p, np.int32, gx + 1)
        tiles = _read(t_p, DEVICE_TILE, int(bp[gx]))
        g = _read(g_p, GEMM_DTYPE, int(tiles["gemm"].max(initial=-1)) + 1)
        for t in tiles:
            FakeHip._tile(g[t["gemm"]], v, v.kinds[t["kind"]], int(t["m0"]), int(t["n0"]))

    def run(self, name, blocks, threads, values):
        import types

        from test_hip_backend_fake import _read

        from portgemm.kernels.render import GEMM_DTYPE
        (offs_p, G, rows, tiles_n, a, b, c, a_step, b_stride, lda, ldb, ldc, N, K, alpha, beta,
         alphas_p, betas_p) = values
        v = self.variants[name]
        kind = v.kinds[0]
        assert threads == kind.threads and blocks == (rows // kind.tm + G) * tiles_n
        isz = 4 if v.dtype == "float32" else 8
        offs = _read(offs_p, np.int32, G)
        job = types.SimpleNamespace(groups=G, rows=rows, tiles_n=tiles_n, n_tiles=blocks,
                                    kind=kind)
        starts, M, slots = emulate_slots(job, offs)
        d = np.zeros(G, GEMM_DTYPE)
        d["A"], d["B"], d["C"] = (a + starts * a_step * isz, b + np.arange(G) * b_stride * isz,
                                  c + starts * ldc * isz)
        d["lda"], d["ldb"], d["ldc"], d["M"], d["N"], d["K"] = lda, ldb, ldc, M, N, K
        d["alpha"] = _read(alphas_p, np.float64, G) if alphas_p else alpha
        d["beta"] = _read(betas_p, np.float64, G) if betas_p else beta
        for t in slots:
            if t["gemm"] >= 0:
                FakeHip._tile(d[t["gemm"]], v, kind, int(t["m0"]), int(t["n0"]))


@pytest.fixture
def fake_cuda(cuda_fake_backend):
    """test_cuda_backend_fake's CUDA backend on a fake CuPy, its cuLaunchKernel replaced by
    one that decodes the encoded argument buffers and runs FakeKernels."""
    import ctypes
    be, names, kernels = cuda_fake_backend, {}, FakeKernels(_VARIANTS)
    ctype = {"p": ctypes.c_uint64, "i": ctypes.c_int32, "q": ctypes.c_int64, "d": ctypes.c_double}
    make, real = be.function, be._cu_launch

    def function(variant):
        fn = make(variant)
        names[fn.ptr] = variant.name
        return fn

    def launch(fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        name = names[fn]
        if name == TileExpand.name:   # a plan's tile-list expansion: the fake's own
            return real(fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra)
        be.launches.append((name, stream))
        if "_ragged_" in name:
            assert (gy, gz, by, bz, shmem) == (1, 1, 1, 1, 0)
            kernels.run(name, gx, bx, [ctype[k].from_address(params[i]).value
                                       for i, k in enumerate(kernels.kinds)])
        else:
            kernels.gemm(name, gx, *(ctypes.c_uint64.from_address(params[i]).value
                                     for i in range(3)))
        return 0
    be.function, be._cu_launch = function, launch
    return be


@pytest.fixture
def fake_hip(hip_backend, monkeypatch):
    """The HIP backend on test_hip_backend_fake's runtime, with FakeKernels behind
    hipModuleLaunchKernel for the device-offsets entry point."""
    be, launches = hip_backend, []
    kernels = FakeKernels(be.fake.variants)
    real = be.fake.hipModuleLaunchKernel

    def launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        if fn == TileExpand.name:   # a plan's tile-list expansion: the fake's own
            return real(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
        launches.append((fn, stream))
        values = [a.value or 0 for a in extra]
        if "_ragged_" in fn:
            assert (gy, gz, by, bz, shared) == (1, 1, 1, 1, 0)
            kernels.run(fn, gx, bx, values)
        else:
            kernels.gemm(fn, gx, *values[:3])
        return (0,)
    monkeypatch.setattr(be.fake, "hipModuleLaunchKernel", launch)
    be.launches = launches
    return be


@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cuda_device_offsets_encode_once_and_follow_new_offsets(fake_cuda, dtype, trans):
    """Device offsets on the CUDA backend: the first call uploads the per-group scalars
    and encodes its one launch; later calls on the same arrays upload nothing and only
    launch, and each one computes the split the offsets hold at that time (as a graph
    replay would)."""
    from test_cuda_backend_fake import FakeArray, FakeStream
    ta, tb = trans
    rng = np.random.default_rng(next(SEEDS))
    sizes = [5, 0, 40, 1, 17, 0, 33]
    A, B, C, offs = ragged_operands(rng, sizes, 19, 23, dtype, ta, tb, spare=30)
    alpha, beta = scalars(rng, len(sizes), True)
    dA, dB, dC, d_offs = FakeArray(A), FakeArray(B), FakeArray(C), FakeArray(offs.copy())
    T = C.shape[0]
    splits = [np.array(sizes), rng.multinomial(T - 9, np.ones(len(sizes)) / len(sizes)),
              np.zeros(len(sizes), int), np.array([0, T, 0, 0, 0, 0, 0])]
    with FakeStream(71) as s:
        for i, split in enumerate(splits):
            o = np.cumsum(split).astype(np.int32)
            d_offs.a[:] = o                      # in place, as a graph replay would see it
            C[...] = rng.random(C.shape) - 0.5
            poison(C, o, beta)
            ref = ragged_reference(A, B, C, o, alpha, beta, ta, tb)
            uploads = len(s.log)
            portgemm.gemm_grouped(dA, dB, dC, d_offs, alpha=alpha, beta=beta, trans_a=ta,
                                  trans_b=tb, backend=fake_cuda)
            end = int(o[-1])
            close(C[:end], ref[:end], dtype)
            assert np.isnan(C[end:]).all(), "rows past offs[-1] were written"
            if i:
                assert len(s.log) == uploads, "a repeated call uploaded something"
    names = [n for n, _ in fake_cuda.launches]
    assert len(names) == len(splits) and all("_ragged_" in n for n in names)
    assert {st for _, st in fake_cuda.launches} == {71}


def test_cuda_host_offsets_repeat_without_uploads(fake_cuda):
    from test_cuda_backend_fake import FakeArray, FakeStream
    rng = np.random.default_rng(33)
    A, B, C, offs = ragged_operands(rng, [4, 0, 30, 9], 12, 20, np.float32, False, True)
    dA, dB, dC = FakeArray(A), FakeArray(B), FakeArray(C)
    with FakeStream(5) as s:
        for i in range(3):
            C[...] = np.nan
            before = len(s.log)
            portgemm.gemm_grouped(dA, dB, dC, offs, trans_b=True, backend=fake_cuda)
            if i:
                assert len(s.log) == before
            ref = ragged_reference(A, B, C, offs, 1.0, 0.0, False, True)
            close(C[:43], ref[:43], np.float32)
            assert np.isnan(C[43:]).all()


def test_hip_device_offsets_encode_once(fake_hip):
    from test_hip_backend_fake import DevArray
    rng = np.random.default_rng(34)
    A, B, C, offs = ragged_operands(rng, [7, 0, 20, 3], 9, 11, np.float64, True, False)
    alpha, beta = scalars(rng, 4, True)
    d_offs = DevArray(offs.copy())
    allocs = []
    for split in ([7, 0, 20, 3], [0, 30, 0, 0], [1, 2, 3, 4]):
        o = np.cumsum(split).astype(np.int32)
        d_offs.a[:] = o
        C[...] = rng.random(C.shape) - 0.5
        poison(C, o, beta)
        ref = ragged_reference(A, B, C, o, alpha, beta, True, False)
        portgemm.gemm_grouped(DevArray(A), DevArray(B), DevArray(C), d_offs, alpha=alpha,
                              beta=beta, trans_a=True, backend=fake_hip, device_offs=True)
        end = int(o[-1])
        close(C[:end], ref[:end], np.float64)
        assert np.isnan(C[end:]).all()
        allocs.append(len(fake_hip.fake._keep))
    assert len(fake_hip.launches) == 3
    assert allocs[0] == allocs[-1] > 0, "a repeated call allocated or uploaded"


# ---- the device-offsets call's tile kind: chosen by the cost model, every one runs -----------

def _every_candidate():
    from portgemm.grouped.ragged_kind import candidate_kinds
    return [(dt, k) for dt in (np.float32, np.float64) for k in candidate_kinds(dt)]


@pytest.mark.parametrize("dtype, kind", _every_candidate(), ids=lambda x: getattr(x, "name", None))
def test_cuda_device_offsets_run_every_kind_the_chooser_may_give(fake_cuda, monkeypatch,
                                                                 dtype, kind):
    """Every kind choose_kind can return runs correctly in the ragged entry point (the
    fake backend runs its logic from the encoded arguments), with empty
    groups, groups of fewer rows than a tile and of several tiles."""
    from test_cuda_backend_fake import FakeArray
    from portgemm.grouped import ragged
    monkeypatch.setattr(ragged, "choose_kind", lambda *a: kind)
    ragged._kinds.clear()
    ragged._calls.clear()
    rng = np.random.default_rng(next(SEEDS))
    sizes = [0, 3, kind.tm + 5, 0, 2 * kind.tm, 1]
    ta, tb = bool(rng.integers(2)), bool(rng.integers(2))
    A, B, C, offs = ragged_operands(rng, sizes, 11, kind.tn + 7, dtype, ta, tb, spare=4)
    alpha, beta = scalars(rng, len(sizes), False)
    poison(C, offs, beta)
    ref = ragged_reference(A, B, C, offs, alpha, beta, ta, tb)
    portgemm.gemm_grouped(FakeArray(A), FakeArray(B), FakeArray(C), FakeArray(offs.copy()),
                          alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=fake_cuda)
    end = int(offs[-1])
    close(C[:end], ref[:end], dtype)
    assert np.isnan(C[end:]).all(), "rows past offs[-1] were written"
    launches = [n for n, _ in fake_cuda.launches]
    assert len(launches) == 1 and launches[0].endswith("_ragged_" + kind.ident)
    ragged._kinds.clear()
    ragged._calls.clear()


def test_device_offsets_kind_is_the_cost_models_least():
    """The kind is the candidate with the least predicted time, our kinds among the
    candidates: large groups get a larger tile than the paper's largest (64x64)."""
    from portgemm.grouped.ragged_kind import choose_kind, predicted_seconds
    from portgemm.occupancy import get_arch
    arch = get_arch("sm_90")
    for G, rows, N, K in ((8, 500, 128, 128), (1024, 512 * 1024, 1024, 128), (64, 0, 64, 64)):
        pred = predicted_seconds(arch, G, rows, N, K, np.float32)
        assert {k.family for k, _ in pred} == {"zhang2025", "portgemm"}
        assert all(np.isfinite(s) and s > 0 for _, s in pred)
        assert choose_kind(arch, G, rows, N, K, np.float32) == min(pred, key=lambda p: p[1])[0]
    big = choose_kind(arch, 1024, 512 * 1024, 1024, 128, np.float32)
    assert big.tm * big.tn > 64 * 64
    f64 = {k.family for k, _ in predicted_seconds(arch, 64, 4096, 256, 256, np.float64)}
    assert f64 == {"zhang2025", "portgemm-f64"}


def test_device_offsets_weigh_the_wgmma_tile_over_its_mma_sync_shape():
    """Where the wgmma kinds are weighed (sm_90, aligned rows), the mma.sync kind of a
    wgmma tile shape is not (tiles.without_superseded); unaligned, it is. On sm_90 every
    MoE layer of the bench (bf16 and fp16, 4,096 tokens) runs the wgmma 128x128 kind."""
    from portgemm.benchmark.workloads import moe_cases
    from portgemm.grouped import ragged_kind as rk
    from portgemm.occupancy import get_arch
    arch = get_arch("sm_90")
    names = {k.name for k, _ in rk.predicted_seconds(arch, 8, 8192, 4096, 4096, "bfloat16")}
    assert "wgmma-bf16.128x128/g64x128" in names
    assert "portgemm-bf16.128x128/w64x32" not in names
    assert "portgemm-bf16.64x64/w32x32" in names
    odd = {k.name for k, _ in rk.predicted_seconds(arch, 8, 8192, 4095, 4095, "bfloat16")}
    assert "portgemm-bf16.128x128/w64x32" in odd and not any("wgmma" in n for n in odd)
    for case in moe_cases():
        s = case.shapes
        for dtype in ("bfloat16", "float16"):
            k = rk.choose_kind(arch, s.shape[0], int(s[:, 0].sum()), int(s[0, 1]),
                               int(s[0, 2]), dtype)
            assert (k.family, k.kind) == (f"wgmma-{'bf16' if dtype == 'bfloat16' else 'f16'}",
                                          "128x128/g64x128"), case.name


def test_cuda_repeated_calls_take_the_fast_key_and_still_see_every_change(fake_cuda):
    """CuPy-typed arrays and int/float scalars take the one-pass key: a repeat only
    launches; host offsets changed in place, device offsets copied to the host
    (device_offs=False) and a non-bool flag still take the full path."""
    from test_cuda_backend_fake import FakeArray
    from portgemm.grouped import ragged
    rng = np.random.default_rng(35)
    A, B, C, offs = ragged_operands(rng, [4, 0, 30, 9], 12, 20, np.float32, False, False)
    dA, dB, dC = FakeArray(A), FakeArray(B), FakeArray(C)
    host = offs.copy()
    for split in ([4, 0, 30, 9], [10, 10, 0, 3], [10, 10, 0, 3]):
        host[:] = np.cumsum(split)               # the same array, new values
        C[...] = np.nan
        before = len(ragged._fast._d)
        portgemm.gemm_grouped(dA, dB, dC, host, alpha=2, beta=0.0, backend=fake_cuda)
        end = int(host[-1])
        close(C[:end], ragged_reference(A, B, C, host, 2.0, 0.0, False, False)[:end],
              np.float32)
        assert np.isnan(C[end:]).all()
    assert len(ragged._fast._d) == before, "the last call was a repeat: nothing new kept"
    d_offs = FakeArray(offs.copy())
    fake_cuda.cp.asnumpy = lambda x: x.a.copy()   # the copy device_offs=False makes
    for split in ([4, 0, 30, 9], [0, 0, 43, 0]):
        d_offs.a[:] = np.cumsum(split)
        C[...] = np.nan
        portgemm.gemm_grouped(dA, dB, dC, d_offs, backend=fake_cuda, device_offs=False)
        close(C[:43], ragged_reference(A, B, C, d_offs.a, 1.0, 0.0, False, False)[:43],
              np.float32)
    with pytest.raises(DtypeError, match="trans_a"):
        portgemm.gemm_grouped(dA, dB, dC, host, trans_a=0, backend=fake_cuda)


def test_device_offsets_kind_falls_back_to_the_planner(monkeypatch):
    """With no candidate family weighed (choose_kind None) or another strategy named, the
    kind is the one that strategy's per-kind plan of the mean size uses most."""
    from portgemm.grouped import ragged
    from portgemm.grouped import ragged_kind
    monkeypatch.setattr(ragged_kind, "predicted_seconds", lambda *a: [])
    monkeypatch.setattr(ragged, "choose_kind", ragged_kind.choose_kind)
    ragged._kinds.clear()
    be = portgemm.backends.base.get_backend("numpy")
    kind = ragged._kind(be, 8, 800, 64, 64, np.dtype(np.float32), None)
    assert kind.family == "zhang2025"
    ragged._kinds.clear()


def test_cuda_device_offsets_on_new_buffers_reuse_the_validated_layout(fake_cuda, monkeypatch):
    """Device offsets, A and C new buffers every call (a mixture-of-experts layer's
    activations): the checks, kind and sizes of the first call are reused (not validated
    again), only the pointer checks are redone: a C overlapping A is still refused, and
    each call computes into its own buffers."""
    from test_cuda_backend_fake import FakeArray
    from portgemm.grouped import ragged
    calls = []
    real = ragged._validate
    monkeypatch.setattr(ragged, "_validate", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(36)
    sizes = [3, 0, 25, 8]
    _, B, _, offs = ragged_operands(rng, sizes, 10, 21, np.float32, False, False)
    dB, d_offs = FakeArray(B), FakeArray(offs.copy())
    T = 40
    for i in range(3):
        A = (rng.random((T, 10)) - 0.5).astype(np.float32)
        C = np.full((T, 21), np.nan, np.float32)
        portgemm.gemm_grouped(FakeArray(A), dB, FakeArray(C), d_offs, backend=fake_cuda)
        close(C[:36], ragged_reference(A, B, C, offs, 1.0, 0.0, False, False)[:36],
              np.float32)
        assert np.isnan(C[36:]).all()
    assert len(calls) == 1, "calls on new buffers of the same layout were validated again"
    # the same layouts and alignments, but C starts inside A: refused without validation
    buf = np.zeros(48 + T * 21, np.float32)
    A, C = buf[:T * 10].reshape(T, 10), buf[48:].reshape(T, 21)
    assert A.ctypes.data % 16 == C.ctypes.data % 16 == 0
    with pytest.raises(LayoutError, match="C overlaps A"):
        portgemm.gemm_grouped(FakeArray(A), dB, FakeArray(C), d_offs, backend=fake_cuda)
    assert not buf.any(), "a refused call wrote"
    assert len(calls) == 1
