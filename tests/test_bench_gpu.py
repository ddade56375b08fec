"""python -m portgemm bench on a CUDA device (marker gpu; skipped without one): every
method that is not skipped passes the float64 check, in both dtypes, and is timed."""
from __future__ import annotations

import json

import pytest

from portgemm.benchmark import cli
from portgemm.errors import DeviceUnavailable

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda():
    from portgemm.backends.base import get_backend
    try:
        return get_backend("cuda")
    except DeviceUnavailable as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_method_passes_its_check_on_the_device(cuda, tmp_path, dtype):
    f = tmp_path / "s.csv"
    # odd sizes, a 1-row and a K=1 GEMM: edges in every method
    f.write_text("M,N,K\n17,33,65\n1,128,40\n100,7,1\n64,64,64\n300,200,129\n")
    out = tmp_path / "o"
    assert cli.main(["--shapes-file", str(f), "--backend", "cuda", "--dtype", dtype,
                     "--strategies", "all", "--entry", "bound,gemm_vbatched,run",
                     "--quick", "--no-progress", "--no-plots", "--out", str(out)]) == 0
    data = json.loads((out / "shapes.json").read_text())
    failed = [r for r in data["records"] if r["status"] == "failed"]
    assert not failed, failed
    timed = {r["method"] for r in data["records"] if r["status"] == "ok"}
    skipped = {n.split(":")[0] for n in data["notes"]}
    assert "cublas-loop" in timed and len([m for m in timed if "/" in m]) == 12
    assert timed | skipped >= {"cublas-grouped", "cublas-grouped-lists", "triton-grouped",
                               "torch-bmm"}
    assert data["ceilings"]["flops_per_s"] > 1e12 and data["meta"]["driver"] > 0
