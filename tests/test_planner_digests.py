"""Plans stay what they were while the planner is made faster: every strategy, mode,
tlp_model, family, dtype and two archs plan many random batches (sizes 1..1024, batches
1..3000), and each plan's tiles (as its per-GEMM layout or its flat list), kinds, mode,
TLP, threshold and notes must hash to the digest recorded from the planner before the
speed work, with predicted_ms within 1e-9 relative.

The digests depend on the kernels' recorded resource figures and the device ceilings
(they set occupancy and the cost model). A change there that moves plans on purpose
rewrites them: ``PYTHONPATH=$PWD python tests/test_planner_digests.py --write``.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import portgemm  # noqa: F401  (sets the default resources provider)
from portgemm import planner

DATA = Path(__file__).resolve().parent / "data" / "plan_digests.json"


def random_shapes(rng, batch):
    """One of several distributions of sizes in 1..1024 (some with repeated shapes and
    exact multiples of the tiles; a few empty dimensions)."""
    kind = int(rng.integers(0, 5))
    if kind == 0:
        s = rng.integers(1, 1025, (batch, 3))
    elif kind == 1:
        s = rng.integers(1, 65, (batch, 3))
    elif kind == 2:
        s = rng.integers(1, 65, (batch, 3)) * 16
    elif kind == 3:
        base = rng.integers(1, 1025, (max(1, batch // 8), 3))
        s = base[rng.integers(0, base.shape[0], batch)]
    else:
        s = rng.integers(0, 300, (batch, 3))
    return s.astype(np.int64)


def cases():
    """(name, shapes, plan kwargs) for every configuration, deterministic."""
    configs = [dict()]   # the default plan: neither strategy nor mode
    for strategy in ("wavefront-tlp", "workgroup-tlp"):
        for mode in ("fused", "per-kind", None):
            for rule in ("device", "paper"):
                configs.append(dict(strategy=strategy, mode=mode, tlp_model=rule))
        for family in ("li2019-128", "portgemm", "portgemm-f64"):
            configs.append(dict(strategy=strategy, mode="per-kind", family=family))
    configs += [dict(strategy="coordinated", mode="fused"),
                dict(strategy="coordinated", mode="per-kind"),
                dict(strategy="magma"),
                dict(strategy="wavefront-tlp", tlp_factor=0.25),
                dict(strategy="wavefront-tlp", tlp_threshold=2e5, mode="fused")]
    rng = np.random.default_rng(20261123)
    out = []
    for c, kw in enumerate(configs):
        for dtype in ("float32", "float64"):
            fam = kw.get("family")
            if fam == "portgemm" and dtype == "float64" or fam == "portgemm-f64" and dtype == "float32":
                continue
            for arch in ("sm_90", "gfx90a"):
                for batch in (1, int(rng.integers(2, 40)), int(rng.integers(40, 600)),
                              int(rng.integers(600, 3001))):
                    if kw.get("strategy") == "coordinated" and batch > 600:
                        continue   # it builds the flat list: slow, and nothing here changes it
                    shapes = random_shapes(rng, batch)
                    out.append((f"{c}:{dtype}:{arch}:{batch}", shapes,
                                dict(kw, dtype=dtype, arch=arch)))
    return out


def digest(p) -> tuple[str, float | None]:
    """(hash of the plan's tiles, kinds, mode, TLP, threshold and notes; predicted_ms).
    TLP and threshold enter to 9 significant digits: numpy's float reductions pick their
    SIMD paths by CPU, so their last bits differ between machines (up to 3 ulp measured,
    every plan equal), and the digests are compared on whatever machine runs the tests;
    predicted_ms is compared to 1e-9 relative for the same reason."""
    h = hashlib.sha256()
    h.update(repr((p.strategy, p.mode, [k.name for k in p.kinds], p.dtype.name,
                   f"{float(p.tlp):.9g}", f"{float(p.tlp_threshold):.9g}", p.tlp_model,
                   list(p.notes), p.grid)).encode())
    if p.layout is not None:
        lay = p.layout
        for a in (lay.gemm, lay.kind, lay.gm, lay.gn):
            h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
        h.update(bytes([lay.m_fastest]))
    else:
        h.update(np.ascontiguousarray(p.tiles).tobytes())
        h.update(np.ascontiguousarray(p.block_ptr).tobytes())
    return h.hexdigest()[:32], p.predicted_ms


def compute():
    return {name: digest(planner.plan(s, use_cache=False, **kw)) for name, s, kw in cases()}


@pytest.fixture(scope="module")
def recorded():
    if not DATA.exists():
        pytest.skip("no recorded digests (tests/test_planner_digests.py --write)")
    return json.loads(DATA.read_text())


@pytest.mark.parametrize("part", range(4))
def test_plans_equal_the_recorded_digests(recorded, part):
    all_cases = cases()
    assert len(all_cases) == len(recorded)
    bad = []
    for name, s, kw in all_cases[part::4]:
        h, pred = digest(planner.plan(s, use_cache=False, **kw))
        want_h, want_pred = recorded[name]
        if h != want_h:
            bad.append(f"{name} {kw}: plan differs")
        elif (pred is None) != (want_pred is None) or (
                pred is not None and pred != pytest.approx(want_pred, rel=1e-9, abs=1e-300)):
            bad.append(f"{name} {kw}: predicted_ms {pred} != {want_pred}")
    assert not bad, "\n".join(bad[:20])


if __name__ == "__main__":
    if "--write" not in sys.argv:
        sys.exit("usage: python tests/test_planner_digests.py --write")
    DATA.write_text(json.dumps(compute(), indent=0, sort_keys=True) + "\n")
    print(f"wrote {DATA}")
