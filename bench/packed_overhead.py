"""The packed API against the bound call on the same GEMMs: event-timed back-to-back calls
(bench/timing.do_bench: host work and kernels together), one device, one run.

Per case (MaxMN x K x groups): ragged M as a mixture-of-experts layer holds it, A (T, K)
rows packed, B (G, K, N), C (T, N), M_g uniform in [0, MaxMN], N = MaxMN, K fixed, and
group ends ``offs`` (int32, torch._grouped_mm's convention) on the host and on the
device. Timed: ``gemm_grouped`` with host offsets, with device offsets, and the bound
call ``portgemm.plan(shapes).bind(views)()`` over views of the same buffers (what the
packed call must come within 15 % of). Each entry point's output is checked once over
NaN-poisoned C against float64 (a sample of the groups). The last column names the tile
kind the device-offsets call runs (grouped/ragged_kind.choose_kind: the cost model's pick).

    python bench/packed_overhead.py [--quick] [--dtype float32] [--out packed.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import portgemm  # noqa: E402
from portgemm.backends.base import get_backend  # noqa: E402
from portgemm.grouped.ragged_kind import choose_kind  # noqa: E402
from peers import checked  # noqa: E402
from timing import do_bench  # noqa: E402

MAX_MN = (128, 256, 512, 1024)
KS = (128, 512)
GROUPS = (8, 64, 256, 1024)
TOL = {"float32": 1e-4, "float64": 1e-10}


def packed_case(cp, rng, groups, max_mn, k, dtype):
    """A, B, C, host offs, device offs, and the per-group views of the same buffers."""
    m = rng.integers(0, max_mn + 1, groups)
    offs = np.cumsum(m).astype(np.int32)
    T, n = int(offs[-1]), int(max_mn)
    A = cp.random.random((T, k), dtype=cp.float64).astype(dtype) - 0.5
    B = cp.random.random((groups, k, n), dtype=cp.float64).astype(dtype) - 0.5
    C = cp.empty((T, n), dtype)
    starts = np.concatenate([[0], offs[:-1]])
    views = ([A[s:e] for s, e in zip(starts, offs)], [B[g] for g in range(groups)],
             [C[s:e] for s, e in zip(starts, offs)])
    shapes = np.stack([m, np.full(groups, n), np.full(groups, k)], 1)
    return A, B, C, offs, cp.asarray(offs), views, shapes


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="MaxMN 128/512, K 128, all groups")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    be = get_backend("cuda")
    cp = be.cp
    cp.random.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    arch = be.arch()
    print(f"device: {be.device_name()} ({arch.name}, {arch.compute_units} SMs); {args.dtype}, "
          f"alpha = 1, beta = 0; M_g uniform in [0, MaxMN], N = MaxMN")
    rows, raw, ratios = [], [], {"host": [], "device": []}
    mns = MAX_MN[::2] if args.quick else MAX_MN
    ks = KS[:1] if args.quick else KS
    for max_mn in mns:
        for k in ks:
            for groups in GROUPS:
                A, B, C, offs, d_offs, (la, lb, lc), shapes = packed_case(
                    cp, rng, groups, max_mn, k, args.dtype)
                bound = portgemm.plan(shapes, args.dtype, arch=arch).bind(la, lb, lc, backend=be)
                calls = {
                    "host": lambda: portgemm.gemm_grouped(A, B, C, offs, backend=be),
                    "device": lambda: portgemm.gemm_grouped(A, B, C, d_offs, backend=be),
                    "bound": bound}
                for name, fn in calls.items():
                    err = checked(cp, fn, la, lb, lc)
                    assert err < TOL[args.dtype], f"{name}: max relative error {err:.1e}"
                t = {name: do_bench(cp, fn) * 1e3 for name, fn in calls.items()}  # us
                for name in ratios:
                    ratios[name].append(t[name] / t["bound"])
                kind = choose_kind(arch, groups, int(offs[-1]), max_mn, k, args.dtype).name
                rows.append([max_mn, k, groups, t["host"], t["device"], t["bound"],
                             t["host"] / t["bound"], t["device"] / t["bound"], kind])
                raw.append({"max_mn": max_mn, "k": k, "groups": groups, "device_kind": kind,
                            **{f"{n}_us": v for n, v in t.items()}})
                del A, B, C, d_offs, la, lb, lc, bound, calls
                cp.get_default_memory_pool().free_all_blocks()
    print("\nus per call (event-timed back-to-back, host work included):")
    print(tabulate(rows, headers=["MaxMN", "K", "groups", "packed host offs",
                                  "packed device offs", "bound", "host/bound", "device/bound",
                                  "device-offsets kind"],
                   floatfmt=(".0f", ".0f", ".0f", ",.1f", ",.1f", ",.1f", ".3f", ".3f")))
    geo = {n: float(np.exp(np.mean(np.log(r)))) for n, r in ratios.items()}
    worst = {n: float(np.max(r)) for n, r in ratios.items()}
    print(f"packed/bound geometric mean over {len(rows)} cases: host offsets {geo['host']:.3f}, "
          f"device offsets {geo['device']:.3f} (worst {worst['host']:.3f} / "
          f"{worst['device']:.3f}); target <= 1.15")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": be.device_name(), "dtype": args.dtype,
                                              "cases": raw, "geomean": geo}, indent=1))


if __name__ == "__main__":
    main()
