"""Tuned data files for the tuning tests: a private directory in place of the package's,
and a hand-written file."""
from __future__ import annotations

import json

import pytest

from portgemm.occupancy import tuned


@pytest.fixture
def tuned_dir(tmp_path, monkeypatch):
    """An empty tuned-data directory in place of the package's, reloaded around the test."""
    monkeypatch.setattr(tuned, "DIRECTORY", tmp_path)
    monkeypatch.delenv(tuned.ENV, raising=False)
    tuned.reload()
    yield tmp_path
    tuned.reload()


def write_file(dirpath, dtypes: dict, sha=None, arch="sm_90"):
    """<dirpath>/<arch>.json with ``dtypes`` (dtype -> entry), made from the current kernel
    source unless ``sha`` says otherwise; the loader forgets what it read before."""
    data = {"arch": arch, "kernel_sha256": sha or tuned.kernel_fingerprint(), "dtypes": dtypes}
    (dirpath / f"{arch}.json").write_text(json.dumps(data))
    tuned.reload()
