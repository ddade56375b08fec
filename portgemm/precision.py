"""fp32 precision modes: what ``precision=`` names and what each computes.

- ``"ieee"`` (the default): IEEE fp32 FMAs on the SIMT kinds, as without the argument.
- ``"tf32"``: A and B rounded to TF32 (fp32's 8 exponent bits, 10 of its 23 stored
  mantissa bits; to nearest, ties away from zero, as ``cvt.rna.tf32.f32``) and multiplied
  on the tensor cores with fp32 accumulation (``mma.sync`` m16n8k8): unit roundoff 2^-11
  on each input, as ``torch.backends.cuda.matmul.allow_tf32``.
- ``"3xtf32"``: each input split into two TF32 parts, x = big + small (big = tf32(x),
  small = tf32(x - big)), and a_small b_big + a_big b_small + a_big b_big summed on the
  tensor cores (CUTLASS's fast-fp32 scheme): the products keep about 21 of fp32's 24
  significand bits, so the error stays close to IEEE fp32's.

Both modes apply to float32 only, on the archs with TF32 tensor cores
(occupancy.archs.TF32_MMA). They are permissions, like allow_tf32: GEMMs too small for a
tensor-core tile run the planner's IEEE fp32 SIMT kind, which is at least as accurate.
The NumPy backend computes "tf32" tiles from TF32-rounded inputs (round_tf32) and
"3xtf32" tiles in fp32 (its reference), so CPU tests see each mode's semantics.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import PrecisionError
from .tiles import PRECISIONS, TF32_FAMILIES

# precision mode -> the tile family that computes it (tiles.TF32_FAMILIES)
FAMILY = {p: f for f, p in TF32_FAMILIES.items()}


def check_name(precision) -> str:
    """``precision`` as a mode name ("ieee" for None); PrecisionError otherwise."""
    if precision is None:
        return "ieee"
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise PrecisionError(f"precision must be one of {', '.join(map(repr, PRECISIONS))}, "
                             f"got {precision!r}")
    return precision


@dataclass(frozen=True)
class Mode:
    """A strategy with a precision mode other than "ieee": what the entry points' call
    caches key on in place of the bare strategy, so calls in different modes never share
    an entry (the default mode keeps the bare strategy, and its keys, as before)."""
    strategy: object
    precision: str


def how(strategy, precision):
    """The key value of (strategy, precision): the strategy itself for "ieee"."""
    p = check_name(precision)
    return strategy if p == "ieee" else Mode(strategy, p)


def split(how_value) -> tuple[object, str]:
    """(strategy, precision) of a value made by ``how``."""
    if isinstance(how_value, Mode):
        return how_value.strategy, how_value.precision
    return how_value, "ieee"


def round_tf32(x) -> np.ndarray:
    """float32 ``x`` rounded to TF32 (10 stored mantissa bits), to nearest with ties away
    from zero, as ``cvt.rna.tf32.f32``: half a TF32 unit (bit 12) is added to the
    magnitude bits and the 13 low bits cleared; a carry moves into the exponent (the
    next binade, or infinity past the largest TF32 value). Inf and NaN pass unchanged."""
    a = np.ascontiguousarray(x, dtype=np.float32)
    u = a.view(np.uint32)
    finite = (u & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
    r = np.where(finite, (u + np.uint32(0x1000)) & np.uint32(0xFFFFE000), u)
    return r.astype(np.uint32).view(np.float32).reshape(a.shape)
