"""Tuned tile families, as data: what ``python -m portgemm tune`` measured on a device.

One file per architecture, ``occupancy/tuned/<arch>.json``, written by the sweep
(portgemm/tuning/). Per dtype it names

- ``kinds``: the tuned family, a few kinds of the dtype's candidate family (tiles.py),
  which the default plan uses in place of our hand-picked family;
- ``factors``: per kind, measured / predicted time of its tiles, by which the cost model
  multiplies that kind's tile time (so the model corrects itself where it was wrong);

with the sweep's table (sizes, times, exclusions) kept beside them for the reader.

:func:`tuned_family` is what the planner asks. It answers None - the model's defaults
apply, exactly as without tuning - when there is no file for the arch, when
``$PORTGEMM_TUNED`` is ``0``, when the file was tuned on another kernel source (its
``kernel_sha256`` differs from :func:`kernel_fingerprint`: stale, a warning), or when
the dtype's entry is missing or malformed (a warning). Files and the variable are read
once per process (the planner asks on every plan, so it must be cheap); :func:`reload`
reads them again (the sweep calls it after writing a file).
"""
from __future__ import annotations

import json
import math
import os
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import generation
from ..tiles import CATALOGUE, TileConfig, family_dtypes
from .resources import kernel_fingerprint

DIRECTORY = Path(__file__).with_name("tuned")
ENV = "PORTGEMM_TUNED"          # "0": ignore every tuned file (reproduce the model's plans)
FORMAT = 1


class TunedDataWarning(UserWarning):
    """A tuned data file exists but is not used (stale or malformed)."""


@dataclass(frozen=True)
class TunedFamily:
    """The tuned kinds of one (arch, dtype) and their tile-time factors."""
    arch: str
    dtype: str
    kinds: tuple[TileConfig, ...]     # small -> large (by area), as the planner runs them
    factors: tuple[float, ...]        # one per kind, in the same order
    path: str                         # the file, for the plan's notes

    def factor_of(self, kinds) -> np.ndarray | None:
        """The factors of ``kinds`` (a tuple of TileConfig) when it is this family, else None."""
        return np.array(self.factors) if tuple(kinds) == self.kinds else None


def _env_enabled() -> bool:
    return os.environ.get(ENV) != "0"


_enabled = _env_enabled()   # read at import and at reload(): the planner reads it per plan


def enabled() -> bool:
    return _enabled


def path_for(arch_name: str, directory: Path | None = None) -> Path:
    return Path(DIRECTORY if directory is None else directory) / f"{arch_name}.json"


_lock = threading.Lock()
_files: dict = {}          # path -> parsed data or None (absent / unreadable)
_families: dict = {}       # (arch name, dtype) -> TunedFamily or None (DIRECTORY's file)
_fingerprint: list = []    # [sha] once computed
_version = 0


def version() -> int:
    """What the planner's caches key on: how often the files (and $PORTGEMM_TUNED) were
    read again in this process."""
    return _version


def reload() -> None:
    """Forget the files read so far and read $PORTGEMM_TUNED again (after the sweep wrote
    a file, or a test swapped them or set the variable)."""
    global _version, _enabled
    with _lock:
        _enabled = _env_enabled()
        _files.clear()
        _families.clear()
        _fingerprint.clear()
        _version += 1
    generation.bump()


def _current_fingerprint() -> str:
    if not _fingerprint:
        _fingerprint.append(kernel_fingerprint())
    return _fingerprint[0]


def read(path: Path) -> dict | None:
    """The file's data (None when there is none, or it is not JSON: a warning)."""
    key = str(path)
    with _lock:
        if key in _files:
            return _files[key]
    data = None
    if Path(path).exists():
        try:
            data = json.loads(Path(path).read_text())
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            warnings.warn(f"tuned data {path} not used: unreadable ({e})", TunedDataWarning,
                          stacklevel=3)
            data = None
    with _lock:
        _files[key] = data
    return data


def tuned_family(arch_name: str, dtype: str) -> TunedFamily | None:
    """The tuned family for ``arch_name`` and ``dtype``, or None (module docstring)."""
    if not enabled():
        return None
    key = (arch_name, dtype)
    hit = _families.get(key, _families)   # one dict read: no lock on the planner's path
    if hit is not _families:
        return hit
    path = path_for(arch_name)
    fam = None
    data = read(path)
    if data is not None:
        fam, problem = parse(data, arch_name, dtype, str(path), _current_fingerprint())
        if problem:
            warnings.warn(f"tuned data {path} not used for {dtype}: {problem}",
                          TunedDataWarning, stacklevel=2)
    with _lock:
        _families[key] = fam
    return fam


def parse(data: dict, arch_name: str, dtype: str, path: str, fingerprint: str):
    """(TunedFamily or None, why not or None). No entry for the dtype is no problem
    (a sweep of the other dtype only); anything else that keeps it from use is."""
    if data.get("kernel_sha256") != fingerprint:
        return None, ("stale: tuned on another kernel source (kernel_sha256 "
                      f"{str(data.get('kernel_sha256'))[:12]}, now {fingerprint[:12]}); "
                      "run python -m portgemm tune again")
    if data.get("arch") != arch_name:
        return None, f"made for arch {data.get('arch')!r}, not {arch_name}"
    entry = (data.get("dtypes") or {}).get(dtype)
    if entry is None:
        return None, None
    names = entry.get("kinds")
    factors = entry.get("factors") or {}
    if not isinstance(names, list) or not names:
        return None, "no kinds"
    kinds = []
    for n in names:
        k = CATALOGUE.get(n) if isinstance(n, str) else None
        if k is None:
            return None, f"unknown kind {n!r}"
        if dtype not in family_dtypes(k.family):
            return None, f"kind {n} is not made for {dtype}"
        kinds.append(k)
    if len(set(kinds)) != len(kinds):
        return None, "a kind named twice"
    fs = []
    for k in kinds:
        f = factors.get(k.name, 1.0)
        if not isinstance(f, (int, float)) or isinstance(f, bool) or not math.isfinite(f) \
                or f <= 0:
            return None, f"factor of {k.name} is {f!r}, not a positive number"
        fs.append(float(f))
    order = sorted(range(len(kinds)), key=lambda i: (kinds[i].area, kinds[i].tm, kinds[i].tk,
                                                     kinds[i].threads))
    return TunedFamily(arch=arch_name, dtype=dtype, kinds=tuple(kinds[i] for i in order),
                       factors=tuple(fs[i] for i in order), path=path), None


def write(path: Path, data: dict) -> None:
    """Write ``data`` (what the sweep made) and forget what was read before."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=1) + "\n")
    reload()
