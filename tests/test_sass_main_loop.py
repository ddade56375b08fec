"""The lean-step main loop in sm_90 SASS (marker ``toolchain``; skipped without NVRTC or
cuobjdump): a k step of 64x128/8x8 A B^T issues fewer non-FFMA instructions with
PG_LEAN_STEP than the same source rendered without it, at no more registers than its
3-block cap and with no spill (portgemm/kernels/nv_sass.py; bench/NOTES.md session 10).
(A B runs the k-major cp.async pipeline since session 13: PG_KPIPE; B^T keeps the
register path this loop belongs to.)"""
from __future__ import annotations

import pytest

from portgemm.errors import DeviceUnavailable
from portgemm.kernels import nv_sass, nvrtc, render
from portgemm.kernels.variants import Variant
from portgemm.tiles import FAMILIES

pytestmark = pytest.mark.toolchain

try:
    nvrtc.version()
    nv_sass.cuobjdump()
except DeviceUnavailable as e:
    pytest.skip(str(e), allow_module_level=True)


def test_lean_step_loop_is_shorter():
    kind = next(k for k in FAMILIES["portgemm"] if k.kind == "64x128/8x8")
    v = Variant((kind,), "float32", trans_b=True)
    assert render.lean_step(v)
    r = render.render(v)
    step = "#define PG_LEAN_STEP 1\n"
    assert step in r.source
    new_cubin, new_res = nvrtc.compile(r.source, r.name, "sm_90")
    old_cubin, _ = nvrtc.compile(r.source.replace(step, ""), r.name, "sm_90")
    new, old = nv_sass.main_loop(new_cubin), nv_sass.main_loop(old_cubin)
    assert new.ffma == old.ffma == 512          # 8 k of an 8x8 micro-tile a step
    assert new.other < old.other, (new, old)
    assert new_res.spill_bytes == 0 and new_res.registers <= 168, new_res
