"""A Triton grouped GEMM, written for this benchmark in the style of Triton's grouped-GEMM
tutorial: a fixed number of programs (one per SM) walk the tiles of every GEMM in turn,
reading each GEMM's pointers, sizes and leading dimensions from device arrays built once.
Unlike the tutorial it masks edges (our sizes are arbitrary) and multiplies in IEEE fp32
(input_precision="ieee": no TF32), so it is compared on equal arithmetic.
"""
from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32


@triton.jit
def _grouped_kernel(a_ptrs, b_ptrs, c_ptrs, sizes, lds, group_count,
                    NUM_PROGRAMS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr):
    tile = tl.program_id(0)
    first = 0  # first tile index of GEMM g
    for g in range(group_count):
        gm = tl.load(sizes + g * 3)
        gn = tl.load(sizes + g * 3 + 1)
        gk = tl.load(sizes + g * 3 + 2)
        tiles_n = tl.cdiv(gn, BLOCK_N)
        n_tiles = tl.cdiv(gm, BLOCK_M) * tiles_n
        while tile >= first and tile < first + n_tiles:
            lda = tl.load(lds + g * 3)
            ldb = tl.load(lds + g * 3 + 1)
            ldc = tl.load(lds + g * 3 + 2)
            a_ptr = tl.load(a_ptrs + g).to(tl.pointer_type(tl.float32))
            b_ptr = tl.load(b_ptrs + g).to(tl.pointer_type(tl.float32))
            c_ptr = tl.load(c_ptrs + g).to(tl.pointer_type(tl.float32))
            t = tile - first
            rm = (t // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
            rn = (t % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
            rk = tl.arange(0, BLOCK_K)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(0, gk, BLOCK_K):
                kk = k0 + rk
                a = tl.load(a_ptr + rm[:, None] * lda + kk[None, :],
                            mask=(rm[:, None] < gm) & (kk[None, :] < gk), other=0.0)
                b = tl.load(b_ptr + kk[:, None] * ldb + rn[None, :],
                            mask=(kk[:, None] < gk) & (rn[None, :] < gn), other=0.0)
                acc += tl.dot(a, b, input_precision="ieee")
            tl.store(c_ptr + rm[:, None] * ldc + rn[None, :], acc,
                     mask=(rm[:, None] < gm) & (rn[None, :] < gn))
            tile += NUM_PROGRAMS
        first += n_tiles


class GroupedGemm:
    """C_i = A_i @ B_i over one case's operands; device arrays built at construction."""

    def __init__(self, torch, dev, ops):
        n = ops.batch
        ptrs = np.empty((3, n), np.int64)
        for row, xs in enumerate((ops.A, ops.B, ops.C)):
            ptrs[row] = [x.data.ptr for x in xs]
        lds = np.stack([[a.shape[1] for a in ops.A], [b.shape[1] for b in ops.B],
                        [c.shape[1] for c in ops.C]], axis=1).astype(np.int32)
        T = lambda x: torch.as_tensor(np.ascontiguousarray(x), device="cuda")  # noqa: E731
        self.a, self.b, self.c = T(ptrs[0]), T(ptrs[1]), T(ptrs[2])
        self.sizes = T(ops.shapes.astype(np.int32))
        self.lds = T(lds)
        self.n = n
        self.programs = int(dev.be.arch().compute_units)

    def __call__(self):
        _grouped_kernel[(self.programs,)](
            self.a, self.b, self.c, self.sizes, self.lds, self.n,
            NUM_PROGRAMS=self.programs, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
