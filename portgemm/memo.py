"""A bounded memo for values that are cheap to make again (encoded launches, kept
read-only constant arrays, index tables): emptied whole when full, since the values in
use live on in their callers."""
from __future__ import annotations


def kept(cache: dict, key, most: int, make):
    """cache[key], made by ``make()`` on a miss; the cache is emptied when it holds
    ``most`` entries."""
    value = cache.get(key)
    if value is None:
        if len(cache) >= most:
            cache.clear()
        value = cache[key] = make()
    return value


def kept_for(cache: dict, owner, key, most: int, make):
    """:func:`kept` for a value derived from ``owner`` (key it by ``id(owner)``): a hit
    made for another object that has since taken the same id is made again."""
    hit = cache.get(key)
    if hit is not None and hit[0] is owner:
        return hit[1]
    if len(cache) >= most:
        cache.clear()
    value = make()
    cache[key] = (owner, value)
    return value
