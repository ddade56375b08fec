"""python -m portgemm bench on the CPU: argument handling, shapes files, and a NumPy-backend
dry run of the whole pipeline (peers absent -> skipped with a note)."""
from __future__ import annotations

import csv
import json

import pytest

from portgemm.__main__ import main as portgemm_main
from portgemm.benchmark import cli

TINY = ["--backend", "numpy", "--quick", "--no-progress", "--rep-ms", "1", "--warmup-ms", "0"]


def bench(*argv):
    return portgemm_main(["bench", *argv])


@pytest.mark.parametrize("argv, words", [
    (["--strategies", "nope"], "unknown strategy nope"),
    (["--peers", "cublas-grouped,foo"], "unknown peer foo"),
    (["--entry", "bound,fast"], "unknown entry fast"),
    (["--modes", "hot"], "unknown mode hot"),
    (["--batch", "0"], "must be a positive integer"),
    (["--batches", "8,x"], "expected a positive integer"),
    (["--ranges", "128-128"], "expected MaxMN/MaxK"),
    (["--grid", "--inception"], "not allowed with"),
    (["--dtype", "float16"], "invalid choice"),
    (["--backend", "metal"], "invalid choice"),
])
def test_bad_arguments_exit_2_with_a_message(capsys, argv, words):
    with pytest.raises(SystemExit) as e:
        bench(*argv)
    assert e.value.code == 2
    assert words in capsys.readouterr().err


def test_help_goes_through_the_package_main(capsys):
    with pytest.raises(SystemExit) as e:
        bench("--help")
    assert e.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--grid", "--shapes-file", "--inception", "--paper", "--quick", "--entry"):
        assert flag in out


def test_grouped_entry_only_when_the_library_has_it(monkeypatch, capsys):
    import portgemm
    monkeypatch.delattr(portgemm, "gemm_grouped", raising=False)
    with pytest.raises(SystemExit):
        bench("--entry", "grouped")
    assert "unknown entry grouped" in capsys.readouterr().err
    monkeypatch.setattr(portgemm, "gemm_grouped", lambda *a, **k: None, raising=False)
    assert cli.build_parser().parse_args(["--entry", "grouped"]).entry == ["grouped"]


def test_list_options_parse():
    a = cli.build_parser().parse_args(["--strategies", "all", "--peers", "none",
                                       "--ranges", "128/64,1024/512", "--batches", "8,16"])
    import portgemm
    assert a.strategies == portgemm.strategies()
    assert a.peers == []
    assert a.ranges == [(128, 64), (1024, 512)]
    assert a.batches == [8, 16]


@pytest.mark.parametrize("name, text, words", [
    ("s.csv", "M,N,K\n4,5\n", "s.csv line 2: expected 3 values"),
    ("s.csv", "4,5,x\n", "s.csv line 1: 'x' is not an integer"),
    ("s.csv", "4,5,-1\n", "s.csv line 1: size -1 is negative"),
    ("s.csv", "# only a comment\n", "no M,N,K rows"),
    ("s.json", "[[1, 2, 3], [1, 2]]", "s.json row 1: expected [M, N, K]"),
    ("s.json", "[[1, 2.5, 3]]", "sizes must be integers"),
    ("s.json", "[{\"M\": 1, \"N\": 2}]", "missing key 'K'"),
    ("s.json", "{\"oops\": 1}", "expected a list"),
    ("s.json", "[[1, 2, 3]", "not valid JSON"),
])
def test_bad_shapes_files_exit_2_with_one_line(tmp_path, capsys, name, text, words):
    f = tmp_path / name
    f.write_text(text)
    assert bench("--shapes-file", str(f), *TINY, "--out", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and words in err and "\n" not in err
    assert not (tmp_path / "o").exists()   # nothing written on failure


def test_missing_shapes_file(tmp_path, capsys):
    assert bench("--shapes-file", str(tmp_path / "none.csv"), *TINY) == 2
    assert "cannot read" in capsys.readouterr().err


def _records(path):
    return json.loads(path.read_text())


def test_dry_run_shapes_file_on_numpy(tmp_path, capsys):
    f = tmp_path / "shapes.csv"
    f.write_text("M,N,K\n# a comment\n3,5,7\n0,4,2\n17,1,9\n")
    out = tmp_path / "o"
    assert bench("--shapes-file", str(f), *TINY, "--out", str(out)) == 0
    text = capsys.readouterr().out
    assert "[warm]" in text and "[cold-l2]" in text
    assert "cublas-grouped: skipped" in text and "torch-bmm: skipped" in text
    data = _records(out / "shapes.json")
    assert data["meta"]["backend"] == "numpy" and data["meta"]["date"]
    assert set(data["ceilings"]) == {"flops_per_s", "bytes_per_s", "launch_s"}
    ok = [r for r in data["records"] if r["status"] == "ok"]
    # three entry points x two modes, every one checked before it was timed
    assert {(r["method"], r["mode"]) for r in ok} == {
        (f"{e}/wavefront-tlp", m) for e in ("bound", "gemm_vbatched", "run")
        for m in ("warm", "cold-l2")}
    assert all(r["max_rel_error"] <= 1e-5 and r["ms"] > 0 for r in ok)
    assert len(data["notes"]) == 5
    rows = list(csv.DictReader((out / "shapes.csv").open()))
    assert len(rows) == len(data["records"]) and rows[0]["case"] == "shapes.csv"
    assert "Speed-up of portgemm" in (out / "shapes-summary.md").read_text()


def test_dry_run_grid_and_inception_float64(tmp_path):
    out = tmp_path / "o"
    assert bench("--grid", "--ranges", "32/16,16/48", "--batches", "2,3", "--dtype", "float64",
                 "--strategies", "wavefront-tlp,magma", "--entry", "bound", "--modes", "warm",
                 *TINY, "--out", str(out)) == 0
    recs = _records(out / "grid.json")["records"]
    assert {r["case"] for r in recs} == {"32/16 b2", "32/16 b3", "16/48 b2", "16/48 b3"}
    assert {r["method"] for r in recs} == {"bound/wavefront-tlp", "bound/magma"}
    assert all(r["status"] == "ok" and r["max_rel_error"] <= 1e-12 for r in recs)
    assert bench("--inception", "--peers", "none", "--entry", "bound", "--modes", "warm", *TINY,
                 "--out", str(out)) == 0
    assert len({r["case"] for r in _records(out / "inception.json")["records"]}) == 9


def test_dry_run_paper_on_numpy(tmp_path, capsys):
    out = tmp_path / "p"
    assert bench("--paper", "--ranges", "32/16", "--batches", "2,4", "--ncu", "off", *TINY,
                 "--out", str(out)) == 0
    summary = (out / "paper-summary.md").read_text()
    for fig in ("Figs. 4/5", "Figs. 8/9", "Fig. 7", "Fig. 10", "Fig. 11", "Fig. 6"):
        assert fig in summary
    assert "measured occupancy: skipped" in summary
    parts = {r["part"] for r in _records(out / "paper.json")["records"]}
    assert parts == {"grid", "sweep", "inception"}
