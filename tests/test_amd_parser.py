"""The AMD code-object metadata parser and the clang remark parser, on a fixture made
once with the real toolchain (tests/data/amd_fixture.hip says how): runs everywhere,
no GPU and no ROCm needed."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from portgemm.errors import CompileError
from portgemm.kernels import amd_codeobject
from portgemm.kernels.clang_amd import parse_remarks
from portgemm.occupancy import KernelResources, get_arch, occupancy

DATA = Path(__file__).parent / "data"
CODE = (DATA / "amd_fixture_gfx90a.co").read_bytes()
REMARKS = parse_remarks((DATA / "amd_fixture_gfx90a.remarks.txt").read_text())


def test_target_kernels_and_producer():
    co = amd_codeobject.parse(CODE)
    assert co.target == "amdgcn-amd-amdhsa--gfx90a"
    assert co.arch == "gfx90a"
    assert set(co.kernels) == {"fixture_lds", "fixture_mfma"}
    # The kernel's compiler, not the older one the device libraries were built with.
    assert co.compiler == "Debian clang version 15.0.6"
    assert any(p.startswith("Linker:") for p in co.producers)


def test_plain_kernel_figures():
    k = amd_codeobject.parse(CODE).kernels["fixture_lds"]
    assert (k.lds_bytes, k.agpr_count, k.scratch_bytes, k.max_flat_workgroup_size) == (1024, 0, 0, 256)
    assert (k.vgpr_count, k.sgpr_count) == (5, 12)
    assert k.vgpr_spill_count == k.sgpr_spill_count == 0 and k.wavefront_size == 64


def test_agprs_unified_file():
    # gfx90a's note counts alignTo(arch VGPRs, 4) + AGPRs; the arch part comes back aligned.
    k = amd_codeobject.parse(CODE).kernels["fixture_mfma"]
    assert (k.vgpr_count, k.agpr_count) == (28, 16)
    res = amd_codeobject.resources(CODE, "fixture_mfma")
    assert (res.registers, res.agprs, res.sgprs, res.shared_bytes) == (12, 16, 8, 0)
    assert res.source == "Debian clang version 15.0.6 (gfx90a)"


def test_split_file_keeps_the_total():
    # gfx908 notes max(arch, agpr): the arch count is only bounded, so it is kept whole.
    k = amd_codeobject.KernelMeta("k", 40, 32, 10, 0, 0, 0, 0, 64, 256)
    assert k.arch_vgprs("gfx908") == 40
    assert k.arch_vgprs("gfx90a") == 8
    assert k.arch_vgprs("gfx942") == 8


@pytest.mark.parametrize("name", ["fixture_lds", "fixture_mfma"])
def test_metadata_matches_llvm_remark_of_the_same_compile(name):
    k = amd_codeobject.parse(CODE).kernels[name]
    r = REMARKS[name]
    assert k.sgpr_count == r["SGPRs"]
    assert k.agpr_count == r["AGPRs"]
    assert k.arch_vgprs("gfx90a") == (-(-r["VGPRs"] // 4) * 4 if r["AGPRs"] else r["VGPRs"])
    assert k.lds_bytes == r["LDS Size [bytes/block]"]
    assert k.scratch_bytes == r["ScratchSize [bytes/lane]"]
    assert k.vgpr_spill_count == r["VGPRs Spill"] and k.sgpr_spill_count == r["SGPRs Spill"]


@pytest.mark.parametrize("name", ["fixture_lds", "fixture_mfma"])
def test_model_matches_llvm_occupancy(name):
    res = amd_codeobject.resources(CODE, name)
    threads = amd_codeobject.parse(CODE).kernels[name].max_flat_workgroup_size
    arch = get_arch("gfx90a")
    occ = occupancy(arch, threads, res)
    assert occ.active_waves / arch.rules.simds == REMARKS[name]["Occupancy [waves/SIMD]"]


def test_resources_feed_the_model_where_agprs_bind():
    # The AGPRs count on gfx90a: 128 arch + 256 AGPRs leave one wave per SIMD, not two.
    occ = occupancy("gfx90a", 256, KernelResources(registers=128, agprs=256, sgprs=20))
    assert occ.active_waves == 4


def test_remark_parser_reads_every_key():
    assert REMARKS["fixture_lds"] == {
        "SGPRs": 12, "VGPRs": 5, "AGPRs": 0, "ScratchSize [bytes/lane]": 0,
        "Occupancy [waves/SIMD]": 8, "SGPRs Spill": 0, "VGPRs Spill": 0,
        "LDS Size [bytes/block]": 1024}


def test_remark_parser_ignores_other_diagnostics():
    log = ("a.hip:1:1: warning: unused [-Wunused]\n"
           "a.hip:2:1: remark: Function Name: k2 [-Rpass-analysis=kernel-resource-usage]\n"
           "a.hip:2:1: remark:     VGPRs: 7 [-Rpass-analysis=kernel-resource-usage]\n"
           "a.hip:3:1: remark: loop not vectorized [-Rpass-analysis=loop-vectorize]\n")
    assert parse_remarks(log) == {"k2": {"VGPRs": 7}}


def test_not_an_elf():
    with pytest.raises(CompileError, match="not an ELF"):
        amd_codeobject.parse(b"\x7fELF but not really")


def test_not_an_amdgpu_elf():
    host_elf = Path(sys.executable).resolve().read_bytes()
    if not host_elf.startswith(b"\x7fELF"):
        pytest.skip("the Python executable is not an ELF file here")
    with pytest.raises(CompileError, match="not an AMDGPU"):
        amd_codeobject.parse(host_elf)


def test_unknown_kernel_names_the_ones_present():
    with pytest.raises(CompileError, match="fixture_lds"):
        amd_codeobject.resources(CODE, "no_such_kernel")
