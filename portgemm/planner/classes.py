"""A batch as classes of GEMMs the device rule cannot tell apart.

Everything the device rule and its bound read of a GEMM under a family depends on M,
N and K only through the tile grid (ceil(M / tm), ceil(N / tn)), which tiles fit
(tm <= M, tn <= N) and divide (tm | M, tn | N), and the K steps (ceil(K / tk)). Two
GEMMs that agree on all of these for every kind of both families weighed are one
*class*: they get the same tables, the same choices and the same kind. So the rule can
run on one representative GEMM per class, each counted as many times as its class
has members (its weight), and give each GEMM its class's kind: the aggregates it sums
are integers (tiles, tiles x steps), the same in any order, and its maxima are the
same maxima. Per-GEMM sums of non-integers (the structure bound) are taken over the
GEMMs in their order, as without classes, so every number is the same.

Classes pay where the batch has many GEMMs and few distinct classes: small M and N
(every size up to the largest tile edge is a class of its own only through its flags)
and repeated shapes (MoE steps). Uniform sizes up to 1,024 have nearly as many classes
as GEMMs; there :func:`batch_classes` gives up after a few passes over the batch.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .memo import per_family

MIN_BATCH = 256      # below this, the classes cost more than they save
MAX_SHARE = 0.5      # classes per GEMM above which the batch is planned GEMM by GEMM
MAX_KEYS = 8         # dense class keys per GEMM at most (the bincount's length)
MAX_SPAN = 16        # steps per GEMM a dimension's sizes may span (its bincount's length)


@dataclass(frozen=True)
class BatchClasses:
    """One representative GEMM per class (``shapes``, (classes, 3)), the class sizes
    (``weights``, float64) and each GEMM's class (``inverse``, (batch,))."""
    shapes: np.ndarray
    weights: np.ndarray
    inverse: np.ndarray


def _dim_codes(v: np.ndarray, step: int, patterns, limit: int):
    """(codes, count) of one dimension: a dense code per GEMM, equal for two sizes
    exactly when ceil(v / step) and the divisibility pattern (``patterns``: (table over
    v mod period, period, patterns), or None for none) agree; None where more than
    ``limit`` codes are present, or the sizes span more than MAX_SPAN steps per GEMM."""
    if step & (step - 1) == 0:   # ceil(v / step) by a shift: integers throughout
        q = np.right_shift(v + (step - 1), step.bit_length() - 1)
    else:
        q = np.ceil(np.true_divide(v, step)).astype(np.int64)   # exact: v < 2**31
    low, high = int(q.min()), int(q.max())
    if high - low >= MAX_SPAN * v.shape[0]:   # the counts below would be a huge array
        return None
    q -= low
    code = q
    size = np.bincount(code)
    if np.count_nonzero(size) > limit:   # too many already, before the patterns
        return None
    if patterns is not None:
        table, period, n_patterns = patterns
        low = v & (period - 1) if period & (period - 1) == 0 else v % period
        code *= n_patterns
        code += table.take(low)
        size = np.bincount(code)
    present = _present(size)
    if present.shape[0] > limit:
        return None
    slot = np.zeros(size.shape[0], dtype=np.int64)
    slot[present] = np.arange(present.shape[0])
    return slot.take(code), present.shape[0]


def _present(size: np.ndarray) -> np.ndarray:
    """size.nonzero()[0] of a bincount: through a bool mask where the counts are many
    (numpy's nonzero of a long int64 array with scattered zeros is ~4x slower than of
    its mask; for short ones the mask's pass costs more than it saves)."""
    return size.nonzero()[0] if size.shape[0] <= 4096 else (size != 0).nonzero()[0]


@per_family
def _edge_steps(kinds: tuple):
    """Per dimension (M, N, K) of ``kinds``: (step, patterns) or None where the class
    code cannot be formed. step: the smallest tile edge (K: the smallest K step), every
    other a multiple of it, so ceil(v / step) decides ceil(v / edge) for each; patterns
    (M, N only): (a table of the divisibility pattern over v mod the edges' least
    common multiple, that multiple, the number of patterns), which with ceil(v / step) also decides edge <= v."""
    out = []
    for edges, with_pattern in (({k.tm for k in kinds}, True), ({k.tn for k in kinds}, True),
                                ({k.tk for k in kinds}, False)):
        e = sorted(edges)
        if any(x % e[0] for x in e):
            return None
        if not with_pattern:
            out.append((e[0], None))
            continue
        period = int(np.lcm.reduce(np.array(e, dtype=np.int64)))
        r = np.arange(period, dtype=np.int64)[:, None]
        sig = r % np.array(e, dtype=np.int64) == 0
        table = np.unique(sig, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
        table.flags.writeable = False
        out.append((e[0], (table, period, int(table.max()) + 1)))
    return tuple(out)


def class_keys(shapes: np.ndarray, steps):
    """(key per GEMM, number of keys) of ``shapes`` under the edge steps ``steps``, or
    None where a dimension has too many distinct codes: more than batch / 32 K steps,
    batch / 4 (K steps, N) pairs or MAX_KEYS x batch keys in all. K first (no pattern:
    the cheapest), then N, then M; a batch of uniform sizes has too many K steps or
    (K, N) pairs for its size and gives up there."""
    B = shapes.shape[0]
    key, space = None, 1
    for d, limit in ((2, B // 32), (1, B // 4), (0, MAX_KEYS * B)):
        step, patterns = steps[d]
        got = _dim_codes(shapes[:, d], step, patterns, limit // space)
        if got is None:
            return None
        code, n = got
        key = code if key is None else key * n + code
        space *= n
    return key, space


def batch_classes(shapes: np.ndarray, kinds) -> BatchClasses | None:
    """The classes of ``shapes`` (validated (batch, 3) int64) under ``kinds`` (every
    kind of every family the rule will weigh), or None where they would not pay: a
    small batch, tile edges or K steps that are not multiples of the smallest, or too
    many distinct sizes (checked dimension by dimension: more than batch / 32 K steps,
    batch / 4 (K steps, N) pairs or MAX_KEYS x batch keys in all, so a batch of uniform
    sizes gives up after one or two passes) or classes (more than MAX_SHARE per GEMM)."""
    B = shapes.shape[0]
    if B < MIN_BATCH:
        return None
    steps = _edge_steps(tuple(kinds))
    if steps is None:
        return None
    if _gives_up_on_a_sample(shapes, steps):
        return None
    got = class_keys(shapes, steps)
    if got is None:
        return None
    key, space = got
    size = np.bincount(key, minlength=space)
    # counted before they are listed: a batch of too many classes (uniform sizes up to
    # 256: ~60,000 keys) gives up without the list
    C = int(np.count_nonzero(size))
    if C > MAX_SHARE * B:
        return None
    present = _present(size)
    slot = np.empty(space, dtype=np.int64)
    slot[present] = np.arange(C)
    inverse = slot.take(key)
    rep = np.empty(C, dtype=np.int64)
    rep[inverse] = np.arange(B)   # any member stands for its class
    reps = shapes.take(rep, axis=0)
    reps.flags.writeable = False
    return BatchClasses(reps, size.take(present).astype(np.float64), inverse)


# GEMMs batch_classes looks at first (the batch's first ones): enough to see that a batch
# of uniform sizes has too many K steps and N sizes, at a fraction of a pass over it.
# From SAMPLED_FROM GEMMs on: below, the sample's dozen small calls cost about what the
# full count does (a batch that has classes pays them for nothing: MoE-like 1,024
# GEMMs 2.5 % slower on this CPU with the sample from 512 on)
SAMPLE = 256
SAMPLED_FROM = 4096


def _gives_up_on_a_sample(shapes: np.ndarray, steps) -> bool:
    """Whether batch_classes would give up at K or N (more than batch / 32 K steps, or
    more N steps than batch / 4 over the K steps), told from the first SAMPLE GEMMs: a
    sample has no more distinct values than the batch, and fewer K steps only raise the
    N limit, so a sample past either limit means the whole batch is past it."""
    B = shapes.shape[0]
    if B < SAMPLED_FROM:
        return False
    n_k = _distinct_steps(shapes[:SAMPLE, 2], steps[2][0])
    if n_k > B // 32:
        return True
    return _distinct_steps(shapes[:SAMPLE, 1], steps[1][0]) > (B // 4) // n_k


def _distinct_steps(v: np.ndarray, step: int) -> int:
    """How many distinct ceil(v / step) the sizes ``v`` have (_dim_codes' first count)."""
    if step & (step - 1) == 0:
        q = np.right_shift(v + (step - 1), step.bit_length() - 1)
    else:
        q = np.ceil(np.true_divide(v, step)).astype(np.int64)
    q -= q.min()
    if int(q.max()) >= MAX_SPAN * q.shape[0]:   # a wide span: sort rather than count
        return int(np.unique(q).shape[0])
    return int(np.count_nonzero(np.bincount(q)))
