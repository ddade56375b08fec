"""The recorded resource figures (used by the planner and the occupancy CLI where no
compiler runs) belong to the kernel source in the tree."""
import json

from portgemm.kernels import resources
from portgemm.kernels.variants import catalogue_variants


def test_recorded_figures_match_the_kernel_source():
    data = json.loads(resources.RECORDED_PATH.read_text())
    assert data["kernel_sha256"] == resources.source_fingerprint(), (
        "kernel source, compat.h or render.py changed: run python tools/record_resources.py")


def test_every_catalogue_variant_is_recorded_for_the_ci_archs():
    names = {v.name for v in catalogue_variants()}
    for arch in ("gfx908", "gfx90a", "gfx940", "sm_80", "sm_90"):
        assert names <= set(resources._recorded()["archs"][arch]), arch
        v = catalogue_variants()[0]
        assert resources.lookup(arch, v).source != "estimate"
