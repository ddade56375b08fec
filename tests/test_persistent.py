"""Persistent per-kind launches (backends/persistent.py, launch.plan_state): the block
pointers cover the same tiles in the same order, each launch runs its kind's resident
workgroups as blocks, and the runs are balanced by K steps. CPU only."""
from __future__ import annotations

import numpy as np
import pytest

import portgemm  # noqa: F401  (installs the default resources provider)
from portgemm.backends import persistent
from portgemm.backends.launch import host_device_tiles, plan_state
from portgemm.planner import plan as make_plan


def random_shapes(seed, batch, max_mn=1024, max_k=128):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(16, max_mn + 1, batch), rng.integers(16, max_mn + 1, batch),
                     rng.integers(16, max_k + 1, batch)], axis=1)


@pytest.mark.parametrize("n, blocks", [(1, 1), (5, 5), (10, 3), (1000, 132), (50, 49)])
def test_balanced_cuts_cover_everything_without_empty_blocks(n, blocks):
    rng = np.random.default_rng(n * 1000 + blocks)
    w = rng.integers(1, 20, n)
    cuts = persistent.balanced_cuts(w, blocks)
    assert cuts[0] == 0 and cuts[-1] == n and cuts.shape[0] == blocks + 1
    assert np.all(np.diff(cuts) >= 1)
    sums = np.add.reduceat(w, cuts[:-1])
    assert sums.max() <= w.sum() / blocks + 2 * w.max()


def test_balanced_cuts_with_one_heavy_item_keep_every_block_nonempty():
    w = np.array([1000] + [1] * 9)
    cuts = persistent.balanced_cuts(w, 5)
    assert np.all(np.diff(cuts) >= 1) and cuts[-1] == 10


def _state(p, upload=lambda a: np.array(a, copy=True)):
    return plan_state(p, ("test", id(p)), False, False, upload)


def test_per_kind_plan_launches_resident_blocks_over_the_same_tiles():
    p = make_plan(random_shapes(1, 1024), "float32", "sm_90", mode="per-kind")
    tiles, planned_ptr, planned = host_device_tiles(p)
    st = _state(p)
    ptr, launches = st["block_ptr"], st["launches"]
    assert ptr[0] == 0 and ptr[-1] == p.n_tiles and np.all(np.diff(ptr) >= 1)
    assert np.array_equal(st["tiles"], tiles)              # same tiles, same order
    grown = 0
    for (which, base, grid), (w0, first, n) in zip(launches, planned):
        assert which == w0
        slots = persistent.resident_blocks(p, which)
        assert grid == (slots if slots < n else n)
        # the launch's blocks cover exactly its planned tiles
        assert ptr[base] == planned_ptr[first] and ptr[base + grid] == planned_ptr[first + n]
        grown += grid < n
    assert grown >= 1                                       # this batch needs several waves


def test_runs_are_balanced_by_k_steps():
    p = make_plan(random_shapes(2, 1024), "float32", "sm_90", mode="per-kind")
    tiles, _, _ = host_device_tiles(p)
    st = _state(p)
    ptr = st["block_ptr"]
    kind = np.empty(p.n_tiles, np.int64)
    for which, base, grid in st["launches"]:
        kind[ptr[base]:ptr[base + grid]] = which
    w = persistent.tile_weights(p, tiles["gemm"].astype(np.int64), kind)
    cum = np.concatenate([[0], np.cumsum(w)])
    for which, base, grid in st["launches"]:
        runs = np.diff(cum[ptr[base:base + grid + 1]])
        assert runs.max() <= runs.mean() + 2 * w[ptr[base]:ptr[base + grid]].max()


def test_disabled_by_environment(monkeypatch):
    monkeypatch.setenv(persistent.ENV, "0")
    p = make_plan(random_shapes(3, 512), "float32", "sm_90", mode="per-kind")
    _, planned_ptr, planned = host_device_tiles(p)
    st = _state(p)
    assert st["launches"] == planned and np.array_equal(st["block_ptr"], planned_ptr)


def test_fused_and_one_wave_plans_are_left_alone():
    fused = make_plan(random_shapes(4, 1024), "float32", "sm_90", mode="fused")
    st = _state(fused)
    assert st["launches"] == [(0, 0, fused.n_blocks)]
    small = make_plan(random_shapes(5, 4, max_mn=64), "float32", "sm_90", mode="per-kind")
    _, planned_ptr, planned = host_device_tiles(small)
    st = _state(small)
    assert st["launches"] == planned


def test_device_expanded_plan_gets_persistent_pointers():
    """A one-tile-per-block plan whose list the device writes: the backend uploads new
    block pointers over the layout's order (the expansion kernel's)."""
    from portgemm.backends.expand import emulate_expand
    p = make_plan(random_shapes(6, 1024), "float32", "sm_90", mode="per-kind")
    assert p.layout is not None
    made = {}

    def expand(exp):
        t, b = emulate_expand(exp.table, exp.spans, exp.n_tiles)
        made["tiles"] = t
        return t, b, exp.table
    st = plan_state(p, ("test-expand", 0), False, False, lambda a: np.array(a, copy=True), expand)
    ptr = st["block_ptr"]
    assert ptr[-1] == p.n_tiles and np.all(np.diff(ptr) >= 1)
    assert sum(g for _, _, g in st["launches"]) == ptr.shape[0] - 1 < p.n_tiles
