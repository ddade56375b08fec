"""One counter for what cached plans depend on beyond their arguments.

A plan depends on inputs that can change between two calls with equal arguments: the
device ceilings (occupancy/ceilings.py: reloaded, or replaced in memory), the tuned
data (occupancy/tuned.py: reloaded) and the kernels' resources figures (a compile that
registers figures the occupancy model reads differently, kernels/resources.py). Each
of those calls :func:`bump` when it changes, so the planner's cache-hit path compares
one integer (``value``) instead of asking every source for its version. The plan
cache's full key still holds each source's own version (per arch), so a bump that
concerns none of a cached plan's inputs costs that plan one slower lookup, never a
replan.
"""
from __future__ import annotations

import itertools

_next = itertools.count(1)   # next() is atomic under the GIL: no value is ever reused

value = 0   # read as ``generation.value``; changes on every bump


def bump() -> None:
    """Say that something a cached plan may depend on has changed."""
    global value
    value = next(_next)
