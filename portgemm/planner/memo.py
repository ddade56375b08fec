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
import itertools
import threading

_lock = threading.Lock()
_by_id: dict = {}      # id(kinds) -> (kinds, token)
_by_value: dict = {}   # tuple(kinds) -> token
_next = itertools.count()   # tokens are never reused, so a memo entry never goes stale
MAX_IDS = 1024


def family_token(kinds) -> int:
    """A small integer, equal for equal kind sequences (tuples or lists; two tokens may
    name one family once MAX_IDS families have been seen). Only a tuple (immutable) is
    remembered by its id."""
    hit = _by_id.get(id(kinds))
    if hit is not None and hit[0] is kinds:
        return hit[1]
    value = tuple(kinds)
    with _lock:
        tok = _by_value.get(value)
        if tok is None:
            if len(_by_value) >= MAX_IDS:   # many families seen: start over (new tokens)
                _by_value.clear()
            tok = _by_value[value] = next(_next)
        if type(kinds) is tuple:
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
