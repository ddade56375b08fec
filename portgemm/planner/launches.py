"""What the planner needs to know about the kernel launches a plan makes, as data:
which tile kinds share an entry point in each mode, its threads per workgroup, and the
identity a resources provider is asked about.

The planner sits above the occupancy model and beside the kernels, never on top of
them: it describes a launch here and asks a *resources provider* (passed to
``plan(..., resources=)``) for its figures, so ``portgemm.planner`` imports nothing
from ``portgemm.kernels``. The kernels side maps a Launch to its compiled variant
(``kernels.resources``' default provider does).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Protocol, runtime_checkable

from ..errors import ArgumentTypeError
from ..occupancy.resources import KernelResources
from ..tiles import TileConfig

# Execution modes and the launch layout each uses (the same split as the kernels'
# variants: "fused" = every kind in one entry point with max(threads) per block,
# "per-kind" = one launch per kind, "grid-z" = MAGMA's grid, one config per launch).
LAYOUTS = {"fused": "tile-list", "per-kind": "tile-list", "grid-z": "grid-z"}

# gridDim.y / gridDim.z limit on both vendors (CUDA and HIP); the backends split grid z
# into launches of at most this, grid y must fit. The same value as
# kernels.variants.GRID_YZ_MAX (tests check they agree).
GRID_YZ_MAX = 65535


@dataclass(frozen=True)
class Launch:
    """One entry point a plan launches: its tile kinds, dtype and layout. Hashable, and
    what a resources provider is asked about (the NN transpose case: transposes change
    addressing, not the figures the planner uses)."""
    kinds: tuple[TileConfig, ...]
    dtype: str = "float32"
    layout: str = "tile-list"   # "tile-list" | "grid-z"

    @property
    def threads(self) -> int:
        """Threads per workgroup: the largest of its kinds (a fused kernel's 128-thread
        kinds run in its 256-thread blocks)."""
        return max(k.threads for k in self.kinds)


def launches_for(kinds, mode: str, dtype: str) -> tuple[Launch, ...]:
    """The launches one mode makes for ``kinds``: one fused entry point, or one per kind."""
    kinds = tuple(kinds)
    if mode == "fused":
        return (Launch(kinds, dtype, "tile-list"),)
    return tuple(Launch((k,), dtype, LAYOUTS[mode]) for k in kinds)


@runtime_checkable
class ResourcesProvider(Protocol):
    """What ``plan(..., resources=)`` takes: a callable ``(arch, launch) -> KernelResources``
    (``arch`` an occupancy Arch, ``launch`` a :class:`Launch`). A plain function will do;
    plans made with it are cached under it, on the understanding that its figures never
    change. A provider whose figures can change (the default one learns compiled
    figures as backends compile) also has ``version(arch_name) -> hashable``, a value
    that changes whenever its figures for that arch do: cached plans and per-kind tables
    are keyed on it, so new figures replan only what they concern. A provider whose
    version changes only together with portgemm.generation's counter (it calls
    ``generation.bump()`` on every change) may say so with ``bumps_generation = True``:
    the plan cache's hit path then compares the counter instead of calling ``version``."""

    def __call__(self, arch, launch: Launch) -> KernelResources: ...


# The provider plan() uses when given none. Set from above (``import portgemm`` sets the
# kernels' recorded-and-compiled figures): the planner never reaches for it itself.
_default_provider = None


def set_default_provider(provider) -> None:
    """Make ``provider`` the one ``plan(..., resources=None)`` uses."""
    global _default_provider
    _default_provider = check_provider(provider)


def resolve_provider(provider):
    """``provider``, or the default one when it is None; ArgumentTypeError if neither."""
    if provider is None:
        if _default_provider is None:
            raise ArgumentTypeError("no resources provider: pass resources= (a callable "
                                    "(arch, launch) -> KernelResources) or import portgemm, "
                                    "which sets the default one")
        return _default_provider
    return check_provider(provider)


def check_provider(provider):
    if not callable(provider):
        raise ArgumentTypeError(f"resources must be a callable (arch, launch) -> "
                                f"KernelResources or None, got {type(provider).__name__}")
    return provider


def provider_version(provider, arch_name: str) -> Hashable:
    """The provider's ``version(arch_name)``, or None for a provider without one."""
    version = getattr(provider, "version", None)
    return None if version is None else version(arch_name)
