"""Compiled-kernel cache, shared by the vendor compilers: in memory and on disk under
~/.cache/portgemm (or $PORTGEMM_CACHE_DIR). The key covers the source, the options,
the target arch and the compiler version; files are written atomically (temp + rename),
so concurrent processes never read a half-written binary."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from ..occupancy.resources import KernelResources

_memory: dict[str, tuple[bytes, KernelResources]] = {}


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


def get(k: str) -> tuple[bytes, KernelResources] | None:
    hit = _memory.get(k)
    if hit is not None:
        return hit
    d = cache_dir()
    try:
        binary = (d / f"{k}.bin").read_bytes()
        res = KernelResources(**json.loads((d / f"{k}.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None
    _memory[k] = (binary, res)
    return binary, res


def put(k: str, binary: bytes, res: KernelResources) -> None:
    _memory[k] = (binary, res)
    try:
        d = cache_dir()
        _atomic_write(d / f"{k}.bin", binary)  # binary first: a .json implies its .bin
        _atomic_write(d / f"{k}.json", json.dumps(res.as_dict()).encode())
    except OSError:
        pass  # a read-only home must not stop compilation; the memory cache still holds it
