"""``python -m portgemm tune`` on the device, and every candidate kind it may choose
(marker ``gpu``): each kind alone on irregular and edge sizes, every transpose pair,
NaN-poisoned C (odd leading dimensions take the scalar path, multiples of 16 bytes the
vector one), against a float64 reference; then a
short sweep of each dtype writes a file the planner accepts, and a plan made with it
computes correct results."""
from __future__ import annotations

import json

import numpy as np
import pytest

import portgemm
from gpu_batches import TOL, make_host_batch, max_rel_error, reference, stable_seed
from portgemm.occupancy import tuned
from portgemm.tiles import FAMILIES
from portgemm.tuning.model import one_kind_plan
from portgemm.tuning.space import CANDIDATES

pytestmark = pytest.mark.gpu

TRANS = [(False, False), (False, True), (True, False), (True, True)]
EDGES = [[1, 1, 1], [7, 129, 3], [129, 7, 17], [127, 255, 33], [256, 128, 64], [33, 65, 0]]


def run_checked(cuda, cp, plan, A, B, C, alpha, beta, ta, tb):
    dev = [[cp.asarray(x) for x in xs] for xs in (A, B, C)]
    for c, beta_i in zip(dev[2], beta):
        if beta_i == 0:
            c[...] = np.nan          # beta = 0 must never read C
    ref = reference(A, B, C, alpha, beta, ta, tb)
    plan.run(*dev, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, backend=cuda)
    return max_rel_error([cp.asnumpy(c) for c in dev[2]], ref)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_candidate_kind_computes_correctly(cuda, cp, dtype):
    arch = cuda.arch()
    for kind in FAMILIES[CANDIDATES[dtype]]:
        for ta, tb in TRANS:
            seed = stable_seed("candidate", dtype, kind.name, ta, tb)
            rng = np.random.default_rng(seed)
            shapes = np.concatenate([np.array(EDGES), rng.integers(1, 300, (10, 3))])
            n = shapes.shape[0]
            alpha = rng.choice([1.0, -0.5], n)
            beta = np.where(np.arange(n) % 2 == 0, 0.0, 0.75)
            A, B, C = make_host_batch(rng, shapes, dtype, ta, tb)
            plan = one_kind_plan(shapes, kind, dtype, arch)
            err = run_checked(cuda, cp, plan, A, B, C, alpha, beta, ta, tb)
            assert err <= TOL[dtype], f"{kind.name} trans {ta, tb} seed {seed}: {err:.2e}"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tune_writes_a_file_the_planner_uses(cuda, cp, tmp_path, monkeypatch, dtype):
    from portgemm.tuning.cli import main
    arch = cuda.arch().name
    out = tmp_path / f"{arch}.json"
    assert main(["--dtype", dtype, "--quick", "--budget", "90", "--out", str(out),
                 "--no-progress"]) == 0
    data = json.loads(out.read_text())
    assert data["arch"] == arch and data["kernel_sha256"] == tuned.kernel_fingerprint()
    assert list(data["dtypes"]) == [dtype]
    entry = data["dtypes"][dtype]
    names = {k.name for k in FAMILIES[CANDIDATES[dtype]]}
    assert entry["kinds"] and set(entry["kinds"]) <= names
    assert not entry["excluded"], entry["excluded"]
    assert all(0 < f < 100 for f in entry["factors"].values())
    measured = [x for row in entry["measured_ms"].values() for x in row if x is not None]
    assert measured and all(x > 0 for x in measured)

    monkeypatch.setattr(tuned, "DIRECTORY", tmp_path)
    monkeypatch.delenv(tuned.ENV, raising=False)
    tuned.reload()
    try:
        rng = np.random.default_rng(stable_seed("tuned plan", dtype))
        shapes = rng.integers(1, 300, (200, 3))
        p = portgemm.plan(shapes, dtype=dtype, arch=arch)
        assert f"tuned: {out}" in p.notes
        A, B, C = make_host_batch(rng, shapes, dtype)
        n = shapes.shape[0]
        err = run_checked(cuda, cp, p, A, B, C, np.ones(n), np.zeros(n), False, False)
        assert err <= TOL[dtype]
    finally:
        tuned.reload()
