"""tools/vendor_matrix.py's report lines, on made-up cells (no compiler needed):
spills of non-default variants are warnings, LDS-bound cells one summary line."""
import importlib.util
import re
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "vendor_matrix.py"


@pytest.fixture(scope="module")
def vm():
    spec = importlib.util.spec_from_file_location("vendor_matrix", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cell(variant, arch="sm_90", default=False, spill=0, scratch=None, remark=None,
         per_simd=None):
    row = {"variant": variant, "arch": arch, "default": default, "compiler": "nvrtc",
           "threads": 256, "resources": {"registers": 64, "sgprs": 0, "agprs": 0,
                                          "shared_bytes": 0, "spill_bytes": spill},
           "model": {"waves": 8, "occ": 0.5, "limit": "registers"}}
    if scratch is not None:
        row["scratch"] = scratch
    if remark is not None:  # an AMD cell with LLVM's occupancy remark
        row.update(compiler="clang", remark={"Occupancy [waves/SIMD]": remark},
                   clang={"registers": 64, "agprs": 0, "sgprs": 40, "shared_bytes": 16384},
                   clang_model={"per_simd": per_simd, "reg_per_simd": 8, "llvm_lds": remark})
    return row


def test_non_default_spills_are_warnings_and_default_spills_fail(vm):
    rows = [cell("pg_f64_nn_fused_li2019_128", spill=3684), cell("pg_ok"),
            cell("pg_f32_nn_zhang2025_large", default=True, spill=8),
            cell("pg_amd_scratch", arch="gfx90a", scratch=64)]
    lines = vm.notes_and_warnings(rows)
    warned = [line for line in lines if line.startswith("warning ")]
    assert len(warned) == 2
    assert "pg_f64_nn_fused_li2019_128 sm_90: spills 3684 bytes" in warned[0]
    assert "pg_amd_scratch gfx90a" in warned[1] and "64 bytes scratch" in warned[1]
    assert vm.check(rows[0]) == [] and vm.check(rows[2])      # the default one fails CI


def test_lds_bound_cells_are_one_line_unless_verbose(vm):
    rows = [cell(f"pg_v{i}", arch="gfx940", remark=5, per_simd=4.5) for i in range(7)]
    rows.append(cell("pg_agrees", arch="gfx940", remark=5, per_simd=5))
    short = vm.notes_and_warnings(rows)
    assert len(short) == 1 and short[0].startswith("note: 7 AMD cells are LDS-bound")
    assert "--verbose" in short[0]
    long = vm.notes_and_warnings(rows, verbose=True)
    assert len(long) == 8 and sum("pg_v" in line for line in long[1:]) == 7


def test_matrix_covers_our_families_in_every_transpose(vm):
    names = [v.name for v in vm.matrix_variants()]
    assert len(names) == len(set(names))
    for op in ("nn", "nt", "tn", "tt"):
        assert f"pg_f32_{op}_portgemm_128x128_8x8" in names
        assert f"pg_f64_{op}_fused_portgemm_f64" in names
    assert "pg_f64_nn_portgemm_128x128_8x8" not in names      # fp32 family: fp32 only
    assert "pg_f32_nt_zhang2025_large" not in names           # the paper's: nn only
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) for n in names)


def test_matrix_covers_every_ragged_kind_and_their_spills_fail(vm):
    """The device-offsets entry point of every kind a packed call may run is compiled
    (our families' in every transpose) and must not spill."""
    from portgemm.grouped.ragged_kind import candidate_kinds
    by_name = {v.name: v for v in vm.matrix_variants()}
    for dtype, d in (("float32", "f32"), ("float64", "f64")):
        for k in candidate_kinds(dtype):
            ops = ("nn", "nt", "tn", "tt") if k.family in vm.ALL_TRANSPOSES else ("nn",)
            for op in ops:
                v = by_name[f"pg_{d}_{op}_ragged_{k.ident}"]
                assert v.layout == "ragged" and vm.must_not_spill(v)


def test_own_family_spills_fail(vm):
    row = cell("pg_f32_nn_portgemm_128x128_8x8", spill=8)
    row["no_spill"] = True
    assert vm.check(row) and vm.spill_warning(row) is None


# A source with a macro redefinition (the compat.h defect) and an unused variable.
WARNS = 'extern "C" __global__ void k(float* p) { int unused; }\n#define PG_X 1\n#define PG_X 2\n'


def _compiler_or_skip(arch):
    from portgemm.kernels import offline
    if not offline.available(arch):
        pytest.skip(f"no compiler for {arch} here")


@pytest.mark.parametrize("arch", ["sm_80", "gfx90a"])
def test_werror_turns_warnings_into_compile_errors(arch, monkeypatch, tmp_path):
    from portgemm.errors import CompileError
    from portgemm.kernels import hiprtc_compile, nvrtc
    _compiler_or_skip(arch)
    monkeypatch.setenv("PORTGEMM_CACHE_DIR", str(tmp_path))
    compile_ = (lambda: nvrtc.compile(WARNS, "k", arch)) if arch.startswith("sm_") else \
        (lambda: hiprtc_compile.compile(WARNS, "k", arch, cache=False))
    compile_()                                   # warnings alone compile by default
    monkeypatch.setenv(nvrtc.WERROR_ENV, "1")
    with pytest.raises(CompileError, match="PG_X|macro|warn"):
        compile_()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "gfx90a"])
def test_default_kernel_compiles_with_warnings_as_errors(arch, monkeypatch, tmp_path):
    """The compat.h defect (the AMD unroll block pasted into the pre-sm_90 CUDA branch)
    was a macro redefinition warning on sm_80; no variant may warn on any target."""
    from portgemm.kernels import nvrtc, offline
    from portgemm.kernels.variants import variants_for
    from portgemm.tiles import PORTGEMM, ZHANG2025
    _compiler_or_skip(arch)
    monkeypatch.setenv("PORTGEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(nvrtc.WERROR_ENV, "1")
    for v in (variants_for(ZHANG2025, "fused", "float32")[0],
              variants_for(PORTGEMM, "per-kind", "float32", True, False)[-1]):
        _, res = offline.compile_variant(v, arch, cache=False)
        assert res.registers > 0
