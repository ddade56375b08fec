"""Achieved occupancy measured by Nsight Compute: each method is replayed in a child
process under ``ncu``, which reads the hardware counter
sm__warps_active.avg.pct_of_peak_sustained_active (active warps / the SM's maximum,
zhang2025 Eq. 12) for every kernel launched between cudaProfilerStart and cudaProfilerStop (ncu
--profile-from-start off), so set-up kernels are not counted; a method's figure
is the duration-weighted mean over its kernels. ncu is optional: absent, it says so."""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
DURATION = "gpu__time_duration.sum"


def find_ncu(setting: str = "auto") -> str | None:
    if setting == "off":
        return None
    if setting != "auto":
        return setting if Path(setting).exists() or shutil.which(setting) else None
    found = shutil.which("ncu")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "ncu").exists():
            return str(Path(root) / "bin" / "ncu")
    return None


def parse_csv(text: str) -> float | None:
    """Duration-weighted mean occupancy (percent) over the kernels in ncu's CSV."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    kernels: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        name, value = row.get("Metric Name"), row.get("Metric Value", "")
        if name not in (OCCUPANCY, DURATION):
            continue
        try:
            kernels.setdefault(row["ID"], {})[name] = float(value.replace(",", ""))
        except ValueError:
            continue
    pairs = [(k[OCCUPANCY], k.get(DURATION, 1.0)) for k in kernels.values() if OCCUPANCY in k]
    weight = sum(d for _, d in pairs)
    return sum(o * d for o, d in pairs) / weight if pairs and weight > 0 else None


def measure(ncu: str, method: str, dtype: str, shapes_list, timeout_s=120) -> tuple[float | None, str]:
    """(occupancy percent or None, a note) of one method over the given cases."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps({"method": method, "dtype": dtype,
                                    "cases": [s.tolist() for s in shapes_list]}))
        cmd = [ncu, "--profile-from-start", "off", "--metrics",
               f"{OCCUPANCY},{DURATION}", "--csv", sys.executable, "-m",
               "portgemm.benchmark.ncu_replay", str(spec)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None, f"ncu timed out after {timeout_s:.0f} s"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"ncu exit {done.returncode}: {tail[0][:160]}"
    occ = parse_csv(done.stdout)
    return occ, "" if occ is not None else "ncu reported no kernel in the range"
