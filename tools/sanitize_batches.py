"""A small workload for compute-sanitizer: every strategy and mode, both dtypes, all four
transpose pairs, edge sizes and per-GEMM alpha/beta, each checked against float64; then
the tensor-core paths' default plans (float16, and float32 in the precision modes tf32 and
3xtf32) over the same sizes; float16 staged (plan(staging=True): the alignment copy into
a workspace, then the inner plan on it) over them; and, where the device has them (sm_90),
each wgmma kind forced (tiles.WGMMA_FAMILIES: float16, and wgmma-3xtf32 on float32; their
stages past 48 KiB are dynamic shared memory), aligned and strided rows, edge sizes and a
long K; then every SIMT kind of ours (fp32, fp64) and every float16 / 3xtf32 wgmma kind
forced, three tiles a block (a tile's epilogue beside the next tile's copies); last, every
float32 tensor-core kind (the TF32 families and wgmma-3xtf32) forced on operands that
end where their own cudaMalloc ends (no memory pool), with leading
dimensions of every residue mod 4 and bases 1-3 elements past a 16-byte boundary, NaN
between the rows: the stages' aligned windows (PgTf32Stage) must not read past a
matrix's last element; and every float16 MMA kind forced on such operands with odd
leading dimensions and bases 0, 1 or 3 elements into their allocation: the shifted word
copies of 2-byte rows (pg_copy_shift16) read from the word before a chunk and must not
read before the allocation or past its last element.

    compute-sanitizer --tool memcheck --error-exitcode 9 python3 tools/sanitize_batches.py
                                                               [--only simt_blocks,wgmma_blocks]

Exits 1 on a wrong result (the sanitizer's own exit code reports its findings)."""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import portgemm  # noqa: E402
from gpu_batches import FAMILY, TOL, family_plan, make_host_batch, max_rel_error, reference  # noqa: E402
from portgemm.tiles import (FAMILIES, TF32_FAMILIES, WGMMA_FAMILIES, family_builds_for,  # noqa: E402
                            family_precision)
from portgemm.tuning.model import family_kind_plan  # noqa: E402

SHAPES = [(1, 1, 1), (17, 31, 15), (64, 64, 16), (127, 61, 33), (0, 5, 3), (300, 130, 70),
          (16, 200, 0), (45, 1, 129)]
# the default plan (no mode named) splits K on these (planner/split_k.py)
SPLIT_SHAPES = [(64, 64, 4096), (33, 17, 1000), (5, 70, 2050), (0, 8, 512), (20, 24, 0),
                (16, 16, 40)]
# tensor-core paths: (dtype, precision), relative Frobenius error allowed against float64
# of the rounded inputs (float16: the result rounded to 2^-11; tf32: inputs rounded to
# 2^-11; 3xtf32: fp32-level)
MMA_CASES = {("float16", None): 4e-3, ("float32", "tf32"): 4e-3, ("float32", "3xtf32"): 1e-5}
STAGED = "staged"   # a strategy slot of its own: float16 with staging=True
# the wgmma kinds forced (tuning.model.family_kind_plan): edges, a K tail past 3 stages
WGMMA_SHAPES = [(130, 200, 72), (64, 128, 1000), (1, 1, 8), (0, 16, 16), (200, 136, 0),
                (257, 129, 200)]
CASES = [(None, "fused"), (None, "per-kind"), ("coordinated", None), ("magma", None),
         (None, None)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None,
                    help="comma list of parts: simt_blocks, wgmma_blocks, windows, shift16")
    only = ap.parse_args(argv).only
    be = portgemm.backends.base.get_backend("cuda")
    cp = be.cp
    rng = np.random.default_rng(11)
    if only:
        parts = {"simt_blocks": simt_blocks, "wgmma_blocks": wgmma_blocks, "windows": windows,
                 "shift16": shift16}
        return 1 if sum(parts[p](be, be.arch(), rng) for p in only.split(",")) else 0
    bad = 0
    runs = [(strategy, mode, dtype, None, TOL[dtype]) for (strategy, mode), dtype in
            itertools.product(CASES, ("float32", "float64"))]
    runs += [(None, None, dtype, precision, tol) for (dtype, precision), tol in MMA_CASES.items()]
    runs += [(STAGED, None, "float16", None, MMA_CASES["float16", None])]
    arch = be.arch()
    runs += [(f"{fam}.{k.kind}", None, dt, None, MMA_CASES[dt, None if dt == "float16" else "3xtf32"])
             for fam, dt in WGMMA_FAMILIES.items() if dt in ("float16", "float32")
             and family_builds_for(fam, arch.name) for k in FAMILIES[fam]]
    for (strategy, mode, dtype, precision, tol), (ta, tb) in itertools.product(
            runs, itertools.product((False, True), repeat=2)):
        forced = strategy is not None and "." in strategy
        shapes = WGMMA_SHAPES if forced else SPLIT_SHAPES \
            if (strategy, mode, precision) == (None, None, None) and dtype != "float16" else SHAPES
        # the MMA paths also dense (nn, tt), where aligned rows take the 16-byte copies
        dense = ((dtype, precision) in MMA_CASES or forced) and ta == tb and strategy != STAGED
        A, B, C, alpha, beta, ref = nan_batch(cp, rng, shapes, dtype, ta, tb, not dense)
        staged = strategy == STAGED
        if forced:
            p = family_kind_plan(shapes, dtype, arch, *strategy.split("."), "sanitize")
        else:
            p = portgemm.plan(shapes, dtype=dtype, arch=arch, mode=mode, precision=precision,
                              **({"staging": True} if staged else {"strategy": strategy}))
        p.run(A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=be)
        err = max_rel_error([cp.asnumpy(c) for c in C], ref)
        ok = err < tol
        bad += not ok
        print(f"{strategy or 'default'}/{p.mode}{' split-K' if p.split else ''}"
              f"{' staged' if p.staging is not None else ''} {dtype} "
              f"{precision or ''} "
              f"trans={int(ta)}{int(tb)}: "
              f"err {err:.2e} {'ok' if ok else 'WRONG'}")
    bad += simt_blocks(be, arch, rng)
    bad += wgmma_blocks(be, arch, rng)
    bad += windows(be, arch, rng)
    bad += shift16(be, arch, rng)
    return 1 if bad else 0


def exact_view(cp, vals, ld, start):
    """``vals`` (rows, cols) on the device with leading dimension ``ld``, ``start``
    elements into an allocation of its own that ends at its last element, NaN elsewhere."""
    r, c = vals.shape
    size = vals.dtype.itemsize
    n = start + (r - 1) * ld + c if r and c else start + 1
    mem = cp.cuda.memory.MemoryPointer(cp.cuda.memory.Memory(size * n), 0)
    flat = cp.ndarray((n,), vals.dtype, memptr=mem)
    flat.fill(np.nan)
    view = cp.lib.stride_tricks.as_strided(flat[start:], (r, c), (size * ld, size))
    view[...] = cp.asarray(vals)
    return view


def nan_batch(cp, rng, shapes, dtype, ta, tb, strided):
    """Device operands of ``shapes``, alpha and beta per GEMM (beta == 0 on every other
    one, its C NaN), and the float64 reference."""
    hA, hB, hC = make_host_batch(rng, shapes, dtype, ta, tb, strided=strided)
    alpha = rng.uniform(-2, 2, len(shapes))
    beta = np.where(np.arange(len(shapes)) % 2, 0.0, rng.uniform(-2, 2, len(shapes)))
    for c, b_ in zip(hC, beta):
        if b_ == 0:
            c[...] = np.nan
    ref = reference(hA, hB, hC, alpha, beta, ta, tb)
    A, B, C = ([cp.asarray(x) for x in xs] for xs in (hA, hB, hC))
    return A, B, C, alpha, beta, ref


def simt_blocks(be, arch, rng) -> int:
    """Every SIMT kind of ours forced, fp32 and fp64 (both main loops, the k-major
    pipeline and the register path, and the epilogue that stages unaligned C through
    shared memory), three tiles a block: a warp's epilogue then runs beside the other
    warps' next tile, whose copies must not touch the shared rows it uses (racecheck)."""
    runs = [(dt, FAMILY[dt], k.kind, TOL[dt]) for dt in ("float32", "float64")
            for k in FAMILIES[FAMILY[dt]] if k.engine == "simt"]
    return blocks_of_three(be, arch, rng, runs, [*SHAPES, (200, 300, 24), (129, 257, 9),
                                                 (256, 128, 40)])


def wgmma_blocks(be, arch, rng) -> int:
    """Every float16 / 3xtf32 wgmma kind forced (where the device has them), three tiles a
    block: a warp's epilogue through the last stage (pg_wgmma_store) runs beside the
    other warps' next tile (racecheck)."""
    runs = [(dt, fam, k.kind, MMA_CASES[dt, None if dt == "float16" else "3xtf32"])
            for fam, dt in WGMMA_FAMILIES.items()
            if dt in ("float16", "float32") and family_builds_for(fam, arch.name)
            for k in FAMILIES[fam]]
    return blocks_of_three(be, arch, rng, runs, [*WGMMA_SHAPES, (300, 260, 40), (129, 257, 9)])


def blocks_of_three(be, arch, rng, runs, shapes) -> int:
    """Each (dtype, family, kind, tolerance) of ``runs`` forced on ``shapes``, three tiles
    a block, strided rows, every transpose pair; the number of wrong results."""
    cp = be.cp
    bad = 0
    for (dt, fam, kind, tol), (ta, tb) in itertools.product(
            runs, itertools.product((False, True), repeat=2)):
        A, B, C, alpha, beta, ref = nan_batch(cp, rng, shapes, dt, ta, tb, True)
        p = family_plan(shapes, dt, arch, "per-kind", kind, tiles_per_block=3, family=fam)
        p.run(A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=be)
        err = max_rel_error([cp.asnumpy(c) for c in C], ref)
        bad += not err < tol
        print(f"{fam}.{kind} {dt} 3 tiles/block trans={int(ta)}{int(tb)}: err {err:.2e} "
              f"{'ok' if err < tol else 'WRONG'}")
    return bad


def windows(be, arch, rng) -> int:
    """The float32 tensor-core kinds on exact-extent, unaligned operands (module doc)."""
    fams = [f for f in (*TF32_FAMILIES, *WGMMA_FAMILIES) if family_precision(f) != "ieee"
            and family_builds_for(f, arch.name)]
    return exact_extent_runs(
        be, arch, rng, "windows", [(fam, k.kind) for fam in fams for k in FAMILIES[fam]],
        [(130, 200, 97), (64, 128, 256), (33, 70, 65), (5, 7, 3)], "float32",
        lambda g, cols: (cols + g % 4 + 1, 1 + g % 3),
        lambda fam: MMA_CASES["float32", family_precision(fam)])


def shift16(be, arch, rng) -> int:
    """The float16 MMA kinds on exact-extent operands with odd leading dimensions (module
    doc): most slices of these shapes lie inside their matrices, where 2-byte rows take
    the shifted word copies."""
    fam = "portgemm-f16"
    return exact_extent_runs(
        be, arch, rng, "shift16", [(fam, k.kind) for k in FAMILIES[fam] if k.engine == "mma"],
        [(130, 200, 97), (64, 128, 256), (96, 33, 160), (5, 7, 3)], "float16",
        lambda g, cols: ((cols | 1) + 2 * (g % 2), (0, 1, 3)[g % 3]),
        lambda fam: MMA_CASES["float16", None])


def exact_extent_runs(be, arch, rng, label, kinds, shapes, dtype, ld_start, tol_of) -> int:
    """Each (family, kind) forced on ``shapes``, four transposes, A and B as exact_view
    operands: GEMM g's stored matrix of ``cols`` columns at (leading dimension, start) =
    ld_start(g, cols), B's with g + 1. Returns how many runs were wrong."""
    cp = be.cp
    bad = 0
    for (fam, kind), (ta, tb) in itertools.product(kinds, itertools.product((False, True), repeat=2)):
        hA, hB, hC = make_host_batch(rng, shapes, dtype, ta, tb)
        A = [exact_view(cp, a, *ld_start(g, a.shape[1])) for g, a in enumerate(hA)]
        B = [exact_view(cp, b, *ld_start(g + 1, b.shape[1])) for g, b in enumerate(hB)]
        C = [cp.asarray(c) for c in hC]
        alpha, beta = rng.uniform(-2, 2, len(shapes)), rng.uniform(-2, 2, len(shapes))
        ref = reference(hA, hB, hC, alpha, beta, ta, tb)
        p = family_kind_plan(shapes, dtype, arch, fam, kind, "sanitize")
        p.run(A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=be)
        err = max_rel_error([cp.asnumpy(c) for c in C], ref)
        tol = tol_of(fam)
        bad += not err < tol
        print(f"{label} {fam}.{kind} trans={int(ta)}{int(tb)}: err {err:.2e} "
              f"{'ok' if err < tol else 'WRONG'}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
