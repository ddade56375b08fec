"""zhang2025 Algorithm 1 with the workgroup-level TLP of Eq. 3 (tiles x threads per
workgroup, the launch's block: a 128-thread tile in a 256-thread fused block counts 256)
instead of the wavefront TLP: the baseline of the paper's Fig. 8/9 comparison. Same
rules (``tlp_model`` "device" or "paper"), start, candidates, stops and thresholds as
``wavefront-tlp``; only the TLP held against the threshold differs, so under the
device rule Eq. 3 reaches the threshold with fewer tiles (it charges idle warps and
ignores the last partial wave) and stops considering smaller tiles sooner."""
from __future__ import annotations

from . import register
from .wavefront_tlp import OPTIONS, algorithm1


@register("workgroup-tlp", modes=("fused", "per-kind"), options=OPTIONS)
def plan_workgroup(req):
    return algorithm1(req, "workgroup-tlp", "workgroup")
