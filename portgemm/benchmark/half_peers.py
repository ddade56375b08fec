"""The methods of the 16-bit / tf32 benches over TorchOperands: portgemm (a bound
plan of the lists, or the packed call) and the peers a user would call instead. Each
make(ctx, ops) returns a methods.Prepared or raises Skip with a one-line reason;
portgemm raising one of its typed errors for a format it does not take yet is a Skip
whose reason starts "n/a (not supported)".

- ours:                 portgemm.plan(...).bind(A, B, C) over the per-GEMM lists
                        (tf32 and 3xtf32: plan(..., precision=<format>))
- ours-ieee:            our fp32 IEEE plan on the same fp32 operands (what tf32 and 3xtf32
                        have to beat)
- ours-packed:          portgemm.gemm_grouped(A, B, C, offs=...) (ragged M, shared N, K)
- cublas-grouped:       cublasGemmGroupedBatchedEx in the format (cublas.py TYPES)
- cublas-grouped-ieee:  the same on fp32 with CUBLAS_COMPUTE_32F (beside the tf32 column)
- torch-bmm:            torch.bmm over operands zero-padded to the batch's largest M, N, K
                        (padding outside the timing; tf32 through allow_tf32)
- torch-grouped-mm:     torch.nn.functional.grouped_mm, else torch._grouped_mm (whichever
                        the installed torch has), ragged M; its output is a new tensor
                        (allocation timed, as a user pays it), copied into C for the check
"""
from __future__ import annotations

from dataclasses import dataclass

import portgemm

from .methods import Prepared, Skip
from .peers import padded_bmm


@dataclass
class Context:
    torch: object
    cp: object
    be: object          # portgemm's cuda backend
    cublas: object      # CublasGrouped, or a str: why there is none


def _portgemm_unsupported(e: portgemm.PortgemmError) -> Skip:
    return Skip(f"n/a (not supported): {type(e).__name__}: {str(e).splitlines()[0][:120]}")


def _precision_kw(fmt):
    """portgemm's keyword for the tf32 and 3xtf32 formats (a portgemm without precision
    modes rejects it with a typed error, reported n/a)."""
    return {"precision": fmt.name} if fmt.name in ("tf32", "3xtf32") else {}


def _ours(ctx, ops, fmt=None):
    fmt = fmt or ops.fmt
    kw = _precision_kw(fmt)
    try:
        p = portgemm.plan(ops.shapes, dtype=fmt.storage, arch=ctx.be.arch(), **kw)
        return Prepared(p.bind(ops.A, ops.B, ops.C, backend=ctx.be), plan=p)
    except portgemm.PortgemmError as e:
        raise _portgemm_unsupported(e) from None


def _ours_ieee(ctx, ops):
    """Our fp32 SIMT path on the tf32 case's operands (what tf32 is to beat)."""
    from .formats import FORMATS
    return _ours(ctx, ops, FORMATS["float32"])


def _ours_packed(ctx, ops):
    if not ops.uniform_nk:
        raise Skip("ours-packed needs one N and one K across the batch")
    if ops.fmt.storage not in ("float16", "bfloat16"):
        raise Skip("ours-packed: the MoE bench runs float16 and bfloat16")
    A, B, C, offs = ops.packed()
    try:   # the first call validates and plans: unsupported formats raise here
        portgemm.gemm_grouped(A, B, C, offs=offs, backend=ctx.be)
    except portgemm.PortgemmError as e:
        raise _portgemm_unsupported(e) from None
    return Prepared(lambda: portgemm.gemm_grouped(A, B, C, offs=offs, backend=ctx.be))


def _cublas(ctx, ops, precision=None):
    if isinstance(ctx.cublas, str):
        raise Skip(f"cuBLAS grouped unavailable: {ctx.cublas}")
    return Prepared(ctx.cublas.prepare(ops.A, ops.B, ops.C, precision=precision or ops.fmt.name))


def _cublas_ieee(ctx, ops):
    if ops.fmt.storage != "float32":
        raise Skip("cublas-grouped-ieee: fp32 operands only")
    return _cublas(ctx, ops, "float32")


def _torch_bmm(ctx, ops):
    return padded_bmm(ctx.torch, ops.A, ops.B, ops.C, tf32=ops.fmt.name == "tf32")


def grouped_mm_function(torch):
    """(name, function) of the installed torch's grouped matmul, or (None, None)."""
    fn = getattr(torch.nn.functional, "grouped_mm", None)
    if fn is not None:
        return "torch.nn.functional.grouped_mm", fn
    fn = getattr(torch, "_grouped_mm", None)
    return ("torch._grouped_mm", fn) if fn is not None else (None, None)


def _torch_grouped_mm(ctx, ops):
    torch = ctx.torch
    name, fn = grouped_mm_function(torch)
    if fn is None:
        raise Skip(f"torch {torch.__version__} has no grouped_mm")
    if not ops.uniform_nk:
        raise Skip("torch grouped_mm (ragged M) needs one N and one K across the batch")
    n, k = (int(v) for v in ops.shapes[0, 1:])
    if (n * ops.c_flat.element_size()) % 16 or (k * ops.a_flat.element_size()) % 16:
        raise Skip(f"{name}: N and K rows must be multiples of 16 bytes (TMA)")
    A, B, C, offs = ops.packed()
    if ops.fmt.name != "bfloat16":   # documented for bf16; other formats: ask it once
        try:
            fn(A, B, offs=offs)
        except RuntimeError as e:
            raise Skip(f"{name} on {ops.fmt.name}: {str(e).splitlines()[0][:120]}") from None
    out = [None]

    def call():
        out[0] = fn(A, B, offs=offs)
    return Prepared(call, poison=lambda: out.__setitem__(0, None),
                    collect=lambda: C.copy_(out[0]))


MAKERS = {
    "ours": _ours,
    "ours-ieee": _ours_ieee,
    "ours-packed": _ours_packed,
    "cublas-grouped": _cublas,
    "cublas-grouped-ieee": _cublas_ieee,
    "torch-bmm": _torch_bmm,
    "torch-grouped-mm": _torch_grouped_mm,
}
OURS = ("ours", "ours-ieee", "ours-packed")
