"""The ceilings measurement (portgemm/benchmark/ceilings.py): its kernels compile, the
bench flag reaches it, and on a device its figures are sane (the planner's reading of
ceilings.json is tested in test_planner.py)."""
from __future__ import annotations

import importlib.util

import pytest

from portgemm.benchmark import ceilings as bench_ceilings
from portgemm.benchmark import cli
from portgemm.occupancy import ceilings

KERNELS = ("pg_copy", "pg_smem", "pg_fma32", "pg_fma64", "pg_empty", "pg_chase")


@pytest.mark.toolchain
@pytest.mark.parametrize("name", KERNELS)
def test_kernels_compile(name):
    nvrtc = pytest.importorskip("portgemm.kernels.nvrtc")
    try:
        cubin, _ = nvrtc.compile(bench_ceilings.SOURCE, name, "sm_90")
    except Exception as e:   # no NVRTC here
        pytest.skip(f"NVRTC unavailable: {e}")
    assert cubin


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None,
                    reason="with CuPy present the flag would measure and write the file")
def test_flag_without_a_device_is_one_line_and_status_2(capsys):
    assert cli.main(["--ceilings"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")


@pytest.mark.gpu
def test_measured_figures_are_sane(cp):
    entry = bench_ceilings.measure(cp)
    assert set(ceilings.FIELDS) <= set(entry)
    assert 1e11 < entry["copy_bytes_per_s"] < 2e13
    assert 1e10 < entry["smem_bytes_per_s_per_cu"] < 2e12
    assert 1e12 < entry["fp32_flops_per_s"] < 5e14
    assert 1e10 < entry["fp64_flops_per_s"] <= 1.2 * entry["fp32_flops_per_s"]
    assert 1e-7 < entry["launch_s"] < 1e-3
    assert 5e-8 < entry["latency_s"] < 1e-5


def test_cost_model_predicts_the_recorded_h100_run():
    """The H100 session's bound-call times (bench/results/2026-11-23-h100/paper.json:
    four strategies on the 48-case grid and the Inception layers, plans of the paper
    rule): the model's log times correlate, and it orders most pairs of strategies."""
    from pathlib import Path

    from portgemm.benchmark.model_check import replay
    path = Path(__file__).resolve().parents[1] / "bench/results/2026-11-23-h100/paper.json"
    if not path.exists():
        pytest.skip("no recorded run")
    got = replay(path)
    assert got["rows"] >= 200
    assert got["pearson_log"]["all"] > 0.98
    assert got["pairs_ordered"]["share"] > 0.85
    assert 0.8 < got["predicted_over_measured"]["median"] < 1.25
