"""Compiled-kernel cache, shared by the vendor compilers: in memory and on disk under
~/.cache/portgemm (or $PORTGEMM_CACHE_DIR).

The key covers the source, the options, the target arch and the compiler version. Each
entry is ``<key>.bin`` (the binary) and ``<key>.json`` (its SHA-256 and its resource
figures). Files are written atomically (temp + rename), binary first. A cache can still
be damaged (a full disk, a crash between the two renames, two processes racing on one
key, a user's editor): every read checks the JSON and the binary's digest, and anything
that does not check out is a miss, so the caller recompiles and overwrites it. A binary
that checks out but does not load is handled by :func:`load`, which recompiles once.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path

from ..occupancy.resources import KernelResources

_memory: dict[str, tuple[bytes, KernelResources]] = {}
_lock = threading.Lock()


def cache_dir() -> Path:
    return Path(os.environ.get("PORTGEMM_CACHE_DIR", Path.home() / ".cache" / "portgemm"))


def key(source: str, options: tuple[str, ...], arch: str, compiler: str) -> str:
    h = hashlib.sha256()
    for part in (source, "\0".join(options), arch, compiler):
        h.update(part.encode())
        h.update(b"\1")
    return h.hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(k: str) -> tuple[bytes, KernelResources] | None:
    """The on-disk entry, or None when it is missing or does not check out."""
    d = cache_dir()
    try:
        meta = json.loads((d / f"{k}.json").read_text())
        binary = (d / f"{k}.bin").read_bytes()
        if meta["sha256"] != hashlib.sha256(binary).hexdigest():
            return None
        return binary, KernelResources(**meta["resources"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def get(k: str) -> tuple[bytes, KernelResources] | None:
    with _lock:
        hit = _memory.get(k)
    if hit is not None:
        return hit
    hit = _read(k)
    if hit is not None:
        with _lock:
            _memory[k] = hit
    return hit


def put(k: str, binary: bytes, res: KernelResources) -> None:
    with _lock:
        _memory[k] = (binary, res)
    meta = {"sha256": hashlib.sha256(binary).hexdigest(), "resources": res.as_dict()}
    try:
        d = cache_dir()
        _atomic_write(d / f"{k}.bin", binary)  # binary first: a .json names its .bin's digest
        _atomic_write(d / f"{k}.json", json.dumps(meta).encode())
    except OSError:
        pass  # a read-only home must not stop compilation; the memory cache still holds it


def clear_memory() -> None:
    """Forget the in-memory entries (the next get reads the disk again)."""
    with _lock:
        _memory.clear()


def load(compile, load_binary):
    """``load_binary(binary)`` of what ``compile(refresh)`` returns; when that fails, once
    more with ``compile(refresh=True)``, which compiles afresh and overwrites the cache
    entry (a damaged binary whose digest still matches, or one another driver or runtime
    wrote). A failure on the fresh binary propagates. Returns (loaded, binary, resources)."""
    binary, res = compile(False)
    try:
        return load_binary(binary), binary, res
    except Exception:  # noqa: BLE001 - any failure of a cached binary means: rebuild it
        binary, res = compile(True)
        return load_binary(binary), binary, res
