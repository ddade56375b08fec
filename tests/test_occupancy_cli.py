"""``python -m portgemm.occupancy``, run as a user would (subprocess)."""
import json
import subprocess
import sys

import pytest

from portgemm.kernels.variants import catalogue_variants


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


def test_argparse_errors_exit_2():
    r = cli("--arch", "gfx90a", "--threads", "many")
    assert r.returncode == 2 and "Traceback" not in r.stderr


@pytest.mark.parametrize("arch, cols", [
    ("cdna2", ("VGPR", "AGPR", "SGPR", "LDS")),
    ("hopper", ("regs", "smem")),
])
def test_variant_table_lists_every_variant(arch, cols):
    r = cli("--arch", arch)
    assert r.returncode == 0, r.stderr
    header = r.stdout.splitlines()[1]
    for col in (*cols, "spill", "source", "exact wg", "exact occ", "exact limit",
                "paper wg", "paper occ", "paper limit"):
        assert col in header
    names = {line.split()[0] for line in r.stdout.splitlines()[3:] if line.strip()}
    expected = {v.name for v in catalogue_variants(dtypes=("float32", "float64"))}
    assert expected <= names and len(expected) > 0
    assert any(n.startswith("pg_f64") for n in expected)


def test_variant_table_json_has_both_models():
    r = cli("--arch", "gfx908", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["arch"] == "gfx908" and len(d["variants"]) == len(catalogue_variants())
    row = d["variants"][0]
    assert {"exact", "paper", "registers", "source"} <= set(row)
    assert {"wg", "waves", "occ", "limit"} <= set(row["exact"])


def test_arch_table():
    r = cli()
    assert r.returncode == 0, r.stderr
    for name in ("gfx908", "gfx90a", "gfx940", "gfx942", "gfx1100",
                 "sm_70", "sm_80", "sm_86", "sm_89", "sm_90"):
        assert name in r.stdout
