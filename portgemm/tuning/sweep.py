"""The measurements: every candidate kind on every size, one dtype at a time.

For each size: fresh operands and their float64 reference (benchmark/operands.py);
for each kind: a plan that runs the batch with that kind alone, bound once; one run
over NaN-poisoned C checked against the reference (a kind that computes a wrong result,
or fails to compile or launch, is excluded from the whole sweep and reported); then the
timer. The device, the timer and the clock are parameters, so the sweep runs on the
numpy backend with a fake timer in tests; the deadline stops it between two
measurements, leaving the sizes measured so far (a size not every kind reached is
dropped by :meth:`DtypeSweep.complete_sizes`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..benchmark.check import TOLERANCE
from ..benchmark.formats import FORMATS, tolerance
from ..benchmark.operands import make_operands
from ..benchmark.runner import progress
from ..benchmark.timing import Budget, measure
from ..tiles import FAMILIES, HALF_FAMILIES
from . import choose
from .model import fit_factor, one_kind_plan, predicted_seconds
from .space import CANDIDATES, Size

# Per measurement: short, since the sweep makes a few hundred of them.
BUDGET = Budget(warmup_ms=5.0, rep_ms=25.0, min_reps=5, max_reps=100)


def device_timer(dev, fn) -> float:
    """Median milliseconds of ``fn()`` (warm-up, then timed reps: benchmark/timing.py)."""
    return measure(dev, fn, "warm", BUDGET)[0]


@dataclass(frozen=True)
class Work:
    size: int
    kind: int
    name: str


@dataclass
class DtypeSweep:
    """One dtype's table: measured and predicted milliseconds per (kind, size), NaN where
    not measured."""
    dtype: str
    family: str
    arch: object
    sizes: list
    kinds: tuple
    ms: np.ndarray
    predicted_ms: np.ndarray
    excluded: dict = field(default_factory=dict)    # kind name -> why
    stopped: bool = False                           # the deadline came first

    def live(self) -> np.ndarray:
        return np.array([k.name not in self.excluded for k in self.kinds], dtype=bool)

    def complete_sizes(self) -> np.ndarray:
        """Sizes every kind still in the sweep was measured on."""
        live = self.live()
        if not live.any():
            return np.zeros(len(self.sizes), dtype=bool)
        return ~np.isnan(self.ms[live]).any(axis=0)

    def table(self) -> np.ndarray:
        """(kinds, sizes) ms on the complete sizes, excluded kinds NaN."""
        t = np.where(self.live()[:, None], self.ms, np.nan)
        return t[:, self.complete_sizes()]

    def chosen(self, tolerance: float = choose.TOLERANCE) -> list:
        return [self.kinds[i] for i in choose.cover(self.table(), tolerance, self.required())]

    def required(self) -> list[int]:
        """Candidates with the shape of a kind of the default plan's own family (the
        planner's OUR_FAMILY for this dtype): the tuned family keeps them."""
        from ..planner.wavefront_tlp import OUR_FAMILY
        from ..tiles import family
        ours = {_shape(k) for k in family(OUR_FAMILY[self.dtype])} if self.dtype in OUR_FAMILY else set()
        return [i for i, k in enumerate(self.kinds) if _shape(k) in ours]

    def factors(self) -> dict:
        """kind name -> geometric mean over its sizes of the factor that makes the model
        predict what was measured (kinds without one are left out: factor 1)."""
        out = {}
        for name, fs in self.size_factors().items():
            g = choose.geometric_mean(fs)
            if g is not None:
                out[name] = g
        return out

    def size_factors(self) -> dict:
        """kind name -> per size, the factor that makes the model predict what was
        measured (model.fit_factor), None where not measured or not told; the kinds
        still in the sweep."""
        out = {}
        for i, k in enumerate(self.kinds):
            if k.name in self.excluded:
                continue
            out[k.name] = [
                None if np.isnan(self.ms[i, j]) else fit_factor(
                    self.ms[i, j] * 1e-3, lambda f, k=k, shapes=s.shapes():
                    predicted_seconds(shapes, k, self.dtype, self.arch, f))
                for j, s in enumerate(self.sizes)]
        return out


def sweep_dtype(dev, dtype: str, sizes: list[Size], *, kinds=None, timer=device_timer,
                clock=time.monotonic, deadline: float = float("inf"), seed: int = 0,
                show_progress: bool = True) -> DtypeSweep:
    """Measure ``kinds`` (default: the dtype's candidate family) on ``sizes`` on
    ``dev`` (a benchmark device: benchmark/device.py)."""
    family = CANDIDATES[dtype] if kinds is None else kinds[0].family
    kinds = tuple(FAMILIES[family] if kinds is None else kinds)
    arch = dev.be.arch()
    shape = (len(kinds), len(sizes))
    out = DtypeSweep(dtype, family, arch, list(sizes), kinds, np.full(shape, np.nan),
                     np.full(shape, np.nan))
    work = [Work(si, ki, f"{s.name} {k.kind}") for si, s in enumerate(sizes)
            for ki, k in enumerate(kinds)]
    ops, at = None, None
    for w in progress(work, f"tune {dtype}", show_progress):
        kind = kinds[w.kind]
        if kind.name in out.excluded:
            continue
        if clock() >= deadline:
            out.stopped = True
            break
        size = sizes[w.size]
        if at != w.size:
            ops = None   # free the last size's operands first
            ops = sweep_operands(dev, size.shapes(), dtype, seed=(seed, w.size))
            at = w.size
        try:
            ms = _measure_one(dev, ops, size, kind, dtype, arch, timer)
        except Exception as e:   # compile, launch or check failure: the kind is out
            out.excluded[kind.name] = f"{size.name}: {_one_line(e)}"
            out.ms[w.kind] = np.nan
            continue
        out.ms[w.kind, w.size] = ms
        out.predicted_ms[w.kind, w.size] = 1e3 * predicted_seconds(size.shapes(), kind, dtype,
                                                                   arch)
    return out


class WrongResult(Exception):
    pass


def sweep_operands(dev, shapes, dtype: str, seed):
    """One size's operands and reference: the benchmark's (CuPy or NumPy arrays); the
    16-bit dtypes on the CUDA device as torch tensors (CuPy has no bfloat16)."""
    if dtype in HALF_FAMILIES.values() and dev.kind == "cuda":
        import torch
        from ..benchmark.torch_operands import make_torch_operands
        return make_torch_operands(torch, shapes, FORMATS[dtype],
                                   int(np.random.default_rng(seed).integers(2 ** 31)))
    return make_operands(dev, shapes, dtype, seed)


def sweep_tolerance(dtype: str, max_k: int) -> float:
    """The largest relative error a kind may make: fp32/fp64 the benchmark's fixed
    figures, the 16-bit dtypes their format's bound at this depth (benchmark/formats.py)."""
    if dtype in HALF_FAMILIES.values():
        return tolerance(FORMATS[dtype], max_k)
    return TOLERANCE[dtype]


def _measure_one(dev, ops, size, kind, dtype, arch, timer) -> float:
    plan = one_kind_plan(size.shapes(), kind, dtype, arch)
    bound = plan.bind(ops.A, ops.B, ops.C, backend=dev.be)
    ops.poison()
    bound()
    dev.synchronize()
    err = ops.errors(dev.xp)
    worst = float(err.max()) if err.size else 0.0
    tol = sweep_tolerance(dtype, size.k)
    if not worst <= tol:
        raise WrongResult(f"wrong result: relative error {worst:.2e} > {tol:.0e}")
    return float(timer(dev, bound))


def _one_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    what = type(e).__name__
    return f"{what}: {text[-1][:200]}" if text else what


def _shape(k) -> tuple:
    return (k.tm, k.tn, k.tk, k.threads, k.rm, k.rn)
