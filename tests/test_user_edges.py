"""What a new user trips over: plans refuse what runs would refuse (cheaply), option
ranges, one-line reprs, spill warnings, TLP explained, the main job's report and exit
codes."""
from __future__ import annotations

import subprocess
import sys
import tracemalloc

import pytest

import portgemm
import portgemm.planner as planner
from portgemm.errors import ValidationError
from portgemm.planner import tiling
from portgemm.problem import MAX_SPAN


# --- plans refuse what runs would refuse --------------------------------------------

@pytest.mark.parametrize("shape, what", [
    ((2**20, 2**20, 16), "C (M x N)"),
    ((2**16, 16, 2**16), "A (M x K)"),
    ((16, 2**16, 2**16), "B (K x N)"),
])
def test_a_gemm_no_array_could_hold_is_refused_at_planning(shape, what):
    shapes = [(8, 8, 8), shape]
    tracemalloc.start()
    try:
        with pytest.raises(ValidationError) as e:
            planner.plan(shapes, use_cache=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert e.value.gemm == 1 and what in str(e.value) and str(MAX_SPAN) in str(e.value)
    assert peak < 10 * 2**20, f"refusal allocated {peak} bytes"   # nothing tile-sized


def test_the_span_limit_is_the_boundary():
    assert 46340**2 <= MAX_SPAN < 46341**2
    assert planner.plan([(46340, 46340, 16)], use_cache=False).n_tiles > 0
    with pytest.raises(ValidationError, match="C \\(M x N\\)"):
        planner.plan([(46341, 46341, 16)], use_cache=False)


def test_max_tiles_is_the_exact_boundary(monkeypatch):
    shapes = [(64, 64, 16)] * 3 + [(1024, 1000, 16)] * 3
    n = planner.plan(shapes, use_cache=False).n_tiles
    monkeypatch.setattr(tiling, "MAX_TILES", n)
    assert planner.plan(shapes, use_cache=False).n_tiles == n
    monkeypatch.setattr(tiling, "MAX_TILES", n - 1)
    with pytest.raises(ValidationError) as e:
        planner.plan(shapes, use_cache=False)
    assert f"{n:,} tiles" in str(e.value) and 0 <= e.value.gemm < len(shapes)


@pytest.mark.parametrize("strategy", ["wavefront-tlp", "coordinated", "magma"])
def test_max_tiles_applies_to_every_strategy(monkeypatch, strategy):
    monkeypatch.setattr(tiling, "MAX_TILES", 100)
    with pytest.raises(ValidationError, match="tiles"):
        planner.plan([(2048, 2048, 16)], strategy=strategy, use_cache=False)


def test_huge_tile_count_is_refused_with_the_real_limit():
    # 1,024 GEMMs of 2**20 x 2**10: at least 2**26 tiles of the largest kind (128 x 128),
    # past MAX_TILES whichever kind the planner weighs; refused, not built.
    assert tiling.MAX_TILES < 2**26
    tracemalloc.start()
    try:
        with pytest.raises(ValidationError, match="split the batch"):
            planner.plan([(2**20, 2**10, 1)] * 1024, use_cache=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20 * 64


# --- option ranges --------------------------------------------------------------------

@pytest.mark.parametrize("kw", [
    dict(strategy="coordinated", theta=1e19), dict(strategy="coordinated", theta=0),
    dict(strategy="coordinated", theta=2.5), dict(strategy="coordinated", theta=2**31),
    dict(tlp_factor=1e7), dict(tlp_factor=-0.1), dict(tlp_threshold=1e16),
    dict(tlp_threshold=float("inf")), dict(tlp_factor=True),
])
def test_numeric_options_out_of_range_are_typed_errors(kw):
    name = next(k for k in kw if k != "strategy")
    with pytest.raises(ValidationError, match=f"option {name} must be"):
        planner.plan([(64, 64, 64)], use_cache=False, **kw)


@pytest.mark.parametrize("kw", [
    dict(strategy="coordinated", theta=1), dict(strategy="coordinated", theta=float(2**31 - 1)),
    dict(tlp_factor=0), dict(tlp_factor=1e6), dict(tlp_threshold=1e15), dict(tlp_threshold=0),
])
def test_numeric_options_at_their_ends_plan(kw):
    p = planner.plan([(64, 64, 64), (17, 200, 9)], use_cache=False, **kw)
    assert p.n_tiles > 0


# --- REPL manners ---------------------------------------------------------------------

def test_repr_is_one_short_line():
    p = planner.plan([(64, 64, 64)], arch="h100", use_cache=False)
    r = repr(p)
    assert "\n" not in r and len(r) < 200
    for part in ("wavefront-tlp", "fused", "sm_90", "batch=1", f"tiles={p.n_tiles}"):
        assert part in r
    for kind, n in p.tiles_per_kind().items():
        assert f"{kind} {n}" in r
    assert repr(planner.plan([], use_cache=False)).startswith("<Plan ")


def test_plan_help_states_errors_and_alpha_beta_semantics():
    doc = portgemm.Plan.__doc__
    for word in ("ShapeMismatch", "DtypeError", "LayoutError", "beta_i = 0", "alpha_i = 0",
                 "nothing is written"):
        assert word in doc
    bind_doc = portgemm.Plan.bind.__doc__
    assert "C[0] = other" in bind_doc and "bind again" in bind_doc


# --- TLP explained, spills visible ----------------------------------------------------

def test_describe_explains_a_tlp_below_the_threshold():
    p = planner.plan([(64, 64, 64)], arch="sm_90", use_cache=False)
    assert p.tlp < p.tlp_threshold
    assert "not an error" in p.describe() and "not an error" in p.tlp_verdict()
    assert "smallest tile" in p.tlp_verdict()
    # The paper's rule: a big batch fills the device: phi caps TLP at what the occupancy
    # lets it hold, which here is below the threshold; the report must say why that is fine.
    big = planner.plan([(1024, 1024, 64)] * 256, arch="sm_90", use_cache=False,
                       tlp_model="paper")
    assert big.tlp < big.tlp_threshold
    assert "not an error" in big.tlp_verdict() and "device is full" in big.tlp_verdict()
    # The device rule: a partial last wave; the cost model kept the tiles
    dev = planner.plan([(1024, 1024, 64)] * 256, arch="sm_90", use_cache=False)
    assert dev.tlp < dev.tlp_threshold and "cost model" in dev.tlp_verdict()
    low = planner.plan([(1024, 1024, 64)] * 256, arch="sm_90", tlp_factor=0.1,
                       use_cache=False)
    assert low.tlp >= low.tlp_threshold and "threshold reached" in low.tlp_verdict()


def test_describe_warns_when_a_plan_uses_a_spilling_variant():
    # coordinated + float64 on a large batch grows to li2019's 128-thread family, whose
    # fused float64 kernel spills on sm_90 (recorded NVRTC figures).
    p = planner.plan([(256, 256, 64)] * 2000, strategy="coordinated", dtype="float64",
                     arch="sm_90", use_cache=False)
    spills = p.spills()
    assert spills and all(b > 0 for b in spills.values())
    text = p.describe()
    for name, b in spills.items():
        assert f"warning: {name} spills {b:,} bytes" in text


def test_describe_has_no_spill_warning_for_the_default_plan():
    p = planner.plan([(256, 256, 64)] * 64, arch="sm_90", use_cache=False)
    assert p.spills() == {} and "warning:" not in p.describe()


def test_spill_warning_reads_registered_figures():
    from portgemm.kernels import resources
    from portgemm.kernels.variants import variants_for
    from portgemm.occupancy.resources import KernelResources
    p = planner.plan([(48, 48, 48)], arch="sm_86", mode="per-kind", use_cache=False)
    used = set(p.tiles_per_kind())
    (v,) = variants_for(tuple(k for k in p.kinds if k.kind in used), "per-kind", "float32")
    before = resources._registered.get(("sm_86", v.name))
    resources.register("sm_86", v.name, KernelResources(registers=255, spill_bytes=40,
                                                        source="test"))
    try:
        assert p.spills() == {v.name: 40} and "spills 40 bytes" in p.describe()
    finally:
        if before is None:
            resources._registered.pop(("sm_86", v.name), None)
        else:
            resources._registered[("sm_86", v.name)] = before
        resources._versions["sm_86"] = resources._versions.get("sm_86", 0) + 1   # replan


# --- the main job ---------------------------------------------------------------------

def job(*args, env=None):
    import os
    e = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "portgemm", *args], capture_output=True,
                          text=True, timeout=300, env=e)


SMALL = ("run", "--batch", "8", "--max-mn", "48", "--max-k", "24", "--reps", "1")


@pytest.mark.parametrize("args, says", [
    (("--seed", "-1"), "--seed"),
    (("--batch", "0"), "--batch"),
    (("--batch", "lots"), "--batch"),
    (("--max-k", "-5"), "--max-k"),
    (("--reps", "1.5"), "--reps"),
    (("--dtype", "float16"), "--dtype"),
    (("--bogus",), "--bogus"),
    (("--arch", "sm_1"), "sm_1"),
    (("--strategy", "coordinated", "--backend", "nope"), "nope"),
    (("--max-mn", "100000", "--max-k", "100000", "--batch", "2"), "32-bit"),
])
def test_main_job_bad_arguments_exit_2_with_one_line(args, says):
    r = job(*SMALL, "--backend", "numpy", *args) if "--backend" not in args else \
        job(*SMALL, *args)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert r.stdout == ""


def test_main_job_reports_skipped_backends_arch_and_notes():
    r = job(*SMALL, env={"PORTGEMM_ARCH": "gfx90a"})
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    if "backend numpy" in out:   # no GPU here: both GPU backends were skipped, with reasons
        assert out.count("skipped:") == 2 and "cuda:" in out and "hip:" in out
    assert "plans for gfx90a" in out and "PORTGEMM_ARCH=gfx90a" in out
    assert "note:" in out and "TLP:" in out


def test_main_job_arch_option_and_tlp_verdict():
    r = job(*SMALL, "--backend", "numpy", "--arch", "h100")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "plans for sm_90" in r.stdout and "from --arch" in r.stdout
    assert "skipped:" not in r.stdout          # a named backend skips nothing
    tlp = next(line for line in r.stdout.splitlines() if line.startswith("TLP:"))
    assert "not an error" in tlp or "threshold reached" in tlp


def test_main_job_warns_about_spills():
    # 600 GEMMs of 16^3: above li2019's threshold with its 256-thread tiles, so the
    # coordinated planner takes the 128-thread family, whose fused float64 kernel spills
    # on sm_90 (recorded NVRTC figures).
    r = job("run", "--batch", "600", "--max-mn", "16", "--max-k", "16", "--reps", "1",
            "--backend", "numpy", "--arch", "sm_90", "--dtype", "float64",
            "--strategy", "coordinated")
    assert r.returncode == 0, r.stdout + r.stderr
    plan = planner.plan([(16, 16, 16)] * 600, strategy="coordinated", dtype="float64",
                        arch="sm_90", use_cache=False)
    warnings = plan.spill_warnings()
    assert warnings
    for w in warnings:
        assert f"warning:     {w}" in r.stdout
