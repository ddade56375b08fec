"""What the runner measures: a Method makes, for one case's operands, a Prepared call
(set-up outside the timing), or raises Skip with a one-line reason."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


class Skip(Exception):
    """This method cannot run here (library missing, dtype or layout unsupported)."""


@dataclass
class Prepared:
    call: Callable[[], object]            # the timed call
    poison: Callable[[], object] | None = None    # NaN-fill any output buffer besides C
    collect: Callable[[], object] | None = None   # copy the output into C for the check
    plan: object = None                   # portgemm's plan, when there is one


@dataclass(frozen=True)
class Method:
    name: str                  # "bound/wavefront-tlp", "cublas-grouped", ...
    kind: str                  # "portgemm" or "peer"
    make: Callable             # make(dev, ops) -> Prepared (raises Skip)
    strategy: str | None = None
    entry: str | None = None
