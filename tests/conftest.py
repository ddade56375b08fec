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
