"""A Plan is immutable; the backends' launch state for it lives in backends/launch.py and
goes with the plan."""
import dataclasses
import gc

import numpy as np
import pytest

import portgemm
from portgemm.backends import launch


def test_a_plan_cannot_be_changed():
    p = portgemm.plan([(64, 48, 32), (17, 5, 100)], use_cache=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.mode = "per-kind"
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.tlp = 0.0
    assert not p.shapes.flags.writeable and not p.tiles.flags.writeable


def test_launch_state_is_kept_per_plan_and_dropped_with_it():
    p = portgemm.plan([(64, 48, 32)] * 3, use_cache=False)
    uploads = []

    def upload(host):
        uploads.append(host.nbytes)
        return np.array(host, copy=True)

    st = launch.plan_state(p, ("fake", 0), False, False, upload)
    assert launch.plan_state(p, ("fake", 0), False, False, upload) is st   # made once
    assert launch.plan_state(p, ("fake", 0), True, False, None) is None    # only looked up
    assert list(launch.plan_states(p)) == [(("fake", 0), False, False)]
    n = len(launch._STATES)
    del p, st
    gc.collect()
    assert len(launch._STATES) == n - 1
