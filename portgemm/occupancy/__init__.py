"""Occupancy: how many workgroups (waves) of a kernel one compute unit holds at once.

    from portgemm.occupancy import get_arch, occupancy, KernelResources
    occ = occupancy("cdna2", 256, KernelResources(registers=64, sgprs=40))
    occ.active_workgroups, occ.occupancy, occ.limited_by, occ.limits

``archs`` is the architecture table (data), ``model`` the exact rules (one function per
limit), ``paper_model`` zhang2025's Eqs. 5-9; ``python -m portgemm.occupancy`` is the CLI.
"""
from .archs import ARCHS, Arch, AmdRules, NvidiaRules, get_arch, known_names
from .model import (AMD_LIMITS, MODELS, NVIDIA_LIMITS, Occupancy, check_resources,
                    exact_occupancy, occupancy)
from .paper_model import paper_occupancy
from .resources import KernelResources

__all__ = [
    "ARCHS", "Arch", "AmdRules", "NvidiaRules", "get_arch", "known_names",
    "occupancy", "exact_occupancy", "paper_occupancy", "Occupancy", "MODELS",
    "AMD_LIMITS", "NVIDIA_LIMITS", "check_resources", "KernelResources",
]
