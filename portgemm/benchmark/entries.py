"""portgemm's entry points as benchmark methods. An entry is a function
(dev, ops, strategy) -> Prepared; registering one is a decorator, so a new API is a
few lines. ``available`` says whether this portgemm has it."""
from __future__ import annotations

import numpy as np

import portgemm

from .methods import Method, Prepared, Skip

ENTRIES: dict[str, tuple] = {}   # name -> (make, available)


def entry(name, available=lambda: True):
    def deco(fn):
        ENTRIES[name] = (fn, available)
        return fn
    return deco


def entries() -> list[str]:
    """Entry names this portgemm provides."""
    return [n for n, (_, ok) in ENTRIES.items() if ok()]


def methods(names, strategies) -> list[Method]:
    out = []
    for s in strategies:
        for n in names:
            make = ENTRIES[n][0]
            out.append(Method(f"{n}/{s}", "portgemm",
                              lambda dev, ops, _m=make, _s=s: _m(dev, ops, _s), strategy=s, entry=n))
    return out


def _plan(dev, ops, strategy):
    return portgemm.plan(ops.shapes, dtype=ops.dtype.name, arch=dev.be.arch(), strategy=strategy)


@entry("bound")
def _bound(dev, ops, strategy):
    p = _plan(dev, ops, strategy)
    return Prepared(p.bind(ops.A, ops.B, ops.C, backend=dev.be), plan=p)


@entry("run")
def _run(dev, ops, strategy):
    p = _plan(dev, ops, strategy)
    return Prepared(lambda: p.run(ops.A, ops.B, ops.C, backend=dev.be), plan=p)


@entry("gemm_vbatched")
def _vbatched(dev, ops, strategy):
    return Prepared(lambda: portgemm.gemm_vbatched(ops.A, ops.B, ops.C, backend=dev.be,
                                                   strategy=strategy),
                    plan=_plan(dev, ops, strategy))


@entry("grouped", available=lambda: hasattr(portgemm, "gemm_grouped"))
def _grouped(dev, ops, strategy):
    """The packed ragged-M form: A (sum M, K), B (G, K, N), C (sum M, N), offs the
    cumulative row ends (torch._grouped_mm's convention), on the device."""
    if not ops.uniform_nk:
        raise Skip("grouped (ragged M) needs one N and one K across the batch")
    n, k = (int(v) for v in ops.shapes[0, 1:])
    rows = int(ops.shapes[:, 0].sum())
    A = ops.a_flat.reshape(rows, k)
    B = ops.b_flat.reshape(ops.batch, k, n)
    C = ops.c_flat.reshape(rows, n)
    offs = dev.asarray(np.cumsum(ops.shapes[:, 0]).astype(np.int32))
    kw = {} if strategy == portgemm.strategies()[0] else {"strategy": strategy}
    return Prepared(lambda: portgemm.gemm_grouped(A, B, C, offs=offs, backend=dev.be, **kw))
