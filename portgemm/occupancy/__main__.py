"""``python -m portgemm.occupancy``: occupancy of one kernel, or of every catalogue variant.

    python -m portgemm.occupancy                          the architecture table
    python -m portgemm.occupancy --arch cdna2             every variant, both models
    python -m portgemm.occupancy --arch gfx90a --threads 256 --vgprs 64 --sgprs 40 --json
    python -m portgemm.occupancy --arch sm_80 --threads 256 --regs 64 --model paper

Bad input (unknown arch, impossible resources, flags of the other vendor) exits with
status 2 and one line on stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from tabulate import tabulate

from ..errors import PortgemmError
from .archs import ARCHS, Arch, get_arch, known_names
from .model import MODELS, occupancy
from .resources import KernelResources

PROG = "python -m portgemm.occupancy"
AMD_FLAGS = ("vgprs", "agprs", "sgprs", "lds")
NVIDIA_FLAGS = ("regs", "smem")


class UsageError(Exception):
    """A flag combination argparse cannot see is wrong."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--arch", help="arch, family or product: " + ", ".join(known_names()))
    p.add_argument("--threads", type=int, help="threads per workgroup")
    amd = p.add_argument_group("AMD resources")
    amd.add_argument("--vgprs", type=int, help="arch VGPRs per thread")
    amd.add_argument("--agprs", type=int, help="AGPRs per thread (CDNA)")
    amd.add_argument("--sgprs", type=int, help="SGPRs per wave, incl. VCC etc.")
    amd.add_argument("--lds", type=int, help="LDS bytes per workgroup")
    nv = p.add_argument_group("NVIDIA resources")
    nv.add_argument("--regs", type=int, help="registers per thread")
    nv.add_argument("--smem", type=int, help="static + dynamic shared bytes per block")
    p.add_argument("--model", choices=MODELS, default="exact",
                   help="exact rules (default) or zhang2025 Eqs. 5-9; the variant table "
                        "always shows both")
    p.add_argument("--json", action="store_true", help="print JSON")
    return p


# --- one kernel ----------------------------------------------------------------------

def _given(args, flags) -> list[str]:
    return [f for f in flags if getattr(args, f) is not None]


def resources_from_args(arch: Arch, args) -> KernelResources:
    own, other, need = ((AMD_FLAGS, NVIDIA_FLAGS, "vgprs") if arch.vendor == "amd"
                        else (NVIDIA_FLAGS, AMD_FLAGS, "regs"))
    wrong = _given(args, other)
    if wrong:
        raise UsageError(f"--{wrong[0]} is not a resource of {arch.name} ({arch.vendor}); "
                         f"use {' '.join('--' + f for f in own)}")
    if args.threads is None or getattr(args, need) is None:
        raise UsageError(f"{arch.name} needs --threads and --{need} "
                         f"(or only --arch for the variant table)")
    if arch.vendor == "amd":
        return KernelResources(registers=args.vgprs, agprs=args.agprs or 0,
                               sgprs=args.sgprs or 0, shared_bytes=args.lds or 0,
                               source="command line")
    return KernelResources(registers=args.regs, shared_bytes=args.smem or 0,
                           source="command line")


def one_kernel(arch: Arch, args) -> str:
    res = resources_from_args(arch, args)
    occ = occupancy(arch, args.threads, res, model=args.model)
    if args.json:
        return json.dumps({**occ.as_dict(), **_arch_fields(arch),
                           "resources": res.as_dict()}, indent=2)
    rows = [[name, "-" if wg is None else wg, "-" if occ.wave_limits[name] is None
             else occ.wave_limits[name], "<-" if name == occ.limited_by else ""]
            for name, wg in occ.limits.items()]
    waves = _waves(arch)
    head = (f"{_describe(arch)}, {occ.model} model: {occ.threads} threads = "
            f"{occ.waves_per_workgroup} {waves} per workgroup")
    table = tabulate(rows, headers=["limit", f"workgroups/{arch.unit}",
                                    f"{waves}/{arch.unit}", ""])
    tail = (f"active: {occ.active_workgroups} workgroups, {occ.active_waves} of "
            f"{occ.max_waves} {waves} per {arch.unit}: occupancy {occ.occupancy:.1%}, "
            f"limited by {occ.limited_by}")
    return "\n".join([head, table, tail])


# --- every catalogue variant ---------------------------------------------------------

def _model_cells(arch: Arch, threads: int, res: KernelResources, model: str) -> dict:
    try:
        o = occupancy(arch, threads, res, model=model)
    except PortgemmError as e:  # a variant that cannot launch here still gets its row
        return {"wg": 0, "waves": 0, "occ": 0.0, "limit": f"cannot launch: {e}"}
    return {"wg": o.active_workgroups, "waves": o.active_waves, "occ": o.occupancy,
            "limit": o.limited_by}


def variant_rows(arch: Arch) -> list[dict]:
    from ..kernels.offline import register_compiled
    from ..kernels.resources import lookup
    from ..kernels.variants import catalogue_variants
    variants = catalogue_variants(dtypes=("float32", "float64"))
    # Compiled figures where this arch's compiler is installed (no GPU needed); else
    # lookup falls back to the recorded ones (tools/record_resources.py), then estimates.
    register_compiled(arch.name, variants)
    rows = []
    for v in variants:
        res = lookup(arch, v)
        row = {"variant": v.name, "threads": v.threads, **res.as_dict()}
        for model in MODELS:
            row[model] = _model_cells(arch, v.threads, res, model)
        rows.append(row)
    return rows


def variant_table(arch: Arch, as_json: bool) -> str:
    rows = variant_rows(arch)
    if as_json:
        return json.dumps({**_arch_fields(arch), "variants": rows}, indent=2)
    if arch.vendor == "amd":
        res_cols = [("VGPR", "registers"), ("AGPR", "agprs"), ("SGPR", "sgprs"),
                    ("LDS", "shared_bytes")]
    else:
        res_cols = [("regs", "registers"), ("smem", "shared_bytes")]
    headers = ["variant", "threads", *(h for h, _ in res_cols), "spill", "source"]
    for model in MODELS:
        headers += [f"{model} wg", f"{model} {_waves(arch)}", f"{model} occ",
                    f"{model} limit"]
    body = []
    for r in rows:
        line = [r["variant"], r["threads"], *(r[k] for _, k in res_cols),
                r["spill_bytes"], r["source"]]
        for model in MODELS:
            c = r[model]
            line += [c["wg"], c["waves"], f"{c['occ']:.0%}", c["limit"]]
        body.append(line)
    head = (f"{_describe(arch)}; per {arch.unit}: workgroups (wg), {_waves(arch)}, occupancy and "
            f"the binding limit, exact rules vs zhang2025 Eqs. 5-9 (paper)")
    return head + "\n" + tabulate(body, headers=headers)


# --- the architecture table ----------------------------------------------------------

def arch_table() -> str:
    rows = [[a.name, a.vendor, a.family, a.part, a.compute_units, a.unit, a.wave_size,
             a.max_waves_per_cu, a.shared_per_cu, a.max_shared_per_workgroup]
            for a in ARCHS.values()]
    return tabulate(rows, headers=["arch", "vendor", "family", "part", "units", "unit",
                                   "wave", "waves/unit", "shared/unit", "shared/wg max"])


def _waves(arch: Arch) -> str:
    return "warps" if arch.vendor == "nvidia" else "waves"


def _describe(arch: Arch) -> str:
    return (f"{arch.name} ({arch.family}, {arch.part}, {arch.compute_units} "
            f"{arch.unit}s, {arch.max_waves_per_cu} {_waves(arch)} per {arch.unit})")


def _arch_fields(arch: Arch) -> dict:
    return {"arch": arch.name, "vendor": arch.vendor, "family": arch.family,
            "part": arch.part, "compute_units": arch.compute_units, "unit": arch.unit,
            "wave_size": arch.wave_size}


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.arch is None:
            if _given(args, ("threads", *AMD_FLAGS, *NVIDIA_FLAGS)):
                raise UsageError("resource flags need --arch")
            out = json.dumps([a.as_dict() for a in ARCHS.values()], indent=2) \
                if args.json else arch_table()
        else:
            arch = get_arch(args.arch)
            if args.threads is None and not _given(args, (*AMD_FLAGS, *NVIDIA_FLAGS)):
                out = variant_table(arch, args.json)
            else:
                out = one_kernel(arch, args)
    except (PortgemmError, UsageError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    try:
        print(out, flush=True)
    except BrokenPipeError:  # `... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
