"""The planner's alignment input: which operand loads take the kernel's 16-byte path
(planner/alignment.py) and the measured path efficiencies that price them
(occupancy/vector_path.py). Hand-worked figures; no device."""

import numpy as np
import pytest

import portgemm
from portgemm import api, planner
from portgemm.errors import ValidationError
from portgemm.occupancy import get_arch
from portgemm.occupancy.vector_path import EFFICIENCY, SWITCH_MARGIN
from portgemm.planner import alignment, cost_model
from portgemm.planner.parallelism import kind_table
from portgemm.tiles import FAMILIES

SM90 = get_arch("sm_90")
FAT = next(k for k in FAMILIES["portgemm"] if k.kind == "128x128/16x8")

def test_dense_rows_are_aligned_where_the_kernel_reads_16_bytes():
    # fp32: 4 elements in 16 bytes; lda = K, ldb = N for dense row-major operands
    s = np.array([[10, 8, 12], [10, 6, 12], [10, 8, 13], [3, 4, 4]])
    assert alignment.aligned_rows(s, "float32").tolist() == [
        [True, True], [True, False], [False, True], [True, True]]
    # fp64: 2 elements
    assert alignment.aligned_rows(s, "float64").tolist() == [
        [True, True], [True, True], [False, True], [True, True]]
    # given strides win over the shapes (a padded B, a transposed A)
    lds = np.array([[16, 9], [10, 8], [12, 8], [3, 4]])
    assert alignment.aligned_rows(s, "float32", lds).tolist() == [
        [True, False], [False, True], [True, True], [False, True]]

def test_vector_share_hand_worked():
    # one 200 x 256 x 60 GEMM, 128 x 128 tiles, tk 8: A's slices are inside M in 1 of 2
    # tile rows, B's in both tile columns; 7 of 8 K steps are whole
    s = np.array([[200, 256, 60]])
    both = np.array([[True, True]])
    f = alignment.vector_share(s, both, [128], [128], [8])
    assert f[0] == pytest.approx((128 * 0.5 + 128 * 1.0) / 256 * 7 / 8)
    # B's rows not aligned: only A's inside slices count
    f = alignment.vector_share(s, np.array([[True, False]]), [128], [128], [8])
    assert f[0] == pytest.approx(128 * 0.5 / 256 * 7 / 8)
    # two GEMMs weigh by tiles x K steps: 4 tiles x 8 steps aligned, 1 x 1 not
    s2 = np.array([[256, 256, 64], [16, 16, 8]])
    f = alignment.vector_share(s2, np.array([[True, True], [False, False]]), [128], [128], [8])
    assert f[0] == pytest.approx(32 / 33)

def test_figures_only_shorten_tiles():
    # the device rule skips its second pricing where the best has no scaled tiles,
    # which holds only while every figure is at most 1
    for table in EFFICIENCY.values():
        for scalar, vector in table.values():
            assert 0 < scalar <= 1 and 0 < vector <= 1


def test_kind_factor_is_scalar_to_vector_by_the_share():
    scalar, vector = EFFICIENCY[("sm_90", "float32", "portgemm")]["128x128/16x8"]
    kinds = FAMILIES["portgemm"]
    table = kind_table(SM90, kinds, "per-kind", "float32")
    i = kinds.index(FAT)
    # 64 x 1000^2 x 512: 7 of 8 tile rows and columns lie inside, every K step is whole
    s = np.tile([1000, 1000, 512], (64, 1))
    share = alignment.share_for(SM90, "float32", kinds, s)
    assert share[i] == pytest.approx(0.875)
    kc = cost_model.kind_costs(SM90, kinds, table, "float32", share=share)
    # times the measured kind factors (ceilings.json kind_factors), where the H100 has them
    kf = cost_model.ceilings_for(SM90).kind_factors_of(kinds)
    kf = np.ones(len(kinds)) if kf is None else kf
    assert kc.factor[i] == pytest.approx(kf[i] * scalar * (vector / scalar) ** 0.875)
    # kinds without figures keep the model's time (or their kind factor)
    j = kinds.index(next(k for k in kinds if k.kind == "64x64/8x4"))
    assert kc.factor[j] == pytest.approx(kf[j])
    # rows not aligned: every load scalar
    rows = np.zeros((64, 2), bool)
    share0 = alignment.share_for(SM90, "float32", kinds, s, rows)
    kc0 = cost_model.kind_costs(SM90, kinds, table, "float32", share=share0)
    assert kc0.factor[i] == pytest.approx(kf[i] * scalar)
    # no figures for fp64, the paper's kinds or other archs: nothing is computed
    assert alignment.share_for(SM90, "float64", FAMILIES["portgemm-f64"], s) is None
    assert alignment.share_for(SM90, "float32", FAMILIES["zhang2025"], s) is None
    assert alignment.share_for(get_arch("sm_80"), "float32", kinds, s) is None

def test_aligned_batch_takes_the_fat_tile_and_an_unaligned_one_does_not():
    # 64 x 1000^2 x 512 in fp32: aligned rows (lda 512, ldb 1000), the 128x128/16x8
    # tiles run at vector^0.875 scalar^0.125 = 0.63 of the model's time, below
    # 64x128/8x8's; with odd strides (lda 513, ldb 1001) they run at scalar = 0.8 of
    # it, above
    s = np.tile([1000, 1000, 512], (64, 1))
    dense = planner.plan(s, "float32", arch="sm_90", use_cache=False)
    assert dense.tiles_per_kind() == {"128x128/16x8": 4096}
    odd = planner.plan(s, "float32", arch="sm_90", use_cache=False,
                       lds=np.tile([513, 1001], (64, 1)))
    # (64x128/8x8 before the fp32 kind factors, 128x64/8x8 with them: read at K = 512,
    # 64x128/8x8's factor is 4 % above 128x64/8x8's; bench/NOTES.md, session 8)
    assert odd.tiles_per_kind() in ({"64x128/8x8": 8192}, {"128x64/8x8": 8192})
    assert odd.predicted_ms > dense.predicted_ms
    # the figures move the choice by more than SWITCH_MARGIN: predicted 1.79 ms against
    # 1.94 for the 64x128 tiles (8 %)
    assert dense.predicted_ms < odd.predicted_ms * (1 - SWITCH_MARGIN)
    # the prediction follows the plan's strides too
    assert cost_model.predict(dense) == pytest.approx(dense.predicted_ms, rel=1e-9)
    assert cost_model.predict(odd, aligned=np.zeros((64, 2), bool)) == pytest.approx(
        odd.predicted_ms, rel=1e-9)

def test_dense_strides_are_the_plan_without_them():
    s = np.tile([1000, 1000, 512], (4, 1))
    p = planner.plan(s, "float32", arch="sm_90")
    assert planner.plan(s, "float32", arch="sm_90", lds=s[:, [2, 1]]) is p
    # other strides with the same alignment: the same plan (not necessarily the object)
    q = planner.plan(s, "float32", arch="sm_90", lds=np.tile([1024, 1024], (4, 1)))
    assert q.tiles_per_kind() == p.tiles_per_kind()
    odd = planner.plan(s, "float32", arch="sm_90", lds=np.tile([513, 1001], (4, 1)))
    assert odd is not p and planner.plan(s, "float32", arch="sm_90",
                                         lds=np.tile([513, 1001], (4, 1))) is odd

@pytest.mark.parametrize("lds", [np.zeros((3, 2), np.int64), np.zeros((4, 3), np.int64),
                                 np.full((4, 2), -4), np.full((4, 2), 4.0)])
def test_bad_strides_are_refused(lds):
    with pytest.raises(ValidationError, match="lds"):
        planner.plan(np.tile([64, 64, 64], (4, 1)), "float32", arch="sm_90", lds=lds)

def test_split_slices_keep_their_gemms_alignment(monkeypatch):
    # two GEMMs of long K, B's rows aligned in the first only: the split replans see
    # each slice with its own GEMM's rows, not the slices' K
    s = np.array([[64, 64, 16384], [64, 64, 16384]])
    lds = np.array([[16384, 64], [16384, 65]])
    seen = []
    real = alignment.share_for

    def spy(arch, dtype, kinds, shapes, aligned=None, **kw):
        seen.append((shapes.shape[0], None if aligned is None else aligned.copy()))
        return real(arch, dtype, kinds, shapes, aligned, **kw)
    monkeypatch.setattr(alignment, "share_for", spy)
    p = planner.plan(s, "float32", arch="sm_90", use_cache=False, lds=lds)
    assert p.split is not None
    slices = [(n, a) for n, a in seen if n > 2]
    assert slices
    for n, a in slices:
        assert a is not None and a.shape == (n, 2)
        assert a[:, 0].all()
        half = n // 2   # GEMM 0's slices first, then GEMM 1's (equal K: equal counts)
        assert a[:half, 1].all() and not a[half:, 1].any()

def test_lists_pass_their_real_strides(monkeypatch):
    # B of GEMM 1 is a column slice of a wider array: its ldb is the array's row, not N
    rng = np.random.default_rng(0)
    wide = rng.random((8, 11)).astype(np.float32)
    A = [rng.random((5, 8)).astype(np.float32) for _ in range(2)]
    B = [rng.random((8, 6)).astype(np.float32), wide[:, :6]]
    C = [np.zeros((5, 6), np.float32) for _ in range(2)]
    got = {}
    real = api.make_plan

    def spy(shapes, **kw):
        got["lds"] = np.array(kw["lds"])
        return real(shapes, **kw)
    monkeypatch.setattr(api, "make_plan", spy)
    portgemm.gemm_vbatched(A, B, C, backend="numpy")
    assert got["lds"].tolist() == [[8, 6], [8, 11]]
    for a, b, c in zip(A, B, C):
        np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5)
