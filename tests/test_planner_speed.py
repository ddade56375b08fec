"""The fast planning path and the planner's explicit inputs.

- build_tiles and the LPT orderings give exactly what straightforward references give,
  and so does every strategy and mode end to end (references patched in);
- a resources provider passed to plan() is the one used; registering figures replans
  only what they concern (cached plans of other archs, and plans whose figures a
  compile merely confirms, stay cached);
- portgemm.planner imports nothing from portgemm.kernels or the backends.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import portgemm
import portgemm.planner as planner
from portgemm.errors import ArgumentTypeError
from portgemm.kernels import resources as kres
from portgemm.kernels.variants import GRID_YZ_MAX, variants_for
from portgemm.occupancy import KernelResources, get_arch
from portgemm import tile_layout
from portgemm.plan import TILE_DTYPE
from portgemm.planner import coordinated, launches, magma, tiling, wavefront_tlp
from portgemm.tiles import FAMILIES, LI2019_128, LI2019_256, MAGMA, TileConfig, ZHANG2025

ROOT = Path(__file__).resolve().parents[1]
STRATEGY_MODES = [(s, m) for s in planner.strategies() for m in planner.strategy_info(s).modes]


# --- straightforward references ---------------------------------------------------

def ref_build_tiles(shapes, kinds, kidx, gemm_order=None, m_fastest=False):
    """One GEMM, one tile at a time."""
    rows = []
    order = range(shapes.shape[0]) if gemm_order is None else gemm_order
    for g in order:
        k = kinds[int(kidx[g])]
        M, N = int(shapes[g, 0]), int(shapes[g, 1])
        gm, gn = -(-M // k.tm), -(-N // k.tn)
        cells = ([(i, j) for j in range(gn) for i in range(gm)] if m_fastest
                 else [(i, j) for i in range(gm) for j in range(gn)])
        rows += [(g, i * k.tm, j * k.tn, k.tm, k.tn, int(kidx[g])) for i, j in cells]
    return np.array(rows, dtype=TILE_DTYPE)


class RefLayout(tile_layout.TileLayout):
    """A layout whose list is ref_build_tiles' (set by ref_tile_layout)."""

    def tiles(self):
        return ref_build_tiles(*self.ref_args)


def ref_tile_layout(shapes, kinds, kidx, gemm_order=None, m_fastest=False, per_gemm=None):
    """The per-GEMM layout, one GEMM at a time (``per_gemm`` ignored: made again here);
    its list is ref_build_tiles'."""
    order = range(shapes.shape[0]) if gemm_order is None else gemm_order
    cols = []
    for g in order:
        k = kinds[int(kidx[g])]
        cols.append((int(g), int(kidx[g]), k.tm, k.tn, -(-int(shapes[g, 0]) // k.tm),
                     -(-int(shapes[g, 1]) // k.tn)))
    cols = np.array(cols, dtype=np.int64).reshape(-1, 6).T
    first = np.concatenate([[0], np.cumsum(cols[4] * cols[5])]).astype(np.int64)
    lay = RefLayout(*cols, first, m_fastest)
    object.__setattr__(lay, "ref_args", (shapes, kinds, kidx, gemm_order, m_fastest))
    return lay


def ref_per_gemm_tiles(shapes, kinds, kidx):
    """tm, tn, gm, gn per GEMM, one GEMM at a time."""
    rows = [(kinds[int(k)].tm, kinds[int(k)].tn, -(-int(m) // kinds[int(k)].tm),
             -(-int(n) // kinds[int(k)].tn)) for (m, n, _), k in zip(shapes.tolist(), kidx)]
    return tuple(np.array(c, dtype=np.int64).reshape(-1) for c in zip(*rows)) if rows else \
        tuple(np.zeros(0, dtype=np.int64) for _ in range(4))


def ref_lpt_order(cost, group=None, total_cost=None):
    if group is None:
        return np.argsort(-cost, kind="stable")
    n_groups = int(group.max()) + 1 if group.size else 0
    total = np.bincount(group, weights=total_cost, minlength=n_groups)
    rank = np.empty(n_groups, dtype=np.int64)
    rank[np.argsort(-total, kind="stable")] = np.arange(n_groups)
    return np.lexsort((-cost, rank[group]))


def ref_pack_blocks(tiles, block_of, K, by_kind=False):
    """Blocks by descending cost (stable; per kind, heaviest kind first, with by_kind),
    tiles of a block in their order: with dicts and Python's stable sort."""
    blocks = {}
    for t, b in enumerate(block_of.tolist()):
        blocks.setdefault(b, []).append(t)
    cost = {b: sum(int(tiles["tm"][t]) * int(tiles["tn"][t]) * int(K[tiles["gemm"][t]])
                   for t in ts) for b, ts in blocks.items()}
    ids = sorted(blocks)
    if by_kind:
        kind = {b: int(tiles["kind"][blocks[b][0]]) for b in ids}
        total = {}
        for b in ids:
            total[kind[b]] = total.get(kind[b], 0) + cost[b]
        rank = {k: i for i, k in enumerate(sorted(total, key=lambda k: (-total[k], k)))}
        ids.sort(key=lambda b: (rank[kind[b]], -cost[b]))
    else:
        ids.sort(key=lambda b: -cost[b])
    order = [t for b in ids for t in blocks[b]]
    ptr = np.cumsum([0] + [len(blocks[b]) for b in ids]).astype(np.int32)
    return tiles[np.array(order, dtype=np.int64)], ptr


def random_shapes(rng, batch, hi):
    s = rng.integers(0, hi, (batch, 3))
    s[rng.random(batch) < 0.05, rng.integers(0, 3)] = 0     # some empty GEMMs
    return s.astype(np.int64)


# --- 1. the fast path equals the references ---------------------------------------

@pytest.mark.parametrize("family", [ZHANG2025, LI2019_128, MAGMA])
@pytest.mark.parametrize("m_fastest", [False, True])
def test_build_tiles_equals_reference(family, m_fastest):
    rng = np.random.default_rng(11)
    for trial in range(40):
        shapes = random_shapes(rng, int(rng.integers(0, 40)), int(rng.choice([20, 130, 700])))
        kidx = rng.integers(0, len(family), shapes.shape[0])
        order = rng.permutation(shapes.shape[0]) if trial % 2 else None
        got = tiling.build_tiles(shapes, family, kidx, order, m_fastest)
        want = ref_build_tiles(shapes, family, kidx, order, m_fastest)
        assert got.dtype == TILE_DTYPE
        assert got.tobytes() == want.tobytes(), f"trial {trial}"


def test_build_tiles_chunks_and_large_coordinates(monkeypatch):
    # several chunks (lines never split), and a tile tall enough that the m_fastest
    # column's t x (tm << 32) wraps int64 before the base is added back
    monkeypatch.setattr(tile_layout, "_CHUNK", 64)   # the expansion lives there
    rng = np.random.default_rng(3)
    shapes = random_shapes(rng, 30, 400)
    kidx = rng.integers(0, 5, 30)
    for mf in (False, True):
        assert (tiling.build_tiles(shapes, ZHANG2025, kidx, m_fastest=mf).tobytes()
                == ref_build_tiles(shapes, ZHANG2025, kidx, m_fastest=mf).tobytes())
    monkeypatch.setattr(tile_layout, "_CHUNK", 1 << 15)
    tall = (TileConfig("test", "tall", 16384, 16, 16, 1024, 256, 1),)
    shapes = np.array([[16384 * 256, 16 * 600, 1]])              # 153,600 tiles
    got = tiling.build_tiles(shapes, tall, np.array([0]), m_fastest=True)
    assert got.tobytes() == ref_build_tiles(shapes, tall, np.array([0]), m_fastest=True).tobytes()
    assert got["m0"].max() == 255 * 16384 and got["n0"].max() == 599 * 16


@pytest.mark.parametrize("radix_min", [0, tiling._RADIX_MIN])
def test_orderings_equal_reference(radix_min, monkeypatch):
    monkeypatch.setattr(tiling, "_RADIX_MIN", radix_min)     # 0: radix for every size
    rng = np.random.default_rng(5)
    for trial in range(200):
        n = int(rng.integers(0, 300)) if trial % 10 else int(rng.integers(2048, 5000))
        area = np.array([k.area for k in ZHANG2025])[rng.integers(0, 5, n)]
        top = int(rng.choice([3, 600, 2**20, 2**40]))       # one, two, three radix passes
        cost = (area * rng.integers(0, top, n)).astype(np.float64)
        if trial % 7 == 0:
            cost = cost + 0.5                                 # not integral: numpy's sort
        assert np.array_equal(tiling.gemm_lpt_order(cost), ref_lpt_order(cost))
        group = rng.integers(0, 5, n)
        assert np.array_equal(tiling.gemm_lpt_order(cost, group, cost * 3),
                              ref_lpt_order(cost, group, cost * 3))
        assert np.array_equal(tiling.stable_argsort(cost), np.argsort(cost, kind="stable"))
    for x in (np.array([], dtype=np.int64), np.array([-3, 5, -3, 0]), np.array([2**53 + 2.0, 1.0]),
              np.array([7, 2**40, 7, 0, 2**16, 2**16 - 1])):
        assert np.array_equal(tiling.stable_argsort_desc(x), np.argsort(-x, kind="stable"))
        assert np.array_equal(tiling.stable_argsort(x), np.argsort(x, kind="stable"))


@pytest.mark.parametrize("by_kind", [False, True])
def test_pack_blocks_equals_reference(by_kind):
    rng = np.random.default_rng(9)
    for _ in range(30):
        shapes = random_shapes(rng, int(rng.integers(1, 30)), 200)
        kidx = rng.integers(0, 6, shapes.shape[0])
        tiles = tiling.build_tiles(shapes, LI2019_256, kidx)
        block_of = rng.integers(0, max(1, tiles.shape[0] // 2), tiles.shape[0])
        block_of = np.unique(block_of, return_inverse=True)[1]   # blocks 0..nb-1, none empty
        got_t, got_p = tiling.pack_blocks(tiles, block_of, shapes[:, 2], by_kind)
        want_t, want_p = ref_pack_blocks(tiles, block_of, shapes[:, 2], by_kind)
        assert got_t.tobytes() == want_t.tobytes() and np.array_equal(got_p, want_p)


REFERENCES = {"build_tiles": ref_build_tiles, "tile_layout": ref_tile_layout,
              "per_gemm_tiles": ref_per_gemm_tiles,
              "gemm_lpt_order": ref_lpt_order,
              "pack_blocks": ref_pack_blocks}


def _patch_references(monkeypatch):
    """Every strategy module's own name for a fast helper now means its reference."""
    patched = 0
    for module in (wavefront_tlp, magma, coordinated, *_other_strategy_modules()):
        for name, ref in REFERENCES.items():
            if hasattr(module, name):
                monkeypatch.setattr(module, name, ref)
                patched += 1
    assert patched >= 5


def _other_strategy_modules():
    known = {wavefront_tlp.__name__, magma.__name__, coordinated.__name__}
    return [sys.modules[planner.strategy_info(s).fn.__module__] for s in planner.strategies()
            if planner.strategy_info(s).fn.__module__ not in known]


PLAN_FIELDS = ("strategy", "mode", "tlp", "tlp_threshold", "tlp_model", "grid", "notes")


@pytest.mark.parametrize("strategy,mode", STRATEGY_MODES)
def test_every_plan_equals_the_reference_plan(strategy, mode, monkeypatch):
    rng = np.random.default_rng(hash((strategy, mode)) % 2**32)
    batches = [random_shapes(rng, int(rng.integers(1, 60)), hi) for hi in (40, 300, 1100)]
    batches.append(np.array([[1008, 1008, 512]] * 8))
    fast = [planner.plan(s, strategy=strategy, mode=mode, use_cache=False) for s in batches]
    _patch_references(monkeypatch)
    for s, p in zip(batches, fast):
        r = planner.plan(s, strategy=strategy, mode=mode, use_cache=False)
        assert p.n_tiles == r.n_tiles and p.tiles_per_kind() == r.tiles_per_kind()
        assert p.tiles.tobytes() == r.tiles.tobytes() and p.tiles.dtype == r.tiles.dtype
        assert p.block_ptr.tobytes() == r.block_ptr.tobytes()
        assert p.kinds == r.kinds and p.occupancy == r.occupancy
        assert [getattr(p, f) for f in PLAN_FIELDS] == [getattr(r, f) for f in PLAN_FIELDS]


def test_fingerprint_collision_is_a_miss_not_a_wrong_plan(monkeypatch):
    planner.clear_cache()
    monkeypatch.setattr(planner, "_fingerprint", lambda s: 0)
    a = planner.plan([[64, 64, 64]] * 2)
    b = planner.plan([[128, 64, 64]] * 2)                    # same key but for the shapes
    assert not np.array_equal(a.shapes, b.shapes)
    assert planner.plan([[128, 64, 64]] * 2) is b
    planner.clear_cache()


# --- 2. the resources provider --------------------------------------------------------

class Heavy:
    """A provider that says every kernel uses 200 registers per thread and 120 KiB of
    shared memory: one block per SM on sm_90 (the recorded figures allow two or more)."""

    def __init__(self):
        self.asked = []

    def __call__(self, arch, launch):
        self.asked.append(launch)
        return KernelResources(registers=200, shared_bytes=120 * 1024, source="test")


@pytest.mark.parametrize("strategy,mode", STRATEGY_MODES)
def test_the_provider_passed_in_is_used(strategy, mode):
    shapes = np.random.default_rng(1).integers(16, 600, (64, 3))
    heavy = Heavy()
    p = planner.plan(shapes, strategy=strategy, mode=mode, resources=heavy)
    d = planner.plan(shapes, strategy=strategy, mode=mode)
    assert heavy.asked and all(isinstance(x, launches.Launch) for x in heavy.asked)
    assert all(o.active_workgroups == 1 for o in p.occupancy.values())
    assert p.occupancy != d.occupancy
    assert planner.plan(shapes, strategy=strategy, mode=mode, resources=heavy) is p  # cached
    assert planner.plan(shapes, strategy=strategy, mode=mode) is d


def test_a_heavy_provider_changes_the_plan():
    # 256 large tiles: with the recorded figures (3 blocks per SM, 396 resident) the
    # device holds them all at once; with 1 block per SM (132) it does not, so the
    # wavefront TLP the plan reports (and, depending on the rule, its tiles) differ
    shapes = [[1024, 1024, 64]]
    light = planner.plan(shapes, mode="fused", use_cache=False)
    heavy = planner.plan(shapes, mode="fused", use_cache=False, resources=Heavy())
    assert heavy.tlp != light.tlp
    assert heavy.occupancy["zhang2025.large"].active_workgroups == 1
    assert light.occupancy["zhang2025.large"].active_workgroups > 1


class Unhashable:
    __hash__ = None

    def __eq__(self, other):
        return isinstance(other, Unhashable)

    def __call__(self, arch, launch):
        return KernelResources(registers=64, source="test")


def test_an_unhashable_provider_plans_without_caching():
    shapes = [[100, 100, 100]] * 3
    p = planner.plan(shapes, resources=Unhashable())
    assert p.n_tiles and planner.plan(shapes, resources=Unhashable()) is not p


def test_provider_errors():
    with pytest.raises(ArgumentTypeError, match="callable"):
        planner.plan([[16, 16, 16]], resources="sm_90")
    with pytest.raises(ArgumentTypeError, match="KernelResources"):
        planner.plan([[16, 16, 16]], resources=lambda arch, launch: 64, use_cache=False)


def test_the_default_provider_is_the_kernels_figures():
    shapes = [[300, 200, 100]] * 5
    a = planner.plan(shapes, use_cache=False)
    b = planner.plan(shapes, use_cache=False, resources=kres.DEFAULT_PROVIDER)
    assert a.tiles.tobytes() == b.tiles.tobytes() and a.occupancy == b.occupancy
    assert planner.plan(shapes) is planner.plan(shapes, resources=kres.DEFAULT_PROVIDER)


@pytest.mark.parametrize("mode", ["fused", "per-kind", "grid-z"])
def test_launches_name_the_variants_the_backends_compile(mode):
    fams = [MAGMA] if mode == "grid-z" else [f for n, f in FAMILIES.items() if n != "magma"]
    for fam in fams:
        for dtype in ("float32", "float64"):
            got = [kres.as_variant(x) for x in launches.launches_for(fam, mode, dtype)]
            want = list(variants_for(fam, mode, dtype))
            assert got == want
            assert [x.threads for x in launches.launches_for(fam, mode, dtype)] == \
                [v.threads for v in want]
    assert launches.GRID_YZ_MAX == GRID_YZ_MAX


@pytest.fixture
def fresh_registry(monkeypatch):
    monkeypatch.setattr(kres, "_registered", {})
    monkeypatch.setattr(kres, "_versions", {})
    planner.clear_cache()
    yield
    planner.clear_cache()


def _fused_variant(dtype="float32"):
    return variants_for(ZHANG2025, "fused", dtype)[0]


def test_registering_figures_keeps_unrelated_plans(fresh_registry):
    shapes = [[200, 300, 64]] * 16
    p90 = planner.plan(shapes, mode="fused", arch="sm_90")
    p80 = planner.plan(shapes, mode="fused", arch="sm_80")
    v = _fused_variant()
    # a compile that confirms the figures the plan used (occupancy inputs equal; the
    # source and spill bytes do not matter): every plan stays cached
    same = kres.lookup("sm_90", v)
    kres.register("sm_90", v.name, replace(same, source="kernel attributes"))
    assert planner.plan(shapes, mode="fused", arch="sm_90") is p90
    # new figures for another arch: the sm_90 plan stays cached, sm_80 is replanned
    kres.register("sm_80", v.name, KernelResources(registers=250, source="test"))
    assert planner.plan(shapes, mode="fused", arch="sm_90") is p90
    q80 = planner.plan(shapes, mode="fused", arch="sm_80")
    assert q80 is not p80 and q80.occupancy["zhang2025.large"].active_workgroups == 1
    # plans made with another provider do not care about the kernels' registry
    heavy = Heavy()
    ph = planner.plan(shapes, mode="fused", arch="sm_90", resources=heavy)
    kres.register("sm_90", v.name, KernelResources(registers=250, source="test"))
    assert planner.plan(shapes, mode="fused", arch="sm_90", resources=heavy) is ph
    # ...while the default provider's sm_90 plans now see the new figures
    q90 = planner.plan(shapes, mode="fused", arch="sm_90")
    assert q90 is not p90 and q90.occupancy["zhang2025.large"].active_workgroups == 1


class Versioned:
    """A provider whose figures change, saying so through version()."""

    def __init__(self):
        self.registers, self.v = 64, 0

    def __call__(self, arch, launch):
        return KernelResources(registers=self.registers, source="test")

    def version(self, arch_name):
        return self.v


def test_a_versioned_provider_replans_when_its_figures_change():
    prov = Versioned()
    shapes = [[512, 512, 64]] * 4
    p = planner.plan(shapes, mode="fused", resources=prov)
    assert planner.plan(shapes, mode="fused", resources=prov) is p
    prov.registers, prov.v = 250, 1
    q = planner.plan(shapes, mode="fused", resources=prov)
    assert q is not p and q.occupancy["zhang2025.large"].active_workgroups == 1


# --- 3. one-way arrows ------------------------------------------------------------------

def test_planner_sources_import_no_kernels_or_backends():
    bad = []
    for path in sorted((ROOT / "portgemm" / "planner").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [f"{'.' * node.level}{node.module or ''}"]
                names += [f"{names[0]}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                parts = name.lstrip(".").split(".")
                if {"kernels", "backends", "api"} & set(parts[:2]):
                    bad.append(f"{path.name}:{node.lineno} imports {name}")
    assert not bad, bad


LAYERING = r"""
import importlib.util, sys
# the package without its __init__ (which wires the layers together): only what the
# planner itself pulls in gets imported
spec = importlib.util.find_spec("portgemm")
sys.modules["portgemm"] = importlib.util.module_from_spec(spec)
import portgemm.planner as planner
from portgemm.occupancy import KernelResources
from portgemm.errors import ArgumentTypeError
loaded = sorted(m for m in sys.modules if m.startswith(("portgemm.kernels", "portgemm.backends",
                                                        "portgemm.api")))
assert not loaded, loaded
try:
    planner.plan([[64, 64, 64]])
except ArgumentTypeError as e:
    assert "resources" in str(e)
else:
    raise AssertionError("planned without a provider")
p = planner.plan([[64, 64, 64]] * 3, resources=lambda arch, launch: KernelResources(registers=64))
assert p.n_tiles >= 3 and p.strategy == "wavefront-tlp", p
loaded = sorted(m for m in sys.modules if m.startswith("portgemm.kernels"))
assert not loaded, loaded
print("ok")
"""


def test_importing_the_planner_imports_no_kernels():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", LAYERING], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_portgemm_plan_is_the_planner_with_the_default_provider():
    assert portgemm.plan is planner.plan
    assert launches.resolve_provider(None) is kres.DEFAULT_PROVIDER
    assert get_arch("sm_90").name == "sm_90"


def test_plan_time_counts_numpy_calls_and_puts_numpy_back():
    """bench/plan_time.py --count-calls: a plan makes NumPy calls the counter sees, and
    portgemm's modules see NumPy itself again afterwards (the counting stand-in is gone)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import plan_time
    from portgemm.planner import cost_model, wavefront_tlp
    calls, operators = plan_time.count_calls(
        lambda: planner.plan([[300, 200, 64]] * 8, use_cache=False))
    assert calls > 50 and operators > 0
    assert wavefront_tlp.np is np and cost_model.np is np
    assert sys.getprofile() is None


# --- buffers kept between plans (planner/scratch.py) ------------------------------------

def test_no_plan_holds_a_kept_buffer():
    """Plans made one after another on one thread (the buffers rewritten by each) keep
    their own arrays: none shares memory with a kept buffer, and an earlier plan's
    layout and predictions are unchanged by later plans."""
    from portgemm.planner import scratch
    rng = np.random.default_rng(21)
    batches = [random_shapes(rng, n, hi) for n, hi in ((300, 1100), (40, 200), (300, 1100),
                                                       (2000, 600))]
    plans = [planner.plan(s, use_cache=False) for s in batches]
    before = [(p.tiles.tobytes(), p.predicted_ms) for p in plans]
    again = [planner.plan(s, use_cache=False) for s in reversed(batches)]
    assert [(p.tiles.tobytes(), p.predicted_ms) for p in plans] == before
    assert [(p.tiles.tobytes(), p.predicted_ms) for p in reversed(again)] == before
    kept = list(scratch._local.pool.values())
    assert kept
    for p in plans:
        lay = p.layout
        for a in (lay.gemm, lay.kind, lay.tm, lay.tn, lay.gm, lay.gn, lay.first):
            assert not any(np.shares_memory(a, b) for b in kept)


def test_buffers_past_the_bound_are_fresh(monkeypatch):
    from portgemm.planner import scratch
    monkeypatch.setattr(scratch, "MAX_POOLED", 8)
    a = scratch.buffer("test", (2, 9))
    assert scratch.buffer("test", (2, 9)) is not a and not np.shares_memory(
        a, scratch.buffer("test", (2, 9)))
    b = scratch.buffer("test", (2, 8))
    assert scratch.buffer("test", (2, 8)) is b                  # kept: the same view
    c = scratch.buffer("test", (3, 8))                          # grown: a new buffer
    assert c.shape == (3, 8) and not np.shares_memory(b, c)


@pytest.mark.parametrize("family", ["portgemm", "li2019-128", "tune"])
def test_round_ladders_longest_k_equals_the_per_kind_maximum(family):
    """typed_rounds with ``k_live`` (the type's longest K) gives the aggregates of the
    pass over every (kind, GEMM)."""
    from portgemm.planner import level_search
    from portgemm.planner.wavefront_tlp import BatchTables
    from portgemm.tiles import FAMILIES as ALL
    kinds = tuple(sorted(ALL[family], key=lambda k: k.area))
    rng = np.random.default_rng(3)
    s = planner._shapes(random_shapes(rng, 700, 1500))
    tabs = BatchTables(s, kinds)
    if tabs.fk["one_tk"]:
        pytest.skip("one tk: the per-GEMM path")
    least = np.where(tabs.allowed, rng.random(tabs.counts.shape), np.inf).argmin(axis=0)
    cs = tabs.counts * tabs.steps
    args = (tabs.fk, (tabs.M, tabs.N), tabs.start, least, tabs.counts, cs, tabs.steps_live,
            len(kinds) + 2)
    (n0, S0, M0), _ = level_search.typed_rounds(*args)
    (n1, S1, M1), _ = level_search.typed_rounds(*args, tabs.K * tabs.live)
    assert np.array_equal(n0, n1) and np.array_equal(S0, S1) and np.array_equal(M0, M1)


def test_a_plan_made_while_planning_leaves_the_outer_tables_whole():
    """A resources provider that plans (on the same thread, in the middle of the outer
    plan's tables): the outer plan equals the one made without it."""
    rng = np.random.default_rng(8)
    outer, inner = random_shapes(rng, 400, 1100), random_shapes(rng, 300, 700)
    want = planner.plan(outer, use_cache=False)

    def provider(arch, launch):
        planner.plan(inner, use_cache=False)      # rewrites nothing of the outer plan's
        return kres.DEFAULT_PROVIDER(arch, launch)
    got = planner.plan(outer, use_cache=False, resources=provider)
    assert got.tiles.tobytes() == want.tiles.tobytes() and got.predicted_ms == want.predicted_ms


def test_plans_made_on_several_threads_at_once_equal_the_serial_ones():
    """Each thread keeps its own buffers: plans made concurrently equal those made one
    after another."""
    from concurrent.futures import ThreadPoolExecutor
    rng = np.random.default_rng(13)
    batches = [random_shapes(rng, int(n), 1100) for n in rng.integers(200, 900, 12)]
    want = [planner.plan(s, use_cache=False).tiles.tobytes() for s in batches]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda s: planner.plan(s, use_cache=False).tiles.tobytes(),
                            batches * 2))
    assert got == want * 2
