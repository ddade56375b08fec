"""Host time of planning (a plan-cache miss), per strategy, batch size and size range,
with a breakdown of where it goes.

    python bench/plan_time.py [--arch sm_90] [--reps 50] [--batches 1024,8192]
                              [--max-mn 128,256,1024] [--strategies wavefront-tlp]
                              [--all-modes] [--no-breakdown] [--clock wall|cpu]
                              [--count-calls] [--dist uniform|moe]

Rows: "default" (plan() with neither strategy nor mode: what a call that names none
pays, two launch structures weighed), then each strategy in its default mode (named).
Shapes follow docs/design.md §6: M, N uniform in [16, MaxMN], K in [16, 512] (``--dist
moe``: MoE-like, 8 experts' (N, K), M in [0, MaxMN]). Each cell
is the median (and the least) of ``reps`` calls of ``plan(..., use_cache=False)`` after
one warm-up call (which fills the per-kind occupancy tables, as the first plan of a
process does). The breakdown times the same calls with the named steps wrapped
(validation, the cache key, and the strategy module's helpers: tile grid, initial
kinds, per-kind tables, ordering, build_tiles, pack_blocks, make_plan; for the device
rule its batch tables, the structure bound, the rounds and caps ladders and their
pricing, which nest inside device_rule); "other" is the rest of the strategy. Steps may nest (coordinated's tiling_engine calls
tile_counts), so parts can add up past the total. Wrapping adds a few µs per step.
``--clock cpu`` times this thread's CPU time instead of wall time: steadier on a shared,
loaded machine. Last, a cache hit.

``--count-calls`` adds, per cell, the NumPy calls one plan makes (CallCounter): calls of
NumPy functions, ufuncs and array methods, and, apart, the operator expressions
evaluated in portgemm's code (``a * b``, ``a[i]``, ``a < b``: an upper bound on the
array operations among them, since Python has no hook that tells an array's operator
from a float's).
"""
from __future__ import annotations

import argparse
import dis
import statistics
import sys
import time
import types

import numpy as np
from tabulate import tabulate

import portgemm  # noqa: F401  (sets the default resources provider)
import portgemm.planner as planner
from portgemm.planner import DEFAULT_STRATEGY, strategies, strategy_info

# Steps wrapped for the breakdown: (module attribute owner, name). Strategy modules
# import their helpers by name, so each is wrapped where the strategy looks it up.
PLANNER_STEPS = ("_shapes", "_key")
STRATEGY_STEPS = ("device_rule", "paper_rule", "notes_for_shapes", "batch_classes",
                  "BatchTables", "least_possible", "typed_rounds", "cap_events", "cap_aggregates",
                  "predict_rows",
                  "tile_grid", "tile_counts", "initial_kinds", "kind_table", "tiling_engine",
                  "choose_config", "gemm_lpt_order", "per_gemm_tiles", "tile_layout",
                  "build_tiles", "threshold_batching",
                  "binary_batching", "pack_blocks", "make_plan")


def shapes(batch, max_mn, max_k=512, seed=0, dist="uniform"):
    """docs/design.md §6's shapes (``dist`` "uniform"), or MoE-like ones ("moe"): 8
    experts, each one (N, K) of multiples of 256 up to 2,048, tokens per GEMM (M)
    uniform in [0, MaxMN] (an idle expert has M = 0)."""
    rng = np.random.default_rng(seed)
    if dist == "moe":
        nk = rng.integers(1, 9, (8, 2)) * 256
        e = rng.integers(0, 8, batch)
        return np.stack([rng.integers(0, max_mn + 1, batch), nk[e, 0], nk[e, 1]], axis=1)
    return np.stack([rng.integers(16, max_mn + 1, batch), rng.integers(16, max_mn + 1, batch),
                     rng.integers(16, max_k + 1, batch)], axis=1)


# perf_counter_ns (wall, the default) or thread_time_ns (--clock cpu: this thread's CPU
# time, steadier on a shared, loaded machine; the same on an idle one)
_clock = time.perf_counter_ns


def timed(fn, reps):
    """(median µs, least µs) of ``reps`` calls after one warm-up."""
    fn()
    times = []
    for _ in range(reps):
        t0 = _clock()
        fn()
        times.append(_clock() - t0)
    return statistics.median(times) / 1e3, min(times) / 1e3


class Breakdown:
    """Wraps named functions, adding up the time spent in each per call of plan()."""

    def __init__(self, strategy):
        self.spent: dict[str, list[float]] = {}
        self.current: dict[str, float] = {}
        self.saved = []
        # the strategy's module and every strategy module it calls into (workgroup-tlp
        # runs wavefront-tlp's loop): helpers are looked up in their callers' globals
        modules = {sys.modules[strategy_info(s).fn.__module__] for s in strategies()}
        owners = [(planner, PLANNER_STEPS)] + [(m, STRATEGY_STEPS) for m in modules]
        for owner, names in owners:
            for name in names:
                if hasattr(owner, name):
                    self._wrap(owner, name)

    def _wrap(self, owner, name):
        fn = getattr(owner, name)
        label = name.lstrip("_")

        def wrapped(*a, **k):
            t0 = _clock()
            try:
                return fn(*a, **k)
            finally:
                self.current[label] = self.current.get(label, 0) + _clock() - t0
        self.saved.append((owner, name, fn))
        setattr(owner, name, wrapped)

    def restore(self):
        for owner, name, fn in self.saved:
            setattr(owner, name, fn)

    def run(self, fn, reps):
        fn()
        totals = []
        for _ in range(reps):
            self.current = {}
            t0 = _clock()
            fn()
            totals.append(_clock() - t0)
            for k, v in self.current.items():
                self.spent.setdefault(k, []).append(v)
        total = statistics.median(totals) / 1e3
        parts = {k: statistics.median(v) / 1e3 for k, v in self.spent.items()}
        parts["other"] = max(0.0, total - sum(parts.values()))
        return total, parts


_OPERATORS = {dis.opmap[n] for n in ("BINARY_OP", "COMPARE_OP", "UNARY_NEGATIVE",
                                      "UNARY_INVERT", "BINARY_SUBSCR") if n in dis.opmap}


class _CountedUfunc:
    """A ufunc that counts its calls (methods such as ``.at`` pass through, counted by
    the profiler as C methods)."""

    def __init__(self, fn, counter):
        self._fn, self._counter = fn, counter

    def __call__(self, *a, **k):
        self._counter.numpy += 1
        return self._fn(*a, **k)

    def __getattr__(self, name):
        return getattr(self._fn, name)


class _CountingNumpy(types.ModuleType):
    """Stands in for ``np`` in portgemm's modules while counting: ufuncs come back
    counted; everything else is NumPy's own (its functions are counted by the profiler)."""

    def __init__(self, counter):
        super().__init__("numpy")
        self._counter = counter

    def __getattr__(self, name):
        v = getattr(np, name)
        return _CountedUfunc(v, self._counter) if isinstance(v, np.ufunc) else v


class CallCounter:
    """Counts NumPy calls made while it is active: NumPy's C functions and array / ufunc
    methods (profiler ``c_call`` events), its Python functions (outermost only), ufuncs
    called by name (portgemm's modules see a counting ``np``), and operator opcodes run
    in portgemm's frames (``operators``: an upper bound on the array operations)."""

    def __init__(self):
        self.numpy = 0
        self.operators = 0
        self._depth = 0
        self._swapped = []

    def _is_numpy(self, fn) -> bool:
        owner = getattr(fn, "__self__", None)
        if isinstance(owner, (np.ndarray, np.ufunc, np.generic)):
            return True
        return (getattr(fn, "__module__", None) or "").startswith("numpy")

    def _profile(self, frame, event, arg):
        if event == "c_call" and not self._depth and self._is_numpy(arg):
            self.numpy += 1
        elif event == "call" and frame.f_code.co_filename.startswith(self._np_dir):
            if not self._depth:
                self.numpy += 1
            self._depth += 1
        elif event == "return" and frame.f_code.co_filename.startswith(self._np_dir):
            self._depth -= 1

    def _trace(self, frame, event, arg):
        if event == "call":
            if "portgemm" not in frame.f_code.co_filename:
                return None
            frame.f_trace_opcodes = True
            return self._trace
        if event == "opcode" and frame.f_code.co_code[frame.f_lasti] in _OPERATORS:
            self.operators += 1
        return self._trace

    def __enter__(self):
        import os
        self._np_dir = os.path.dirname(np.__file__)
        fake = _CountingNumpy(self)
        for name, mod in list(sys.modules.items()):
            if name.startswith("portgemm") and getattr(mod, "np", None) is np:
                self._swapped.append(mod)
                mod.np = fake
        self._before = (sys.gettrace(), sys.getprofile())   # a debugger's or coverage's
        sys.setprofile(self._profile)
        sys.settrace(self._trace)
        return self

    def __exit__(self, *exc):
        sys.settrace(self._before[0])
        sys.setprofile(self._before[1])
        for mod in self._swapped:
            mod.np = np
        return False


def count_calls(fn):
    """(NumPy calls, operator expressions) of one call of ``fn`` (after a warm-up)."""
    fn()
    with CallCounter() as c:
        fn()
    return c.numpy, c.operators


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--batches", default="1024,8192")
    ap.add_argument("--max-mn", default="128,256,1024")
    ap.add_argument("--strategies", default=None,
                    help="comma-separated (default: all strategies)")
    ap.add_argument("--all-modes", action="store_true", help="every mode, not just the default")
    ap.add_argument("--no-breakdown", action="store_true")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--count-calls", action="store_true",
                    help="also count the NumPy calls of one plan per cell")
    ap.add_argument("--dist", choices=("uniform", "moe"), default="uniform",
                    help="shapes: design §6's uniform sizes, or MoE-like (8 experts' N, K; "
                         "M in [0, MaxMN])")
    args = ap.parse_args(argv)
    global _clock
    _clock = time.thread_time_ns if args.clock == "cpu" else time.perf_counter_ns
    names = args.strategies.split(",") if args.strategies else ["default", *strategies()]
    rows, parts_rows = [], []
    for strategy in names:
        # "default": plan() with neither strategy nor mode, as a call names none (the
        # device rule weighs two launch structures); a named strategy is timed in the
        # mode(s) it is named with
        info = strategy_info(DEFAULT_STRATEGY if strategy == "default" else strategy)
        modes = ((None,) if strategy == "default" else
                 info.modes if args.all_modes else (info.default_mode,))
        for mode in modes:
            for max_mn in map(int, args.max_mn.split(",")):
                for batch in map(int, args.batches.split(",")):
                    s = shapes(batch, max_mn, dist=args.dist)

                    def call():
                        return planner.plan(s, arch=args.arch, mode=mode, use_cache=False,
                                            strategy=None if strategy == "default" else strategy)
                    p = call()
                    med, least = timed(call, args.reps)
                    rows.append([strategy, mode or p.mode, max_mn, batch, p.n_tiles, p.n_blocks,
                                 f"{med:,.0f}", f"{least:,.0f}",
                                 f"{1e3 * med / max(1, p.n_tiles):.1f}"])
                    if args.count_calls:
                        rows[-1] += list(count_calls(call))
                    if args.no_breakdown:
                        continue
                    b = Breakdown(info.name)
                    try:
                        total, parts = b.run(call, args.reps)
                    finally:
                        b.restore()
                    parts_rows.append([strategy, mode or p.mode, max_mn, batch, f"{total:,.0f}",
                                       ", ".join(f"{k} {v:,.0f}" for k, v in
                                                 sorted(parts.items(), key=lambda kv: -kv[1])
                                                 if v >= 0.5)])
    hits = []
    for batch in (8, 1024, 8192):   # a hit: the same shapes again (a copy, as a new step passes)
        s = shapes(batch, 1024)
        planner.plan(s, arch=args.arch)
        med, least = timed(lambda: planner.plan(s.copy(), arch=args.arch), args.reps)
        copy, _ = timed(lambda: s.copy(), args.reps)
        hits.append(f"{batch} GEMMs {med:,.1f} µs (least {least:,.1f}, of which the copy {copy:,.1f})")
    print(f"arch {args.arch}; {args.clock} clock; {args.reps} non-cached calls per cell; cache hit "
          f"(default strategy): {'; '.join(hits)}")
    print(tabulate(rows, headers=["strategy", "mode", "MaxMN", "batch", "tiles", "blocks",
                                  "median µs", "least µs", "ns/tile"]
                   + (["numpy calls", "operators (<=)"] if args.count_calls else []),
                   colalign=("left", "left")))
    if parts_rows:
        print("\nbreakdown (median µs per step, wrapped calls):")
        print(tabulate(parts_rows, headers=["strategy", "mode", "MaxMN", "batch", "total µs",
                                            "steps"], colalign=("left", "left")))


if __name__ == "__main__":
    main()
