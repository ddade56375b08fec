"""zhang2025 Algorithm 1 with the workgroup-level TLP of Eq. 3 (tiles x threads per
workgroup) instead of Eq. 4: the baseline of the paper's Fig. 8/9 comparison. Same
initial scheme, shrink loop, stops and threshold as ``wavefront-tlp``."""
from __future__ import annotations

from . import register
from .wavefront_tlp import OPTIONS, algorithm1


@register("workgroup-tlp", modes=("fused", "per-kind"), options=OPTIONS)
def plan_workgroup(req):
    return algorithm1(req, "workgroup-tlp", "workgroup")
