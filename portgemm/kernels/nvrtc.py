"""NVRTC compile (cuda-bindings), with no GPU needed: source -> cubin + resource usage.
Cached by compile_cache.

The resource figures are read from the cubin (kernels/cubin.py), never only from the
ptxas report (--ptxas-options=-v): with a warm driver compute cache NVRTC returns the
cubin with an empty log. The report, when present, adds the exact spill stores."""
from __future__ import annotations

import dataclasses
import os
import re

from ..errors import CompileError, DeviceUnavailable
from ..occupancy.resources import KernelResources
from . import compile_cache, cubin as cubin_reader
from .render import WGMMA_DEFINE

OPTIONS = ("-std=c++17", "--ptxas-options=-v")
# Warnings as errors, asked for through the environment so the tools reach every compile
# (tools/vendor_matrix.py and tools/record_resources.py set it; runtime compiles do not,
# so a newer compiler's new warning never stops a user's run). NVRTC has no -Werror: the
# front end's warnings are read from the log; ptxas has its own flag.
WERROR_ENV = "PORTGEMM_WERROR"
WERROR_OPTIONS = ("--ptxas-options=--warning-as-error",)
_WARNING = re.compile(r"^.*\bwarning\b.*$", re.MULTILINE | re.IGNORECASE)


def werror() -> bool:
    """Whether compiles treat warnings as errors ($PORTGEMM_WERROR set and not "0")."""
    return os.environ.get(WERROR_ENV, "0") not in ("", "0")


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise DeviceUnavailable("NVRTC needs the cuda-bindings and nvidia-cuda-nvrtc packages "
                                "(pip install 'portgemm[nvrtc]')") from e
    return nvrtc


def _check(nvrtc, result, prog=None, what=""):
    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = _log(nvrtc, prog) if prog is not None else ""
        raise CompileError(f"NVRTC {what} failed: {err.name}\n{log}")
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


def _log(nvrtc, prog) -> str:
    size = _check(nvrtc, nvrtc.nvrtcGetProgramLogSize(prog))
    buf = b" " * size
    _check(nvrtc, nvrtc.nvrtcGetProgramLog(prog, buf))
    return buf.rstrip(b"\0 ").decode(errors="replace")


def version() -> str:
    nvrtc = _nvrtc()
    major, minor = _check(nvrtc, nvrtc.nvrtcVersion())
    return f"nvrtc {major}.{minor}"


_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_SPILL = re.compile(r"(\d+) bytes spill stores")


def parse_ptxas_log(log: str, name: str) -> dict | None:
    """Registers, shared bytes and spill stores of entry point ``name`` from a -v log;
    None when the log holds no report for it (an empty log is normal, see above)."""
    # The report for a function starts at the "Compiling entry function 'name'" line.
    start = log.find(f"'{name}'")
    if start < 0:
        return None
    text = log[start:]
    regs, smem, spill = _USED.search(text), _SMEM.search(text), _SPILL.search(text)
    if regs is None:
        return None
    return {"registers": int(regs.group(1)), "shared_bytes": int(smem.group(1)) if smem else 0,
            "spill_bytes": int(spill.group(1)) if spill else 0}


def target_arch(source: str, arch: str) -> str:
    """The NVRTC target for ``source`` on ``arch``: "sm_90a" for a variant with wgmma
    kinds (render.WGMMA_DEFINE; those instructions exist on sm_90a only, and its cubins
    run on sm_90 devices alone), else ``arch`` itself."""
    if arch == "sm_90" and f"#define {WGMMA_DEFINE} 1\n" in source:
        return "sm_90a"
    return arch


def compile(source: str, name: str, arch: str = "sm_90", refresh: bool = False
            ) -> tuple[bytes, KernelResources]:
    """Compile to a cubin for ``arch`` (e.g. "sm_90"; target_arch may make it the
    arch-specific "sm_90a"); returns it with its resources. ``refresh`` skips the cache
    lookup (the fresh result overwrites the entry)."""
    arch = target_arch(source, arch)
    nvrtc = _nvrtc()
    ver = version()
    strict = werror()
    options = OPTIONS + (WERROR_OPTIONS if strict else ()) + (f"-arch={arch}",)
    k = compile_cache.key(source, options, arch, ver)
    hit = None if refresh else compile_cache.get(k)
    if hit is not None:
        return hit
    prog = _check(nvrtc, nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], []),
                  what="create")
    try:
        _check(nvrtc, nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options]),
               prog, what=f"compile of {name} for {arch}")
        log = _log(nvrtc, prog)
        warned = _WARNING.findall(log) if strict else []
        if warned:
            raise CompileError(f"NVRTC compile of {name} for {arch} warned ({WERROR_ENV} "
                               f"makes warnings errors): {warned[0].strip()}\n{log}")
        size = _check(nvrtc, nvrtc.nvrtcGetCUBINSize(prog))
        cubin = b" " * size
        _check(nvrtc, nvrtc.nvrtcGetCUBIN(prog, cubin))
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    res = resources(cubin, log, name, f"{ver} ({arch})")
    compile_cache.put(k, cubin, res)
    return cubin, res


def resources(cubin: bytes, log: str, name: str, source: str) -> KernelResources:
    """Figures of ``name`` from the cubin; the exact spill stores from the log if it has them."""
    res = cubin_reader.resources(cubin, name, source)
    report = parse_ptxas_log(log, name)
    if report is not None:
        res = dataclasses.replace(res, spill_bytes=report["spill_bytes"])
    return res
