"""cuBLAS grouped GEMM (cublasGemmGroupedBatchedEx) through ctypes, as a benchmark peer.

Row-major C = A @ B is column-major C^T = B^T @ A^T, so each GEMM is passed as
(m, n, k) = (N, M, K) with A <- B (ld N), B <- A (ld K), C ld N. One group per GEMM.
The size, leading-dimension and scalar arrays are host arrays; the pointer arrays are
device arrays. Built once per batch (``prepare``); ``__call__`` is the timed call.
"""
from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

CUBLAS_OP_N = 0
CUDA_R_32F = 0
CUBLAS_COMPUTE_32F = 68


def _load():
    """libcublas: the copy CuPy already loaded (dlopen by soname finds it), else the one
    in an nvidia-* wheel under site-packages."""
    try:
        import cupy.cuda.cublas  # noqa: F401  (loads libcublas into the process)
    except ImportError:
        pass
    for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    import site
    for root in site.getsitepackages():
        for lib in sorted(glob.glob(os.path.join(root, "nvidia", "**", "libcublas.so*"),
                                    recursive=True)):
            return ctypes.CDLL(lib)
    raise OSError("libcublas not found")


class CublasGrouped:
    def __init__(self, cp):
        self.cp = cp
        self.lib = _load()
        self.handle = ctypes.c_void_p()
        self._check(self.lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")

    @staticmethod
    def _check(status, what):
        if status != 0:
            raise RuntimeError(f"{what} failed with cuBLAS status {status}")

    def prepare(self, A, B, C, alpha=1.0, beta=0.0):
        """A call of C_i = alpha A_i B_i + beta C_i (float32, row-major, contiguous)."""
        cp = self.cp
        n = len(A)
        M = np.array([a.shape[0] for a in A], np.int32)
        K = np.array([a.shape[1] for a in A], np.int32)
        N = np.array([b.shape[1] for b in B], np.int32)
        ptr = lambda xs: cp.asarray(np.array([x.data.ptr for x in xs], np.uint64))  # noqa: E731
        dB, dA, dC = ptr(B), ptr(A), ptr(C)   # cuBLAS A <- our B, B <- our A
        ops = np.full(n, CUBLAS_OP_N, np.int32)
        al = np.full(n, alpha, np.float32)
        be = np.full(n, beta, np.float32)
        ones = np.ones(n, np.int32)
        keep = (M, K, N, dA, dB, dC, ops, al, be, ones)
        P = lambda x: x.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
        D = lambda x: ctypes.c_void_p(x.data.ptr)  # noqa: E731
        args = (self.handle, P(ops), P(ops), P(N), P(M), P(K), P(al),
                D(dB), CUDA_R_32F, P(N), D(dA), CUDA_R_32F, P(K), P(be),
                D(dC), CUDA_R_32F, P(N), ctypes.c_int(n), P(ones),
                ctypes.c_int(CUBLAS_COMPUTE_32F))
        lib, stream = self.lib, cp.cuda.get_current_stream()

        def call():
            self._check(lib.cublasSetStream_v2(self.handle, ctypes.c_void_p(stream.ptr)),
                        "cublasSetStream")
            self._check(lib.cublasGemmGroupedBatchedEx(*args), "cublasGemmGroupedBatchedEx")
        call.keep = keep  # the host/device arrays the call points into
        return call
