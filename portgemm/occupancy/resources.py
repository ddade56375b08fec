"""What a compiled kernel asks of one compute unit: the input of the occupancy model."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class KernelResources:
    """Per-kernel resource usage, vendor-neutral.

    ``registers`` is arch VGPRs per lane on AMD and registers per thread on NVIDIA;
    ``shared_bytes`` is LDS (AMD) or static + dynamic shared memory (NVIDIA) per
    workgroup; ``sgprs``/``agprs`` only matter on AMD (sgprs including VCC and the
    other reserved ones). ``source`` says where the figures came from: a compiler and
    its version, or ``estimate``.
    """

    registers: int
    shared_bytes: int = 0
    sgprs: int = 0
    agprs: int = 0
    spill_bytes: int = 0
    source: str = "estimate"

    def as_dict(self) -> dict:
        return asdict(self)
