"""Validated calls kept by what their validation reads, so that a call equal to an
earlier one in every such respect skips validation and planning and only launches.

- ``CallCache``: a small LRU of entries by key (the packed API's calls, and the lists
  path's ``layout_key``); entries hold no user array.
- ``layout_key`` / ``LayoutCall``: the lists path (gemm_vbatched) on arrays read in one
  pass (arrays.gather): the key is every array's pointer, shape, strides and
  writability as bytes, the dtype, device and array type, the transposes, scalars,
  backend and strategy. New array objects over the same memory in the same layout
  (views made afresh every call, as frameworks do) therefore hit, and a hit costs the
  one pass of attribute reads, the key's hash and the launch. The identity-based reuse
  path (reuse.py) is looked up first and is cheaper still (no attribute reads).
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict

import numpy as np

from .small_batch import Few


class CallCache:
    """Validated calls by everything their validation and launch depend on (backend,
    flags, each operand's pointer, shape, strides, dtype, device and writability, the
    sizes and offsets as values, alpha and beta), so that a call repeating an earlier
    one skips validation and planning: equal keys would validate alike. Entries hold
    no user array (a freed buffer is never kept alive; a new one at the same address
    with the same geometry validates the same); the last KEPT entries are kept."""

    KEPT = 64

    def __init__(self, kept: int = KEPT):
        self.kept = kept
        self._d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        try:
            return self._d.get(key)   # one atomic dict read; no lock needed
        except TypeError:             # unhashable (e.g. a strategy object): not cached
            return None

    def put(self, key, entry):
        if key is None:
            return
        with self._lock:
            try:
                self._d[key] = entry
            except TypeError:
                return
            while len(self._d) > self.kept:
                self._d.popitem(last=False)

    def clear(self):
        with self._lock:
            self._d.clear()


VECTOR = "per-GEMM"        # scalar_key of alpha/beta given as a sequence or an array


def scalar_key(x):
    """alpha or beta in a cache key: a float by value and the sign of zero (-0.0 and 0.0
    differ), an int by value and type; anything else is VECTOR."""
    t = type(x)
    if t is float:
        return (x, math.copysign(1.0, x))
    if t is int:
        return (x, t)
    return VECTOR


def _scalar_part(x):
    """scalar_key, with a sequence or array by its float64 bytes, or None (no key: the
    full path validates it)."""
    k = scalar_key(x)
    if k is not VECTOR:
        return k
    try:
        a = np.asarray(x)
        if a.dtype.kind not in "iuf":
            return None
        return ("vector", a.shape, a.astype(np.float64).tobytes())
    except Exception:  # noqa: BLE001 - anything numpy cannot read: the full path says
        return None


def layout_key(be, how, whole, C, alpha, beta, trans_a, trans_b):
    """The key of a lists call whose A, B, C were read as one operand ``whole``
    (arrays.gather over A + B + C), or None when it has none. ``how``: the strategy
    name or a plan's id."""
    if type(trans_a) is not bool or type(trans_b) is not bool or not len(C):
        return None
    a, b = _scalar_part(alpha), _scalar_part(beta)
    if a is None or b is None:
        return None
    if type(whole) is Few:   # a small batch read as Python tuples: the tuples are the key
        return (id(be), how, type(C[0]), whole.dtype, whole.device, trans_a, trans_b, a, b,
                len(C), whole.ptr, whole.shape, whole.strides, whole.readonly)
    # Strides derived from the shapes (whole.contiguous) add nothing the shapes do not say
    # (and cost a third of the key's bytes to copy, hash and compare).
    strides = None if whole.contiguous else whole.strides.tobytes()
    return (id(be), how, type(C[0]), whole.dtype, whole.device, trans_a, trans_b, a, b,
            len(C), whole.ptr.tobytes(), whole.shape.tobytes(), strides,
            whole.readonly.tobytes())


class LayoutCall:
    """A validated, planned lists call without its arrays: the Batch's flat fields, the
    plan, the descriptors the first launch uploaded and, from its first hit on a backend
    with a ``relauncher``, its encoded launches (made then, so a call that never repeats
    pays nothing for them)."""

    __slots__ = ("plan", "fields", "gemms", "relaunch", "backend")

    def __init__(self, be, plan, batch, gemms):
        self.backend, self.plan, self.gemms = be, plan, gemms
        self.fields = (batch.shapes, batch.ptr, batch.ld, batch.alpha, batch.beta,
                       batch.trans_a, batch.trans_b, batch.dtype, batch.size, batch.device,
                       batch.flat)
        self.relaunch = None

    def run(self, batch):
        """Launch over ``batch`` (this call's arrays with the entry's fields); returns the
        descriptors used."""
        if self.relaunch is None and self.gemms is not None:
            relauncher = getattr(self.backend, "relauncher", None)
            if relauncher is not None:
                self.relaunch = relauncher(self.plan, batch, self.gemms)
        if self.relaunch is not None:
            self.relaunch()
            return self.gemms
        self.gemms = self.backend.execute(self.plan, batch, self.gemms)
        return self.gemms
