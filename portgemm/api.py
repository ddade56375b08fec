"""The public entry points: gemm_vbatched, Plan.run and Plan.bind."""
from __future__ import annotations

import numpy as np

from .backends.base import get_backend
from .errors import DtypeError, ShapeMismatch
from .problem import validate


def gemm_vbatched(A, B, C, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,
                  backend=None, strategy=None):
    """C_i = alpha_i op(A_i) op(B_i) + beta_i C_i for every i, in place; returns C.

    A, B, C: sequences of 2-D arrays of one dtype (float32 or float64) on the backend's
    device, any strides with unit inner stride. alpha, beta: scalars or one per GEMM.
    op(X) is X.T when the trans flag is set. backend: "cuda", "hip", "numpy" or None
    (the first available, in that order). strategy: a planner name (portgemm.strategies()).
    """
    be = get_backend(backend)
    batch = validate(A, B, C, alpha, beta, trans_a, trans_b, be.array_info)
    if batch.size == 0:
        return C
    from .planner import plan
    p = plan(batch.shapes, dtype=batch.dtype, arch=be.arch(), strategy=strategy)
    be.execute(p, batch)
    return C


def _checked(plan, A, B, C, alpha, beta, trans_a, trans_b, backend):
    be = get_backend(backend)
    batch = validate(A, B, C, alpha, beta, trans_a, trans_b, be.array_info)
    if batch.size and batch.dtype != plan.dtype:
        raise DtypeError(f"plan was made for {plan.dtype}, arrays are {batch.dtype}")
    if batch.shapes.shape != plan.shapes.shape or not np.array_equal(batch.shapes, plan.shapes):
        bad = _first_mismatch(batch.shapes, plan.shapes)
        raise ShapeMismatch("shapes differ from the ones the plan was made for", gemm=bad)
    return be, batch


def run_plan(plan, A, B, C, alpha, beta, trans_a, trans_b, backend):
    be, batch = _checked(plan, A, B, C, alpha, beta, trans_a, trans_b, backend)
    if batch.size:
        be.execute(plan, batch)
    return C


class BoundGemm:
    """One plan bound to fixed arrays, validated once: calling it only launches.

    For loops that run the same batch on the same buffers (inference, solvers): it
    skips the per-call validation, whose cost grows with the batch (about 1-5 us per
    GEMM), and reuses its device descriptors. It holds the arrays, the plan and those
    descriptors, so a CUDA graph captured from it stays valid while it lives; the bound
    arrays' shapes must not be changed in place while bound.
    """

    def __init__(self, plan, backend, batch, C):
        self.plan, self.backend, self.batch, self.C = plan, backend, batch, C
        self._gemms = None  # the device descriptors, held after the first call

    def __call__(self):
        if self.batch.size:
            self._gemms = self.backend.execute(self.plan, self.batch, self._gemms)
        return self.C


def bind_plan(plan, A, B, C, alpha, beta, trans_a, trans_b, backend) -> BoundGemm:
    be, batch = _checked(plan, A, B, C, alpha, beta, trans_a, trans_b, backend)
    return BoundGemm(plan, be, batch, C)


def _first_mismatch(a, b):
    if a.shape != b.shape:
        return None
    return int(np.flatnonzero((a != b).any(axis=1))[0])
