"""The README's main job: python -m portgemm run, on the numpy backend."""
import subprocess
import sys

import pytest

FIELDS = ("device:", "NumPy (host)", "backend numpy", "strategy", "mode", "tiles", "TLP",
          "threshold", "predicted occupancy", "median", "GFLOP/s", "||C - Cref||", "OK")


def run(*args):
    return subprocess.run([sys.executable, "-m", "portgemm", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("extra", [[], ["--dtype", "float64", "--trans-a", "--trans-b"],
                                   ["--strategy", "magma", "--trans-b"]])
def test_run_numpy(extra):
    r = run("run", "--batch", "16", "--max-mn", "64", "--max-k", "32", "--backend", "numpy",
            "--reps", "2", *extra)
    assert r.returncode == 0, r.stdout + r.stderr
    for f in FIELDS:
        assert f in r.stdout, f"{f!r} missing from:\n{r.stdout}"


def test_no_subcommand_prints_help():
    r = run()
    assert r.returncode == 0 and "usage:" in r.stdout and "run" in r.stdout


def test_unknown_strategy_fails():
    r = run("run", "--batch", "4", "--backend", "numpy", "--strategy", "nope")
    assert r.returncode != 0 and "nope" in r.stderr


def test_wrong_result_exits_1(monkeypatch, capsys):
    # A backend that skips the last tile leaves NaN in C: the job must notice.
    from portgemm.__main__ import main
    from portgemm.backends.numpy import NumpyBackend

    real = NumpyBackend.execute

    def skip_last_tile(self, plan, batch, gemms=None):
        import dataclasses
        return real(self, dataclasses.replace(plan, tiles=plan.tiles[:-1]), batch)

    monkeypatch.setattr(NumpyBackend, "execute", skip_last_tile)
    rc = main(["run", "--batch", "8", "--max-mn", "40", "--max-k", "20", "--backend", "numpy",
               "--reps", "1"])
    assert rc == 1 and "FAILED" in capsys.readouterr().out
