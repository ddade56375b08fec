"""cuBLAS grouped GEMM (cublasGemmGroupedBatchedEx) through ctypes.

Row-major C = A @ B is column-major C^T = B^T @ A^T, so each GEMM is passed as
(m, n, k) = (N, M, K) with A <- B (ld N), B <- A (ld K), C ld N; one group per GEMM.
The op, size, leading-dimension, scalar and group-size arrays are HOST arrays; the
A/B/C pointer arrays are DEVICE arrays. fp32: CUDA_R_32F with CUBLAS_COMPUTE_32F (no
TF32); fp64: CUDA_R_64F with CUBLAS_COMPUTE_64F.
"""
from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

CUBLAS_OP_N = 0
TYPES = {"float32": (0, 68, np.float32), "float64": (1, 70, np.float64)}  # data, compute, host


def load_cublas():
    """libcublas: the copy CuPy already loaded (dlopen by soname finds it), else the one
    in an nvidia-* wheel under site-packages. OSError when there is none."""
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
        self.lib = load_cublas()
        if not hasattr(self.lib, "cublasGemmGroupedBatchedEx"):
            raise OSError("this libcublas has no cublasGemmGroupedBatchedEx (needs CUDA >= 12.5)")
        self.handle = ctypes.c_void_p()
        self._check(self.lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")

    @staticmethod
    def _check(status, what):
        if status != 0:
            raise RuntimeError(f"{what} failed with cuBLAS status {status}")

    def build(self, A, B, C, alpha=1.0, beta=0.0):
        """The argument arrays of one call from lists of contiguous row-major CuPy
        arrays: (args, keep), keep holding the arrays the pointers point into."""
        cp, n = self.cp, len(A)
        dt = np.dtype(A[0].dtype).name
        if dt not in TYPES:
            raise TypeError(f"cuBLAS grouped peer: no {dt}")
        data_t, compute_t, host_t = TYPES[dt]
        M = np.fromiter((a.shape[0] for a in A), np.int32, n)
        K = np.fromiter((a.shape[1] for a in A), np.int32, n)
        N = np.fromiter((b.shape[1] for b in B), np.int32, n)
        ptrs = np.empty((3, n), np.uint64)
        for row, xs in enumerate((B, A, C)):   # cuBLAS A <- our B, B <- our A
            ptrs[row] = np.fromiter((x.data.ptr for x in xs), np.uint64, n)
        dptr = cp.asarray(ptrs)
        ops = np.full(n, CUBLAS_OP_N, np.int32)
        al, be = np.full(n, alpha, host_t), np.full(n, beta, host_t)
        ones = np.ones(n, np.int32)
        keep = (M, K, N, dptr, ops, al, be, ones)
        P = lambda x: x.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
        D = lambda i: ctypes.c_void_p(dptr.data.ptr + i * n * 8)  # noqa: E731
        args = (self.handle, P(ops), P(ops), P(N), P(M), P(K), P(al),
                D(0), data_t, P(N), D(1), data_t, P(K), P(be),
                D(2), data_t, P(N), ctypes.c_int(n), P(ones), ctypes.c_int(compute_t))
        return args, keep

    def launch(self, args):
        stream = self.cp.cuda.get_current_stream()
        self._check(self.lib.cublasSetStream_v2(self.handle, ctypes.c_void_p(stream.ptr)),
                    "cublasSetStream")
        self._check(self.lib.cublasGemmGroupedBatchedEx(*args), "cublasGemmGroupedBatchedEx")

    def prepare(self, A, B, C, alpha=1.0, beta=0.0):
        """A call with its arrays built once."""
        args, keep = self.build(A, B, C, alpha, beta)

        def call():
            self.launch(args)
        call.keep = keep
        return call

    def per_call(self, A, B, C, alpha=1.0, beta=0.0):
        """A call that builds its arrays from the lists every time (what a user with
        lists pays)."""
        def call():
            args, keep = self.build(A, B, C, alpha, beta)
            self.launch(args)
            return keep   # alive until the launch has read the host arrays
        return call
