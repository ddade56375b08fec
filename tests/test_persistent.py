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
def test_round_robin_order(n, blocks):
    order = persistent.round_robin(n, blocks)
    assert sorted(order.tolist()) == list(range(n))
    per = np.bincount(np.arange(n) % blocks, minlength=blocks)
    runs = np.split(order, np.cumsum(per)[:-1])
    for j, run in enumerate(runs):
        assert run.tolist() == list(range(j, n, blocks))


def _state(p, upload=lambda a: np.array(a, copy=True)):
    return plan_state(p, ("test", id(p)), False, False, upload)


def test_per_kind_plan_launches_resident_blocks_round_robin():
    p = make_plan(random_shapes(1, 1024), "float32", "sm_90", mode="per-kind")
    tiles, planned_ptr, planned = host_device_tiles(p)
    st = _state(p)
    ptr, launches, got = st["block_ptr"], st["launches"], st["tiles"]
    assert ptr[0] == 0 and ptr[-1] == p.n_tiles and np.all(np.diff(ptr) >= 1)
    # the same tiles, each once
    key = lambda t: np.sort(t.view(np.int32).reshape(-1, 4) @ np.array([1 << 40, 1 << 20, 1, 0]))  # noqa: E731
    assert np.array_equal(key(got), key(tiles))
    grown, base = 0, 0
    for (which, b0, grid), (w0, first, n) in zip(launches, planned):
        assert which == w0 and b0 == base
        slots = persistent.resident_blocks(p, which)
        assert grid == (slots if slots < n else n)
        for j in (0, grid // 2, grid - 1):   # block j runs planned blocks j, j + grid, ...
            want = np.concatenate([tiles[planned_ptr[b]:planned_ptr[b + 1]]
                                   for b in range(first + j, first + n, grid)])
            assert np.array_equal(got[ptr[base + j]:ptr[base + j + 1]], want)
        grown += grid < n
        base += grid
    assert grown >= 1                                       # this batch needs several waves


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


def test_device_expanded_plan_goes_persistent_from_the_host():
    """A one-tile-per-block plan whose list the device would write: a persistent launch
    uploads the reordered list instead (the expansion kernel writes a block per tile)."""
    p = make_plan(random_shapes(6, 1024), "float32", "sm_90", mode="per-kind")
    assert p.layout is not None

    def expand(exp):
        raise AssertionError("a persistent plan is not expanded on the device")
    st = plan_state(p, ("test-expand", 0), False, False, lambda a: np.array(a, copy=True), expand)
    ptr = st["block_ptr"]
    assert ptr[-1] == p.n_tiles and np.all(np.diff(ptr) >= 1)
    assert sum(g for _, _, g in st["launches"]) == ptr.shape[0] - 1 < p.n_tiles


def test_a_plan_of_one_launch_keeps_a_block_per_tile():
    """One kind's launch alone measured slower persistent: it stays as planned."""
    from portgemm.tuning.model import one_kind_plan
    from portgemm.tiles import FAMILIES
    kind = FAMILIES["portgemm"][1]
    p = one_kind_plan(random_shapes(7, 1024), kind, "float32", make_plan(
        random_shapes(7, 4), "float32", "sm_90").arch)
    if p.mode != "per-kind":
        pytest.skip(f"one_kind_plan made a {p.mode} plan")
    _, planned_ptr, planned = host_device_tiles(p)
    st = _state(p)
    assert st["launches"] == planned


def test_planned_blocks_of_several_tiles_move_whole():
    """Planned blocks holding several tiles (li2019's packing) move as wholes: block j
    runs planned blocks j, j + G, ..., each one's tiles in their order."""
    class Occ:
        active_workgroups = 1

    class Arch:
        compute_units = 3

    class Kind:
        name = "k"
        engine = "simt"

    class P:
        kinds = (Kind(),)
        occupancy = {"k": Occ()}
        arch = Arch()
    sizes = np.array([2, 1, 3, 1, 2, 2, 1, 4])
    block_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    order, ptr, launches = persistent.persistent_launches(P, block_ptr, [(0, 0, 8)])
    assert launches == [(0, 0, 3)]
    planned = [list(range(block_ptr[b], block_ptr[b + 1])) for b in range(8)]
    for j in range(3):
        want = sum((planned[b] for b in range(j, 8, 3)), [])
        assert order[ptr[j]:ptr[j + 1]].tolist() == want
    assert ptr[-1] == block_ptr[-1]


def _expand_on_host(exp):
    """The device expansion's output, emulated (the GPU backends' expand callback)."""
    from portgemm.backends.expand import emulate_expand
    tiles, block_ptr = emulate_expand(exp.table, exp.spans, exp.n_tiles)
    return tiles, block_ptr, exp.table


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("strategy, mode", [(None, None), (None, "fused"), (None, "per-kind"),
                                            ("coordinated", None), ("workgroup-tlp", None)])
@pytest.mark.parametrize("persist", ["0", "1"])
def test_flat_lists_name_a_real_gemm_in_every_record(dtype, strategy, mode, persist,
                                                     monkeypatch):
    """The flat-tile-list entry point (vbatched_gemm.cu) runs every record between two
    block pointers without checking it: every list a backend can upload or have the
    device write (the host's list, the device expansion, a persistent reordering) holds
    a GEMM of the batch in every record, and every block at least one record. (The
    ragged upper-bound list's empty slots never reach this entry point: the ragged entry
    finds its own group.)"""
    monkeypatch.setenv(persistent.ENV, persist)
    for seed, batch, max_mn in [(11, 1024, 1024), (12, 64, 256), (13, 3, 40), (14, 300, 128)]:
        shapes = random_shapes(seed, batch, max_mn=max_mn)
        shapes[::7, 2] = 0                                  # K = 0 GEMMs keep their tiles
        p = make_plan(shapes, dtype, "sm_90", strategy, mode)
        if p.mode == "grid-z":
            continue
        st = plan_state(p, ("test-lists", seed, persist), False, False,
                        lambda a: np.array(a, copy=True), _expand_on_host)
        tiles, ptr = st["tiles"], st["block_ptr"]
        assert np.all(tiles["gemm"] >= 0) and np.all(tiles["gemm"] < batch), (seed, p.strategy)
        assert ptr[0] == 0 and ptr[-1] == tiles.shape[0] and np.all(np.diff(ptr) >= 1)
        assert sum(g for _, _, g in st["launches"]) == ptr.shape[0] - 1


def _carry_only_lines(src: str):
    """(line number, code) of the kernel source's lines compiled only under PG_CARRY_ON:
    inside an `#if PG_CARRY_ON` branch (not its #else), at any depth."""
    stack = []                      # per open #if: True while in a PG_CARRY_ON branch
    for no, line in enumerate(src.splitlines(), 1):
        d = line.strip()
        if d.startswith(("#if ", "#ifdef", "#ifndef")):
            stack.append(d.split(None, 1)[1].strip() == "PG_CARRY_ON")
        elif d.startswith(("#else", "#elif")):
            stack[-1] = False
        elif d.startswith("#endif"):
            stack.pop()
        yield no, line.split("//")[0], any(stack)


def test_carry_code_is_compiled_only_where_the_carry_is_on():
    """Every use of the carry in vbatched_gemm.cu sits under `#if PG_CARRY_ON`, so a
    variant that does not carry (fp64, fused, MMA, grid-z, ragged, AMD) compiles to the
    code it had before the carry: passing a carry to every tile had changed registers
    in such kernels and made one sm_80 fp64 kernel spill (vendor matrix)."""
    import re

    from portgemm.kernels.render import SOURCE_FILE
    src = SOURCE_FILE.read_text()
    uses = re.compile(r"\b(carry|PgCarry|prefetch|primed|pg_run|next|nm0|nn0)\b")
    leaked = [(no, code.strip()) for no, code, on in _carry_only_lines(src)
              if uses.search(code) and not on and not code.lstrip().startswith("#define PG_CARRY_ON")]
    assert not leaked, leaked
    assert any(on for _, _, on in _carry_only_lines(src))
