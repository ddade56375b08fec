"""Buffers kept between plans, per thread, for the device rule's (kinds x batch) tables.

Why: at 8,192 GEMMs one such table is some 400 KB, and a plan makes dozens. Made fresh
each plan, they come from pages the C allocator gave back to the system when the last
plan freed them (glibc trims the heap's top) and fault in again, page by page, which
costs more than the arithmetic (bench/NOTES.md, "Session 5: planning time"). Written
with ``out=`` into a buffer kept from the last plan, they touch no fresh page.

A buffer is named by its role (and, for the batch tables, the family's slot: the two
families' tables live side by side). It stays valid until the next request for the
same name on this thread, so nothing taken from here may outlive the plan that took
it: the plan keeps copies (tile_layout gathers). Batches above MAX_POOLED GEMMs get
fresh arrays (the pages a buffer holds for good are bounded), and so does a plan made
while another is being made on the same thread (a resources provider that plans):
planners run inside :func:`planning`, which counts them.
"""
from __future__ import annotations

import threading

import numpy as np

MAX_POOLED = 1 << 15   # GEMMs: at most a few MB held per buffer name and thread

MAX_VIEWS = 512       # views kept for reuse, per thread (each a few hundred bytes)

_local = threading.local()


class planning:
    """``with planning():`` around one plan's use of the buffers; a plan begun inside
    another on this thread gets fresh arrays, so the outer plan's tables stay whole."""

    def __enter__(self):
        _local.depth = getattr(_local, "depth", 0) + 1

    def __exit__(self, *exc):
        _local.depth -= 1
        return False


def buffer(name, shape: tuple, dtype=np.float64, batch: int | None = None) -> np.ndarray:
    """An uninitialised array of ``shape`` and ``dtype`` for role ``name``, reused from
    this thread's last request for that name where it fits (``batch``: the plan's
    GEMMs, for the MAX_POOLED bound; default shape[-1])."""
    if (shape[-1] if batch is None else batch) > MAX_POOLED or getattr(_local, "depth", 0) > 1:
        return np.empty(shape, dtype)
    views = getattr(_local, "views", None)
    if views is None:
        views = _local.views = {}
        _local.pool = {}
    key = (name, shape, dtype)
    v = views.get(key)   # the same request as a plan before: the same view
    if v is None:
        if len(views) >= MAX_VIEWS:   # batch sizes change from plan to plan
            views.clear()
        v = views[key] = _view(name, shape, dtype, views)
    return v


def _view(name, shape: tuple, dtype, views: dict) -> np.ndarray:
    pool = _local.pool
    n = 1
    for d in shape:
        n *= d
    held = pool.get(name)
    if held is None or held.dtype != dtype or held.shape[0] < n:
        held = pool[name] = np.empty(n, dtype)
        for key in [k for k in views if k[0] == name]:   # views of the buffer replaced
            del views[key]
    return held[:n].reshape(shape)


def buffers(name, shape: tuple, dtype, count: int, batch: int | None = None) -> tuple:
    """``count`` arrays of ``shape`` and ``dtype`` for role ``name`` (one buffer, one
    request: the tables of one step ask once)."""
    views = getattr(_local, "views", None)
    key = (name, shape, dtype, count)
    got = None if views is None else views.get(key)
    if (got is not None and got[0] is _local.pool.get(name)   # the same as a plan before
            and getattr(_local, "depth", 0) <= 1):
        return got[1]
    whole = buffer(name, (count, *shape), dtype, shape[-1] if batch is None else batch)
    split = tuple(whole)
    if whole.base is not None and whole.base is _local.pool.get(name):   # kept: remember
        _local.views[key] = (whole.base, split)
    return split
