"""AMD MFMA lane layouts, checked without an AMD GPU: the layout structs of compat.h
(PgMfmaHalf, PgMfmaF64: which element of A, B and C each lane of a wave64 holds) are
parsed from the header the kernel compiles, the kernel's fragment loads are replayed from
them, and a numpy model of each instruction computes what the hardware would. The
instruction models are written from AMD's side of the contract (the matrix instruction
calculator's tables: for each matrix element, the lane and item that hold it), not from
the structs, so a wrong lane map in compat.h gives a wrong product here."""
from __future__ import annotations

import re

import numpy as np
import pytest

from portgemm.kernels.render import COMPAT_FILE, SOURCE_FILE
from portgemm.tiles import FAMILIES, MFMA_FAMILIES, mma_lanes, mma_shape

WAVE = 64


# ---- compat.h's layout data -----------------------------------------------------------

_FN = re.compile(r"static __device__ __forceinline__ int (\w+)\(([^)]*)\)\s*\{\s*return ([^;]+);\s*\}")
_CONST = re.compile(r"(\w+) = (\d+)")


def layout(struct: str) -> dict:
    """The constants and index functions of ``struct`` in compat.h, as Python: each
    function body is one integer expression of l (lane) and i (element)."""
    text = COMPAT_FILE.read_text()
    m = re.search(r"struct %s \{(.*?)\n\};" % struct, text, re.S)
    assert m, f"struct {struct} not in compat.h"
    body = m.group(1)
    out: dict = {}
    for line in body.splitlines():
        if "static constexpr int" in line:
            for name, val in _CONST.findall(line.split("//")[0]):
                out[name] = int(val)
    for name, args, expr in _FN.findall(body):
        params = [a.split()[-1] for a in args.split(",") if a.strip()]
        # C's / on the non-negative ints used here is Python's //; the other operators agree
        py = expr.replace("/", "//")
        out[name] = eval(f"lambda {', '.join(params)}: {py}")   # noqa: S307 (our own header)
    return out


HALF = layout("PgMfmaHalf")
F64 = layout("PgMfmaF64")


def a_of(L, lane, i):
    """(row, k) of element i of lane's A fragment, as the kernel loads it."""
    return L["a_row"](lane), L["a_k"](lane, i)


def b_of(L, lane, i):
    return L["b_k"](lane, i), L["b_col"](lane)


def c_of(L, lane, i):
    return L["c_row"](lane, i), L["c_col"](lane)


# ---- the instructions, from AMD's tables -----------------------------------------------
# (M, N, K, items per lane of A/B, where element (row, k) of A lives, where (row, col) of
# D lives). Matrix instruction calculator, wave64, no broadcast (cbsz = abid = blgp = 0).

def _mfma_16x16(K, a_home, d_home):
    """A numpy model of one 16x16xK MFMA: regs_a[lane][item] and regs_b hold A and B as
    a_home says (B's element (k, col) lives where A's (col, k) would), acc[lane][item]
    holds C as d_home says; returns the new acc."""
    def run(regs_a, regs_b, acc):
        A = np.empty((16, K))
        B = np.empty((K, 16))
        for r in range(16):
            for k in range(K):
                lane, item = a_home(r, k)
                A[r, k] = regs_a[lane][item]
                B[k, r] = regs_b[lane][item]
        D = A @ B
        out = [list(row) for row in acc]
        for r in range(16):
            for c in range(16):
                lane, item = d_home(r, c)
                out[lane][item] = acc[lane][item] + D[r, c]
        return out
    return run


# v_mfma_f32_16x16x16f16 and v_mfma_f32_16x16x16bf16_1k: A[i][k] in lane i + 16 (k / 4),
# item k % 4; D[i][j] in lane j + 16 (i / 4), item i % 4 (one group of 4 rows per lane).
MFMA_F32_16x16x16 = _mfma_16x16(16, lambda i, k: (i + 16 * (k // 4), k % 4),
                                lambda i, j: (j + 16 * (i // 4), i % 4))
# v_mfma_f32_16x16x8bf16 (gfx908): A[i][k] in lane i + 16 (k / 2), item k % 2.
MFMA_F32_16x16x8BF16 = _mfma_16x16(8, lambda i, k: (i + 16 * (k // 2), k % 2),
                                   lambda i, j: (j + 16 * (i // 4), i % 4))
# v_mfma_f64_16x16x4f64: A[i][k] in lane i + 16 k; D[i][j] in lane j + 16 (i % 4), item
# i / 4 (four groups of one row per lane: CK's mfma_f64_16x16x4f64 has group_size 1).
MFMA_F64_16x16x4 = _mfma_16x16(4, lambda i, k: (i + 16 * k, 0),
                               lambda i, j: (j + 16 * (i % 4), i // 4))


# ---- replaying the kernel's use of the layouts -----------------------------------------

def fragments(L, A, B):
    """Each lane's A and B fragment registers, loaded as pg_tile_mfma loads them."""
    regs_a = [[A[a_of(L, l, i)] for i in range(L["AE"])] for l in range(WAVE)]
    regs_b = [[B[b_of(L, l, i)] for i in range(L["AE"])] for l in range(WAVE)]
    return regs_a, regs_b


def store(L, acc):
    """The 16x16 block of C the kernel's epilogue writes from each lane's accumulators."""
    C = np.full((16, 16), np.nan)
    for l in range(WAVE):
        for i in range(L["CE"]):
            r, c = c_of(L, l, i)
            assert np.isnan(C[r, c]), f"two lanes write C[{r}][{c}]"
            C[r, c] = acc[l][i]
    return C


def one_block(L, instruction, A, B, gfx908_bf16=False):
    regs_a, regs_b = fragments(L, A, B)
    acc = [[0.0] * L["CE"] for _ in range(WAVE)]
    if gfx908_bf16:
        # compat.h's gfx908 bf16: 16x16x8bf16 on elements 0-1 (register 0), then 2-3
        for half in (slice(0, 2), slice(2, 4)):
            acc = instruction([r[half] for r in regs_a], [r[half] for r in regs_b], acc)
    else:
        acc = instruction(regs_a, regs_b, acc)
    return store(L, acc)


CASES = {
    "f16 / bf16_1k 16x16x16": (HALF, MFMA_F32_16x16x16, False),
    "bf16 gfx908 2 x 16x16x8": (HALF, MFMA_F32_16x16x8BF16, True),
    "f64 16x16x4": (F64, MFMA_F64_16x16x4, False),
}


@pytest.mark.parametrize("case", CASES)
def test_one_mfma_block_is_a_at_b(case):
    L, instruction, split = CASES[case]
    rng = np.random.default_rng(3)
    A = rng.standard_normal((L["M"], L["K"]))
    B = rng.standard_normal((L["K"], L["N"]))
    C = one_block(L, instruction, A, B, split)
    np.testing.assert_allclose(C, A @ B, rtol=1e-12, atol=1e-12)


def test_a_wrong_lane_map_fails():
    """The check has teeth: the fp32 forms' C layout (one group of four rows) read as the
    f64 instruction's, or a swapped k order in B alone, gives a wrong product."""
    rng = np.random.default_rng(4)
    A, B = rng.standard_normal((16, 4)), rng.standard_normal((4, 16))
    wrong_c = {**F64, "c_row": HALF["c_row"]}
    assert not np.allclose(one_block(wrong_c, MFMA_F64_16x16x4, A, B), A @ B)
    A, B = rng.standard_normal((16, 16)), rng.standard_normal((16, 16))
    wrong_b = {**HALF, "b_k": lambda l, i: 4 * (l >> 4) + (3 - i)}
    assert not np.allclose(one_block(wrong_b, MFMA_F32_16x16x16, A, B), A @ B)


@pytest.mark.parametrize("L", [HALF, F64], ids=["half", "f64"])
def test_layout_covers_each_element_once(L):
    a = {a_of(L, l, i) for l in range(WAVE) for i in range(L["AE"])}
    b = {b_of(L, l, i) for l in range(WAVE) for i in range(L["AE"])}
    c = {c_of(L, l, i) for l in range(WAVE) for i in range(L["CE"])}
    assert len(a) == L["M"] * L["K"] == WAVE * L["AE"]
    assert len(b) == L["K"] * L["N"]
    assert len(c) == L["M"] * L["N"] == WAVE * L["CE"]
    assert L["LANES"] == WAVE


def test_half_fragments_load_as_k_adjacent_pairs():
    """pg_tile_mfma reads a 16-bit fragment as two registers of k-adjacent pairs starting
    at elements 0 and 2 (PgMmaStage::pair), which the gfx908 bf16 path feeds to one
    16x16x8bf16 each."""
    for l in range(WAVE):
        for i in (0, 2):
            assert HALF["a_k"](l, i + 1) == HALF["a_k"](l, i) + 1
            assert HALF["b_k"](l, i + 1) == HALF["b_k"](l, i) + 1
    text = COMPAT_FILE.read_text()
    g908 = text[text.index("#if defined(__gfx908__)\n    // two 16x16x8bf16"):]
    assert g908.index("a[0]") < g908.index("a[1]") < g908.index("#else")
    # ... and the kernel's 16-bit fragment reads start their two pairs at elements 0, 2
    kernel = SOURCE_FILE.read_text()
    ops = kernel[kernel.index("struct PgMfmaOps {"):kernel.index("#else", kernel.index("struct PgMfmaOps {"))]
    for x in ("a", "b"):
        assert f"F::{x}_k(l, 0)" in ops and f"F::{x}_k(l, 2)" in ops


def test_family_shapes_match_compat_h():
    for fam, dtype in MFMA_FAMILIES.items():
        L = F64 if dtype == "float64" else HALF
        assert mma_shape(fam) == (L["M"], L["N"], L["K"])
        assert mma_lanes(fam) == L["LANES"]


# ---- a whole tile: pg_tile_mfma's waves, blocks and k steps -----------------------------

def emulate_tile(kind, A, B):
    """C = A @ B for one tile of ``kind`` (an MFMA family's MMA kind) as pg_tile_mfma
    computes it: waves in a (tm / rm) x (tn / rn) grid, each (rm / 16) x (rn / 16) blocks,
    k in steps of the instruction's K; zero-padded edges as the staging fills them."""
    dtype = MFMA_FAMILIES[kind.family]
    L, instruction = (F64, MFMA_F64_16x16x4) if dtype == "float64" else (HALF, MFMA_F32_16x16x16)
    M, K = A.shape
    N = B.shape[1]
    Kp = -(-K // kind.tk) * kind.tk
    Ap = np.zeros((kind.tm, Kp))
    Bp = np.zeros((Kp, kind.tn))
    Ap[:M, :K], Bp[:K, :N] = A, B
    C = np.full((kind.tm, kind.tn), np.nan)
    wgn = kind.tn // kind.rn
    for wave in range(kind.threads // kind.lanes):
        wm, wn = (wave // wgn) * kind.rm, (wave % wgn) * kind.rn
        for bi in range(kind.rm // L["M"]):
            for bj in range(kind.rn // L["N"]):
                acc = [[0.0] * L["CE"] for _ in range(WAVE)]
                r0, c0 = wm + bi * L["M"], wn + bj * L["N"]
                for kk in range(0, Kp, L["K"]):
                    regs_a, regs_b = fragments(L, Ap[r0:r0 + 16, kk:kk + L["K"]],
                                               Bp[kk:kk + L["K"], c0:c0 + 16])
                    acc = instruction(regs_a, regs_b, acc)
                C[r0:r0 + 16, c0:c0 + 16] = store(L, acc)
    return C[:M, :N]


@pytest.mark.parametrize("name", [f"{f}.{k.kind}" for f in MFMA_FAMILIES
                                  for k in FAMILIES[f] if k.engine == "mma"])
def test_one_tile_of_each_mfma_kind(name):
    fam, kind_name = name.split(".", 1)
    kind = next(k for k in FAMILIES[fam] if k.kind == kind_name)
    rng = np.random.default_rng(5)
    M, N, K = kind.tm - 3, kind.tn - 5, 2 * kind.tk + 3     # edges: not whole fragments
    A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    np.testing.assert_allclose(emulate_tile(kind, A, B), A @ B, rtol=1e-11, atol=1e-11)
