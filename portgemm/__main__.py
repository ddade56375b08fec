"""python -m portgemm run [...]: plan, run, time and check one random irregular batch.
(``bench`` and ``tune`` are dispatched to their own parsers.)"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from .cli import OneLineParser, nonnegative_int, positive_int

TOLERANCE = {"float32": 1e-5, "float64": 1e-12}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # its own parser: python -m portgemm bench --help
        from portgemm.benchmark.cli import main as bench_main
        return bench_main(argv[1:])
    if argv[:1] == ["tune"]:   # likewise: python -m portgemm tune --help
        from portgemm.tuning.cli import main as tune_main
        return tune_main(argv[1:])
    p = OneLineParser(
        prog="python -m portgemm",
        description="Variable-size batched GEMM, planned by an occupancy model.")
    sub = p.add_subparsers(dest="command")
    sub.add_parser("bench", help="portgemm against its peers on this device (bench --help)",
                   add_help=False)
    sub.add_parser("tune", help="time the candidate tile kinds on this device and write the "
                                "planner's tuned data file (tune --help)", add_help=False)
    r = sub.add_parser("run", help="plan, run, time and check a random irregular batch",
                       description="Build a random batch (M, N uniform in [16, max-mn], K in "
                                   "[16, max-k]), plan it, run it, time it and check it "
                                   "against a float64 reference.")
    r.add_argument("--batch", type=positive_int, default=1024, help="number of GEMMs (default 1024)")
    r.add_argument("--max-mn", type=positive_int, default=256, help="largest M and N (default 256)")
    r.add_argument("--max-k", type=positive_int, default=256, help="largest K (default 256)")
    r.add_argument("--dtype", choices=sorted(TOLERANCE), default="float32")
    r.add_argument("--strategy", default=None, help="planner strategy (default: the planner's)")
    r.add_argument("--backend", default=None, help="cuda, hip or numpy (default: first available)")
    r.add_argument("--arch", default=None,
                   help="architecture to plan for, e.g. sm_80, gfx90a, h100 (default: the "
                        "device's; on numpy $PORTGEMM_ARCH, else sm_90)")
    r.add_argument("--seed", type=nonnegative_int, default=0)
    r.add_argument("--trans-a", action="store_true")
    r.add_argument("--trans-b", action="store_true")
    r.add_argument("--reps", type=positive_int, default=None,
                   help="timed repetitions (default 20 on a GPU, 3 on numpy)")
    args = p.parse_args(argv)
    if args.command != "run":
        p.print_help()
        return 0
    from portgemm.errors import PortgemmError
    try:
        return run(args)
    except PortgemmError as e:  # a bad option or no usable device: say so, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"error: not enough host memory for {args.batch} GEMMs up to "
              f"{args.max_mn} x {args.max_mn} x {args.max_k}", file=sys.stderr)
        return 2


def pick_backend(name):
    """(backend, [(skipped name, why)]): the named backend, or the first that runs here."""
    from portgemm.backends.base import ORDER, get_backend
    from portgemm.errors import DeviceUnavailable
    if name is not None:
        return get_backend(name), []
    skipped = []
    for n in ORDER:
        try:
            return get_backend(n), skipped
        except DeviceUnavailable as e:
            skipped.append((n, str(e)))
    raise DeviceUnavailable("no backend available: " + "; ".join(w for _, w in skipped))


def arch_source(args, be) -> str:
    """Where the planned-for architecture came from, and how to change it."""
    if args.arch is not None:
        return "from --arch"
    if be.name != "numpy":
        return "the device's; --arch plans for another"
    env = os.environ.get("PORTGEMM_ARCH")
    if env:
        return f"from PORTGEMM_ARCH={env}; change it with --arch or PORTGEMM_ARCH"
    return "no device to ask: the default; change it with --arch or PORTGEMM_ARCH"


def random_shapes(rng, batch, max_mn, max_k):
    """(batch, 3) M, N, K: M, N uniform in [16, max_mn], K in [16, max_k]."""
    lo_mn, lo_k = min(16, max_mn), min(16, max_k)
    M = rng.integers(lo_mn, max_mn + 1, batch)
    N = rng.integers(lo_mn, max_mn + 1, batch)
    K = rng.integers(lo_k, max_k + 1, batch)
    return np.stack([M, N, K], axis=1)


def random_operands(rng, shapes, dtype, trans_a, trans_b):
    """Host A and B for ``shapes``, entries uniform in [-0.5, 0.5)."""
    def rand(rows, cols, t):
        return rng.random((cols, rows) if t else (rows, cols), dtype=dtype) - dtype(0.5)

    A = [rand(m, k, trans_a) for m, _, k in shapes]
    B = [rand(k, n, trans_b) for _, n, k in shapes]
    return A, B


def max_rel_error(C, A, B, trans_a, trans_b):
    worst = 0.0
    for c, a, b in zip(C, A, B):
        a64 = (a.T if trans_a else a).astype(np.float64)
        b64 = (b.T if trans_b else b).astype(np.float64)
        ref = a64 @ b64
        err = np.linalg.norm(c.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-300)
        worst = max(worst, float(err) if np.isfinite(err) else float("inf"))
    return worst


def run(args) -> int:
    import portgemm

    be, skipped = pick_backend(args.backend)
    dtype = np.dtype(args.dtype).type
    rng = np.random.default_rng(args.seed)
    shapes = random_shapes(rng, args.batch, args.max_mn, args.max_k)
    # Planned before any array exists: a batch no run could take is refused cheaply.
    plan = portgemm.plan(shapes, dtype=args.dtype, strategy=args.strategy,
                         arch=be.arch() if args.arch is None else args.arch)
    A_h, B_h = random_operands(rng, shapes, dtype, args.trans_a, args.trans_b)

    A = [be.to_device(a) for a in A_h]
    B = [be.to_device(b) for b in B_h]
    C = [be.to_device(np.full((m, n), np.nan, dtype)) for m, n, _ in shapes]  # poisoned
    call = dict(alpha=1.0, beta=0.0, trans_a=args.trans_a, trans_b=args.trans_b, backend=be)

    plan.run(A, B, C, **call)  # the checked run, also the warm-up
    be.synchronize()
    err = max_rel_error([be.to_host(c) for c in C], A_h, B_h, args.trans_a, args.trans_b)

    reps = args.reps or (3 if be.name == "numpy" else 20)
    t_run = _median_seconds(lambda: plan.run(A, B, C, **call), be, reps)
    bound = plan.bind(A, B, C, **call)
    bound()  # warm-up: uploads this array set's descriptors
    t_bound = _median_seconds(bound, be, reps)

    tol = TOLERANCE[args.dtype]
    per_kind = ", ".join(f"{k} {v}" for k, v in plan.tiles_per_kind().items())
    ops = ("T" if args.trans_a else "N") + ("T" if args.trans_b else "N")
    print(f"device:      {be.device_name()} (backend {be.name})")
    for name, why in skipped:
        print(f"skipped:     {name}: {why}")
    print(f"arch:        plans for {plan.arch.name} ({plan.arch.part}, {plan.arch.compute_units} "
          f"{plan.arch.unit}s), {arch_source(args, be)}")
    print(f"problem:     {args.batch} GEMMs {args.dtype} {ops}, M,N in [{min(16, args.max_mn)}, "
          f"{args.max_mn}], K in [{min(16, args.max_k)}, {args.max_k}], seed {args.seed}")
    print(f"plan:        strategy {plan.strategy}, mode {plan.mode}, {plan.n_tiles} tiles in "
          f"{plan.n_blocks} blocks ({per_kind})")
    print(f"TLP:         {plan.tlp:,.0f} vs threshold {plan.tlp_threshold:,.0f} "
          f"({plan.tlp_model}): {plan.tlp_verdict()}")
    print(f"occupancy:   predicted occupancy {plan.predicted_occupancy():.0%} "
          f"(block-weighted, by the occupancy model)")
    for n in plan.notes:
        print(f"note:        {n}")
    for w in plan.spill_warnings():
        print(f"warning:     {w}")
    print(f"time:        plan.run {t_run * 1e3:.3f} ms ({plan.flops / t_run / 1e9:,.1f} GFLOP/s, "
          f"validates every call); bound call {t_bound * 1e3:.3f} ms "
          f"({plan.flops / t_bound / 1e9:,.1f} GFLOP/s); medians of {reps} after warm-up")
    ok = err <= tol
    print(f"error:       max ||C - Cref|| / ||Cref|| = {err:.2e} (tolerance {tol:.0e}) "
          f"{'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


def _median_seconds(fn, be, reps) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        be.synchronize()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


if __name__ == "__main__":
    sys.exit(main())
