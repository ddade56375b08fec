"""Fixtures the GPU test files share: a backend by name, skipping where it cannot run."""
from __future__ import annotations

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
