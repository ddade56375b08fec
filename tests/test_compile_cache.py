"""The compile cache survives damage and missing compiler reports.

CPU: every damaged entry (truncated or flipped binary, bad or orphaned JSON, an entry of
the old format) reads as a miss; a binary that fails to load is rebuilt once.
NVRTC (marker ``toolchain``, skipped without it): resource figures come from the cubin
and equal ptxas's own report; an empty NVRTC log (what a warm driver compute cache
gives) still yields them; a damaged cache is recompiled and rewritten; two processes
compiling into one fresh cache directory at once both succeed."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from portgemm.errors import CompileError
from portgemm.kernels import compile_cache, offline
from portgemm.kernels.render import render
from portgemm.kernels.variants import catalogue_variants
from portgemm.occupancy.resources import KernelResources

ROOT = Path(__file__).resolve().parents[1]
RES = KernelResources(registers=40, shared_bytes=1024, spill_bytes=0, source="test")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PORTGEMM_CACHE_DIR", str(tmp_path))
    compile_cache.clear_memory()
    yield tmp_path
    compile_cache.clear_memory()


def _fresh_get(k):
    compile_cache.clear_memory()
    return compile_cache.get(k)


def _truncate(p: Path):
    p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])


def _flip(p: Path):
    b = bytearray(p.read_bytes())
    b[len(b) // 2] ^= 0xFF
    p.write_bytes(bytes(b))


DAMAGE = {
    "truncated bin": lambda d, k: _truncate(d / f"{k}.bin"),
    "flipped bin": lambda d, k: _flip(d / f"{k}.bin"),
    "bad json": lambda d, k: (d / f"{k}.json").write_text("{not json"),
    "json without bin": lambda d, k: (d / f"{k}.bin").unlink(),
    "json of another type": lambda d, k: (d / f"{k}.json").write_text("[1, 2]"),
    "old format json": lambda d, k: (d / f"{k}.json").write_text(json.dumps(RES.as_dict())),
    "bad resources": lambda d, k: (d / f"{k}.json").write_text(
        json.dumps({"sha256": json.loads((d / f"{k}.json").read_text())["sha256"],
                    "resources": {"nope": 1}})),
}


def test_roundtrip(cache):
    k = compile_cache.key("src", ("-O3",), "sm_90", "nvrtc 13.0")
    compile_cache.put(k, b"\x7fELF binary", RES)
    assert _fresh_get(k) == (b"\x7fELF binary", RES)
    meta = json.loads((cache / f"{k}.json").read_text())
    assert set(meta) == {"sha256", "resources"}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_entry_is_a_miss(cache, damage):
    k = compile_cache.key("src", (), "sm_90", "nvrtc 13.0")
    compile_cache.put(k, b"\x7fELF binary bytes", RES)
    DAMAGE[damage](cache, k)
    assert _fresh_get(k) is None
    compile_cache.put(k, b"\x7fELF binary bytes", RES)  # overwriting repairs it
    assert _fresh_get(k) == (b"\x7fELF binary bytes", RES)


def test_load_rebuilds_a_binary_that_does_not_load():
    calls = []

    def compile(refresh):
        calls.append(refresh)
        return (b"fresh" if refresh else b"stale"), RES

    def load(binary):
        if binary == b"stale":
            raise RuntimeError("CUDA_ERROR_INVALID_IMAGE")
        return ("module", binary)

    assert compile_cache.load(compile, load) == (("module", b"fresh"), b"fresh", RES)
    assert calls == [False, True]


def test_load_failure_of_a_fresh_binary_propagates():
    def load(binary):
        raise RuntimeError("bad image")

    with pytest.raises(RuntimeError, match="bad image"):
        compile_cache.load(lambda refresh: (b"x", RES), load)


# -- with NVRTC -------------------------------------------------------------------------

nvrtc_only = pytest.mark.skipif(not offline.available("sm_90"),
                                reason="NVRTC (cuda-bindings + nvidia-cuda-nvrtc) not installed")
VARIANTS = {v.name: v for v in catalogue_variants()}
# One of each shape of kernel: 128- and 256-thread single kinds, fused, grid.z, fp64 fused
# (which spills on sm_90: its frame and spill figures are both > 0).
SAMPLE = ["pg_f32_nn_zhang2025_small", "pg_f32_nn_zhang2025_large", "pg_f32_nn_fused_zhang2025",
          "pg_f32_nn_gridz_magma_V512", "pg_f64_nn_fused_zhang2025", "pg_f64_nn_fused_li2019_128"]


def _nvrtc_with_log(source, name, arch):
    """The cubin and the ptxas report, straight from NVRTC (no cache). An empty kernel
    of a fresh name changes the PTX, so a driver compute cache that already holds this
    source's code cannot answer for ptxas (it would leave the log empty)."""
    from portgemm.kernels import nvrtc
    source += f'\nextern "C" __global__ void pg_nonce_{uuid.uuid4().hex}() {{}}\n'
    n = nvrtc._nvrtc()
    options = nvrtc.OPTIONS + (f"-arch={arch}",)
    prog = nvrtc._check(n, n.nvrtcCreateProgram(source.encode(), b"k.cu", 0, [], []))
    try:
        nvrtc._check(n, n.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options]),
                     prog)
        log = nvrtc._log(n, prog)
        size = nvrtc._check(n, n.nvrtcGetCUBINSize(prog))
        cubin = b" " * size
        nvrtc._check(n, n.nvrtcGetCUBIN(prog, cubin))
    finally:
        n.nvrtcDestroyProgram(prog)
    return cubin, log


@nvrtc_only
@pytest.mark.toolchain
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", SAMPLE)
def test_cubin_figures_equal_the_ptxas_report(arch, name):
    from portgemm.kernels import cubin as cubin_reader, nvrtc
    r = render(VARIANTS[name])
    binary, log = _nvrtc_with_log(r.source, r.name, arch)
    report = nvrtc.parse_ptxas_log(log, r.name)
    assert report is not None, log
    res = cubin_reader.resources(binary, r.name, "cubin")
    assert (res.registers, res.shared_bytes) == (report["registers"], report["shared_bytes"])
    # the frame holds the spills: one is zero exactly when the other is
    assert (res.spill_bytes > 0) == (report["spill_bytes"] > 0)
    assert nvrtc.resources(binary, log, r.name, "x").spill_bytes == report["spill_bytes"]


@nvrtc_only
@pytest.mark.toolchain
def test_empty_nvrtc_log_is_not_a_failure(cache, monkeypatch):
    """What NVRTC returns when the driver's compute cache already holds the code."""
    from portgemm.kernels import nvrtc
    r = render(VARIANTS["pg_f32_nn_fused_zhang2025"])
    binary, log = _nvrtc_with_log(r.source, r.name, "sm_90")
    expected = nvrtc.parse_ptxas_log(log, r.name)
    assert nvrtc.parse_ptxas_log("", r.name) is None
    monkeypatch.setattr(nvrtc, "_log", lambda n, prog: "")
    _, res = nvrtc.compile(r.source, r.name, "sm_90")
    assert (res.registers, res.shared_bytes, res.spill_bytes) == \
        (expected["registers"], expected["shared_bytes"], 0)


def _compiler(arch):
    """The vendor compile function for ``arch``, skipping where it is not installed."""
    if not offline.available(arch):
        pytest.skip(f"no compiler for {arch} here")
    from portgemm.kernels import hiprtc_compile, nvrtc
    return nvrtc.compile if arch.startswith("sm_") else hiprtc_compile.compile


@pytest.mark.toolchain
@pytest.mark.parametrize("arch, damage", [("sm_90", d) for d in DAMAGE] +
                         [("gfx90a", "truncated bin"), ("gfx90a", "bad json")])
def test_damaged_cache_is_recompiled_and_rewritten(cache, arch, damage):
    compile = _compiler(arch)
    r = render(VARIANTS["pg_f32_nn_zhang2025_small"])
    first = compile(r.source, r.name, arch)
    (k,) = [p.stem for p in cache.glob("*.json")]
    DAMAGE[damage](cache, k)
    compile_cache.clear_memory()
    again = compile(r.source, r.name, arch)
    assert again[1] == first[1]
    assert _fresh_get(k) == again  # the entry was rewritten whole


def test_not_a_cubin_is_a_compile_error():
    pytest.importorskip("elftools")
    from portgemm.kernels import cubin as cubin_reader
    with pytest.raises(CompileError):
        cubin_reader.resources(b"\x7fELF truncated", "k", "x")


_CHILD = """
import sys
from portgemm.kernels import nvrtc
from portgemm.kernels.render import render
from portgemm.kernels.variants import catalogue_variants
v = {v.name: v for v in catalogue_variants()}[sys.argv[1]]
r = render(v)
_, res = nvrtc.compile(r.source, r.name, "sm_90")
print(f"figures {res.registers} {res.shared_bytes}")
"""


@nvrtc_only
@pytest.mark.toolchain
def test_two_processes_compile_into_one_fresh_cache(tmp_path, monkeypatch):
    fresh = tmp_path / "fresh"
    env = dict(os.environ, PORTGEMM_CACHE_DIR=str(fresh),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, "pg_f32_nn_fused_zhang2025"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    figures = [re.search(r"figures (\d+) (\d+)", out).groups() for out, _ in outs]
    assert figures[0] == figures[1]
    # and the cache they left reads back whole, with no temporary file behind
    (k,) = [p.stem for p in fresh.glob("*.json")]
    assert not list(fresh.glob("*.tmp"))
    monkeypatch.setenv("PORTGEMM_CACHE_DIR", str(fresh))
    assert _fresh_get(k) is not None
    compile_cache.clear_memory()

