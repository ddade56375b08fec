"""One case's operands as torch tensors on the CUDA device, for the 16-bit and tf32
benches (CuPy has no bfloat16, torch has every format here).

A, B and C are each one flat buffer holding the matrices (row-major, contiguous), with
per-GEMM views. With one N and one K across the batch they lie back to back: the same
buffers are then the packed ragged-M layout (A (sum M, K), B (G, K, N), C (sum M, N)).
Otherwise each matrix starts on a 256-byte boundary, as separately allocated ones do:
cuBLAS grouped faults (misaligned address, measured on the H100) on 16-bit matrices
starting at 2-byte offsets. The float64 reference C is computed once per case from the
stored inputs, back to back (``c_off``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .check import per_gemm_errors
from .formats import Format
from .operands import BatchShapes, _offsets, shared_nk

ALIGN_BYTES = 256


def aligned_starts(sizes, align: int) -> np.ndarray:
    """Start of each matrix (and the total, last) with every start a multiple of align
    elements."""
    padded = -(-np.asarray(sizes, np.int64) // align) * align
    return _offsets(padded)


@dataclass(eq=False)
class TorchOperands(BatchShapes):
    torch: object
    shapes: np.ndarray      # (batch, 3) M, N, K
    fmt: Format
    a_flat: object
    b_flat: object
    c_flat: object
    c_off: np.ndarray
    A: list = field(default_factory=list)
    B: list = field(default_factory=list)
    C: list = field(default_factory=list)
    ref: object = None      # float64 flat reference of C

    @property
    def flops(self) -> float:
        s = self.shapes.astype(np.float64)
        return float(2 * (s[:, 0] * s[:, 1] * s[:, 2]).sum())

    def packed(self):
        """(A (rows, K), B (G, K, N), C (rows, N), offs: int32 cumulative row ends on the
        device), the layout of torch's grouped_mm and portgemm.gemm_grouped."""
        n, k = (int(v) for v in self.shapes[0, 1:])
        rows = int(self.shapes[:, 0].sum())
        offs = self.torch.as_tensor(np.cumsum(self.shapes[:, 0]).astype(np.int32), device="cuda")
        return (self.a_flat.view(rows, k), self.b_flat.view(self.batch, k, n),
                self.c_flat.view(rows, n), offs)

    def poison(self) -> None:
        """NaN into every C, so a GEMM left unwritten fails the check."""
        self.c_flat.fill_(float("nan"))

    def errors(self, cp) -> np.ndarray:
        """Relative Frobenius error of each GEMM's C (inf where a NaN was left)."""
        dense = self.torch.cat([c.reshape(-1) for c in self.C]) if self.C else self.c_flat[:0]
        c64 = cp.from_dlpack(dense.double())
        return per_gemm_errors(cp, c64, cp.from_dlpack(self.ref), self.c_off)


def make_torch_operands(torch, shapes, fmt: Format, seed: int) -> TorchOperands:
    """Inputs uniform in [-0.5, 0.5) drawn on the device (seeded), stored in the format,
    C allocated, float64 reference computed GEMM by GEMM."""
    M, N, K = (shapes[:, i].astype(np.int64) for i in range(3))
    store = getattr(torch, fmt.storage)
    align = 1 if shared_nk(shapes) else ALIGN_BYTES // torch.empty(0, dtype=store).element_size()
    a_off, b_off, c_at = (aligned_starts(x, align) for x in (M * K, K * N, M * N))
    c_off = _offsets(M * N)
    draw = torch.float64 if fmt.storage == "float64" else torch.float32
    g = torch.Generator(device="cuda")
    g.manual_seed(int(seed))

    def fill(n):
        return (torch.rand(int(n), generator=g, device="cuda", dtype=draw) - 0.5).to(store)
    a_flat, b_flat = fill(a_off[-1]), fill(b_off[-1])
    c_flat = torch.empty(int(c_at[-1]), dtype=store, device="cuda")
    ops = TorchOperands(torch, shapes, fmt, a_flat, b_flat, c_flat, c_off)
    ref = torch.empty(int(c_off[-1]), dtype=torch.float64, device="cuda")
    ao, bo, ca, co = a_off.tolist(), b_off.tolist(), c_at.tolist(), c_off.tolist()
    for i, (m, n, k) in enumerate(zip(M.tolist(), N.tolist(), K.tolist())):
        a = a_flat[ao[i]:ao[i] + m * k].view(m, k)
        b = b_flat[bo[i]:bo[i] + k * n].view(k, n)
        ops.A.append(a)
        ops.B.append(b)
        ops.C.append(c_flat[ca[i]:ca[i] + m * n].view(m, n))
        torch.matmul(a.double(), b.double(), out=ref[co[i]:co[i + 1]].view(m, n))
    ops.ref = ref
    torch.cuda.synchronize()
    return ops
