"""The tuning sweep (portgemm/tuning/) without a GPU: the set cover on hand-made tables,
the factor fit, the sweep on the numpy backend with a fake timer (and a fake clock for
the budget), the data file's round trip and the loader's refusals (occupancy/tuned.py)."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from portgemm.backends.numpy import NumpyBackend
from portgemm.benchmark.device import HostDevice
from portgemm.occupancy import tuned
from portgemm.tiles import FAMILIES, FAMILY_DTYPES
from portgemm.tuning import choose, space
from portgemm.tuning.model import fit_factor, one_kind_plan, predicted_seconds
from portgemm.tuning.report import data_file, table
from portgemm.tuning.sweep import sweep_dtype
from tuned_data import tuned_dir, write_file  # noqa: F401  (a fixture)

CAND = FAMILIES["tune"]
KIND = {k.kind: k for k in CAND}


# --- the set cover -----------------------------------------------------------------

def test_cover_picks_the_fewest_kinds_within_tolerance():
    # sizes:           s0    s1    s2    s3
    t = np.array([[1.00, 2.00, 4.00, 8.00],    # 0: best at s0 only
                  [1.02, 1.50, 3.00, 9.00],    # 1: within 3 % at s0, best at s1
                  [3.00, 1.90, 2.00, 5.00],    # 2: best at s2
                  [5.00, 5.00, 5.00, 4.10]])   # 3: best at s3
    assert choose.cover(t) == [1, 2, 3]        # kind 0 is not needed: 1 covers s0
    assert choose.cover(t, tolerance=0.0) == [0, 1, 2, 3]
    # within 30 %: 1 covers s0 and s1, 2 covers s1, s2 and s3 (5.0 <= 1.3 x 4.1)
    assert choose.cover(t, tolerance=0.3) == [1, 2]
    assert choose.cover(t[:, :1]) == [0]       # of two covers of one kind, the faster one


def test_cover_among_equal_sized_covers_takes_the_closest_to_the_best():
    t = np.array([[1.0, 1.029],
                  [1.029, 1.0],
                  [1.005, 1.005]])
    # every single kind covers both sizes; kind 2 is the closest to the best on both
    assert choose.cover(t) == [2]


def test_cover_ignores_unmeasured_kinds_and_sizes():
    nan = np.nan
    t = np.array([[1.0, nan, 2.0],
                  [nan, nan, nan],
                  [1.5, nan, 1.0]])
    assert choose.cover(t) == [0, 2]
    assert choose.cover(np.full((3, 2), nan)) == []


def test_cover_keeps_the_required_kinds_and_adds_the_fewest_others():
    t = np.array([[1.0, 9.0, 9.0],
                  [9.0, 1.0, 9.0],
                  [9.0, 9.0, 1.0],
                  [1.0, 1.0, 1.02]])
    assert choose.cover(t) == [3]                       # alone, kind 3 covers all
    assert choose.cover(t, required=[0]) == [0, 3]      # kept, plus the fewest others
    assert choose.cover(t, required=[0, 1, 2]) == [0, 1, 2]
    assert choose.cover(np.array([[np.nan, np.nan], [1.0, 1.0]]), required=[0]) == [1]  # never measured


def test_the_sweep_requires_the_candidates_shaped_like_our_family():
    from portgemm.planner.wavefront_tlp import OUR_FAMILY
    from portgemm.tiles import family
    from portgemm.tuning.sweep import DtypeSweep, _shape
    for dtype, fam in space.CANDIDATES.items():
        kinds = FAMILIES[fam]
        sw = DtypeSweep.__new__(DtypeSweep)
        sw.dtype, sw.kinds = dtype, kinds
        got = {_shape(kinds[i]) for i in sw.required()}
        assert got == {_shape(k) for k in family(OUR_FAMILY[dtype])}


def test_greedy_cover_when_too_many_kinds(monkeypatch):
    monkeypatch.setattr(choose, "EXACT_MAX_KINDS", 0)
    t = np.array([[1.0, 1.0, 9.0],
                  [9.0, 9.0, 1.0],
                  [1.0, 9.0, 9.0]])
    assert choose.cover(t) == [0, 1]


# --- the space and the factor fit ---------------------------------------------------

def test_sizes_span_the_grid_in_spread_order():
    sz = space.sizes(132, "float32")
    assert len(sz) == 2 * len(space.EDGES) * len(space.DEPTHS) == len(set(sz))
    # the corners first, each aligned and odd together
    first = [(s.m, s.k) for s in sz[:4]]
    e, d = space.EDGES, space.DEPTHS
    assert first == [(e[0], d[0]), (e[0] - 1, d[0] - 1), (e[-1], d[-1]), (e[-1] - 1, d[-1] - 1)]
    # every size aligned (powers of two) and odd (unaligned leading dimensions, edge tiles)
    assert sum(s.k % 2 for s in sz) == len(sz) // 2
    for s in sz:
        assert s.m == s.n and 1 <= s.batch <= space.MAX_BATCH
        assert s.batch * 4 * (2 * s.m * s.k + s.m * s.n) <= space.MAX_BYTES
        assert s.shapes().shape == (s.batch, 3)
    assert space.spread(list(range(7))) == [0, 6, 3, 1, 2, 4, 5]
    assert sorted(space.spread(list(range(18)))) == list(range(18))


def test_fit_factor_inverts_a_monotone_model():
    predict = lambda f: 2.0 + 3.0 * f  # noqa: E731  (launch 2, tile time 3 per unit factor)
    assert fit_factor(8.0, predict) == pytest.approx(2.0, rel=1e-3)
    assert fit_factor(1.0, predict) is None          # below the model's fixed cost
    assert fit_factor(1e9, predict) == pytest.approx(32.0)   # clamped at the top


def test_model_prediction_scales_with_the_factor():
    from portgemm.occupancy import get_arch
    arch = get_arch("sm_90")
    shapes = [[512, 512, 512]] * 64
    k = KIND["64x64/8x4/k16"]
    one = predicted_seconds(shapes, k, "float32", arch)
    assert one == pytest.approx(one_kind_plan(shapes, k, "float32", arch).predicted_ms * 1e-3)
    assert predicted_seconds(shapes, k, "float32", arch, 2.0) > 1.5 * one
    f = fit_factor(1.7 * one, lambda f: predicted_seconds(shapes, k, "float32", arch, f))
    assert predicted_seconds(shapes, k, "float32", arch, f) == pytest.approx(1.7 * one, rel=1e-3)


def test_candidate_families_are_made_for_one_dtype_each():
    assert FAMILY_DTYPES[space.CANDIDATES["float32"]] == ("float32",)
    assert FAMILY_DTYPES[space.CANDIDATES["float64"]] == ("float64",)
    for dtype, fam in space.CANDIDATES.items():
        kinds = FAMILIES[fam]
        # 15: tune-f64 holds every shape of portgemm-f64, its three MMA kinds included
        assert 10 <= len(kinds) <= 15 and len({k.kind for k in kinds}) == len(kinds)
        v = 4 if dtype == "float32" else 2           # elements per 16 bytes
        for k in kinds:
            assert k.rn % v == 0 and (k.tm * k.tk) % (v * k.threads) == 0
            assert (k.tk * k.tn) % (v * k.threads) == 0


# --- the sweep on the numpy backend ------------------------------------------------

@pytest.fixture
def no_required(monkeypatch):
    """The fake sweep's three kinds are all shaped like our family's: without this the
    cover would keep all three and test nothing of its own choice."""
    from portgemm.tuning.sweep import DtypeSweep
    monkeypatch.setattr(DtypeSweep, "required", lambda self: [])


SIZES = [space.Size(32, 32, 16, 3), space.Size(64, 64, 40, 2), space.Size(96, 96, 8, 1)]
KINDS = (KIND["32x32/4x4/k16"], KIND["64x64/8x4/k16"], KIND["128x64/8x8/k8"])
# fake milliseconds per (kind, M): 32x32 wins small, 64x64 middle, 128x64 within 3 % at 96
FAKE = {("32x32/4x4/k16", 32): 1.0, ("32x32/4x4/k16", 64): 3.0, ("32x32/4x4/k16", 96): 9.0,
        ("64x64/8x4/k16", 32): 2.0, ("64x64/8x4/k16", 64): 2.0, ("64x64/8x4/k16", 96): 4.0,
        ("128x64/8x8/k8", 32): 4.0, ("128x64/8x8/k8", 64): 4.0, ("128x64/8x8/k8", 96): 4.1}


def fake_timer(dev, bound):
    return FAKE[(bound.plan.kinds[0].kind, int(bound.plan.shapes[0, 0]))]


def host(backend=None):
    return HostDevice(backend or NumpyBackend())


def test_sweep_measures_checks_and_chooses(no_required):
    sw = sweep_dtype(host(), "float32", SIZES, kinds=KINDS, timer=fake_timer, show_progress=False)
    assert not sw.excluded and not sw.stopped and sw.complete_sizes().all()
    want = [[FAKE[(k.kind, s.m)] for s in SIZES] for k in KINDS]
    np.testing.assert_array_equal(sw.ms, want)
    assert [k.kind for k in sw.chosen()] == ["32x32/4x4/k16", "64x64/8x4/k16"]
    assert np.isfinite(sw.predicted_ms).all() and (sw.predicted_ms > 0).all()
    f = sw.factors()
    assert set(f) == {k.name for k in KINDS} and all(0 < x <= 32 for x in f.values())
    assert "chosen" in table(sw)


class WrongFor:
    """The numpy backend, but one kind's results are off by one in C[0, 0]."""

    def __init__(self, kind_name, raise_instead=False):
        self.inner, self.kind_name, self.raise_instead = NumpyBackend(), kind_name, raise_instead

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def execute(self, plan, batch, gemms=None):
        if plan.kinds[0].name == self.kind_name and self.raise_instead:
            from portgemm.errors import CompileError
            raise CompileError("ptxas: too many resources\nline two")
        self.inner.execute(plan, batch, gemms)
        if plan.kinds[0].name == self.kind_name:
            batch.C[0][0, 0] += 1.0


def test_a_wrong_kind_is_excluded_and_reported():
    bad = KINDS[1].name
    sw = sweep_dtype(host(WrongFor(bad)), "float32", SIZES, kinds=KINDS, timer=fake_timer,
                     show_progress=False)
    assert list(sw.excluded) == [bad] and "wrong result" in sw.excluded[bad]
    assert np.isnan(sw.ms[1]).all() and sw.complete_sizes().all()
    assert KINDS[1] not in sw.chosen() and bad not in sw.factors()
    entry = data_file([sw], {"device": "host"}, None)["dtypes"]["float32"]
    assert bad in entry["excluded"] and bad not in entry["kinds"]
    assert "excluded" in table(sw)


def test_a_kind_that_fails_to_compile_is_excluded():
    bad = KINDS[2].name
    sw = sweep_dtype(host(WrongFor(bad, raise_instead=True)), "float32", SIZES, kinds=KINDS,
                     timer=fake_timer, show_progress=False)
    assert sw.excluded == {bad: f"{SIZES[0].name}: CompileError: line two"}


def test_the_budget_stops_the_sweep_with_a_partial_valid_table(tuned_dir, no_required):
    ticks = iter(range(1000))
    # the clock advances one second per look: 3 kinds x 3 sizes; stop after 4 measurements
    sw = sweep_dtype(host(), "float32", SIZES, kinds=KINDS, timer=fake_timer,
                     clock=lambda: next(ticks), deadline=4, show_progress=False)
    assert sw.stopped
    assert sw.complete_sizes().tolist() == [True, False, False]    # the second size: 1 of 3
    assert np.isfinite(sw.ms[:, 0]).all() and np.isnan(sw.ms[1:, 1]).all()
    data = data_file([sw], {"device": "host", "arch": "sm_90"}, 4.0)
    entry = data["dtypes"]["float32"]
    assert entry["complete"] is False and entry["kinds"] == [KINDS[0].name]
    assert [s["measured_by_all"] for s in entry["sizes"]] == [True, False, False]
    tuned.write(tuned.path_for("sm_90"), data)
    fam = tuned.tuned_family("sm_90", "float32")
    assert fam is not None and fam.kinds == (KINDS[0],)


def test_nothing_measured_gives_no_entry():
    sw = sweep_dtype(host(), "float32", SIZES, kinds=KINDS, timer=fake_timer, deadline=-1,
                     show_progress=False)
    assert sw.stopped and data_file([sw], {}, 1.0)["dtypes"] == {}


# --- the data file -----------------------------------------------------------------

def test_file_round_trip(tuned_dir, no_required):
    sw = sweep_dtype(host(), "float32", SIZES, kinds=KINDS, timer=fake_timer, show_progress=False)
    data = data_file([sw], host().info(), 10.0)
    assert data["arch"] == "sm_90" and data["kernel_sha256"] == tuned.kernel_fingerprint()
    assert data["device"] and data["portgemm"] and data["date"].endswith("Z")
    path = tuned.path_for("sm_90")
    tuned.write(path, data)
    back = json.loads(path.read_text())
    assert back == json.loads(json.dumps(data))
    fam = tuned.tuned_family("sm_90", "float32")
    assert [k.kind for k in fam.kinds] == ["32x32/4x4/k16", "64x64/8x4/k16"]  # small -> large
    assert fam.factors == tuple(data["dtypes"]["float32"]["factors"][k.name] for k in fam.kinds)
    assert fam.path == str(path)
    assert tuned.tuned_family("sm_90", "float64") is None     # not swept: no entry, no warning
    assert tuned.tuned_family("sm_80", "float32") is None     # no file for that arch
    np.testing.assert_array_equal(fam.factor_of(fam.kinds), fam.factors)
    assert fam.factor_of(fam.kinds[::-1]) is None


def test_fingerprint_hashes_the_files_the_kernels_are_rendered_from():
    from pathlib import Path

    from portgemm.kernels import render
    from portgemm.kernels.resources import source_fingerprint
    from portgemm.occupancy.resources import KERNEL_FILES
    rendered_from = (render.COMPAT_FILE, render.SOURCE_FILE, Path(render.__file__))
    assert [f.resolve() for f in KERNEL_FILES] == [f.resolve() for f in rendered_from]
    assert tuned.kernel_fingerprint is source_fingerprint   # one hash for both data files


def test_a_stale_file_is_ignored_with_a_warning(tuned_dir):
    write_file(tuned_dir, {"float32": {"kinds": [KINDS[0].name]}}, sha="0" * 64)
    with pytest.warns(tuned.TunedDataWarning, match="stale"):
        assert tuned.tuned_family("sm_90", "float32") is None


@pytest.mark.parametrize("entry, why", [
    ({"kinds": []}, "no kinds"),
    ({"kinds": ["tune.nope"]}, "unknown kind"),
    ({"kinds": ["tune-f64.32x32/4x4/k8"]}, "not made for float32"),
    ({"kinds": [KINDS[0].name, KINDS[0].name]}, "twice"),
    ({"kinds": [KINDS[0].name], "factors": {KINDS[0].name: -1}}, "positive"),
    ({"kinds": [KINDS[0].name], "factors": {KINDS[0].name: "x"}}, "positive"),
])
def test_a_malformed_entry_is_ignored_with_a_warning(tuned_dir, entry, why):
    write_file(tuned_dir, {"float32": entry})
    with pytest.warns(tuned.TunedDataWarning, match=why):
        assert tuned.tuned_family("sm_90", "float32") is None


def test_an_unreadable_file_is_ignored_with_a_warning(tuned_dir):
    (tuned_dir / "sm_90.json").write_text("{not json")
    with pytest.warns(tuned.TunedDataWarning, match="unreadable"):
        assert tuned.tuned_family("sm_90", "float32") is None


def test_the_environment_switches_tuning_off(tuned_dir, monkeypatch):
    write_file(tuned_dir, {"float32": {"kinds": [KINDS[0].name]}})
    assert tuned.tuned_family("sm_90", "float32") is not None
    v = tuned.version()
    monkeypatch.setenv(tuned.ENV, "0")
    tuned.reload()
    assert tuned.tuned_family("sm_90", "float32") is None and tuned.version() != v


def test_no_warning_without_a_file(tuned_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tuned.tuned_family("sm_90", "float32") is None


# --- the command -------------------------------------------------------------------

def run_cli(argv, monkeypatch, timer=lambda dev, fn: 1.0):
    from portgemm.tuning import cli
    monkeypatch.setattr(space, "sizes", lambda cus, dtype, quick=False: SIZES[:2])
    monkeypatch.setattr("portgemm.tuning.sweep.FAMILIES",
                        {f: FAMILIES[f][:3] for f in space.CANDIDATES.values()})
    return cli.run(cli.parser().parse_args(argv), timer=timer)


def test_cli_refuses_to_write_host_timings_into_the_package(tuned_dir, monkeypatch, capsys):
    assert run_cli(["--backend", "numpy"], monkeypatch) == 2
    assert "numpy backend" in capsys.readouterr().err
    assert not list(tuned_dir.iterdir())


def test_cli_writes_a_valid_file_for_both_dtypes(tuned_dir, monkeypatch, capsys, tmp_path):
    out = tmp_path / "t" / "sm_90.json"
    assert run_cli(["--backend", "numpy", "--out", str(out), "--no-progress"], monkeypatch) == 0
    text = capsys.readouterr().out
    assert "float32 on sm_90" in text and "float64 on sm_90" in text and f"wrote {out}" in text
    data = json.loads(out.read_text())
    assert set(data["dtypes"]) == {"float32", "float64"}
    for dtype, entry in data["dtypes"].items():
        # equal fake times everywhere: one kind covers every size
        assert len(entry["kinds"]) == 1 and entry["complete"]
        fam, why = tuned.parse(data, "sm_90", dtype, str(out), tuned.kernel_fingerprint())
        assert why is None and fam.kinds[0].name == entry["kinds"][0]


def test_cli_no_write_and_main_dispatch(tuned_dir, monkeypatch, capsys):
    assert run_cli(["--backend", "numpy", "--no-write", "--dtype", "float64"], monkeypatch) == 0
    assert "float64: tuned family" in capsys.readouterr().out
    assert not list(tuned_dir.iterdir())
    from portgemm.__main__ import main
    with pytest.raises(SystemExit) as e:
        main(["tune", "--help"])
    assert e.value.code == 0 and "--budget" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["tune", "--budget", "0"])
    assert e.value.code == 2
