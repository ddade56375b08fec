"""Per-family memos looked up by the kinds tuple's identity.

Why: a kinds tuple holds frozen dataclasses (tiles.TileConfig), and hashing one hashes
every field of every kind, about 1 us a tuple; the planner looks family constants up
a dozen times a plan. :func:`family_token` names each distinct tuple (by value) with a
small integer, found by the tuple object's id where that object was seen before (the
object is kept, so its id is not reused meanwhile); :func:`per_family` memoises a
function of (kinds, *hashable extras) under that token.
"""
from __future__ import annotations

import functools
import threading

_lock = threading.Lock()
_by_id: dict = {}      # id(kinds) -> (kinds, token)
_by_value: dict = {}   # tuple(kinds) -> token
MAX_IDS = 1024


def family_token(kinds) -> int:
    """A small integer equal for equal kind sequences (tuples or lists)."""
    hit = _by_id.get(id(kinds))
    if hit is not None and hit[0] is kinds:
        return hit[1]
    value = tuple(kinds)
    with _lock:
        tok = _by_value.setdefault(value, len(_by_value))
        if len(_by_id) >= MAX_IDS:
            _by_id.clear()
        _by_id[id(kinds)] = (kinds, tok)
    return tok


def per_family(fn):
    """Memoise ``fn(kinds: tuple, *extras)`` (extras hashable) per family token; the
    result is shared, so ``fn`` returns read-only values."""
    memo: dict = {}

    @functools.wraps(fn)
    def wrapper(kinds, *extras):
        key = (family_token(kinds), *extras)
        out = memo.get(key)
        if out is None:
            out = fn(tuple(kinds), *extras)
            if len(memo) >= MAX_IDS:
                memo.clear()
            memo[key] = out
        return out
    wrapper.cache_clear = memo.clear
    return wrapper
