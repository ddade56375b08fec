"""Number formats the tensor-core peers run in, and the error each may show.

A format is what the operands are stored in and what the multiply-add rounds to:
float16 and bfloat16 store A, B, C in 16 bits and accumulate in fp32; tf32 stores fp32
but rounds A and B to TF32 (10 stored mantissa bits) before each product; 3xtf32 splits
each fp32 input into a TF32 head and tail and sums three TF32 products (fp32-level
products: u_mul = 2 u32, the "within 2x of the SIMT fp32 error" the issue asks);
float32 and float64 are IEEE throughout.

Tolerance of the relative Frobenius error of one GEMM against a float64 reference
computed from the SAME stored inputs (so input storage rounding is no error):

    tol = SAFETY * (u_out + u_mul + sqrt(K) * u_acc)

u_out: unit roundoff of C's format (C is rounded once at the end); u_mul: relative error
of one product (0 where the product of two stored inputs is exact in the accumulator:
11x11 or 8x8 significand bits fit fp32's 24; 2 * 2^-11 for tf32, which rounds both
inputs); u_acc: the accumulator's unit roundoff, times sqrt(K), the typical (not the
worst-case K) growth of a sum of K rounding errors of random sign (inputs here are
uniform in [-0.5, 0.5), so errors do not all push one way). SAFETY = 2: rounding C to
nearest costs at most u_out per element, so twice the sum leaves room for the
constants and for a blocked or split-K sum, while a method that computes in a lower
precision than its format (fp32 through TF32, fp16 through bf16: 8x fp16's error,
measured on the H100) misses it and is reported failed, not timed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

SAFETY = 2.0
U16, UBF16, UTF32, U32, U64 = 2.0 ** -11, 2.0 ** -8, 2.0 ** -11, 2.0 ** -24, 2.0 ** -53


@dataclass(frozen=True)
class Format:
    name: str        # "float16", "bfloat16", "tf32", "3xtf32", "float32", "float64"
    storage: str     # dtype of A, B and C
    u_out: float
    u_mul: float
    u_acc: float
    tensor_core: bool   # the format runs at the tensor cores' 16-bit (or tf32) rate


FORMATS = {
    "float16": Format("float16", "float16", U16, 0.0, U32, True),
    "bfloat16": Format("bfloat16", "bfloat16", UBF16, 0.0, U32, True),
    "tf32": Format("tf32", "float32", U32, 2 * UTF32, U32, True),
    "3xtf32": Format("3xtf32", "float32", U32, 2 * U32, U32, True),
    "float32": Format("float32", "float32", U32, 0.0, U32, False),
    "float64": Format("float64", "float64", U64, 0.0, U64, False),
}


def tolerance(fmt: Format, max_k: int) -> float:
    """Largest relative Frobenius error accepted for a GEMM of inner size <= max_k."""
    return SAFETY * (fmt.u_out + fmt.u_mul + math.sqrt(max(int(max_k), 1)) * fmt.u_acc)


def parse_formats(text: str, allowed=tuple(FORMATS)) -> list[Format]:
    """"float16,bfloat16" -> their Formats; ValueError naming an unknown one."""
    out = []
    for name in (t.strip() for t in text.split(",") if t.strip()):
        if name not in allowed:
            raise ValueError(f"format {name!r}: known {', '.join(allowed)}")
        out.append(FORMATS[name])
    return out
