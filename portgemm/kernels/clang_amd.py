"""clang (HIP mode) compile for AMD targets, no GPU needed: the targets hiprtc does not
know (gfx940 with clang-15; gfx942 needs clang-19), and LLVM's own resource report.

``-Rpass-analysis=kernel-resource-usage`` makes LLVM print, per kernel, the SGPRs, arch
VGPRs, AGPRs, scratch, LDS, spills and its "Occupancy [waves/SIMD]" — an independent
cross-check of our occupancy model and of the figures we read from the code object.

The compiler, HIP headers and device libraries are found on this machine (Debian's
clang-15 + libamdhip64-dev + rocm-device-libs, or /opt/rocm); override with
PORTGEMM_AMD_CLANG, PORTGEMM_ROCM_PATH, PORTGEMM_ROCM_DEVICE_LIBS.

Parsing the HIP headers (hip/hip_runtime.h, which compat.h includes first) is about 40 % of
a compile. A tool compiling many variants builds them once per arch into a precompiled
header (``build_pch``) and passes it to each ``compile``: clang then starts from the
parsed headers, and the code object and remarks are byte for byte the same
(tests/test_vendor_matrix_pipeline.py checks it). clang refuses a PCH built with other options.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import CompileError, DeviceUnavailable
from ..occupancy.resources import KernelResources
from . import amd_codeobject
from .nvrtc import werror

OPTIONS = ("-O3", "-std=c++17")
# Added when $PORTGEMM_WERROR asks for warnings as errors (see nvrtc.WERROR_ENV).
WERROR_OPTIONS = ("-Wall", "-Werror")
TIMEOUT_S = 600
_ARCH = re.compile(r"^gfx[0-9a-f]{3,4}(:[a-z0-9_]+[+-])*$")

# clang-15 first: the version Debian's ROCm 5.2 device libraries were built for.
_CLANGS = ("clang++-15", *(f"clang++-{v}" for v in range(16, 21)), "/opt/rocm/llvm/bin/clang++",
           "clang++")
_ROCM_PATHS = ("/usr", "/opt/rocm")  # where include/hip/hip_runtime.h lives
_DEVICE_LIBS = ("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", "/usr/lib/amdgcn/bitcode",
                "/opt/rocm/amdgcn/bitcode", "/opt/rocm/lib/llvm/lib/clang/*/lib/amdgcn/bitcode")


@dataclass(frozen=True)
class Toolchain:
    clang: str
    rocm_path: str
    device_libs: str
    version: str            # e.g. "Debian clang version 15.0.6"


@lru_cache(maxsize=1)
def toolchain() -> Toolchain:
    """The clang, HIP headers and device libraries to use; DeviceUnavailable if absent."""
    clang = os.environ.get("PORTGEMM_AMD_CLANG") or next(
        (p for p in map(shutil.which, _CLANGS) if p), None)
    if clang is None:
        raise DeviceUnavailable("no clang for AMD targets (apt-get install hipcc, or set "
                                "PORTGEMM_AMD_CLANG)")
    rocm = os.environ.get("PORTGEMM_ROCM_PATH") or next(
        (p for p in _ROCM_PATHS if Path(p, "include/hip/hip_runtime.h").exists()), None)
    libs = os.environ.get("PORTGEMM_ROCM_DEVICE_LIBS") or next(
        (hit for pat in _DEVICE_LIBS for hit in sorted(glob.glob(pat))
         if Path(hit, "ockl.bc").exists()), None)
    if rocm is None or libs is None:
        raise DeviceUnavailable("HIP headers or ROCm device libraries not found (apt-get "
                                "install hipcc rocm-device-libs, or set PORTGEMM_ROCM_PATH "
                                "and PORTGEMM_ROCM_DEVICE_LIBS)")
    out = subprocess.run([clang, "--version"], capture_output=True, text=True).stdout
    return Toolchain(clang, rocm, libs, out.splitlines()[0].strip() if out else clang)


def version() -> str:
    return toolchain().version


@dataclass(frozen=True)
class ClangResult:
    code: bytes                   # the linked code object (ELF)
    resources: KernelResources    # read from the code object's metadata
    remark: dict                  # LLVM's kernel-resource-usage remark for the kernel
    log: str


# "file:l:c: remark:     VGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]"
_REMARK = re.compile(r"remark:\s+(?P<key>[^:\[]+?(?: \[[^\]]+\])?):\s*(?P<val>\S+)\s+"
                     r"\[-Rpass-analysis=kernel-resource-usage\]")


def parse_remarks(log: str) -> dict[str, dict]:
    """Kernel name -> {remark key: value} from the kernel-resource-usage remarks. Keys as
    LLVM prints them: "SGPRs", "VGPRs", "AGPRs", "ScratchSize [bytes/lane]",
    "Occupancy [waves/SIMD]", "SGPRs Spill", "VGPRs Spill", "LDS Size [bytes/block]"."""
    out: dict[str, dict] = {}
    current = None
    for m in _REMARK.finditer(log):
        key, val = m.group("key").strip(), m.group("val")
        if key == "Function Name":
            current = out.setdefault(val, {})
        elif current is not None:
            current[key] = int(val) if val.lstrip("-").isdigit() else val
    return out


def _command(arch: str, options: tuple[str, ...]) -> list[str]:
    """clang in HIP mode for ``arch``'s device code, without the action and files."""
    tc = toolchain()
    return [tc.clang, "-x", "hip", f"--offload-arch={arch}", "--cuda-device-only",
            "--no-gpu-bundle-output", f"--rocm-path={tc.rocm_path}",
            f"--rocm-device-lib-path={tc.device_libs}", *options,
            *(WERROR_OPTIONS if werror() else ())]


# What compat.h includes first on AMD, so a PCH of it serves every variant.
PCH_HEADER = "#include <hip/hip_runtime.h>\n"


def build_pch(arch: str, path: str | Path, options: tuple[str, ...] = OPTIONS) -> Path:
    """Precompile the HIP headers for ``arch`` with ``compile``'s options into ``path``."""
    if not _ARCH.match(arch):
        raise CompileError(f"{arch!r} is not an AMD target name (like gfx90a or gfx940)")
    path = Path(path)
    src = path.with_suffix(".hip")
    src.write_text(PCH_HEADER)
    # -S: the driver's -c would try to link the PCH as a code object
    cmd = _command(arch, options) + ["-S", "-Xclang", "-emit-pch", "-o", str(path), str(src)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        raise CompileError(f"clang's precompiled header for {arch} took over {TIMEOUT_S} s") from e
    if p.returncode != 0 or not path.exists():
        raise CompileError(f"clang's precompiled header for {arch} failed (exit "
                           f"{p.returncode}):\n{p.stderr[-4000:]}")
    return path


def compile(source: str, name: str, arch: str = "gfx940",
            options: tuple[str, ...] = OPTIONS, pch: str | Path | None = None) -> ClangResult:
    """Compile ``source`` (CUDA dialect + compat.h) for ``arch`` in clang's HIP mode;
    ``pch``: build_pch's file for the same arch and options."""
    if not _ARCH.match(arch):
        raise CompileError(f"{arch!r} is not an AMD target name (like gfx90a or gfx940)")
    tc = toolchain()
    with tempfile.TemporaryDirectory(prefix="portgemm-clang-") as d:
        src, out = Path(d, f"{name}.hip"), Path(d, f"{name}.co")
        src.write_text(source)
        cmd = _command(arch, options) + [
            "-c", "-Rpass-analysis=kernel-resource-usage",
            *(("-Xclang", "-include-pch", "-Xclang", str(pch)) if pch else ()),
            "-o", str(out), str(src)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            raise CompileError(f"clang compile of {name} for {arch} took over {TIMEOUT_S} s") from e
        log = p.stderr
        if p.returncode != 0 or not out.exists():
            raise CompileError(f"clang ({tc.version}) compile of {name} for {arch} failed "
                               f"(exit {p.returncode}):\n{log[-8000:]}")
        code = out.read_bytes()
    co = amd_codeobject.parse(code)
    res = amd_codeobject.resources(co, name, source=f"{tc.version} ({co.arch})")
    remark = parse_remarks(log).get(name)
    if remark is None:
        raise CompileError(f"no kernel-resource-usage remark for {name} in clang's output:\n{log[-4000:]}")
    return ClangResult(code=code, resources=res, remark=remark, log=log)
