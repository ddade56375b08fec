"""hiprtc compile through hip-python, isolated in a subprocess: source, name, arch ->
AMD code object + KernelResources (read from the code object's metadata), no GPU needed.

Why a subprocess: hiprtc (ROCm 5.2's comgr) aborts the whole process on a target it
does not know (gfx940, gfx942, gfx1100 there), and it writes diagnostics straight to the
process's stderr. A child turns both into a CompileError with the log.

This module is also the one place that imports hip-python (``load_hip``), so the
backend and the compiler agree on which shared library they load: Debian ships hiprtc
inside ``libamdhip64.so.5`` and no ``libhiprtc.so``, which hip-python dlopens by that name.

Child protocol (``python -m portgemm.kernels.hiprtc_compile``): a JSON request on stdin,
a JSON reply on stdout; exit 0 compiled, 3 compile error, 4 hiprtc unavailable.
"""
from __future__ import annotations

import base64
import ctypes
import ctypes.util
import json
import os
import re
import signal
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from ..errors import CompileError, DeviceUnavailable
from ..occupancy.resources import KernelResources
from . import amd_codeobject, compile_cache
from .nvrtc import werror

OPTIONS = ("-O3", "-std=c++17")
# Added when $PORTGEMM_WERROR asks for warnings as errors (see nvrtc.WERROR_ENV).
WERROR_OPTIONS = ("-Wall", "-Werror")
TIMEOUT_S = 600
_ARCH = re.compile(r"^gfx[0-9a-f]{3,4}(:[a-z0-9_]+[+-])*$")
EXIT_COMPILE, EXIT_UNAVAILABLE = 3, 4


# -- loading hip-python (child process and the hip backend) ---------------------------

def _loadable(name: str) -> bool:
    try:
        ctypes.CDLL(name)
        return True
    except OSError:
        return False


def _hiprtc_library(amdhip: str) -> str:
    """libhiprtc.so if something provides it, else the HIP runtime (hiprtc built in)."""
    env = os.environ.get("PORTGEMM_HIPRTC_LIB")
    if env:
        return env
    own = Path(os.environ.get("PORTGEMM_HIPRTC_DIR", Path.home() / ".cache/portgemm/hiprtc"))
    for cand in ("libhiprtc.so", str(own / "libhiprtc.so")):
        if _loadable(cand):
            return cand
    return amdhip


def load_hip():
    """(hip, hiprtc) modules of hip-python, pointed at the libraries present here.
    Raises DeviceUnavailable when hip-python or the HIP runtime is missing."""
    try:
        from hip import chip, chiprtc
    except ImportError as e:
        raise DeviceUnavailable("hip-python is not installed (pip install 'portgemm[rocm]', "
                                "or .ci/install_rocm.sh)") from e
    amdhip = os.environ.get("PORTGEMM_AMDHIP_LIB") or ctypes.util.find_library("amdhip64")
    if not amdhip or not _loadable(amdhip):
        raise DeviceUnavailable("the HIP runtime libamdhip64 is not installed "
                                "(ROCm, or Debian's libamdhip64-5)")
    # hip-python dlopens these names on first use; both must be set before any call.
    chip.DLL = amdhip.encode()
    chiprtc.DLL = _hiprtc_library(amdhip).encode()
    from hip import hip, hiprtc
    return hip, hiprtc


# -- the child ------------------------------------------------------------------------

def _runtime_version(hip) -> str:
    err, v = hip.hipRuntimeGetVersion()
    if int(err) != 0:
        return "HIP unknown"
    return f"HIP {v // 10_000_000}.{v // 100_000 % 100}.{v % 100_000}"


def _child_compile(req: dict) -> tuple[int, dict]:
    try:
        hip, hiprtc = load_hip()
    except DeviceUnavailable as e:
        return EXIT_UNAVAILABLE, {"error": str(e)}
    reply = {"version": "hiprtc " + _runtime_version(hip)}
    if req.get("version_only"):
        return 0, reply
    ok = hiprtc.hiprtcResult.HIPRTC_SUCCESS

    def check(result, what):
        if result[0] != ok:
            raise RuntimeError(f"{what}: {result[0].name}")
        return result[1:]

    opts = [o.encode() for o in req["options"]]
    prog, = check(hiprtc.hiprtcCreateProgram(req["source"].encode(), (req["name"] + ".cu").encode(),
                                              0, [], []), "hiprtcCreateProgram")
    try:
        status = hiprtc.hiprtcCompileProgram(prog, len(opts), opts)[0]
        size, = check(hiprtc.hiprtcGetProgramLogSize(prog), "hiprtcGetProgramLogSize")
        log = bytearray(size)
        if size:
            check(hiprtc.hiprtcGetProgramLog(prog, log), "hiprtcGetProgramLog")
        reply["log"] = log.rstrip(b"\0").decode(errors="replace")
        if status != ok:
            reply["error"] = status.name
            return EXIT_COMPILE, reply
        size, = check(hiprtc.hiprtcGetCodeSize(prog), "hiprtcGetCodeSize")
        code = bytearray(size)
        check(hiprtc.hiprtcGetCode(prog, code), "hiprtcGetCode")
        reply["code"] = base64.b64encode(bytes(code)).decode()
        return 0, reply
    finally:
        hiprtc.hiprtcDestroyProgram(prog.createRef())


def _main() -> int:
    req = json.loads(sys.stdin.read())
    try:
        rc, reply = _child_compile(req)
    except RuntimeError as e:
        rc, reply = EXIT_COMPILE, {"error": str(e), "log": ""}
    sys.stdout.write(json.dumps(reply))
    return rc


# -- the parent -----------------------------------------------------------------------

def _run_child(req: dict) -> dict:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # so the child imports this checkout
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else root
    try:
        p = subprocess.run([sys.executable, "-m", "portgemm.kernels.hiprtc_compile"],
                           input=json.dumps(req), capture_output=True, text=True,
                           timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired as e:
        raise CompileError(f"hiprtc compile of {req.get('name')} for {req.get('arch')} "
                           f"took over {TIMEOUT_S} s") from e
    what = f"hiprtc compile of {req.get('name', '?')} for {req.get('arch', '?')}"
    if p.returncode < 0:
        sig = signal.Signals(-p.returncode).name
        raise CompileError(
            f"{what}: the compiler process died with {sig}. hiprtc aborts like this on a "
            f"target it does not support (ROCm 5.2's hiprtc knows gfx908/gfx90a, not "
            f"gfx940/gfx942/gfx1100); compile those with clang (portgemm.kernels.clang_amd) "
            f"or a newer ROCm.\n{p.stderr[-4000:]}")
    try:
        reply = json.loads(p.stdout)
    except ValueError:
        raise CompileError(f"{what}: the compiler process exited {p.returncode} without a "
                           f"reply\n{p.stderr[-4000:]}") from None
    if p.returncode == EXIT_UNAVAILABLE:
        raise DeviceUnavailable(reply["error"])
    if p.returncode != 0:
        log = (reply.get("log") or "") + ("\n" + p.stderr if p.stderr.strip() else "")
        raise CompileError(f"{what} failed: {reply.get('error')}\n{log}")
    return reply


@lru_cache(maxsize=1)
def version() -> str:
    """e.g. "hiprtc HIP 5.2.21153" (the LLVM version is read from each code object)."""
    return _run_child({"version_only": True})["version"]


def compile(source: str, name: str, arch: str = "gfx90a", options: tuple[str, ...] = OPTIONS,
            cache: bool = True, refresh: bool = False) -> tuple[bytes, KernelResources]:
    """Compile ``source`` for ``arch`` (e.g. "gfx90a"); returns the code object and the
    resources of kernel ``name`` from its metadata, stamped with hiprtc's and LLVM's versions.
    ``cache=False`` neither reads nor writes the compile cache; ``refresh`` skips the
    lookup and overwrites the entry (a cached code object that failed to load)."""
    if not _ARCH.match(arch):
        raise CompileError(f"{arch!r} is not an AMD target name (like gfx90a or gfx90a:xnack-)")
    options = tuple(options) + (WERROR_OPTIONS if werror() else ()) + (f"--offload-arch={arch}",)
    ver = version()
    k = compile_cache.key(source, options, arch, ver)
    if cache and not refresh:
        hit = compile_cache.get(k)
        if hit is not None:
            return hit
    reply = _run_child({"source": source, "name": name, "arch": arch, "options": list(options)})
    code = base64.b64decode(reply["code"])
    co = amd_codeobject.parse(code)
    res = amd_codeobject.resources(co, name, source=f"{ver}, {co.compiler} ({co.arch})")
    if cache:
        compile_cache.put(k, code, res)
    return code, res


if __name__ == "__main__":
    sys.exit(_main())
