"""cuBLAS grouped GEMM (cublasGemmGroupedBatchedEx) through ctypes.

Row-major C = A @ B is column-major C^T = B^T @ A^T, so each GEMM is passed as
(m, n, k) = (N, M, K) with A <- B (ld N), B <- A (ld K), C ld N; one group per GEMM.
The op, size, leading-dimension, scalar and group-size arrays are HOST arrays; the
A/B/C pointer arrays are DEVICE arrays. Data and compute types (cudaDataType_t and
cublasComputeType_t values of library_types.h and cublas_api.h):
- float32:  CUDA_R_32F,  CUBLAS_COMPUTE_32F (IEEE, no TF32)
- tf32:     CUDA_R_32F,  CUBLAS_COMPUTE_32F_FAST_TF32 (inputs rounded to TF32 on the tensor cores)
- float64:  CUDA_R_64F,  CUBLAS_COMPUTE_64F
- float16:  CUDA_R_16F,  CUBLAS_COMPUTE_32F (fp32 accumulation, C rounded to fp16)
- bfloat16: CUDA_R_16BF, CUBLAS_COMPUTE_32F
alpha and beta are host scalars of the compute type (float for the 32F computes).
The operands may be CuPy arrays or torch tensors (bfloat16 needs torch: CuPy has none).
"""
from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

CUBLAS_OP_N = 0
CUDA_R_32F, CUDA_R_64F, CUDA_R_16F, CUDA_R_16BF = 0, 1, 2, 14
COMPUTE_32F, COMPUTE_64F, COMPUTE_32F_FAST_TF32 = 68, 70, 77
# precision -> (storage dtype, data type, compute type, host scalar type)
TYPES = {
    "float32": ("float32", CUDA_R_32F, COMPUTE_32F, np.float32),
    "tf32": ("float32", CUDA_R_32F, COMPUTE_32F_FAST_TF32, np.float32),
    "float64": ("float64", CUDA_R_64F, COMPUTE_64F, np.float64),
    "float16": ("float16", CUDA_R_16F, COMPUTE_32F, np.float32),
    "bfloat16": ("bfloat16", CUDA_R_16BF, COMPUTE_32F, np.float32),
}


def dtype_name(x) -> str:
    """"float32", "bfloat16", ... of a CuPy array or a torch tensor."""
    d = x.dtype
    return str(d).removeprefix("torch.") if type(d).__module__.startswith("torch") else np.dtype(d).name


def data_ptr(x) -> int:
    """Device address of a CuPy array or a torch tensor (its first element)."""
    mem = getattr(x, "data", None)
    return int(mem.ptr) if hasattr(mem, "ptr") else int(x.data_ptr())


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

    def build(self, A, B, C, alpha=1.0, beta=0.0, precision=None):
        """The argument arrays of one call from lists of contiguous row-major CuPy
        arrays or torch tensors: (args, keep), keep holding the arrays the pointers
        point into. precision: a TYPES key (default: the operands' dtype)."""
        cp, n = self.cp, len(A)
        dt = dtype_name(A[0])
        precision = precision or dt
        if precision not in TYPES or TYPES[precision][0] != dt:
            raise TypeError(f"cuBLAS grouped peer: no {precision} on {dt} operands")
        _, data_t, compute_t, host_t = TYPES[precision]
        M = np.fromiter((a.shape[0] for a in A), np.int32, n)
        K = np.fromiter((a.shape[1] for a in A), np.int32, n)
        N = np.fromiter((b.shape[1] for b in B), np.int32, n)
        ptrs = np.empty((3, n), np.uint64)
        for row, xs in enumerate((B, A, C)):   # cuBLAS A <- our B, B <- our A
            ptrs[row] = np.fromiter((data_ptr(x) for x in xs), np.uint64, n)
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

    def prepare(self, A, B, C, alpha=1.0, beta=0.0, precision=None):
        """A call with its arrays built once."""
        args, keep = self.build(A, B, C, alpha, beta, precision)

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
