"""What a compiled kernel asks of one compute unit: the input of the occupancy model."""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

# What decides a compiled kernel: its source, the compat header and the renderer (its
# #defines). Recorded figures (kernels/resources.py) and tuned data (occupancy/tuned.py)
# carry this hash and are not used for another source. Read as bytes here, so the
# planner side needs nothing from the kernels package.
_KERNELS = Path(__file__).resolve().parents[1] / "kernels"
KERNEL_FILES = (_KERNELS / "compat.h", _KERNELS / "vbatched_gemm.cu", _KERNELS / "render.py")


def kernel_fingerprint() -> str:
    """sha256 of KERNEL_FILES."""
    h = hashlib.sha256()
    for f in KERNEL_FILES:
        h.update(f.read_bytes())
    return h.hexdigest()


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
