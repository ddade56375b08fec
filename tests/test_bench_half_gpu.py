"""The tensor-core peers on a CUDA device (marker gpu; skipped without one or without
torch): every peer that runs passes its format's float64 check on odd sizes, a peer
returning wrong numbers is reported failed and not timed, and portgemm not taking a
format is n/a, not a failure."""
from __future__ import annotations

import numpy as np
import pytest

from portgemm.benchmark.formats import FORMATS
from portgemm.benchmark.methods import Prepared
from portgemm.errors import DeviceUnavailable

pytestmark = pytest.mark.gpu

ODD = np.array([[17, 33, 65], [1, 128, 40], [100, 7, 1], [64, 64, 64], [300, 200, 129]])


@pytest.fixture(scope="module")
def ctx():
    pytest.importorskip("torch")
    from portgemm.benchmark.half_run import open_context
    try:
        return open_context()
    except DeviceUnavailable as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("name", ["float16", "bfloat16", "tf32", "3xtf32", "float64"])
def test_grid_methods_pass_their_check(ctx, name):
    from portgemm.benchmark.half_run import GRID_METHODS, run_case
    from portgemm.benchmark.torch_operands import make_torch_operands
    c, dev = ctx
    ops = make_torch_operands(c.torch, ODD, FORMATS[name], seed=5)
    recs = run_case(c, dev, ops, GRID_METHODS[name], {"case": "odd", "format": name})
    assert not [r for r in recs if r["status"] == "failed"], recs
    timed = {r["method"] for r in recs if r["status"] == "ok"}
    assert {m for m in GRID_METHODS[name] if not m.startswith("ours")} <= timed
    assert all(r["note"].startswith("n/a (not supported)") for r in recs
               if r["status"] == "skipped" and r["method"].startswith("ours"))


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_moe_methods_pass_their_check(ctx, name):
    from portgemm.benchmark.half_run import MOE_METHODS, run_case
    from portgemm.benchmark.torch_operands import make_torch_operands
    c, dev = ctx
    shapes = np.array([[40, 64, 128], [0, 64, 128], [129, 64, 128], [7, 64, 128]])
    ops = make_torch_operands(c.torch, shapes, FORMATS[name], seed=6)
    recs = run_case(c, dev, ops, MOE_METHODS, {"case": "moe", "format": name})
    assert not [r for r in recs if r["status"] == "failed"], recs
    assert "cublas-grouped" in {r["method"] for r in recs if r["status"] == "ok"}


def test_a_wrong_peer_is_failed_not_timed(ctx, monkeypatch):
    from portgemm.benchmark import half_run
    from portgemm.benchmark.torch_operands import make_torch_operands
    c, dev = ctx
    ops = make_torch_operands(c.torch, ODD, FORMATS["float16"], seed=7)

    def sloppy(ctx_, o):       # bf16 arithmetic behind an fp16 label
        def call():
            for a, b, cc in zip(o.A, o.B, o.C):
                cc.copy_(a.bfloat16() @ b.bfloat16())
        return Prepared(call)
    monkeypatch.setitem(half_run.MAKERS, "sloppy", sloppy)
    (rec,) = half_run.run_case(c, dev, ops, ["sloppy"], {"case": "odd", "format": "float16"})
    assert rec["status"] == "failed" and "ms" not in rec and "relative error" in rec["note"]
