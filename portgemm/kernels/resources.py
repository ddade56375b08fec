"""Where a variant's resource figures come from, best first:

1. figures a backend registered after compiling the variant in this process
   (kernel attributes on a device, or the compiler's own report);
2. recorded figures (``recorded_resources.json``, written by
   ``tools/record_resources.py``, each stamped with its compiler and version);
3. an estimate from the tile shape, marked ``source="estimate"``.

The occupancy CLI reads figures through :func:`lookup`; the planner reads them through
:data:`DEFAULT_PROVIDER` (``import portgemm`` makes it the planner's default resources
provider), so neither imports a GPU library and the planner imports nothing from here.
"""
from __future__ import annotations

import json
import threading
from functools import lru_cache
from pathlib import Path

from .. import generation
from ..occupancy.resources import KernelResources
from ..occupancy.resources import kernel_fingerprint as source_fingerprint  # noqa: F401 (tools, tests)
from .variants import ITEMSIZE, Variant

RECORDED_PATH = Path(__file__).with_name("recorded_resources.json")

_registered: dict[tuple[str, str], KernelResources] = {}
_lock = threading.Lock()
# arch name -> bumped when a register() changes a figure the occupancy model reads for
# that arch: DEFAULT_PROVIDER.version, part of the planner's cache keys
_versions: dict[str, int] = {}


def _occupancy_inputs(res: KernelResources):
    """The figures that decide occupancy (spill bytes and the source do not)."""
    return (res.registers, res.shared_bytes, res.sgprs, res.agprs)


def register(arch: str, variant_name: str, res: KernelResources) -> None:
    """Record figures measured in this process (called by backends after a compile).
    Figures that confirm what was known (the recorded ones, typically) keep every cached
    plan; changed ones replan only this arch's plans."""
    with _lock:
        before = _registered.get((arch, variant_name)) or recorded(arch, variant_name)
        _registered[(arch, variant_name)] = res
        if before is None or _occupancy_inputs(before) != _occupancy_inputs(res):
            _versions[arch] = _versions.get(arch, 0) + 1
            generation.bump()


@lru_cache(maxsize=1)
def _recorded() -> dict:
    """The recorded figures, or {} when they were made from another kernel source
    (stale figures are worse than estimates)."""
    if not RECORDED_PATH.exists():
        return {}
    data = json.loads(RECORDED_PATH.read_text())
    return data if data.get("kernel_sha256") == source_fingerprint() else {}


def recorded(arch: str, variant_name: str) -> KernelResources | None:
    row = _recorded().get("archs", {}).get(arch, {}).get(variant_name)
    return KernelResources(**row) if row else None


def estimate(variant: Variant, vendor: str) -> KernelResources:
    """A rough figure until a compiler has spoken: accumulators + staged loads +
    addressing. Shared memory is exact (it is fixed by the tile shape)."""
    elem = ITEMSIZE[variant.dtype]
    acc_words = 2 if elem == 8 else 1      # the 16-bit dtypes accumulate in fp32
    acc = max(k.accumulators for k in variant.kinds)
    loads = max(-(-k.tk * (k.tm + k.tn) // k.threads) for k in variant.kinds)
    held = loads + max(k.operands_held for k in variant.kinds)
    regs = acc * acc_words + -(-held * elem // 4) + 40
    regs = min(255, regs)
    return KernelResources(registers=regs, shared_bytes=shared_bytes(variant),
                           sgprs=40 if vendor == "amd" else 0, source="estimate")


def shared_bytes(variant: Variant) -> int:
    """Static shared memory the kernel source declares for this variant (keep in step
    with ``PG_SMEM_ELEMS`` in render.py): two stages of A and B tiles."""
    from .render import smem_elems
    return smem_elems(variant.kinds, variant.dtype) * ITEMSIZE[variant.dtype]


def lookup(arch, variant: Variant) -> KernelResources:
    """Best available figures for ``variant`` on ``arch`` (an Arch or its name)."""
    from ..occupancy.archs import get_arch
    a = get_arch(arch) if isinstance(arch, str) else arch
    hit = _registered.get((a.name, variant.name)) or recorded(a.name, variant.name)
    return hit if hit is not None else estimate(variant, a.vendor)


def as_variant(launch) -> Variant:
    """The compiled variant (NN) a planner Launch (planner.launches) runs as."""
    if isinstance(launch, Variant):
        return launch
    return Variant(tuple(launch.kinds), launch.dtype, launch.layout)


class DefaultProvider:
    """The planner's default resources provider: :func:`lookup` of the variant a launch
    runs as (compiled in this process, else recorded, else estimated). ``version(arch)``
    changes when register() changes a figure for that arch, so only those plans are made
    again. Every such change also bumps portgemm.generation (``bumps_generation``), so
    the planner's cache-hit path need not ask for the version."""

    bumps_generation = True

    def __call__(self, arch, launch) -> KernelResources:
        return lookup(arch, as_variant(launch))

    def version(self, arch_name: str) -> int:
        return _versions.get(arch_name, 0)

    def __repr__(self) -> str:
        return "<portgemm.kernels.resources.DEFAULT_PROVIDER>"


DEFAULT_PROVIDER = DefaultProvider()
