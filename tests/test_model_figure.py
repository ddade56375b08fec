"""bench/model_figure.py: one point per distinct plan, the main kind, the correlations."""
from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "model_figure.py"


def load():
    spec = importlib.util.spec_from_file_location("model_figure", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_record():
    def m(plan, pred, meas, tiles):
        return {"plan": plan, "predicted_ms": pred, "ms": meas, "tiles": tiles}
    return {"device": "dev", "arch": "sm_90", "cases": [
        {"case": "a", "batch": 8, "methods": {
            "new": m("p1", 1.0, 2.0, {"small": 3, "large": 5}),
            "old": m("p1", 1.0, 2.0, {"small": 3, "large": 5}),     # same plan: counted once
            "magma": m("p2", 4.0, 4.0, {"V504": 2}),
            "broken": m("p3", 1.0, None, {"small": 1})}},            # not timed: left out
        {"case": "b", "batch": 64, "methods": {
            "new": m("p1", 8.0, 8.0, {"small": 9}),                   # same digest, other case
            "magma": m("p4", 16.0, 32.0, {"V504": 1})}}]}


def test_points_one_per_distinct_plan_with_its_main_kind():
    mf = load()
    pts = mf.points(run_record())
    assert [(q["case"], q["kind"]) for q in pts] == [("a", "large"), ("a", "V504"),
                                                     ("b", "small"), ("b", "V504")]
    rows = {r[0]: r for r in mf.summary(pts, "batch")}
    assert rows[8][1] == 2 and rows[64][1] == 2
    assert rows[8][3] == pytest.approx(math.sqrt(0.5 * 1.0))     # geomean of pred / meas
    assert mf.log_r(pts) == pytest.approx(33 / 35)   # log2 points (0,1) (2,2) (3,3) (4,5)
    assert math.isnan(mf.log_r(pts[:2]))


def test_cli_prints_tables_and_writes_the_figure_when_matplotlib_exists(tmp_path, capsys):
    mf = load()
    src = tmp_path / "run.json"
    src.write_text(json.dumps(run_record()))
    assert mf.main([str(src), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "4 distinct plans" in out and "by kind" in out and "by batch" in out
    wrote = (tmp_path / "model_vs_measured.png").exists()
    assert wrote == (importlib.util.find_spec("matplotlib") is not None)
