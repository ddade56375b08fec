"""``python -m portgemm.occupancy``, run as a user would (subprocess)."""
import json
import re
import subprocess
import sys

import pytest

from portgemm.kernels.variants import catalogue_variants
from portgemm.occupancy import get_arch
from portgemm.tiles import FAMILIES


def cli(*args):
    return subprocess.run([sys.executable, "-m", "portgemm.occupancy", *args],
                          capture_output=True, text=True, timeout=120)


def test_json_amd():
    # gfx90a, 256 threads, 128 VGPRs: 512 // 128 = 4 waves/SIMD -> 4*4//4 = 4 workgroups.
    r = cli("--arch", "cdna2", "--threads", "256", "--vgprs", "128", "--sgprs", "40", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert {"arch", "model", "threads", "active_workgroups", "active_waves", "max_waves",
            "occupancy", "limited_by", "limits"} <= set(d)
    assert (d["arch"], d["model"], d["threads"]) == ("gfx90a", "exact", 256)
    assert (d["active_workgroups"], d["active_waves"], d["max_waves"]) == (4, 16, 32)
    assert d["occupancy"] == pytest.approx(0.5) and d["limited_by"] == "vgpr"
    assert d["limits"]["sgpr"] == 10 and d["limits"]["lds"] is None


def test_json_nvidia_paper():
    # sm_80, 256 threads, 42 regs, paper: 4*floor(512/42) = 48 warps -> 6 blocks.
    r = cli("--arch", "A800", "--threads", "256", "--regs", "42", "--model", "paper", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["arch"], d["model"], d["active_workgroups"], d["active_waves"]) == \
        ("sm_80", "paper", 6, 48)
    assert d["limited_by"] == "registers" and d["part"] == "A800"


def test_human_output():
    # sm_80 at 64 regs: 4 blocks, 32 of 64 warps (the CUDA calculator's 50%).
    r = cli("--arch", "sm_80", "--threads", "256", "--regs", "64")
    assert r.returncode == 0, r.stderr
    assert "registers" in r.stdout and "50.0%" in r.stdout
    assert "4 workgroups" in r.stdout


@pytest.mark.parametrize("args, says", [
    (("--arch", "gfx1234"), "unknown architecture"),
    (("--arch", "sm_80", "--threads", "256", "--vgprs", "64"), "--vgprs"),
    (("--arch", "gfx90a", "--threads", "256", "--regs", "64"), "--regs"),
    (("--arch", "gfx90a", "--threads", "256", "--vgprs", "600"), "600 VGPRs"),
    (("--arch", "sm_90", "--threads", "2048", "--regs", "32"), "2048 threads"),
    (("--arch", "sm_90", "--threads", "128", "--regs", "32", "--smem", "300000"), "300000"),
    (("--arch", "gfx90a", "--vgprs", "64"), "--threads"),
    (("--threads", "64", "--regs", "8"), "--arch"),
])
def test_bad_input_exits_2_with_one_line(args, says):
    r = cli(*args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0]
    assert r.stdout == ""


@pytest.mark.parametrize("args", [("--arch", "gfx90a", "--threads", "many"), ("--bogus",),
                                  ("--arch",), ("--model", "guess")])
def test_argparse_errors_exit_2_with_one_line(args):
    r = cli(*args)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and "usage" not in lines[0], r.stderr


def test_sgprs_are_bounded_like_vgprs():
    r = cli("--arch", "gfx90a", "--threads", "256", "--vgprs", "64", "--sgprs", "20000")
    assert r.returncode == 2 and "20000 SGPRs" in r.stderr and "108" in r.stderr
    ok = cli("--arch", "gfx90a", "--threads", "256", "--vgprs", "64", "--sgprs", "108")
    assert ok.returncode == 0, ok.stderr


def test_help_has_no_rst_and_one_workgroup_is_singular():
    h = cli("--help")
    assert h.returncode == 0 and "``" not in h.stdout
    r = cli("--arch", "sm_90", "--threads", "256", "--regs", "255")
    assert r.returncode == 0 and "active: 1 workgroup," in r.stdout


def test_estimate_rows_have_a_legend_naming_the_missing_compiler():
    r = cli("--arch", "cdna3")   # gfx942: no compiler for it on the CI toolchain
    assert r.returncode == 0, r.stderr
    legend = r.stdout[r.stdout.index("\nestimate: "):] if "\nestimate: " in r.stdout else ""
    if "estimate" in {_source(line.split()) for line in r.stdout.splitlines()
                      if line.startswith("pg_")}:
        assert "gfx942" in legend and "clang 19" in legend


@pytest.mark.parametrize("arch, cols", [
    ("cdna2", ("VGPR", "AGPR", "SGPR", "LDS")),
    ("hopper", ("regs", "smem")),
])
def test_variant_table_lists_every_variant(arch, cols):
    r = cli("--arch", arch)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(line for line in lines if line.startswith("variant "))
    names_of_columns = re.split(r"\s{2,}", header.strip())
    for col in (*cols, "tile", "thr", "spill", "source", "wg", "occ", "limit",
                "P wg", "P occ", "P limit"):
        assert col in names_of_columns
    names = {line.split()[0] for line in lines if line.startswith("pg_")}
    expected = {v.name for v in catalogue_variants(arch=get_arch(arch).name)}
    assert expected == names and len(expected) > 0
    assert any(n.startswith("pg_f64") for n in expected)
    assert max(map(len, lines)) <= 190   # the bfloat16 variants have the longest names
    # the tile column: "BMxBN kBK RMxRN" (3 words) or "fused N" (2 words)
    by_name = {line.split()[0]: line.split() for line in lines if line.startswith("pg_")}
    large = by_name["pg_f32_nn_portgemm_128x128_8x8"]
    assert large[1:4] == ["128x128", "k8", "8x8"]
    assert by_name["pg_f32_nn_fused_zhang2025"][1:3] == ["fused", "5"]
    sources = {_source(w) for w in by_name.values()}
    assert sources <= {"compiled", "recorded", "estimate"}
    for s in sources:  # the legend explains every source shown
        assert any(line.startswith(f"{s}: ") for line in lines)


def _source(words):
    """The source column of a variant row (the one word among the known sources)."""
    return next(x for x in words if x in ("compiled", "recorded", "estimate"))


def test_variant_table_json_has_both_models():
    r = cli("--arch", "gfx908", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["arch"] == "gfx908" and len(d["variants"]) == len(catalogue_variants(arch="gfx908"))
    row = d["variants"][0]
    assert {"exact", "paper", "registers", "source"} <= set(row)
    assert {"wg", "waves", "occ", "limit"} <= set(row["exact"])


def test_arch_table():
    r = cli()
    assert r.returncode == 0, r.stderr
    for name in ("gfx908", "gfx90a", "gfx940", "gfx942", "gfx1100",
                 "sm_70", "sm_80", "sm_86", "sm_89", "sm_90"):
        assert name in r.stdout


def test_amd_table_lists_the_mfma_kinds_with_vgprs_and_agprs():
    """gfx90a's table holds the MFMA kinds (a wave's sub-tile "w"), each with its arch
    VGPRs and AGPRs: compiled here, else recorded (tools/record_resources.py)."""
    r = cli("--arch", "gfx90a", "--json")
    assert r.returncode == 0, r.stderr
    rows = {v["variant"]: v for v in json.loads(r.stdout)["variants"]}
    mfma = {n: v for n, v in rows.items() if "_mfma_" in n}
    assert len(mfma) == len(FAMILIES["mfma-f16"]) + len(FAMILIES["mfma-bf16"]) + len(FAMILIES["mfma-f64"])
    big = mfma["pg_f16_nn_mfma_f16_128x128_w64x64"]
    assert big["tile"] == "128x128 k16 w64x64" and big["threads"] == 256
    if big["origin"] != "estimate":
        assert big["agprs"] >= 64 and big["registers"] > 0 and big["spill_bytes"] == 0
    r = cli("--arch", "sm_90", "--json")
    assert not any("_mfma_" in v["variant"] for v in json.loads(r.stdout)["variants"])
