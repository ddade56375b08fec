"""Planners: shapes -> Plan. One module per strategy, registered here by name.

    plan(shapes, dtype="float32", arch=None, strategy=None, mode=None, *,
         resources=None, **options) -> Plan        (options include split_k)

Strategies: "wavefront-tlp" (default; zhang2025 Algorithm 1 with Eq. 4: under the
default device rule, the largest fitting tiles unless their TLP is below this launch's
capacity, else the candidate tiling the cost model predicts fastest, all candidates
priced at once), "workgroup-tlp" (the same with Eq. 3), "coordinated" (li2019 tiling + batching), "magma" (one config,
grid.z, early exit). The default strategy (strategy=None: wavefront-tlp) may also split
K where the tiles cannot fill the device (split_k.py); the strategies named never do.
Identical requests return the same Plan object from a small LRU
cache, so backends can keep per-plan device state (backends/launch.py, keyed weakly by
the Plan, which is immutable).

Kernel resource figures (registers, shared memory) come from a *resources provider*
passed in (``resources=``, see launches.ResourcesProvider); the planner imports
nothing from ``portgemm.kernels``: ``import portgemm`` installs the kernels' provider
as the default (set_default_resources).
"""
from __future__ import annotations

import dataclasses
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import generation
from ..errors import (ArgumentTypeError, DtypeError, PrecisionError, PrecisionUnavailable,
                      UnknownStrategy, ValidationError)
from ..occupancy import Arch, ceilings, get_arch, tuned
from ..occupancy.archs import HALF_MMA_NOT_BUILT, TF32_MMA, has_mfma, has_tf32_mma
from ..precision import FAMILY as PRECISION_FAMILY, check_name as precision_name
from ..problem import MAX_SPAN
from ..tiles import HALF_FAMILIES, MFMA_FAMILIES, family_precision
from . import parallelism, split_k as split_k_rule, staging as staging_rule
from .alignment import aligned_rows, four_byte_rows
from .launches import provider_version, resolve_provider
from .launches import set_default_provider as set_default_resources  # noqa: F401 (API)
from .tiling import Request

DEFAULT_STRATEGY = "wavefront-tlp"
# Mode for the tile-list strategies when the caller names none: the paper's one
# 256-thread launch, measured faster than per-kind launches (bench/NOTES.md).
DEFAULT_MODE = "fused"
DEFAULT_ARCH = "sm_90"
CACHE_SIZE = 64
FAST_SIZE = 4 * CACHE_SIZE   # hit-path entries (several spellings may name one plan)
DTYPES = ("float32", "float64", "float16", "bfloat16")
# The 16-bit dtypes run only their own families (tiles.HALF_FAMILIES: tensor-core kinds and
# a SIMT kind), one launch per kind, never split (a split's partial sums would be stored
# in 16 bits), under the default strategy (the papers' strategies plan fp32 tiles).
HALF_FAMILY = {d: f for f, d in HALF_FAMILIES.items()}
# On AMD their families are the MFMA ones (tiles.MFMA_FAMILIES), where the arch has MFMA
# for the dtype (occupancy/archs.py MFMA); elsewhere on AMD they are a typed error.
AMD_HALF_FAMILY = {d: f for f, d in MFMA_FAMILIES.items() if d in HALF_FAMILY}
_INT_LIMIT = 2**31 - 1   # tile coordinates and block_ptr are int32


@dataclass(frozen=True)
class Strategy:
    name: str
    fn: Callable
    modes: tuple[str, ...]
    options: tuple[str, ...]

    @property
    def default_mode(self) -> str:
        return DEFAULT_MODE if DEFAULT_MODE in self.modes else self.modes[0]


_registry: dict[str, Strategy] = {}


def register(name: str, modes: tuple[str, ...], options: tuple[str, ...] = ()):
    """Decorator: register ``fn(request) -> Plan`` as strategy ``name``."""
    def deco(fn):
        _registry[name] = Strategy(name, fn, tuple(modes), tuple(options))
        return fn
    return deco


def strategies() -> list[str]:
    return list(_registry)


def strategy_info(name: str) -> Strategy:
    if not isinstance(name, str):
        raise ArgumentTypeError(f"strategy must be a name ({', '.join(_registry)}) or None, "
                                f"got {type(name).__name__}")
    try:
        return _registry[name]
    except KeyError:
        raise UnknownStrategy(f"unknown strategy {name!r}; known: {', '.join(_registry)}") from None


# --- validation ---------------------------------------------------------------------

def _shapes(shapes) -> np.ndarray:
    try:
        a = np.asarray(shapes)
    except Exception as e:  # ragged lists and the like
        raise ValidationError(f"shapes must be an array-like (batch, 3) of M, N, K: {e}") from None
    if (a.ndim == 1 and a.size == 0) or (a.ndim == 2 and a.shape[0] == 0 and a.shape[1] in (0, 3)):
        return np.zeros((0, 3), dtype=np.int64)
    if a.ndim != 2 or a.shape[1] != 3:
        raise ValidationError(f"shapes must have shape (batch, 3) (M, N, K); got {a.shape}")
    if a.dtype.kind in "iu":
        out = a.astype(np.int64, copy=True)
    elif a.dtype.kind == "f":
        bad = ~np.isfinite(a).all(axis=1) | (a != np.round(a)).any(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValidationError(f"M, N, K must be integers, got {a[i].tolist()}", gemm=i)
        out = a.astype(np.int64)
    else:
        raise ValidationError(f"shapes must be integers, got dtype {a.dtype}")
    lo, hi = (int(out.min()), int(out.max())) if out.size else (0, 0)
    if lo < 0 or hi > _INT_LIMIT:
        neg = (out < 0).any(axis=1)
        if neg.any():
            i = int(np.flatnonzero(neg)[0])
            raise ValidationError(f"M, N, K must be >= 0, got {out[i].tolist()}", gemm=i)
        i = int(np.flatnonzero((out > _INT_LIMIT).any(axis=1))[0])
        raise ValidationError(f"M, N, K must be < 2**31, got {out[i].tolist()}", gemm=i)
    if hi * hi > MAX_SPAN:   # otherwise no product of two sizes can pass the limit
        _check_spans(out)
    out.flags.writeable = False
    return out


def _check_spans(s: np.ndarray) -> None:
    """Refuse a GEMM no run could take: every array of its shapes spans more elements
    than the kernels' 32-bit offsets reach (the same limit validation applies to arrays).
    Checked here, before any tile is built, so such a plan fails at once."""
    M, N, K = s[:, 0], s[:, 1], s[:, 2]   # each < 2**31: the products fit in int64
    for what, elems in (("C (M x N)", M * N), ("A (M x K)", M * K), ("B (K x N)", K * N)):
        bad = elems > MAX_SPAN
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValidationError(f"{what} of shape {s[i].tolist()} has {int(elems[i])} "
                                  f"elements; the kernels index with 32-bit offsets (at "
                                  f"most {MAX_SPAN}); split this GEMM", gemm=i)


def _rows_or_none(shapes, dtype, lds):
    """plan()'s ``lds`` as (aligned rows, 4-byte rows) (alignment.aligned_rows,
    four_byte_rows), or (None, None) where both are those of dense operands (the plan is
    the same, and so may its cache entry be)."""
    ld = lds if type(lds) is np.ndarray else np.asarray(lds)
    if type(shapes) is np.ndarray and shapes.ndim == 2 and shapes.shape[1] == 3:
        dense = shapes[:, 2:0:-1]
        if ld.shape == dense.shape and (ld == dense).all():
            return None, None   # lda = K, ldb = N: dense (the common case, checked first)
    s, dt = _shapes(shapes), _dtype(dtype)
    if ld.shape != (s.shape[0], 2) or ld.dtype.kind not in "iu" or (ld < 0).any():
        raise ValidationError(f"lds must be a (batch, 2) array of non-negative integers "
                              f"(lda, ldb per GEMM), got shape {ld.shape} of {ld.dtype}")
    rows, four = aligned_rows(s, dt, ld), four_byte_rows(s, dt, ld)
    if np.array_equal(rows, aligned_rows(s, dt)) and np.array_equal(four, four_byte_rows(s, dt)):
        return None, None
    return rows, four


def _dtype(dtype) -> str:
    if isinstance(dtype, str) and dtype in DTYPES:   # the common case, without np.dtype
        return dtype
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise DtypeError(f"unsupported dtype {dtype!r}; portgemm computes in {', '.join(DTYPES)}") from None
    if name not in DTYPES:
        raise DtypeError(f"unsupported dtype {name}; portgemm computes in {', '.join(DTYPES)}")
    return name


def resolve_arch(arch):
    if arch is None:
        arch = os.environ.get("PORTGEMM_ARCH", DEFAULT_ARCH)
    if isinstance(arch, Arch):
        return arch
    if not isinstance(arch, str):
        raise ValidationError(f"arch must be an Arch or a name, got {type(arch).__name__}")
    hit = _arch_of_name.get(arch)   # get_arch normalises the name (regexes) each call
    if hit is None:
        hit = get_arch(arch)
        if len(_arch_of_name) >= 64:
            _arch_of_name.clear()
        _arch_of_name[arch] = hit
    return hit


_arch_of_name: dict = {}   # name as given -> get_arch's Arch (the table is fixed)


# Numeric options: name -> (least, greatest, integer only). The upper ends are far past
# any value that changes a plan (a threshold above every tile's TLP already means "the
# smallest tiles"), and keep the arithmetic on them exact in float64 and int64.
NUMERIC_OPTIONS = {
    "tlp_factor": (0, 1e6, False),       # fraction of the device's resident threads
    "tlp_threshold": (0, 1e15, False),   # threads
    "theta": (1, MAX_SPAN, True),        # li2019's K sum per batched block
}


def _check_options(options: dict) -> None:
    for name, (lo, hi, integer) in NUMERIC_OPTIONS.items():
        if name in options:
            v = options[name]
            ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            if not ok or not np.isfinite(v) or not lo <= v <= hi or (integer and v != int(v)):
                kind = "an integer" if integer else "a number"
                top = f"{hi:g}" if isinstance(hi, float) else str(hi)
                raise ValidationError(f"option {name} must be {kind} in [{lo}, {top}], "
                                      f"got {v!r}")
    model = options.get("occupancy_model")
    if model is not None and model not in ("exact", "paper"):
        raise ValidationError(f"occupancy_model must be 'exact' or 'paper', got {model!r}")


# --- the cache ----------------------------------------------------------------------

_cache: OrderedDict = OrderedDict()
_cache_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0}


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
        _fast.clear()
        _fast_of.clear()
        _stats.update(hits=0, misses=0)


def cache_info() -> dict:
    return {**_stats, "size": len(_cache), "maxsize": CACHE_SIZE}


def _fingerprint(shapes: np.ndarray) -> int:
    """A 64-bit hash of the validated shapes: a dot product with fixed random odd
    weights, wrapping. Much cheaper than hashing ``shapes.tobytes()`` (Python hashes
    bytes at about 1 byte/ns); a collision costs nothing but a miss, because a hit is
    confirmed by comparing the shapes themselves."""
    global _weights
    flat = shapes.reshape(-1).view(np.uint64)
    w = _weights
    if w.shape[0] < flat.shape[0]:
        w = np.random.default_rng(0x5EED).integers(0, 2**63, max(flat.shape[0], 2 * w.shape[0]),
                                                   dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        _weights = w
    return int(np.dot(flat, w[:flat.shape[0]]))


_weights = np.ones(0, dtype=np.uint64)


def _key(shapes, dtype, arch, strategy, mode, options, resources):
    try:
        opts = tuple(sorted(options.items()))
        # The factors are read at call time, and the provider's version changes when
        # its figures for this arch do, and so do the device ceilings the cost model
        # divides by (reloaded or newly measured), so a change to any makes a new plan
        # rather than returning a stale one. Figures for other archs, or registered figures
        # equal to those a plan used, leave cached plans alone.
        key = (_fingerprint(shapes), shapes.shape[0], dtype, arch.name,
               int(arch.compute_units), strategy, mode, opts, resources,
               _read_at_call(resources, arch.name))
        hash(key)
    except TypeError:
        return None  # unhashable option values or provider: do not cache
    return key


def _read_at_call(provider, arch_name: str):
    """What a plan depends on that may change between calls with equal arguments: the
    factors, the provider's figures for this arch, the ceilings and the tuned data."""
    return (parallelism.TLP_FACTOR, parallelism.LI2019_FACTOR,
            provider_version(provider, arch_name), ceilings.version(), tuned.version())


# --- the hit path -------------------------------------------------------------------
# A hit is looked up before any validation, from the arguments as given: a NumPy shapes
# array by a sample of its values (its dtype and shape beside them) and the other
# arguments by value (arch and resources by identity, kept alive by the entry so an id
# is never reused while it is there). The entry is confirmed by comparing the array's
# bytes with the ones it was made from (one memcmp), and by what the full key reads at
# call time: portgemm.generation's counter (bumped whenever the ceilings, the tuned
# data or the default provider's figures change), the two factors (module attributes,
# by identity) and, for a provider that does not bump the counter, its version. An
# entry leaves with its plan when the LRU evicts it, so a hit here returns exactly what
# the full path would. Anything else (lists, unhashable options, a first sight of
# these shapes) takes the full path, which then records the entry.

class _Fast:
    """A hit-path entry: the plan, the full key it is cached under, the bytes of the
    shapes it was looked up with, and what is compared at call time."""
    __slots__ = ("plan", "key", "raw", "generation", "tlp_factor", "li2019_factor",
                 "version", "arch_name", "provider_version", "keep")

    def __init__(self, plan, key, raw, stamp, provider, keep):
        self.plan, self.key, self.raw, self.keep = plan, key, raw, keep
        self.generation, self.tlp_factor, self.li2019_factor = stamp
        counted = getattr(provider, "bumps_generation", False)
        self.version = None if counted else getattr(provider, "version", None)
        self.arch_name = plan.arch.name
        self.provider_version = None if self.version is None else key[-1][2]


_fast: dict = {}       # hit path's key -> _Fast
_fast_of: dict = {}    # full key -> the hit path's keys that name its plan


def _stamp():
    """What a hit compares, read before the full key (so a change while planning is
    seen): the generation and the factors."""
    return generation.value, parallelism.TLP_FACTOR, parallelism.LI2019_FACTOR


def _fast_key(shapes: np.ndarray, dtype, arch, strategy, mode, resources, options):
    """The hit path's key for a NumPy shapes array of numbers, or None where only the
    full path can tell (unhashable arguments, an arch that is neither a name nor an
    Arch, an array of objects). The shapes enter by a sample of about 32 values (the
    rest is compared on a hit): equal samples of different batches cost a probe, never
    a wrong plan."""
    if shapes.ndim != 2 or shapes.dtype.kind not in "iuf":
        return None
    if arch is None:
        where = os.environ.get("PORTGEMM_ARCH")
    elif isinstance(arch, str):
        where = arch
    elif isinstance(arch, Arch):
        where = id(arch)
    else:
        return None
    n = shapes.size
    sample = shapes.tobytes() if n <= 64 else shapes.reshape(-1)[::(n >> 5) | 1].tobytes()
    key = (sample, shapes.dtype, shapes.shape, where,
           type(dtype), dtype, strategy, mode, id(resources),
           tuple(sorted((k, type(v), v) for k, v in options.items())) if options else ())
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _fast_hit(fkey, shapes: np.ndarray):
    """The cached plan for ``fkey`` if it is still what the full path would return."""
    e = _fast.get(fkey)
    if e is None:
        return None
    if (e.generation != generation.value or e.tlp_factor is not parallelism.TLP_FACTOR
            or e.li2019_factor is not parallelism.LI2019_FACTOR
            or not (e.raw.startswith(shapes) if shapes.flags.c_contiguous
                    else e.raw == shapes.tobytes())
            or (e.version is not None and e.version(e.arch_name) != e.provider_version)):
        return None
    with _cache_lock:
        try:   # an entry leaves with its plan, so the key is the plan's while it is here
            _cache.move_to_end(e.key)
        except KeyError:   # cleared meanwhile
            return None
        _stats["hits"] += 1
    return e.plan


def _fast_store(fkey, shapes: np.ndarray, key, stamp, provider, p, keep) -> None:
    """Record ``p`` under the hit path's key; ``keep``: the objects the key names by id,
    held so that their ids stay theirs while the entry lives; ``stamp``: _stamp() read
    before ``key`` was made."""
    e = _Fast(p, key, shapes.tobytes(), stamp, provider, keep)
    with _cache_lock:
        if _cache.get(key) is not p:
            return
        old = _fast.pop(fkey, None)
        if old is not None:
            _unlist(old.key, fkey)
        _fast[fkey] = e
        _fast_of.setdefault(key, []).append(fkey)
        while len(_fast) > FAST_SIZE:   # many argument spellings of few plans: oldest out
            first = next(iter(_fast))
            _unlist(_fast.pop(first).key, first)


def _unlist(key, fkey) -> None:
    names = _fast_of.get(key)
    if names is not None and fkey in names:
        names.remove(fkey)
        if not names:
            del _fast_of[key]


def _evict(key) -> None:
    """Drop the plan cached under ``key`` and the hit path's entries for it (lock held)."""
    del _cache[key]
    for fkey in _fast_of.pop(key, ()):
        _fast.pop(fkey, None)


# --- the entry point ----------------------------------------------------------------

def _split_option(split_k, strategy) -> bool:
    """Whether to weigh split-K: by default for the default strategy only (the named
    strategies reproduce their papers, which never split)."""
    if split_k is None:
        return strategy is None
    if not isinstance(split_k, (bool, np.bool_)):
        raise ValidationError(f"split_k must be True, False or None, got {split_k!r}")
    if split_k and strategy is not None:
        raise ValidationError(f"strategy {strategy!r} never splits K (it reproduces its "
                              f"paper); split_k=True needs the default strategy (None)")
    return bool(split_k)


def _staging_option(staging, dt: str) -> bool | None:
    """plan()'s ``staging`` option: None (the cost model decides, 16-bit dtypes), False
    (never stage) or True (stage every unaligned operand: tests and measurements)."""
    if staging is None:
        return None
    if not isinstance(staging, (bool, np.bool_)):
        raise ValidationError(f"staging must be True, False or None, got {staging!r}")
    if staging and dt not in staging_rule.STAGED_DTYPES:
        raise ValidationError(f"staging applies to {', '.join(staging_rule.STAGED_DTYPES)} "
                              f"only, not {dt} (planner/staging.py)")
    return bool(staging)


def _half_request(dt: str, arch, strategy, mode, options: dict):
    """(mode, options) of a float16 / bfloat16 plan: its own family (NVIDIA: the mma.sync
    family; AMD: the MFMA family, where the arch has MFMA for the dtype), per kind, no
    split; anything else asked for, or an AMD arch without MFMA, is a typed error."""
    own = HALF_FAMILY[dt]
    if arch.vendor == "amd":
        if not has_mfma(arch, dt):
            raise DtypeError(f"{dt} has no kernels for {arch.name} "
                             f"({HALF_MMA_NOT_BUILT.get(arch.name, 'no MFMA for it')}); "
                             f"{arch.name} runs float32 and float64")
        own = AMD_HALF_FAMILY[dt]
    if strategy is not None:
        raise DtypeError(f"strategy {strategy!r} plans float32/float64 tiles; {dt} runs "
                         f"the default strategy (strategy=None) only")
    fam = options.get("family")
    if fam is not None and fam != own:
        raise ValidationError(f"family must be {own!r} for {dt} on {arch.name}, got {fam!r}")
    if options.get("split_k"):
        raise ValidationError(f"{dt} never splits K (its partial sums would be rounded to "
                              f"16 bits); pass split_k=None or False")
    if mode not in (None, "per-kind"):
        raise ValidationError(f"{dt} runs mode 'per-kind' only, got {mode!r}")
    return "per-kind", {**options, "family": own, "split_k": False}


def check_precision(precision, dtype, arch) -> str:
    """The mode name of ``precision`` for a ``dtype`` plan on ``arch`` (an Arch): "ieee"
    for None; PrecisionError for an unknown name or a tensor-core mode with a dtype other
    than float32, PrecisionUnavailable where the arch has no TF32 tensor cores."""
    p = precision_name(precision)
    if p == "ieee":
        return p
    dt = _dtype(dtype)
    if dt != "float32":
        raise PrecisionError(f"precision {p!r} applies to float32 only, not {dt} (it rounds "
                             f"fp32 inputs to TF32 for the tensor cores)")
    if not has_tf32_mma(arch):
        raise PrecisionUnavailable(
            f"precision {p!r} needs TF32 tensor cores, which {arch.name} has not (or "
            f"portgemm does not build them there): {', '.join(sorted(TF32_MMA))} only; "
            f"use precision='ieee'")
    return p


def _precision_request(p: str, strategy, mode, options: dict):
    """(mode, options) of a "tf32" / "3xtf32" plan: its own family, per kind, never split
    (tiles.TF32_FAMILIES); anything else asked for is a PrecisionError."""
    if strategy is not None:
        raise PrecisionError(f"strategy {strategy!r} plans IEEE fp32 tiles; precision {p!r} "
                             f"runs the default strategy (strategy=None) only")
    fam = options.get("family")
    if fam is not None and fam != PRECISION_FAMILY[p]:
        raise PrecisionError(f"family must be {PRECISION_FAMILY[p]!r} for precision {p!r}, "
                             f"got {fam!r}")
    if options.get("split_k"):
        raise PrecisionError(f"precision {p!r} plans never split K; pass split_k=None or False")
    if mode not in (None, "per-kind"):
        raise PrecisionError(f"precision {p!r} runs mode 'per-kind' only, got {mode!r}")
    return "per-kind", {**options, "family": PRECISION_FAMILY[p], "split_k": False}


def plan(shapes, dtype="float32", arch=None, strategy=None, mode=None, *, use_cache=True,
         resources=None, lds=None, precision=None, **options):
    """Plan a batch of GEMMs with shapes (batch, 3) = M, N, K of op(A) @ op(B).

    dtype: float32 | float64. arch: an occupancy Arch or a name (None: $PORTGEMM_ARCH,
    else sm_90). strategy: one of strategies() (None: "wavefront-tlp"). mode: "fused" |
    "per-kind" for the tile-list strategies, "grid-z" for magma (None: the strategy's
    default; for wavefront-tlp and workgroup-tlp under the device rule with no family
    named, the cost model then chooses between the paper's kinds fused and ours per
    kind). options (None means default): tlp_factor, tlp_threshold, occupancy_model
    ("exact" | "paper"); wavefront-tlp and workgroup-tlp also tlp_model ("device" |
    "paper"), family (a tile family of tiles.FAMILIES) and tuned (False: ignore the
    arch's tuned data file, occupancy/tuned.py; the default uses it); coordinated also theta and
    batching; magma also config. Numeric options have ranges (NUMERIC_OPTIONS).

    resources: the resources provider the occupancy model reads kernel figures from, a
    callable ``(arch, launch) -> KernelResources`` with an optional
    ``version(arch_name)`` (launches.ResourcesProvider); None: the default, the
    kernels' figures (compiled in this process, else recorded, else estimated). Plans
    are cached per provider and its version.

    Raises (typed, each naming the offending GEMM where there is one): ValidationError
    for bad shapes, a GEMM whose A, B or C would span more than 2**31 - 1 elements (no
    run could index it), a plan of more than tiling.MAX_TILES tiles, an unknown mode or
    option, or an option out of range; DtypeError; UnknownArch; UnknownStrategy;
    ArgumentTypeError for a provider that is not callable or returns no KernelResources.
    These checks run before any tile is built.

    lds: (batch, 2) leading dimensions of the stored A and B, in elements, where they are
    not those of dense row-major operands (lda = K, ldb = N): the cost model prices
    each kind on the share of its loads that take the kernel's 16-byte path, which
    needs rows aligned to 16 bytes (planner/alignment.py). Lists and packed calls pass
    theirs. ValidationError for a shape that is not (batch, 2) or a negative entry.
    precision (float32 only): "ieee" or None (the default: IEEE fp32 FMAs, the plans as
    without it), "tf32" or "3xtf32" (tensor cores, portgemm/precision.py says what each
    computes): the default strategy's own family (tiles.TF32_FAMILIES), one launch per
    kind, never split. PrecisionError (a ValueError) for an unknown name, another dtype,
    or a strategy, family, mode or split_k those plans do not take; PrecisionUnavailable
    (a PrecisionError) on an arch without TF32 tensor cores (archs.TF32_MMA: sm_80, sm_90).
    The mode is part of the plan cache's key (through its family); ``plan.precision``
    says which a plan computes.

    Option split_k, for every strategy: None (default: weigh split-K for the default
    strategy, strategy=None, only), False (never split), True (weigh it; ValidationError
    with a named strategy: those never split). A split plan carries ``plan.split``
    (plan.SplitK, planner/split_k.py). It travels among the options (not as a parameter
    of its own) so that every cache key made from the options tells the two apart.

    Option staging (float16 / bfloat16): None (default: the cost model weighs copying the
    operands whose rows are not 16-byte aligned to aligned rows first, planner/
    staging.py), False (never), True (stage every such operand whatever the model
    says: tests and measurements; ValidationError for other dtypes). A staged plan
    carries ``plan.staging`` (plan.Staging). Like split_k, it travels among the options.
    """
    if precision is not None and precision != "ieee":   # "ieee": the plans as without it
        p = check_precision(precision, dtype, resolve_arch(arch))
        mode, options = _precision_request(p, strategy, mode, options)
    elif options.get("family") in PRECISION_FAMILY.values():
        fam = options["family"]
        raise PrecisionError(f"family {fam!r} computes in TF32: plan it with "
                             f"precision={family_precision(fam)!r}")
    aligned, four = (None, None) if lds is None else _rows_or_none(shapes, dtype, lds)
    fkey = None
    if use_cache and type(shapes) is np.ndarray and aligned is None:
        fkey = _fast_key(shapes, dtype, arch, strategy, mode, resources, options)
        hit = None if fkey is None else _fast_hit(fkey, shapes)
        if hit is not None:
            return hit
        stamp = _stamp()   # before the full key reads the same inputs
    s = _shapes(shapes)
    dt = _dtype(dtype)
    a = resolve_arch(arch)
    info = strategy_info(DEFAULT_STRATEGY if strategy is None else strategy)
    m = info.default_mode if mode is None else mode
    if m not in info.modes:
        raise ValidationError(f"strategy {info.name!r} has no mode {m!r}; "
                              f"it supports {', '.join(info.modes)}")
    if dt in HALF_FAMILY:
        m, options = _half_request(dt, a, strategy, mode, options)
    split = _split_option(options.get("split_k"), strategy)
    stage = _staging_option(options.get("staging"), dt)
    options = {k: v for k, v in options.items()   # None = default; these two are plan()'s own
               if v is not None and k not in ("split_k", "staging")}
    unknown = sorted(set(options) - set(info.options))
    if unknown:
        raise ValidationError(f"strategy {info.name!r} takes no option(s) {', '.join(unknown)}; "
                              f"it takes {', '.join(info.options) or 'none'}")
    _check_options(options)
    provider = resolve_provider(resources)
    # a mode named and the same mode by default may plan differently (Request.mode_given)
    layout = None if aligned is None else np.packbits(np.concatenate([aligned, four])).tobytes()
    key = _key(s, dt, a, info.name, (m, mode is not None, split, stage, layout), options,
               provider) \
        if use_cache else None
    if key is not None:
        with _cache_lock:
            hit = _cache.get(key)
            if hit is not None and np.array_equal(hit.shapes, s):
                _cache.move_to_end(key)
                _stats["hits"] += 1
            else:
                hit = None
        if hit is not None:
            if fkey is not None:
                _fast_store(fkey, shapes, key, stamp, provider, hit, (arch, resources))
            return hit
    # None (the default provider) stays None in the request: strategies pass it on
    req = Request(s, dt, a, m, dict(options), resources, mode_given=mode is not None,
                  aligned=aligned, four=four)
    p = info.fn(req)
    if split:   # slices keep their GEMM's operand layout (lda, ldb), not the slice's K
        # (their 16-byte rows; no 4-byte ones: the 16-bit families never split)
        # a replan inside this plan: the strategy may skip what only notes would show,
        # and weigh first the tile family this plan chose (tiling.Request.inner)
        inner = p.kinds[0].family if p.kinds else True

        def replan(vs, gemm):
            rows = aligned_rows(s, dt) if aligned is None else aligned
            return info.fn(dataclasses.replace(req, shapes=vs, aligned=rows[gemm], inner=inner))
        p = split_k_rule.consider(p, replan)
    if stage is not False and dt in staging_rule.STAGED_DTYPES:
        # the leading dimensions: dense operands' (lda = K, ldb = N) unless given
        ld = s[:, 2:0:-1] if lds is None else np.asarray(lds, dtype=np.int64)
        # staged operands' rows are 16-byte aligned: off the 4-byte path
        p = staging_rule.consider(
            p, ld, lambda staged: info.fn(dataclasses.replace(
                req, aligned=staged, four=four_byte_rows(s, dt, ld) & ~staged)),
            force=stage is True)
    if key is not None:
        with _cache_lock:
            _stats["misses"] += 1
            if key in _cache:   # another thread planned it meanwhile: its entries go
                _evict(key)
            _cache[key] = p
            while len(_cache) > CACHE_SIZE:
                _evict(next(iter(_cache)))
        if fkey is not None:
            _fast_store(fkey, shapes, key, stamp, provider, p, (arch, resources))
    return p


# Strategies register themselves on import; they import ``register`` from here.
from . import wavefront_tlp  # noqa: E402,F401  (import order = strategies() order)
from . import workgroup_tlp  # noqa: E402,F401
from . import coordinated  # noqa: E402,F401
from . import magma  # noqa: E402,F401
