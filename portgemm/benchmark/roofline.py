"""The roofline of a case, from ceilings measured in the same run:

    roofline time = max(flops / GEMM peak, bytes / copy bandwidth, empty-launch time)

GEMM peak: one large GEMM in the benchmark's dtype (8192^3 on a GPU, IEEE, no TF32).
Copy bandwidth: a 1 GiB device-to-device copy (read + write bytes). Empty launch: an
empty kernel launched back to back from Python (host overhead counts, as it does for
every method). bytes = itemsize * sum(M K + K N + M N): A and B read once, C written
once (beta = 0 never reads C).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .timing import Budget, measure


@dataclass(frozen=True)
class Ceilings:
    flops_per_s: float
    bytes_per_s: float
    launch_s: float

    def as_dict(self) -> dict:
        return asdict(self)


def case_bytes(shapes, itemsize: int) -> float:
    s = np.asarray(shapes, np.float64).reshape(-1, 3)
    M, N, K = s[:, 0], s[:, 1], s[:, 2]
    return float(itemsize * (M * K + K * N + M * N).sum())


def roofline(flops: float, nbytes: float, c: Ceilings) -> tuple[float, str]:
    """(seconds, limiter) with limiter one of "compute", "memory", "launch"."""
    terms = {"compute": flops / c.flops_per_s, "memory": nbytes / c.bytes_per_s,
             "launch": c.launch_s}
    limiter = max(terms, key=terms.get)
    return terms[limiter], limiter


def fraction_of_roofline(measured_s: float, roofline_s: float) -> float:
    """Roofline time / measured time: 1.0 means at the roofline."""
    return roofline_s / measured_s if measured_s > 0 else float("nan")


def measure_ceilings(dev, dtype, budget: Budget = Budget(warmup_ms=50, rep_ms=200)) -> Ceilings:
    flops, gemm = dev.gemm_probe(dtype)
    nbytes, copy = dev.copy_probe()
    g_ms, _ = measure(dev, gemm, "warm", budget)
    c_ms, _ = measure(dev, copy, "warm", budget)
    l_ms, _ = measure(dev, dev.empty_launch(), "warm", budget)
    return Ceilings(flops / (g_ms * 1e-3), nbytes / (c_ms * 1e-3), l_ms * 1e-3)
