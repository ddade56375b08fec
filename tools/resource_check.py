"""The CUDA device's compiled figures against the recorded ones
(kernels/recorded_resources.json) for its arch: registers, shared and local bytes of every
catalogue variant of the named families (default: the 16-bit and wgmma ones), printing
the ones whose registers differ.

    python tools/resource_check.py [--families portgemm-bf16,wgmma-bf16]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from portgemm.backends import cuda  # noqa: E402
from portgemm.kernels import resources  # noqa: E402
from portgemm.kernels.variants import catalogue_variants  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", default="portgemm-bf16,portgemm-f16,wgmma")
    args = ap.parse_args(argv)
    prefixes = tuple(args.families.split(","))
    be = cuda.create()
    arch = be.arch().name
    rec = json.loads(Path(resources.RECORDED_PATH).read_text())["archs"].get(arch, {})
    n = bad = 0
    for v in catalogue_variants(arch=arch):
        if not any(k.family.startswith(prefixes) for k in v.kinds):
            continue
        a = be.function_attributes(be.function(v))
        r = rec.get(v.name)
        n += 1
        got = (a["num_regs"], a.get("shared_size_bytes"), a.get("local_size_bytes"))
        want = None if r is None else (r["registers"], r["shared_bytes"], r["spill_bytes"])
        if want is None or got[0] != want[0]:
            bad += 1
            print(v.name, "device", got, "recorded", want)
    print(f"{bad} of {n} variants differ in registers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
