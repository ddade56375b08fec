"""Regenerate portgemm/kernels/recorded_resources.json from the real compilers, so the
planner and ``python -m portgemm.occupancy`` have compiled figures where no compiler is
installed. Every figure is stamped with the compiler and version that produced it.

    python tools/record_resources.py [--arch gfx90a ...] [--jobs N] [--out PATH]

Default archs: every arch of the occupancy table that some installed compiler serves
(gfx908/gfx90a: hiprtc; other gfx: clang; sm_XY: NVRTC). An arch whose compiler is
missing or rejects it is reported and left out; the command fails if nothing compiled.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from portgemm.errors import PortgemmError  # noqa: E402
from portgemm.kernels import nvrtc, offline  # noqa: E402
from portgemm.kernels.resources import RECORDED_PATH, source_fingerprint  # noqa: E402
from portgemm.kernels.variants import catalogue_variants  # noqa: E402
from portgemm.occupancy import ARCHS  # noqa: E402


def _one(job):
    variant, arch = job
    try:
        return arch, variant.name, offline.compile_variant(variant, arch, cache=False)[1].as_dict()
    except PortgemmError as e:
        lines = [ln for ln in str(e).splitlines() if ln.strip()]
        return arch, variant.name, f"{type(e).__name__}: {lines[-1] if lines else ''}"


def _compiler(source: str) -> str:
    """ "hiprtc HIP 5.2.21153, Debian clang version 15.0.6 (gfx90a)" -> without the arch."""
    return source.rsplit(" (", 1)[0]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", action="append", help="default: every arch a compiler here serves")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--out", type=Path, default=RECORDED_PATH)
    args = p.parse_args(argv)
    os.environ["PORTGEMM_CACHE_DIR"] = tempfile.mkdtemp(prefix="portgemm-record-")
    os.environ[nvrtc.WERROR_ENV] = "1"   # a warning is a defect here, as in the vendor matrix

    archs = args.arch or list(ARCHS)
    usable = []
    for a in archs:
        try:
            ok = offline.available(a)
        except PortgemmError:
            ok = False
        (usable.append(a) if ok else print(f"skip {a}: no compiler for it here", file=sys.stderr))
    t0 = time.perf_counter()
    # each arch's own catalogue: the portable variants and its arch-specific families
    # (tiles.FAMILY_ARCHS: AMD's MFMA kinds)
    jobs = [(v, a) for a in usable for v in catalogue_variants(arch=a)]
    with ProcessPoolExecutor(max_workers=args.jobs) as ex:
        results = list(ex.map(_one, jobs))

    # Which kernel source the figures belong to: stale figures are worse than estimates.
    out = {"generated_by": "tools/record_resources.py", "kernel_sha256": source_fingerprint(),
           "compilers": {}, "archs": {}}
    failed: dict[str, str] = {}
    for arch, name, res in results:
        if isinstance(res, str):
            failed.setdefault(arch, res)
            continue
        out["archs"].setdefault(arch, {})[name] = res
        out["compilers"][arch] = _compiler(res["source"])
    for arch, why in failed.items():
        # An arch is recorded whole or not at all: partial rows would mix sources.
        out["archs"].pop(arch, None)
        out["compilers"].pop(arch, None)
        print(f"skip {arch}: {why}", file=sys.stderr)
    if not out["archs"]:
        print("nothing compiled; the recorded file is unchanged", file=sys.stderr)
        return 1
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, args.out)
    n = sum(len(v) for v in out["archs"].values())
    print(f"recorded {n} figures for {', '.join(out['archs'])} in {time.perf_counter() - t0:.0f} s "
          f"-> {args.out}")
    for arch, comp in out["compilers"].items():
        print(f"  {arch:8s} {comp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
