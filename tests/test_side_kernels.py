"""The kernels beside the GEMM (kernels/vbatched_gemm.cu): split-K's reduction
(PG_SPLIT_REDUCE) and alignment staging's copy (PG_STAGE_COPY) compile for every target,
with warnings as errors and no spill, for each dtype they serve."""
from __future__ import annotations

import os

import pytest

from portgemm.kernels.variants import SplitReduce, StageCopy

SIDE_KERNELS = [SplitReduce("float32"), SplitReduce("float64"), StageCopy("float16"),
                StageCopy("float32"), StageCopy("float64")]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "gfx908", "gfx90a", "gfx940"])
def test_side_kernels_compile_without_warnings(arch, monkeypatch):
    from portgemm.kernels import nvrtc, offline
    if not offline.available(arch):
        pytest.skip(f"no compiler for {arch} here")
    monkeypatch.setenv(nvrtc.WERROR_ENV, "1")
    monkeypatch.setenv("PORTGEMM_CACHE_DIR",
                       os.environ.get("TMPDIR", "/tmp") + "/pg-side-kernels-test")
    for variant in SIDE_KERNELS:
        _, res = offline.compile_variant(variant, arch, cache=False)
        assert res.spill_bytes == 0, variant.name
