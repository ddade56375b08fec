"""The 16-bit kinds' copy-path figures (ceilings.json ``kind_path_factors``): the data,
the batch's shares of 16-, 4- and 2-byte loads that weigh them, the cost model that
scales a kind's tile time by them, the leading dimensions that reach the shares (given
lds, staged operands) and the command that fits them (on the numpy
backend with a fake timer). No measured figures are committed yet: these tests put
figures in memory or in a copy of the file."""
from __future__ import annotations

import json

import numpy as np
import pytest

import portgemm.planner as planner
from portgemm.occupancy import ceilings, get_arch, vector_path
from portgemm.occupancy.ceilings import ceilings_for, kind_path_factors
from portgemm.planner import alignment
from portgemm.planner.cost_model import kind_costs
from portgemm.planner.parallelism import kind_table
from portgemm.tiles import FAMILIES

H100 = get_arch("sm_90")
F16 = FAMILIES["portgemm-f16"]
# made-up figures, the greatest 1, a different slope per kind
FIGURES = {k.name: [0.5 + 0.05 * i, 0.75 + 0.03 * i, 1.0] for i, k in enumerate(F16)}


def test_a_family_with_figures_for_some_kinds_has_none():
    row = dict(ceilings._load()["measured"]["sm_90"])
    row[ceilings.KIND_PATH_FACTORS] = {F16[0].name: [0.5, 0.7, 1.0]}
    try:
        ceilings.use_in_memory("sm_90", row)
        assert ceilings_for(H100).path_factors_of(F16) is None
        assert ceilings_for(H100).path_factors_of(F16[:1]) is not None
    finally:
        ceilings.reload()


@pytest.fixture
def with_figures():
    """The H100's measured ceilings plus FIGURES for portgemm-f16, in this process."""
    row = dict(ceilings._load()["measured"]["sm_90"])
    row[ceilings.KIND_PATH_FACTORS] = FIGURES
    ceilings.use_in_memory("sm_90", row)
    planner.clear_cache()
    yield
    ceilings.reload()
    planner.clear_cache()


# --- the data ------------------------------------------------------------------------

def test_without_figures_the_16_bit_kinds_keep_one_factor():
    """No figures for the family: no path factor at all, so the model prices the kinds
    as it did before the paths were split (kind_costs' factor is the kind factor)."""
    row = dict(ceilings._load()["measured"]["sm_90"])
    row.pop(ceilings.KIND_PATH_FACTORS, None)
    try:
        ceilings.use_in_memory("sm_90", row)
        assert ceilings_for(H100).path_factors_of(F16) is None
        assert vector_path.efficiencies(H100, "float16", F16) is None
        s = np.tile([255, 254, 256], (8, 1)).astype(np.int64)
        share = alignment.share_for(H100, "float16", F16, s)
        assert len(share) == len(F16)   # the step floors' share alone
        table = kind_table(H100, F16, "per-kind", "float16")
        assert np.array_equal(kind_costs(H100, F16, table, "float16", share=share).factor,
                              kind_costs(H100, F16, table, "float16").factor)
    finally:
        ceilings.reload()


@pytest.mark.parametrize("table,match", [
    ({"portgemm-f16.64x64/w32x32": [1.0, 0.9]}, "16-byte, 4-byte, 2-byte"),
    ({"portgemm-f16.64x64/w32x32": [1.0, 0.9, 0.0]}, "not a positive number"),
    ({"portgemm-f16.64x64/w32x32": [1.0, True, 0.5]}, "not a positive number"),
    ({"nope.64x64": [1.0, 0.9, 0.8]}, "unknown kind"),
    ([1.0, 0.9, 0.8], "must map kind names"),
])
def test_bad_path_factors_are_refused(table, match):
    with pytest.raises(ValueError, match=match):
        kind_path_factors(table, "sm_90")


def test_a_family_has_figures_only_where_every_kind_has(with_figures):
    fig = ceilings_for(H100).path_factors_of(F16)
    assert [list(r) for r in zip(*fig)] == [FIGURES[k.name] for k in F16]
    # a family without figures beside one with them: 1 on every path (wgmma copies
    # aligned rows only); a family with them for some kinds only: none at all
    wg = FAMILIES["wgmma-f16"]
    both = ceilings_for(H100).path_factors_of(F16 + wg)
    assert [list(r) for r in zip(*both)] == [FIGURES[k.name] for k in F16] + [[1.0] * 3] * len(wg)
    assert ceilings_for(H100).path_factors_of(F16[1:]) is not None
    assert ceilings_for(H100).path_factors_of(wg) is None
    eff = vector_path.efficiencies(H100, "float16", F16)
    assert eff.three_way.all()


def test_fp32_keeps_its_two_path_figures():
    """fp32's 128 x 128 kinds: (scalar, vector) for the narrow and wide paths, the same
    factor for every share as before the 4-byte path existed."""
    F32 = FAMILIES["portgemm"]
    eff = vector_path.efficiencies(H100, "float32", F32)
    assert eff is not None and not eff.three_way.any()
    share = np.linspace(0.0, 1.0, len(F32))
    want = eff.two * (eff.wide / eff.two) ** share
    assert np.array_equal(vector_path.factor(eff, share), want)


def test_the_writer_replaces_a_familys_figures_and_keeps_others(tmp_path):
    path = tmp_path / "ceilings.json"
    path.write_text(ceilings.PATH.read_text())
    factors = {k.name: 1.0 for k in F16}
    try:
        ceilings.write_kind_factors("sm_90", factors, "test", path=path, path_factors=FIGURES)
        row = json.loads(path.read_text())["measured"]["sm_90"]
        assert row[ceilings.KIND_PATH_FACTORS] == FIGURES
        assert any(n.startswith("portgemm.") for n in row[ceilings.KIND_FACTORS])
        # a refit without figures drops the family's: its factors no longer divide them out
        ceilings.write_kind_factors("sm_90", factors, "test", path=path)
        row = json.loads(path.read_text())["measured"]["sm_90"]
        assert ceilings.KIND_PATH_FACTORS not in row
        with pytest.raises(ValueError, match="16-byte, 4-byte, 2-byte"):
            ceilings.write_kind_factors("sm_90", factors, "test", path=path,
                                        path_factors={F16[0].name: [1.0]})
    finally:
        ceilings.reload()


# --- the shares ------------------------------------------------------------------------

def test_four_byte_rows_are_the_even_unaligned_ones():
    s = np.array([[8, 64, 32], [8, 30, 30], [8, 31, 31], [8, 36, 36]])
    assert alignment.four_byte_rows(s, "float16").tolist() == \
        [[False, False], [True, True], [False, False], [True, True]]
    lds = np.array([[40, 66], [34, 64], [33, 35], [8, 2]])
    assert alignment.four_byte_rows(s, "bfloat16", lds).tolist() == \
        [[False, True], [True, False], [False, False], [False, True]]
    assert not alignment.four_byte_rows(s, "float32").any()


def test_the_row_share_by_hand():
    # 64 x 64 tiles, tk 32: GEMM 0 (A's rows of 30: 4-byte, B's of 64) has 1 x 1 tiles x
    # 1 step, half its loads (A's tm = 64 of tm + tn = 128) on the 4-byte path; GEMM 1
    # (K 96, N 128: both 16-byte) 1 x 2 tiles x 3 steps, none
    s = np.array([[64, 64, 30], [64, 128, 96]])
    four = alignment.four_byte_rows(s, "float16")
    got = alignment.row_share(s, four, [64], [64], [32])
    assert got.tolist() == [pytest.approx(0.5 * 1 / (1 + 6))]


def test_the_shares_go_on_with_the_four_byte_ones(with_figures):
    s = np.array([[128, 128, 254], [128, 130, 256], [127, 127, 127]])
    share = alignment.share_for(H100, "float16", F16, s)
    n = len(F16)
    assert len(share) == 3 * n
    floor, wide, four = alignment.split_share(share, n)
    # the step floors keep the shares they were fitted with (inside slices): without
    # three-way figures the tuple is those alone, as before
    ceilings.reload()
    plain = alignment.share_for(H100, "float16", F16, s.copy())
    assert len(plain) == n and floor == plain and wide != plain
    for i, k in enumerate(F16):
        w = alignment.row_share(s, alignment.aligned_rows(s, "float16"), [k.tm], [k.tn], [k.tk])
        f = alignment.row_share(s, alignment.four_byte_rows(s, "float16"),
                                [k.tm], [k.tn], [k.tk])
        assert wide[i] == pytest.approx(float(w[0]), abs=alignment.SHARE_STEP)
        assert four[i] == pytest.approx(float(f[0]), abs=alignment.SHARE_STEP)
        assert 0.0 < four[i] and wide[i] + four[i] <= 1.0


def test_the_model_scales_each_kind_by_its_paths(with_figures):
    """kind_costs' factor: the kind factor x wide^s16 x four^s4 x two^(1 - s16 - s4);
    the same batch on 16-byte rows is priced faster than on 4-byte rows, and those
    faster than on 2-byte rows."""
    table = kind_table(H100, F16, "per-kind", "float16")
    plain = kind_costs(H100, F16, table, "float16").factor
    factors = []
    for d in (0, 2, 1):   # aligned, even, odd: every row on one path
        s = np.tile([512 - d, 512 - d, 512 - d], (4, 1)).astype(np.int64)
        share = alignment.share_for(H100, "float16", F16, s)
        _, wide, four = alignment.split_share(share, len(F16))
        kc = kind_costs(H100, F16, table, "float16", share=share)
        fig = np.array([FIGURES[k.name] for k in F16])
        want = plain * fig[:, 0] ** np.array(wide) * fig[:, 1] ** np.array(four) \
            * fig[:, 2] ** (1.0 - np.array(wide) - np.array(four))
        assert kc.factor == pytest.approx(want, rel=1e-12)
        factors.append(kc.factor)
    assert (factors[0] < factors[1]).all() and (factors[1] < factors[2]).all()


def test_given_lds_and_staged_operands_reach_the_shares(with_figures, monkeypatch):
    """Leading dimensions other than dense operands' reach share_for as 4-byte rows:
    given lds (even where the dense ones are odd, though neither is 16-byte aligned),
    and a staged operand none (its rows are aligned). (The 16-bit families never split
    K, so split-K slices have none.)"""
    seen = []
    real = alignment.share_for

    def spy(arch, dtype, kinds, shapes, aligned=None, **kw):
        four = kw.get("four")
        seen.append(None if four is None else four.copy())
        return real(arch, dtype, kinds, shapes, aligned, **kw)
    monkeypatch.setattr(alignment, "share_for", spy)
    s = np.array([[256, 255, 1023], [256, 255, 1023]])
    lds = np.array([[1026, 255], [1023, 258]])   # A of GEMM 0 and B of GEMM 1: even
    planner.plan(s, "float16", arch="sm_90", use_cache=False, lds=lds, staging=False)
    assert seen and all(f.tolist() == [[True, False], [False, True]] for f in seen)
    seen.clear()
    planner.plan(s, "float16", arch="sm_90", use_cache=False, lds=lds, staging=True)
    assert any(f is not None and not f.any() for f in seen)   # the staged replan's


def test_lds_that_only_change_the_four_byte_rows_plan_apart(with_figures):
    """Two layouts with the same 16-byte rows (none), A's rows even (4-byte) in one and
    odd (2-byte) in the other: the first is priced faster, and the plan cache keeps them
    apart (its key holds the 4-byte rows too)."""
    s = np.tile([128, 128, 255], (64, 1)).astype(np.int64)
    even, odd = np.tile([258, 130], (64, 1)), np.tile([257, 130], (64, 1))
    assert (alignment.aligned_rows(s, "float16", even) ==
            alignment.aligned_rows(s, "float16", odd)).all()
    fresh = [planner.plan(s, "float16", arch="sm_90", use_cache=False, staging=False, lds=ld)
             for ld in (even, odd)]
    assert fresh[0].predicted_ms < fresh[1].predicted_ms
    cached = [planner.plan(s, "float16", arch="sm_90", staging=False, lds=ld)
              for ld in (even, odd)]
    assert [p.predicted_ms for p in cached] == [p.predicted_ms for p in fresh]


# --- the command ---------------------------------------------------------------------

def test_the_command_fits_the_paths_then_the_factors(dry_write, monkeypatch, capsys):
    """A device whose kinds run the model's time x a known factor x known path figures at
    each size's shares: the fit gives back both (the figures scaled to a greatest 1),
    writes them, and the factors are what the figures leave (not counted twice)."""
    from portgemm.tuning import kind_factors as cmd
    from portgemm.tuning import space
    from portgemm.tuning.model import predicted_seconds
    monkeypatch.setattr(space, "sizes", lambda cus, dt, quick=False: [
        space.Size(256 - d, 256 - d, k - d, 2) for k in (64, 256) for d in (0, 1, 2)])
    known = {k.name: 0.6 + 0.1 * i for i, k in enumerate(F16)}
    # the figures as measured, before scaling: 2-byte the slowest but not 1
    raw = {n: [f[0] * 1.3, f[1] * 1.3, 1.3] for n, f in FIGURES.items()}

    def timer(dev, bound):
        k = bound.plan.kinds[0]
        sh = bound.plan.shapes
        w = alignment.row_share(sh, alignment.aligned_rows(sh, "float16"), [k.tm], [k.tn], [k.tk])[0]
        f = alignment.row_share(sh, alignment.four_byte_rows(sh, "float16"),
                                [k.tm], [k.tn], [k.tk])[0]
        a, b, c = raw[k.name]
        path = a ** w * b ** f * c ** (1.0 - w - f)
        return 1e3 * predicted_seconds(sh, k, "float16", H100, known[k.name] * path)

    assert dry_write(cmd, ["--dtype", "float16"], timer) == 0
    assert "copy paths 16/4/2-byte" in capsys.readouterr().out
    row = json.loads(dry_write.ceilings.read_text())["measured"]["sm_90"]
    got = {n: r for n, r in row[ceilings.KIND_PATH_FACTORS].items()
           if n.startswith("portgemm-f16.")}
    assert got == {n: [pytest.approx(x, rel=2e-3) for x in f] for n, f in FIGURES.items()}
    factors = {n: f for n, f in row[ceilings.KIND_FACTORS].items()
               if n.startswith("portgemm-f16.")}
    assert factors == {n: pytest.approx(known[n] * 1.3, rel=2e-3) for n in known}
    assert json.loads(dry_write.out.read_text())["path_factors"].keys() == FIGURES.keys()


def test_too_few_sizes_per_path_fit_no_figures(dry_write, monkeypatch, capsys):
    """Aligned and odd sizes only (no 4-byte rows): no figures, the factors over the
    paths together, as before the paths were split, and the file says so."""
    from portgemm.tuning import kind_factors as cmd
    from portgemm.tuning import space
    from portgemm.tuning.model import predicted_seconds
    monkeypatch.setattr(space, "sizes", lambda cus, dt, quick=False: [
        space.Size(256 - d, 256 - d, 64 - d, 2) for d in (0, 1)])

    def timer(dev, bound):
        k = bound.plan.kinds[0]
        return 1e3 * predicted_seconds(bound.plan.shapes, k, "float16", H100, 0.9)

    assert dry_write(cmd, ["--dtype", "float16"], timer) == 0
    assert "no copy-path figures" in capsys.readouterr().out
    row = json.loads(dry_write.ceilings.read_text())["measured"]["sm_90"]
    assert not any(n.startswith("portgemm-f16.") for n in row.get(ceilings.KIND_PATH_FACTORS, {}))
    assert all(f == pytest.approx(0.9, rel=2e-3) for n, f in row[ceilings.KIND_FACTORS].items()
               if n.startswith("portgemm-f16."))


def test_the_sweep_has_a_size_per_path_for_16_bit_dtypes():
    """Per (edge, depth) point, together (a sweep stopped early has every path at the
    points it reached): aligned and odd; for 16-bit also even (the 4-byte path) and the
    two mixes of A's and B's rows (a random batch's operands take paths apart)."""
    from portgemm.planner.alignment import aligned_rows, four_byte_rows
    from portgemm.tuning import space
    for dtype, n in (("float16", 5), ("float32", 2)):
        sizes = space.sizes(132, dtype)
        assert len(sizes) == n * len(space.EDGES) * len(space.DEPTHS) == len(set(sizes))
        for p in range(0, len(sizes), n):
            point = sizes[p:p + n]
            rows = [(aligned_rows(s.shapes()[:1], dtype)[0].tolist(),
                     four_byte_rows(s.shapes()[:1], dtype)[0].tolist()) for s in point]
            want = [([True, True], [False, False]), ([False, False], [False, False])]
            if n == 5:
                want += [([False, False], [True, True]), ([False, True], [False, False]),
                         ([True, False], [False, False])]
            assert rows == want


# --- staging -------------------------------------------------------------------------

def _odd_batch(seed, b=48, lo=200, hi=600):
    rng = np.random.default_rng(seed)
    return (rng.integers(lo // 2, hi // 2, (b, 3)) * 2 + 1).astype(np.int64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_staging_takes_the_models_own_price_of_aligned_rows(with_figures, seed):
    """With copy-path figures the inner plan's prediction is on aligned rows already:
    the staged total is the copy plus it (no measured speedup divided in, which would
    count the paths twice), and the screen's bound stays below that total."""
    from portgemm.occupancy.ceilings import ceilings_for
    from portgemm.planner import staging
    from portgemm.planner.cost_model import planned_ms
    s = _odd_batch(seed)
    p = planner.plan(s, "float16", arch="sm_90", use_cache=False, staging=True)
    st = p.staging
    assert st is not None and "copy-path figures" in st.reason
    assert st.predicted_ms == pytest.approx(st.copy_ms + planned_ms(st.plan), rel=1e-12)
    direct = planner.plan(s, "float16", arch="sm_90", use_cache=False, staging=False)
    ceil = ceilings_for(H100)
    gain = staging.path_gain(direct)
    assert gain == pytest.approx(min(f[0] for f in FIGURES.values()))
    bound = staging.staged_bound_ms(direct, staging._launches(direct, ceil), ceil, gain)
    assert st.copy_ms + bound <= st.predicted_ms * (1 + 1e-9)
