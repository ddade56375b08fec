"""tools/vendor_matrix.py's compile path: one row per (variant, arch) cell whatever the
order the pool ran them in, a failing cell names its variant and arch and fails the run
(with fake compilers: no compiler needed), a broken define is a compile error of that
cell (NVRTC), and the two shortcuts the matrix takes give the same results as the plain
compiles: clang with precompiled HIP headers (byte-identical code object and remark) and
hiprtc in one long-lived child (same figures; errors and aborts fail one request only)."""
from __future__ import annotations

import json

import pytest
from test_vendor_matrix_report import vm  # noqa: F401 (the tool as a module, a fixture)

from portgemm.errors import CompileError, DeviceUnavailable
from portgemm.kernels import offline
from portgemm.kernels.render import Rendered, render
from portgemm.kernels.variants import catalogue_variants
from portgemm.occupancy.resources import KernelResources

VARIANTS = {v.name: v for v in catalogue_variants()}
SMALL = VARIANTS["pg_f32_nn_zhang2025_small"]


def _fake_compiler(broken: tuple[str, str] | None = None):
    """compile_cell for NVIDIA archs that compiles nothing; ``broken`` (variant, arch)
    raises the CompileError a real compiler would."""
    def compile_cell(variant, arch, pch=None):
        if (variant.name, arch) == broken:
            raise CompileError(f"NVRTC compile of {variant.name} for {arch} failed: "
                               f"NVRTC_ERROR_COMPILATION\nerror: identifier \"nope\" is undefined")
        return b"", KernelResources(registers=64, shared_bytes=1024, spill_bytes=0,
                                    source="fake"), None
    return compile_cell


def _run(vm, monkeypatch, tmp_path, capsys, broken=None):
    monkeypatch.setattr(vm, "compile_cell", _fake_compiler(broken))
    # main() sets both in os.environ: set them here first so they are restored after
    monkeypatch.setenv("PORTGEMM_WERROR", "0")
    monkeypatch.setenv("PORTGEMM_CACHE_DIR", str(tmp_path))
    out = tmp_path / "m.json"
    rc = vm.main(["--jobs", "1", "--arch", "sm_80", "--arch", "sm_90", "--family", "magma",
                  "--json", str(out)])
    return rc, capsys.readouterr().out, json.loads(out.read_text())["rows"]


def test_one_row_per_cell_in_matrix_order(vm, monkeypatch, tmp_path, capsys):
    rc, out, rows = _run(vm, monkeypatch, tmp_path, capsys)
    magma = [v.name for v in vm.matrix_variants()
             if getattr(v, "kinds", ()) and v.kinds[0].family == "magma"]
    assert rc == 0 and len(magma) == 8
    # tasks run slowest first; the table and the JSON keep the matrix's order
    assert [(r["variant"], r["arch"]) for r in rows] == \
        [(v, a) for v in magma for a in ("sm_80", "sm_90")]
    assert f"{len(rows)} cells (8 variants over 2 archs; 16-bit: mma.sync families on NVIDIA, MFMA families on AMD), 0 compile errors" in out
    assert all(r["resources"]["registers"] == 64 for r in rows)


def test_a_compile_error_names_variant_and_arch_and_fails(vm, monkeypatch, tmp_path, capsys):
    bad = ("pg_f64_nn_gridz_magma_V510", "sm_90")
    rc, out, rows = _run(vm, monkeypatch, tmp_path, capsys, broken=bad)
    assert rc == 1
    assert "FAIL pg_f64_nn_gridz_magma_V510 sm_90: compile error: CompileError: NVRTC" in out
    assert "--- pg_f64_nn_gridz_magma_V510 sm_90 ---" in out and '"nope" is undefined' in out
    assert [r["variant"] + " " + r["arch"] for r in rows if "error" in r] == [" ".join(bad)]
    assert len(rows) == 16          # the other cells still compiled


def _compiler_or_skip(arch):
    if not offline.available(arch):
        pytest.skip(f"no compiler for {arch} here")


@pytest.mark.toolchain
def test_a_broken_define_fails_its_cell(vm, monkeypatch, tmp_path):
    """A real compile (NVRTC, a fraction of a second): the variant's source with one of
    its defines broken is an error row naming variant and arch, not an exception."""
    _compiler_or_skip("sm_90")
    monkeypatch.setenv("PORTGEMM_CACHE_DIR", str(tmp_path))
    r = render(SMALL)
    assert "#define PG_THREADS " in r.source
    broken = r.source.replace("#define PG_THREADS ", "#define PG_THREADS nope_", 1)
    monkeypatch.setattr(vm, "render", lambda v: Rendered(broken, r.name, r.threads))
    row = vm.cell(SMALL, "sm_90")
    assert row["variant"] == SMALL.name and row["arch"] == "sm_90"
    assert row["error"].startswith("CompileError: NVRTC compile of pg_f32_nn_zhang2025_small "
                                   "for sm_90")
    assert vm.check(row) and vm.check(row)[0].startswith("compile error")


def _clang_or_skip():
    from portgemm.kernels import clang_amd
    try:
        clang_amd.toolchain()
    except DeviceUnavailable as e:
        pytest.skip(str(e))
    return clang_amd


@pytest.mark.toolchain
@pytest.mark.parametrize("arch", ["gfx90a", "gfx940"])
def test_precompiled_headers_change_nothing(arch, tmp_path):
    clang_amd = _clang_or_skip()
    r = render(SMALL)
    pch = clang_amd.build_pch(arch, tmp_path / f"hip-{arch}.pch")
    plain = clang_amd.compile(r.source, r.name, arch)
    fast = clang_amd.compile(r.source, r.name, arch, pch=pch)
    assert fast.code == plain.code
    assert fast.remark == plain.remark and fast.resources == plain.resources


@pytest.mark.toolchain
def test_a_pch_of_another_arch_is_refused(tmp_path):
    clang_amd = _clang_or_skip()
    pch = clang_amd.build_pch("gfx90a", tmp_path / "hip-gfx90a.pch")
    r = render(SMALL)
    with pytest.raises(CompileError, match="compile of pg_f32_nn_zhang2025_small for gfx940"):
        clang_amd.compile(r.source, r.name, "gfx940", pch=pch)


@pytest.mark.toolchain
def test_hiprtc_server_matches_one_shot_and_survives_errors():
    _compiler_or_skip("gfx90a")
    from portgemm.kernels import hiprtc_compile
    r = render(SMALL)
    one_shot = hiprtc_compile.compile(r.source, r.name, "gfx90a", cache=False)
    with hiprtc_compile.Server() as server:
        code, res = hiprtc_compile.compile(r.source, r.name, "gfx90a", cache=False,
                                           server=server)
        assert res == one_shot[1]
        with pytest.raises(CompileError, match="undeclared identifier 'nope'"):
            hiprtc_compile.compile('extern "C" __global__ void k() { nope(); }', "k",
                                   "gfx90a", cache=False, server=server)
        # ROCm 5.2's hiprtc aborts on gfx940: that request fails, a new child serves on
        with pytest.raises(CompileError, match="does not support|not support"):
            hiprtc_compile.compile(r.source, r.name, "gfx940", cache=False, server=server)
        assert hiprtc_compile.compile(r.source, r.name, "gfx908", cache=False,
                                      server=server)[1].registers > 0
