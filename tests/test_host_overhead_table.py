"""bench/host_overhead.py's table arithmetic on the CPU: the "over bound" column."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def ho():
    sys.path.insert(0, str(BENCH))
    try:
        import host_overhead
    except ImportError as e:   # a GPU-only dependency missing here
        pytest.skip(f"bench/host_overhead.py does not import here: {e}")
    finally:
        sys.path.remove(str(BENCH))
    return host_overhead


def test_over_bound_is_the_per_gemm_time_beyond_the_bound_call(ho):
    batch = 8
    res = {"gemm_vbatched": {"host_us_per_gemm": 16.0 / batch},
           "bound": {"host_us_per_gemm": 9.0 / batch}}
    ho._over_bound(res)
    assert res["gemm_vbatched"]["over_bound_us_per_gemm"] == pytest.approx(7.0 / batch)
    assert "over_bound_us_per_gemm" not in res["bound"]
    assert ho._headers("gemm_vbatched") == ["gemm_vbatched", "over bound"]
    assert ho._cells(res["gemm_vbatched"], "gemm_vbatched") == [2.0, pytest.approx(0.875)]
    assert ho._cells(res["bound"], "bound") == [9.0 / batch]
    assert ho._cells(None, "x") == [None, None]


def test_no_bound_call_leaves_the_column_empty(ho):
    res = {"gemm_vbatched": {"host_us_per_gemm": 1.0}}
    ho._over_bound(res)
    assert ho._cells(res["gemm_vbatched"], "gemm_vbatched") == [1.0, None]
