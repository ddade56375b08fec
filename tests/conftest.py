"""Fixtures the test files share: a backend by name, skipping where it cannot run; the
untuned planner; a tuning command's dry run into a copy of the ceilings."""
from __future__ import annotations

import shutil

import pytest

import portgemm
from portgemm.errors import DeviceUnavailable


def backend_or_skip(name):
    try:
        return portgemm.backends.base.get_backend(name)
    except DeviceUnavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def cuda():
    return backend_or_skip("cuda")


@pytest.fixture(scope="module")
def cp(cuda):
    return cuda.cp


@pytest.fixture(autouse=True)
def untuned_planner(monkeypatch):
    """Plan as the model alone does unless a test asks for tuned data (tuned_data.py's
    tuned_dir fixture): a committed occupancy/tuned/<arch>.json changes the default
    plans on that arch, and most tests state what the untuned planner chooses."""
    from portgemm.occupancy import tuned
    monkeypatch.setenv(tuned.ENV, "0")
    if tuned.enabled():   # reload only on a change: the plan cache keys on the version
        tuned.reload()


class DryWrite:
    """A tuning command (tuning/kind_factors.py, tuning/step_floors.py) on the numpy
    backend, writing into a copy of the package's ceilings (``ceilings``) and its table
    beside it (``out``)."""

    def __init__(self, tmp_path):
        from portgemm.occupancy import ceilings
        self.ceilings = tmp_path / "ceilings.json"
        self.out = tmp_path / "table.json"
        shutil.copy(ceilings.PATH, self.ceilings)

    def __call__(self, cmd, argv: list, timer) -> int:
        """The command's exit status for ``argv`` (more than the dry run's own options);
        the package's ceilings are read afresh after it, whatever it wrote."""
        from portgemm.occupancy import ceilings
        args = cmd.parser().parse_args(argv + ["--backend", "numpy", "--out", str(self.out),
                                               "--write", "--ceilings", str(self.ceilings)])
        try:
            return cmd.run(args, timer=timer)
        finally:
            ceilings.reload()


@pytest.fixture
def dry_write(tmp_path):
    return DryWrite(tmp_path)
