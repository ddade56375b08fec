"""``python -m portgemm.occupancy``: occupancy of one kernel, or of every catalogue variant.

    python -m portgemm.occupancy                          the architecture table
    python -m portgemm.occupancy --arch cdna2             every variant, both models
    python -m portgemm.occupancy --arch gfx90a --threads 256 --vgprs 64 --sgprs 40 --json
    python -m portgemm.occupancy --arch sm_80 --threads 256 --regs 64 --model paper

Bad input (unknown arch, impossible resources, flags of the other vendor, malformed
arguments) exits with status 2 and one line on stderr.

The variant table compiles every variant for the arch when its compiler is installed
(NVRTC for sm_XY, hiprtc for gfx908/gfx90a, clang for gfx940; a notice on stderr says
so, since a first compile takes seconds); otherwise it shows recorded figures, then
estimates. A legend under the table says which rows are which.
"""
from __future__ import annotations

import json
import os
import sys
import textwrap

from tabulate import tabulate

from ..cli import OneLineParser
from ..errors import PortgemmError
from .archs import ARCHS, Arch, get_arch, known_names
from .model import MODELS, occupancy
from .resources import KernelResources

PROG = "python -m portgemm.occupancy"
DESCRIPTION = ("Occupancy of one kernel (give --arch, --threads and its resources), or of "
               "every kernel variant of the catalogue (give only --arch), or the "
               "architecture table (no arguments).")
AMD_FLAGS = ("vgprs", "agprs", "sgprs", "lds")
NVIDIA_FLAGS = ("regs", "smem")


class UsageError(Exception):
    """A flag combination argparse cannot see is wrong."""


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description=DESCRIPTION)
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
            f"{_count(occ.waves_per_workgroup, waves)} per workgroup")
    table = tabulate(rows, headers=["limit", f"workgroups/{arch.unit}",
                                    f"{waves}/{arch.unit}", ""])
    tail = (f"active: {_count(occ.active_workgroups, 'workgroups')}, {occ.active_waves} of "
            f"{occ.max_waves} {waves} per {arch.unit}: occupancy {occ.occupancy:.1%}, "
            f"limited by {occ.limited_by}")
    return "\n".join([head, table, tail])


# --- every catalogue variant ---------------------------------------------------------

CANNOT_LAUNCH = "no fit"


def _model_cells(arch: Arch, threads: int, res: KernelResources, model: str) -> dict:
    try:
        o = occupancy(arch, threads, res, model=model)
    except PortgemmError as e:  # a variant that cannot launch here still gets its row
        return {"wg": 0, "waves": 0, "occ": 0.0, "limit": CANNOT_LAUNCH, "why": str(e)}
    return {"wg": o.active_workgroups, "waves": o.active_waves, "occ": o.occupancy,
            "limit": o.limited_by}


def tile_shape(variant) -> str:
    """BMxBN, BK and micro-tile of a one-kind variant ("128x128 k8 8x8"; an MMA kind
    "64x64 k8 w32x32": w, a warp's sub-tile on the matrix units); a fused
    variant names how many kinds it carries (each has its own per-kind row)."""
    if len(variant.kinds) > 1:
        return f"fused {len(variant.kinds)}"
    k = variant.kinds[0]
    if k.engine == "mma":   # a warp's (AMD MFMA: a wave's) sub-tile of MMA fragments
        return f"{k.tm}x{k.tn} k{k.tk} w{k.rm}x{k.rn}"
    return f"{k.tm}x{k.tn} k{k.tk} {k.rm}x{k.rn}"


def variant_rows(arch: Arch) -> list[dict]:
    """One dict per catalogue variant: its resources, where they come from ("origin":
    compiled, recorded or estimate) and both models' occupancy."""
    from ..kernels import offline
    from ..kernels.resources import lookup, recorded
    from ..kernels.variants import catalogue_variants
    variants = catalogue_variants(arch=arch.name)   # with the arch's own families (MFMA)
    # Compiled figures where this arch's compiler is installed (no GPU needed); else
    # lookup falls back to the recorded ones (tools/record_resources.py), then estimates.
    if _compiler_here(arch):
        which = offline.compiler_for(arch.name)
        print(f"compiling {len(variants)} kernel variants for {arch.name} with {which} "
              f"({'uncached: seconds every run' if which == 'clang' else 'seconds the first time, cached after'})...",
              file=sys.stderr, flush=True)
    compiled = offline.register_compiled(arch.name, variants)
    rows = []
    for v in variants:
        res = lookup(arch, v)
        origin = ("compiled" if isinstance(compiled.get(v.name), KernelResources) else
                  "recorded" if recorded(arch.name, v.name) is not None else "estimate")
        row = {"variant": v.name, "tile": tile_shape(v), "threads": v.threads, **res.as_dict(),
               "origin": origin}
        for model in MODELS:
            row[model] = _model_cells(arch, v.threads, res, model)
        rows.append(row)
    return rows


# Short column names keep an AMD table within 180 columns; the heading explains them.
MODEL_COLUMNS = {"exact": ("wg", "waves", "occ", "limit"),
                 "paper": ("P wg", "P waves", "P occ", "P limit")}


def variant_table(arch: Arch, as_json: bool) -> str:
    rows = variant_rows(arch)
    if as_json:
        return json.dumps({**_arch_fields(arch), "variants": rows}, indent=2)
    if arch.vendor == "amd":
        res_cols = [("VGPR", "registers"), ("AGPR", "agprs"), ("SGPR", "sgprs"),
                    ("LDS", "shared_bytes")]
    else:
        res_cols = [("regs", "registers"), ("smem", "shared_bytes")]
    headers = ["variant", "tile", "thr", *(h for h, _ in res_cols), "spill", "source"]
    for model in MODELS:
        headers += [h.replace("waves", _waves(arch)) for h in MODEL_COLUMNS[model]]
    body = []
    for r in rows:
        line = [r["variant"], r["tile"], r["threads"], *(r[k] for _, k in res_cols),
                r["spill_bytes"], r["origin"]]
        for model in MODELS:
            c = r[model]
            line += [c["wg"], c["waves"], f"{c['occ']:.0%}", c["limit"]]
        body.append(line)
    waves = _waves(arch)
    head = (f"{_describe(arch)}\ntile: BMxBN, k step, micro-tile (a fused variant: how many kinds "
            f"it carries)\nthreads per workgroup (thr); per {arch.unit}: workgroups (wg), "
            f"{waves}, occupancy (occ) and the binding limit; exact rules, then zhang2025 "
            f"Eqs. 5-9 (P)")
    notes = [textwrap.fill(n, 150, subsequent_indent="  ") for n in legend(arch, rows)]
    return "\n".join([head, tabulate(body, headers=headers), *notes])


def legend(arch: Arch, rows: list[dict]) -> list[str]:
    """What the source column means for this table, and why estimates appear."""
    out = []
    for origin in ("compiled", "recorded", "estimate"):
        srcs = sorted({r["source"] for r in rows if r["origin"] == origin})
        if not srcs:
            continue
        if origin == "estimate":
            why = (f"no compiler for {arch.name} here and no recorded figures"
                   + (f"; {NO_COMPILER[arch.name]}" if arch.name in NO_COMPILER else ""))
            out.append(f"estimate: registers guessed from the tile shape ({why}); "
                       f"LDS/smem is exact")
        else:
            what = "compiled now by" if origin == "compiled" else \
                "recorded in kernels/recorded_resources.json from"
            out.append(f"{origin}: {what} {'; '.join(srcs)}")
    if any(r[m]["limit"] == CANNOT_LAUNCH for r in rows for m in MODELS):
        out.append(f"{CANNOT_LAUNCH}: not one workgroup of that variant fits ({PROG} --json "
                   f"says why)")
    return out


# Archs whose compiler the toolchain of .ci/install_rocm.sh lacks, and why.
NO_COMPILER = {
    "gfx942": "cdna3 / MI300X resolves to gfx942, which needs clang 19 or later; ROCm 5.2's "
              "hiprtc and clang-15 cannot target it",
    "gfx1100": "clang-15 finds no ROCm device library for gfx1100 in Debian's ROCm 5.2, and "
               "its hiprtc aborts on gfx1100",
}


def _compiler_here(arch: Arch) -> bool:
    from ..kernels import offline
    try:
        return offline.available(arch.name)
    except PortgemmError:
        return False


# --- the architecture table ----------------------------------------------------------

def arch_table() -> str:
    rows = [[a.name, a.vendor, a.family, a.part, a.compute_units, a.unit, a.wave_size,
             a.max_waves_per_cu, a.shared_per_cu, a.max_shared_per_workgroup]
            for a in ARCHS.values()]
    return tabulate(rows, headers=["arch", "vendor", "family", "part", "units", "unit",
                                   "wave", "waves/unit", "shared/unit", "shared/wg max"])


def _count(n: int, plural: str) -> str:
    """"1 workgroup", "4 workgroups" (also waves, warps)."""
    return f"{n} {plural[:-1] if n == 1 else plural}"


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
