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
With ``--serve`` the child stays up for many compiles (``Server``, for the tools that
compile hundreds of variants: starting Python and loading hip-python costs about as much
as a small compile): one JSON request a line on stdin, one JSON reply a line on stdout,
each reply carrying the exit status the one-shot child would have had ("rc").
"""
from __future__ import annotations

import base64
import ctypes
import ctypes.util
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
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


def _answer(req: dict) -> tuple[int, dict]:
    try:
        return _child_compile(req)
    except RuntimeError as e:
        return EXIT_COMPILE, {"error": str(e), "log": ""}


def _serve() -> int:
    """Answer requests until stdin closes (the parent exited or closed the server)."""
    for line in sys.stdin:
        rc, reply = _answer(json.loads(line))
        reply["rc"] = rc
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


def _main() -> int:
    if "--serve" in sys.argv[1:]:
        return _serve()
    rc, reply = _answer(json.loads(sys.stdin.read()))
    sys.stdout.write(json.dumps(reply))
    return rc


# -- the parent -----------------------------------------------------------------------

def _child_command() -> tuple[list[str], dict]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # so the child imports this checkout
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else root
    return [sys.executable, "-m", "portgemm.kernels.hiprtc_compile"], env


def _what(req: dict) -> str:
    return f"hiprtc compile of {req.get('name', '?')} for {req.get('arch', '?')}"


def _timed_out(req: dict) -> CompileError:
    return CompileError(f"{_what(req)} took over {TIMEOUT_S} s")


def _died(req: dict, sig: int, stderr: str) -> CompileError:
    return CompileError(
        f"{_what(req)}: the compiler process died with {signal.Signals(sig).name}. hiprtc "
        f"aborts like this on a target it does not support (ROCm 5.2's hiprtc knows "
        f"gfx908/gfx90a, not gfx940/gfx942/gfx1100); compile those with clang "
        f"(portgemm.kernels.clang_amd) or a newer ROCm.\n{stderr[-4000:]}")


def _checked(req: dict, rc: int, reply: dict, stderr: str) -> dict:
    """The reply of a compile that exited ``rc``, or its error raised."""
    if rc == EXIT_UNAVAILABLE:
        raise DeviceUnavailable(reply["error"])
    if rc != 0:
        log = (reply.get("log") or "") + ("\n" + stderr if stderr.strip() else "")
        raise CompileError(f"{_what(req)} failed: {reply.get('error')}\n{log}")
    return reply


def _run_child(req: dict) -> dict:
    cmd, env = _child_command()
    try:
        p = subprocess.run(cmd, input=json.dumps(req), capture_output=True, text=True,
                           timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired as e:
        raise _timed_out(req) from e
    if p.returncode < 0:
        raise _died(req, -p.returncode, p.stderr)
    try:
        reply = json.loads(p.stdout)
    except ValueError:
        raise CompileError(f"{_what(req)}: the compiler process exited {p.returncode} "
                           f"without a reply\n{p.stderr[-4000:]}") from None
    return _checked(req, p.returncode, reply, p.stderr)


class Server:
    """One long-lived child answering many compiles (``compile(..., server=...)``): the
    same requests, options and replies as the one-shot child, without a Python start-up
    and a hip-python load per compile. A child that dies (hiprtc aborting on a target it
    does not know) fails that compile only; the next request starts a new child. Its
    stderr (hiprtc writes diagnostics there) goes to a file, and what one request
    added is attached to that request's error."""

    def __init__(self):
        self._proc = None
        self._err = None

    def _start(self):
        cmd, env = _child_command()
        self._err = tempfile.TemporaryFile(mode="w+", prefix="portgemm-hiprtc-")
        self._proc = subprocess.Popen(cmd + ["--serve"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._err, text=True,
                                      env=env)

    def _stderr_since(self, pos: int) -> str:
        self._err.flush()
        self._err.seek(pos)
        return self._err.read()

    def request(self, req: dict) -> dict:
        if self._proc is None or self._proc.poll() is not None:
            self.close()
            self._start()
        p, pos = self._proc, self._err.seek(0, os.SEEK_END)
        try:
            p.stdin.write(json.dumps(req) + "\n")
            p.stdin.flush()
            ready, _, _ = select.select([p.stdout], [], [], TIMEOUT_S)
            line = p.stdout.readline() if ready else None
        except BrokenPipeError:
            line = ""
        if line is None:
            self.close()
            raise _timed_out(req)
        if not line:  # the child died on this request
            rc = p.wait()
            stderr = self._stderr_since(pos)
            self.close()
            if rc < 0:
                raise _died(req, -rc, stderr)
            raise CompileError(f"{_what(req)}: the compiler process exited {rc} without "
                               f"a reply\n{stderr[-4000:]}")
        reply = json.loads(line)
        return _checked(req, reply.pop("rc"), reply, self._stderr_since(pos))

    def close(self):
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.stdin.close()  # the child's loop ends at EOF
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            self._proc = None
        if self._err is not None:
            self._err.close()
            self._err = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@lru_cache(maxsize=1)
def version() -> str:
    """e.g. "hiprtc HIP 5.2.21153" (the LLVM version is read from each code object)."""
    return _run_child({"version_only": True})["version"]


def compile(source: str, name: str, arch: str = "gfx90a", options: tuple[str, ...] = OPTIONS,
            cache: bool = True, refresh: bool = False, server: Server | None = None
            ) -> tuple[bytes, KernelResources]:
    """Compile ``source`` for ``arch`` (e.g. "gfx90a"); returns the code object and the
    resources of kernel ``name`` from its metadata, stamped with hiprtc's and LLVM's versions.
    ``cache=False`` neither reads nor writes the compile cache; ``refresh`` skips the
    lookup and overwrites the entry (a cached code object that failed to load).
    ``server``: compile in that long-lived child instead of a child of its own."""
    if not _ARCH.match(arch):
        raise CompileError(f"{arch!r} is not an AMD target name (like gfx90a or gfx90a:xnack-)")
    options = tuple(options) + (WERROR_OPTIONS if werror() else ()) + (f"--offload-arch={arch}",)
    ver = version()
    k = compile_cache.key(source, options, arch, ver)
    if cache and not refresh:
        hit = compile_cache.get(k)
        if hit is not None:
            return hit
    req = {"source": source, "name": name, "arch": arch, "options": list(options)}
    reply = server.request(req) if server is not None else _run_child(req)
    code = base64.b64decode(reply["code"])
    co = amd_codeobject.parse(code)
    res = amd_codeobject.resources(co, name, source=f"{ver}, {co.compiler} ({co.arch})")
    if cache:
        compile_cache.put(k, code, res)
    return code, res


if __name__ == "__main__":
    sys.exit(_main())
