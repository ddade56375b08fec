"""Thread-level-parallelism (TLP) formulas and the thresholds they are held against.

- Eq. 3 of zhang2025 (= Eq. 1 of li2019): workgroups x threads per workgroup.
- Eq. 4 of zhang2025 as the paper reads it ("paper" rule): active wavefronts
  phi(workgroups) x wave size, where phi comes from the occupancy model (how many
  workgroups of each kind one CU holds at once) and every workgroup is charged its
  launch's waves; threshold = CUs x max waves per CU x wave size x TLP_FACTOR.
- The "device" rule (the default; docs/design.md §5): the threshold is what the device
  holds for *this* launch, :func:`launch_capacity` (CUs x resident workgroups per CU by
  the kernel's occupancy x the threads of the tiles in them), which never exceeds the
  device's resident-thread capacity; the wavefront TLP, :func:`resident_tlp`, counts
  a tile's own threads (a 128-thread tile in a 256-thread block sends half its warps
  home at once) and averages over whole waves of resident slots, so a last partial
  wave counts as the idle slots it leaves. TLP reaches the threshold exactly when
  the tiles fill whole waves.

Occupancy is evaluated per (arch, kernel variant), never per GEMM, and memoised.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from ..errors import ArgumentTypeError
from ..occupancy import KernelResources, occupancy
from .launches import launches_for, provider_version, resolve_provider
from .memo import family_token

# Fraction of the device's resident-thread capacity the wavefront TLP of a tiling
# scheme must reach before Algorithm 1 stops shrinking tiles. Calibrated by the sweep in
# bench/calibrate_threshold.py (bench/NOTES.md: on sm_90, 0.5 and 1 tie, 0.25 and below
# leave small batches 17 % slower); plan(..., tlp_factor=x) overrides it per call.
TLP_FACTOR = 0.5

# li2019 set 65536 on V100 = 80 SMs x 2048 threads x 0.4; we keep their 0.4 and take
# the SM count and threads per SM from the architecture table.
LI2019_FACTOR = 0.4


def device_threads(arch) -> int:
    """Threads the whole device can hold resident at once."""
    return int(arch.compute_units) * int(arch.max_waves_per_cu) * int(arch.wave_size)


def tlp_threshold(arch, factor: float | None = None) -> float:
    """zhang2025's TLP_threshold as the paper reads it (the "paper" rule; magma reports
    it too), derived from the architecture (factor None: TLP_FACTOR, read at call
    time). The default "device" rule uses :func:`launch_capacity` instead."""
    return device_threads(arch) * float(TLP_FACTOR if factor is None else factor)


def li2019_threshold(arch, factor: float | None = None) -> float:
    """li2019's tiling threshold: CUs x max threads per CU x factor (None: LI2019_FACTOR),
    65536 on V100."""
    return device_threads(arch) * float(LI2019_FACTOR if factor is None else factor)


def launch_capacity(n_wg: np.ndarray, tile_threads: np.ndarray, active: np.ndarray,
                    compute_units: int) -> float:
    """The "device" rule's threshold: tile threads the device holds at once for this
    launch's mix of tiles. A kind-k tile takes 1/active[k] of a CU, so with the mix
    n_wg the device holds n_wg[k] x CUs / demand tiles of kind k at once, where demand
    = sum_k n_wg[k] / active[k]; the result is a weighted mean of active[k] x
    tile_threads[k] x CUs, never above the device's resident-thread capacity."""
    return resident_tlp_and_capacity(n_wg, tile_threads, active, compute_units)[1]


def launch_waves(n_wg: np.ndarray, active: np.ndarray, compute_units: int) -> int:
    """Whole waves of resident slots the launch needs (at least 1): ceil(demand / CUs)."""
    return _waves(cu_demand(n_wg, active), compute_units)


def _waves(demand: float, compute_units: int) -> int:
    return max(1, math.ceil(demand / compute_units - 1e-9))


def resident_tlp(n_wg: np.ndarray, tile_threads: np.ndarray, active: np.ndarray,
                 compute_units: int) -> float:
    """The "device" rule's wavefront TLP: tile threads resident per wave, averaged over
    the launch's whole waves (sum_k n_wg[k] x tile_threads[k] / waves). Equal to
    :func:`launch_capacity` when the tiles fill whole waves; below it when the device
    is not filled once, or the last wave is partial."""
    return resident_tlp_and_capacity(n_wg, tile_threads, active, compute_units)[0]


def resident_tlp_and_capacity(n_wg: np.ndarray, tile_threads: np.ndarray, active: np.ndarray,
                              compute_units: int) -> tuple:
    """(:func:`resident_tlp`, :func:`launch_capacity`) of one launch, sharing their dot
    products (the device rule wants both; each alone costs as much)."""
    threads = float(np.dot(n_wg, tile_threads))
    demand = cu_demand(n_wg, active)
    capacity = 0.0 if demand <= 0 else threads * compute_units / demand
    return threads / _waves(demand, compute_units), capacity


def workgroup_tlp(n_wg: np.ndarray, threads: np.ndarray) -> float:
    """zhang2025 Eq. 3 / li2019 Eq. 1: sum over kinds of workgroups x threads."""
    return float(np.dot(n_wg, threads))


def cu_demand(n_wg: np.ndarray, active_wg: np.ndarray) -> float:
    """CUs the workgroups would fill if all were resident: sum_k n_wg[k] / active_wg[k]."""
    return float(np.dot(n_wg, 1.0 / active_wg))


def phi(n_wg: np.ndarray, waves: np.ndarray, active_wg: np.ndarray, compute_units: int) -> float:
    """Active wavefronts the device holds at once for ``n_wg[k]`` workgroups of kind k.

    A kind-k workgroup occupies 1/active_wg[k] of a CU, so the batch asks for
    S = sum_k n_wg[k] / active_wg[k] CUs. If S <= CUs everything is resident at once;
    otherwise only the fraction CUs / S is. The result never exceeds
    CUs x max waves per CU.
    """
    total = float(np.dot(n_wg, waves))
    demand = cu_demand(n_wg, active_wg)
    if demand <= compute_units:
        return total
    return total * compute_units / demand


def wavefront_tlp(n_wg, waves, active_wg, arch) -> float:
    """zhang2025 Eq. 4: TLP_new = phi x T_wavefront."""
    return phi(n_wg, waves, active_wg, arch.compute_units) * arch.wave_size


# --- occupancy per kind, memoised per (arch, launch, resources, model) ---------------

_memo: dict = {}
_memo_lock = threading.Lock()


def _arch_key(arch):
    try:
        hash(arch)
        return arch
    except TypeError:
        return (arch.name, arch.compute_units)


def variant_occupancy(arch, launch, model: str = "exact", resources=None):
    """Occupancy of ``launch`` (a launches.Launch) on ``arch`` with the figures the
    resources provider gives for it (``resources``: see launches.ResourcesProvider;
    None: the default provider). The occupancy model runs once per distinct (arch,
    launch, figures, model)."""
    res = resolve_provider(resources)(arch, launch)
    if not isinstance(res, KernelResources):
        raise ArgumentTypeError(f"the resources provider returned {type(res).__name__} for "
                                f"{launch}, not a KernelResources")
    key = (_arch_key(arch), launch, res, model)
    hit = _memo.get(key)
    if hit is None:
        hit = occupancy(arch, launch.threads, res, model=model)  # ResourceError if none fit
        with _memo_lock:
            if len(_memo) > 4096:
                _memo.clear()
            _memo[key] = hit
    return hit


def _resources_version(resources, arch):
    """What identifies the provider's current figures for ``arch``: the provider itself
    and its version (launches.provider_version)."""
    return resources, provider_version(resources, arch.name)


_tables: dict = {}


def kind_table(arch, kinds, mode: str, dtype: str, model: str = "exact",
               resources=None) -> "KindTable":
    """KindTable, memoised per (arch, kinds, mode, dtype, model, provider and its
    version), so new figures from a provider rebuild only its own tables. Strategies
    pass ``resources=req.resources`` (None: the default provider)."""
    key = (_arch_key(arch), family_token(kinds), mode, dtype, model,
           _resources_version(resolve_provider(resources), arch))
    try:
        hit = _tables.get(key)
    except TypeError:   # an unhashable provider: nothing to memoise under
        return KindTable(arch, kinds, mode, dtype, model, resources)
    if hit is None:
        hit = KindTable(arch, kinds, mode, dtype, model, resources)
        with _memo_lock:
            if len(_tables) > 1024:
                _tables.clear()
            _tables[key] = hit
    return hit


class KindTable:
    """Per-kind launch facts for one family in one mode: the variant each kind runs in,
    its threads per workgroup (``threads``: the launch's block, what Eq. 3 charges) and
    waves per workgroup (``waves``), the threads and waves the tile itself keeps
    (``tile_threads``, ``tile_waves``: in a fused launch a 128-thread tile's other
    warps leave at once) and resident workgroups per CU (``active``).
    Read-only once built (shared through :func:`kind_table`)."""

    __slots__ = ("kinds", "variants", "occupancy", "threads", "waves", "active",
                 "tile_threads", "tile_waves")

    def __init__(self, arch, kinds, mode: str, dtype: str, model: str = "exact",
                 resources=None):
        self.kinds = tuple(kinds)
        if mode == "fused":   # one entry point: every kind gets the fused kernel's figures
            v = launches_for(self.kinds, "fused", dtype)[0]
            self.variants = (v,) * len(self.kinds)
            occ = [variant_occupancy(arch, v, model, resources)] * len(self.kinds)
        else:
            self.variants = launches_for(self.kinds, mode, dtype)
            occ = [variant_occupancy(arch, v, model, resources) for v in self.variants]
        self.occupancy = {k.name: o for k, o in zip(self.kinds, occ)}
        self.threads = np.array([v.threads for v in self.variants], dtype=np.float64)
        self.waves = np.array([math.ceil(v.threads / arch.wave_size) for v in self.variants],
                              dtype=np.float64)
        self.active = np.array([o.active_workgroups for o in occ], dtype=np.float64)
        self.tile_threads = np.array([k.threads for k in self.kinds], dtype=np.float64)
        self.tile_waves = np.array([math.ceil(k.threads / arch.wave_size) for k in self.kinds],
                                   dtype=np.float64)
