"""The planning-time changes of session 15 (bench/NOTES.md, "Session 15: planning
time") compute what the code before them computed: the ladders' per-cell sums by
np.add.at instead of np.bincount, a bincount's present entries through a mask, the
class count taken before the class list, and the always-allowed kinds set row by row.
Each against the code it replaces (kept verbatim here where it is more than one call),
on random inputs."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from portgemm import planner
from portgemm.planner import classes, level_search as L, wavefront_tlp
from portgemm.tiles import FAMILIES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plan_equivalence import random_shapes  # noqa: E402


def _families():
    """Both families the default plan weighs, for fp32 and fp64, and their union."""
    out = [wavefront_tlp.FAMILY]
    for dtype in ("float32", "float64"):
        ours = wavefront_tlp.family_option(wavefront_tlp.OUR_FAMILY[dtype], dtype)
        out += [ours, tuple(sorted(wavefront_tlp.FAMILY + ours, key=lambda k: k.area))]
    return out + [tuple(sorted(FAMILIES["portgemm"], key=lambda k: k.area))]


@pytest.mark.parametrize("seed", range(8))
def test_sums_at_equals_bincount(seed):
    """level_search.sums_at: np.bincount's sums bit for bit, runs of one key (the adds
    that wait on one another), int16 and intp keys, integer and fractional weights."""
    rng = np.random.default_rng(1500 + seed)
    for _ in range(20):
        size = int(rng.integers(1, 4000))
        n = int(rng.integers(0, 30000))
        keys = np.repeat(rng.integers(0, size, n // 8 + 1), 8)[:n]
        if rng.random() < 0.5:
            keys = rng.permutation(keys)
        if size < 2**15 and rng.random() < 0.5:
            keys = keys.astype(np.int16)
        w = rng.integers(0, 2**20, n).astype(np.float64)
        if rng.random() < 0.3:
            w = rng.random(n) * 1e3   # not integers: the same adds in the same order
        got = L.sums_at(keys, w, size)
        want = np.bincount(keys.astype(np.intp), weights=w, minlength=size)
        assert got.shape == want.shape and got.tobytes() == want.tobytes()


def test_present_equals_nonzero():
    rng = np.random.default_rng(1515)
    for size in (0, 1, 7, 4096, 4097, 60543, 200000):
        for fill in (0.0, 0.01, 0.5, 1.0):
            counts = np.where(rng.random(size) < fill, rng.integers(1, 9, size), 0)
            assert classes._present(counts).tolist() == counts.nonzero()[0].tolist()


def _old_batch_classes(shapes, kinds):
    """classes.batch_classes as it was (the class list before its count; the keys, which
    that change left alone, from classes.class_keys)."""
    B = shapes.shape[0]
    if B < classes.MIN_BATCH:
        return None
    steps = classes._edge_steps(tuple(kinds))
    if steps is None or classes._gives_up_on_a_sample(shapes, steps):
        return None
    got = classes.class_keys(shapes, steps)   # unchanged: the keys are shared
    if got is None:
        return None
    key, space = got
    size = np.bincount(key, minlength=space)
    present = size.nonzero()[0]
    C = present.shape[0]
    if C > classes.MAX_SHARE * B:
        return None
    slot = np.empty(space, dtype=np.int64)
    slot[present] = np.arange(C)
    inverse = slot.take(key)
    rep = np.empty(C, dtype=np.int64)
    rep[inverse] = np.arange(B)
    return classes.BatchClasses(shapes.take(rep, axis=0),
                                size.take(present).astype(np.float64), inverse)


@pytest.mark.parametrize("seed", range(4))
def test_batch_classes_as_before(seed):
    """The same classes, or None, as before: random batches of the equivalence sample's
    kinds and the uniform batches up to 256 that have too many classes (8,192 GEMMs:
    ~6,600 of ~60,000 keys)."""
    rng = np.random.default_rng(1530 + seed)
    kinds = wavefront_tlp.FAMILY + wavefront_tlp.family_option("portgemm", "float32")
    batches = [planner._shapes(random_shapes(rng, int(rng.integers(256, 9000))))
               for _ in range(12)]
    for B, mx in ((8192, 256), (4096, 128), (1024, 64), (9000, 96)):
        batches.append(planner._shapes(np.stack([rng.integers(16, mx + 1, B),
                                                 rng.integers(16, mx + 1, B),
                                                 rng.integers(16, 513, B)], axis=1)))
    seen = set()
    for s in batches:
        got, want = classes.batch_classes(s, kinds), _old_batch_classes(s, kinds)
        seen.add(got is None)
        assert (got is None) == (want is None)
        if got is not None:
            for x, y in zip((got.shapes, got.weights, got.inverse),
                            (want.shapes, want.weights, want.inverse)):
                assert x.tolist() == y.tolist()
    assert seen == {True, False}


@pytest.mark.parametrize("seed", range(4))
def test_allowed_rows_equal_the_definition(seed):
    """BatchTables.allowed: the tiles that fit, or of the smallest area (every family
    and union of families, sizes around the tile edges and zero)."""
    rng = np.random.default_rng(1540 + seed)
    for kinds in _families():
        B = int(rng.integers(1, 3000))
        s = planner._shapes(rng.integers(0, 300, (B, 3)))
        tabs = wavefront_tlp.BatchTables(s, kinds)
        tm = np.array([k.tm for k in kinds])[:, None]
        tn = np.array([k.tn for k in kinds])[:, None]
        area = np.array([k.area for k in kinds])[:, None]
        want = ((tm <= s[:, 0]) & (tn <= s[:, 1])) | (area == area.min())
        assert tabs.allowed.tolist() == want.tolist()
