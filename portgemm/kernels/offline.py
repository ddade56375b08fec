"""Compile a kernel variant for any architecture with no GPU: which compiler serves which
arch, and whether it is installed here (docs/design.md §4).

  gfx908, gfx90a        hiprtc through hip-python (what the hip backend runs)
  other gfx targets     clang in HIP mode (ROCm 5.2's hiprtc aborts on gfx940+)
  sm_XY                 NVRTC (what the cuda backend runs)
"""
from __future__ import annotations

import ctypes.util
import dataclasses
import importlib.util
import os
from concurrent.futures import ProcessPoolExecutor

from ..errors import DeviceUnavailable, PortgemmError
from ..occupancy.resources import KernelResources
from .render import render
from .variants import Variant

HIPRTC_ARCHS = ("gfx908", "gfx90a")


def compiler_for(arch: str) -> str:
    if arch.startswith("sm_"):
        return "nvrtc"
    if arch.split(":")[0] in HIPRTC_ARCHS:
        return "hiprtc"
    if arch.startswith("gfx"):
        return "clang"
    raise DeviceUnavailable(f"no offline compiler for {arch!r}")


def available(arch: str) -> bool:
    """Whether this arch's compiler is installed (cheap: nothing is compiled)."""
    which = compiler_for(arch)
    if which == "nvrtc":
        return importlib.util.find_spec("cuda") is not None and \
            importlib.util.find_spec("cuda.bindings") is not None
    if which == "hiprtc":
        return importlib.util.find_spec("hip") is not None and \
            ctypes.util.find_library("amdhip64") is not None
    from . import clang_amd
    try:
        clang_amd.toolchain()
        return True
    except DeviceUnavailable:
        return False


def version(arch: str) -> str:
    which = compiler_for(arch)
    if which == "nvrtc":
        from . import nvrtc
        return nvrtc.version()
    if which == "hiprtc":
        from . import hiprtc_compile
        return hiprtc_compile.version()
    from . import clang_amd
    return clang_amd.version()


def compile_variant(variant: Variant, arch: str, cache: bool = True) -> tuple[bytes, KernelResources]:
    """(binary, resources) of ``variant`` for ``arch`` from that arch's compiler.
    ``cache`` switches hiprtc's compile cache only; NVRTC's follows PORTGEMM_CACHE_DIR
    (the tools point it at a fresh directory) and clang is never cached."""
    r = render(variant)
    which = compiler_for(arch)
    if which == "nvrtc":
        return nvrtc_compile(r, arch)
    if which == "hiprtc":
        from . import hiprtc_compile
        return hiprtc_compile.compile(r.source, r.name, arch, cache=cache)
    from . import clang_amd
    out = clang_amd.compile(r.source, r.name, arch)
    return out.code, out.resources


def nvrtc_compile(r, arch: str) -> tuple[bytes, KernelResources]:
    """NVRTC's (cubin, resources) of the rendered variant ``r``, its shared memory counted
    as a launch uses it: the static bytes the compiler reports and the dynamic bytes every
    launch passes (Rendered.dynamic_smem)."""
    from . import nvrtc
    code, res = nvrtc.compile(r.source, r.name, arch)
    return code, dataclasses.replace(res, shared_bytes=res.shared_bytes + r.dynamic_smem)


def _resources(job):
    variant, arch = job
    try:
        return compile_variant(variant, arch)[1]
    except PortgemmError as e:
        return e


def register_compiled(arch: str, variants, jobs: int | None = None) -> dict:
    """Compile ``variants`` for ``arch`` in parallel and register their figures for
    ``resources.lookup``; returns {variant name: KernelResources or the error}. Does
    nothing (returns {}) when the arch's compiler is not installed."""
    from . import resources
    if not available(arch):
        return {}
    variants = list(variants)
    with ProcessPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as ex:
        results = list(ex.map(_resources, [(v, arch) for v in variants]))
    out = {}
    for v, res in zip(variants, results):
        out[v.name] = res
        if isinstance(res, KernelResources):
            resources.register(arch, v.name, res)
    return out
