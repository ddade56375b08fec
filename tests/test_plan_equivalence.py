"""Plans stay byte for byte what they were while the miss path is made faster: random
requests over what the default plan and the device rule see (archs sm_90 / sm_80 /
gfx90a; fp32 / fp64 / fp16 / bf16; precisions ieee / tf32 / 3xtf32; the default plan,
named strategies and modes, families, split-K; design-grid, MoE-like, repeated and tiny
shapes, K = 0 and M = 0, batches 1..9,000) must hash to the digest (and predicted_ms)
recorded from the planner before the change.

The test runs a small sample (seconds); the large one is run by hand against a tree
before the change:

    PYTHONPATH=<old tree> python tests/test_plan_equivalence.py --write N /tmp/old.json
    PYTHONPATH=$PWD python tests/test_plan_equivalence.py --check /tmp/old.json

``--write`` with no file rewrites tests/data/plan_equivalence.json (the small sample):
only where plans move on purpose.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import portgemm  # noqa: F401  (sets the default resources provider)
from portgemm import planner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_planner_digests import digest  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "plan_equivalence.json"
SMALL = 60          # requests in the recorded sample
SEED = 20261124


def random_shapes(rng, batch: int) -> np.ndarray:
    """Shapes of one of several distributions: the design grid's (MaxMN 128 or 1,024),
    MoE-like (8 experts' N, K; M in [0, MaxMN]), repeated shapes, tiny sizes with zeros,
    large K."""
    kind = int(rng.integers(0, 6))
    if kind == 0:
        hi = int(rng.choice([128, 1024, 4096]))
        s = np.stack([rng.integers(16, hi + 1, batch), rng.integers(16, hi + 1, batch),
                      rng.integers(16, 513, batch)], axis=1)
    elif kind == 1:
        nk = rng.integers(1, 9, (8, 2)) * 256
        e = rng.integers(0, 8, batch)
        hi = int(rng.choice([128, 1024]))
        s = np.stack([rng.integers(0, hi + 1, batch), nk[e, 0], nk[e, 1]], axis=1)
    elif kind == 2:
        base = rng.integers(1, 1025, (max(1, batch // 16), 3))
        s = base[rng.integers(0, base.shape[0], batch)]
    elif kind == 3:
        s = rng.integers(0, 70, (batch, 3))
    elif kind == 4:
        s = np.stack([rng.integers(1, 300, batch), rng.integers(1, 300, batch),
                      rng.integers(0, 9000, batch)], axis=1)
    else:
        s = rng.integers(1, 65, (batch, 3)) * int(rng.choice([8, 16, 32]))
    return s.astype(np.int64)


def random_request(rng):
    """(shapes, plan kwargs): mostly the default plan, which the miss path serves."""
    arch = str(rng.choice(["sm_90", "sm_80", "gfx90a"]))
    dtype = str(rng.choice(["float32", "float32", "float64", "float16", "bfloat16"]))
    kw = dict(arch=arch, dtype=dtype)
    r = float(rng.random())
    if dtype == "float32" and arch != "gfx90a" and r < 0.15:
        kw["precision"] = str(rng.choice(["tf32", "3xtf32"]))
    elif dtype in ("float32", "float64") and r < 0.45:
        strategy = str(rng.choice(["wavefront-tlp", "workgroup-tlp"]))
        kw.update(strategy=strategy, mode=str(rng.choice(["fused", "per-kind"])))
        if rng.random() < 0.3:
            kw["tlp_model"] = "paper"
        elif rng.random() < 0.3:
            kw["tlp_factor"] = float(rng.choice([0.25, 0.5, 2.0]))
    elif dtype in ("float32", "float64") and r < 0.55:
        kw["split_k"] = False
    if dtype in ("float16", "bfloat16") and arch == "gfx90a":
        kw["dtype"] = "float32"
    batch = int(rng.choice([1, int(rng.integers(2, 64)), int(rng.integers(64, 1500)),
                            int(rng.integers(1500, 9000))], p=[0.05, 0.3, 0.4, 0.25]))
    return random_shapes(rng, batch), kw


def requests(n: int, seed: int = SEED):
    rng = np.random.default_rng(seed)
    return [random_request(rng) for _ in range(n)]


def compute(n: int, seed: int = SEED) -> list:
    out = []
    for shapes, kw in requests(n, seed):
        try:
            out.append(list(digest(planner.plan(shapes, use_cache=False, **kw))))
        except Exception as e:   # a typed refusal is part of the behaviour too
            out.append([type(e).__name__, None])
    return out


def differences(want: list, seed: int = SEED) -> list[str]:
    got = compute(len(want), seed)
    bad = []
    for i, (g, w, (shapes, kw)) in enumerate(zip(got, want, requests(len(want), seed))):
        if g[0] != w[0]:
            bad.append(f"request {i} ({shapes.shape[0]} GEMMs, {kw}): plan differs")
        elif (g[1] is None) != (w[1] is None) or (
                g[1] is not None and g[1] != pytest.approx(w[1], rel=1e-9, abs=1e-300)):
            bad.append(f"request {i} ({shapes.shape[0]} GEMMs, {kw}): predicted_ms "
                       f"{g[1]!r} != {w[1]!r}")
    return bad


def test_random_plans_equal_the_recorded_ones():
    if not DATA.exists():
        pytest.skip("no recorded sample (tests/test_plan_equivalence.py --write)")
    want = json.loads(DATA.read_text())
    assert len(want) == SMALL
    bad = differences(want)
    assert not bad, "\n".join(bad[:20])


def _old_vector_share(shapes, aligned, tm, tn, tk):
    """alignment.vector_share as it was before the miss path's rewrite (each quotient
    divided twice, numpy's rounding of the share)."""
    M, N, K = np.asarray(shapes, dtype=np.float64).T
    a, b = np.asarray(aligned, dtype=np.float64).T
    out = np.zeros(len(tm))
    for i, (m, n, k) in enumerate(zip(tm, tn, tk)):
        fm, fn, fk = np.floor(M / m), np.floor(N / n), np.floor(K / k)
        gm, gn = np.ceil(M / m), np.ceil(N / n)
        total = float(np.dot(gm * gn, np.ceil(K / k)))
        fast = m * np.dot(a * fm, gn * fk) + n * np.dot(b * fn, gm * fk)
        out[i] = fast / (m + n) / total if total > 0 else 0.0
    return out


@pytest.mark.parametrize("seed", range(6))
def test_vector_share_equals_its_previous_formula(seed):
    """share_for's figures (one quotient per dimension, Python's rounding of the share)
    are the previous formula's, bit for bit, on random batches and operand layouts."""
    from portgemm.occupancy import get_arch
    from portgemm.planner import alignment
    from portgemm.tiles import FAMILIES
    rng = np.random.default_rng(seed)
    shapes = random_shapes(rng, int(rng.integers(1, 3000)))
    lds = shapes[:, 2:0:-1] + rng.integers(0, 3, (shapes.shape[0], 2)) * (rng.random() < 0.5)
    rows = alignment.aligned_rows(shapes, "float32", lds)
    kinds = FAMILIES["portgemm"]
    tm, tn, tk = ([getattr(k, a) for k in kinds] for a in ("tm", "tn", "tk"))
    want = _old_vector_share(shapes, rows, tm, tn, tk)
    assert alignment.vector_share(shapes, rows, tm, tn, tk).tolist() == want.tolist()
    has = [i for i, k in enumerate(kinds) if k.kind.startswith("128x128")]
    f = np.zeros(len(kinds))
    f[has] = want[has]
    rounded = (np.round(f / alignment.SHARE_STEP) * alignment.SHARE_STEP).tolist()
    alignment._last[0] = None
    assert list(alignment.share_for(get_arch("sm_90"), "float32", kinds, shapes, rows)) == rounded


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--write"]:
        n = int(args[1]) if len(args) > 1 else SMALL
        path = Path(args[2]) if len(args) > 2 else DATA
        path.write_text(json.dumps(compute(n)) + "\n")
        print(f"wrote {n} digests to {path}")
    elif args[:1] == ["--check"]:
        want = json.loads(Path(args[1]).read_text())
        bad = differences(want)
        print(f"{len(want) - len(bad)} of {len(want)} plans equal")
        print("\n".join(bad[:50]))
        sys.exit(1 if bad else 0)
    else:
        sys.exit(__doc__)
