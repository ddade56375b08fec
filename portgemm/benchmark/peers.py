"""The peers: what a user would call instead of portgemm. Each is a Method whose make
raises Skip with a one-line reason when its library or device is missing.

- cublas-grouped:       cublasGemmGroupedBatchedEx, arrays prepared once
- cublas-grouped-lists: the same, arrays built from the lists on every call
- cublas-loop:          cupy.matmul per GEMM (zhang2025's cuBLAS baseline)
- triton-grouped:       a Triton grouped GEMM (triton_grouped.py), ieee fp32
- torch-bmm:            PyTorch bmm over operands zero-padded to the batch's largest
                        M, N, K, padding done once outside the timing (what a user
                        keeping padded storage pays); the output is unpadded for the check
fp64 goes through the same cuBLAS calls (DGEMM) and torch; Triton is fp32 only.
"""
from __future__ import annotations

from .methods import Method, Prepared, Skip

PADDED_LIMIT_BYTES = 16 << 30   # torch-bmm skips a case whose padded operands exceed this


def _need_cuda(dev, what):
    if dev.kind != "cuda":
        raise Skip(f"{what} needs the cuda backend")


_cublas = {}


def _grouped_lib(dev):
    _need_cuda(dev, "cuBLAS grouped")
    if "lib" not in _cublas:
        from .cublas import CublasGrouped
        try:
            _cublas["lib"] = CublasGrouped(dev.xp)
        except OSError as e:
            _cublas["lib"] = str(e)
    lib = _cublas["lib"]
    if isinstance(lib, str):
        raise Skip(f"cuBLAS grouped unavailable: {lib}")
    return lib


def _cublas_grouped(dev, ops):
    return Prepared(_grouped_lib(dev).prepare(ops.A, ops.B, ops.C))


def _cublas_grouped_lists(dev, ops):
    return Prepared(_grouped_lib(dev).per_call(ops.A, ops.B, ops.C))


def _cublas_loop(dev, ops):
    _need_cuda(dev, "the cuBLAS loop")
    mm, A, B, C = dev.xp.matmul, ops.A, ops.B, ops.C

    def call():
        for a, b, c in zip(A, B, C):
            mm(a, b, out=c)
    return Prepared(call)


def _torch(dev, what):
    _need_cuda(dev, what)
    try:
        import torch
    except ImportError:
        raise Skip(f"{what} needs PyTorch (not installed)") from None
    if not torch.cuda.is_available():
        raise Skip(f"{what}: PyTorch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False   # IEEE fp32, like everyone else here
    return torch


def _triton_grouped(dev, ops):
    torch = _torch(dev, "Triton grouped")
    if ops.dtype.name != "float32":
        raise Skip("Triton grouped: float32 only")
    try:
        from .triton_grouped import GroupedGemm
    except ImportError as e:
        raise Skip(f"Triton grouped needs Triton ({e})") from None
    g = GroupedGemm(torch, dev, ops)
    return Prepared(g)


def padded_bmm(torch, A, B, C, tf32=False) -> Prepared:
    """torch.bmm over copies of the lists (torch tensors) zero-padded to the largest M,
    N, K, padded once here; C gets the unpadded result in collect. tf32: the call runs
    with allow_tf32 (restored to IEEE after it). Skip when the padding is too large."""
    if not A:
        raise Skip("torch bmm: empty batch")
    M, K = max(a.shape[0] for a in A), max(a.shape[1] for a in A)
    N = max(b.shape[1] for b in B)
    nbytes = len(A) * (M * K + K * N + M * N) * A[0].element_size()
    if nbytes > PADDED_LIMIT_BYTES:
        raise Skip(f"torch bmm: padded operands need {nbytes / 2**30:.0f} GiB "
                   f"(limit {PADDED_LIMIT_BYTES >> 30} GiB)")
    kw = dict(dtype=A[0].dtype, device=A[0].device)
    Ap, Bp = torch.zeros((len(A), M, K), **kw), torch.zeros((len(A), K, N), **kw)
    Cp = torch.empty((len(A), M, N), **kw)
    for i, (a, b) in enumerate(zip(A, B)):
        Ap[i, :a.shape[0], :a.shape[1]].copy_(a)
        Bp[i, :b.shape[0], :b.shape[1]].copy_(b)
    flags = torch.backends.cuda.matmul

    def call():
        flags.allow_tf32 = tf32
        torch.bmm(Ap, Bp, out=Cp)
        flags.allow_tf32 = False

    def collect():
        for i, c in enumerate(C):
            c.copy_(Cp[i, :c.shape[0], :c.shape[1]])
    return Prepared(call, poison=lambda: Cp.fill_(float("nan")), collect=collect)


def _torch_bmm(dev, ops):
    torch = _torch(dev, "torch bmm")
    T = lambda xs: [torch.as_tensor(x, device="cuda") for x in xs]  # noqa: E731  (zero-copy)
    return padded_bmm(torch, T(ops.A), T(ops.B), T(ops.C))


PEERS = {
    "cublas-grouped": _cublas_grouped,
    "cublas-grouped-lists": _cublas_grouped_lists,
    "cublas-loop": _cublas_loop,
    "triton-grouped": _triton_grouped,
    "torch-bmm": _torch_bmm,
}


def methods(names) -> list[Method]:
    return [Method(n, "peer", PEERS[n]) for n in names]
