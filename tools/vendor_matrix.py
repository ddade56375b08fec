"""The vendor matrix, on a machine with no GPU: compile every kernel variant for
gfx908 and gfx90a (hiprtc), gfx940 (clang) and sm_80 / sm_90 (NVRTC), print what each
compiler reports and what our occupancy model makes of it, and check the model against
LLVM's own occupancy for every AMD variant.

    python tools/vendor_matrix.py [--jobs N] [--arch gfx90a ...] [--family zhang2025 ...]
                                  [--json out.json] [--verbose]

Variants: nn for the whole catalogue, all four transposes for our own families
(ALL_TRANSPOSES), the device-offsets (ragged) entry point of every kind a packed call may
run (the same transposes), and split-K's reduction (both dtypes; not with --family). Every
compile treats warnings as errors ($PORTGEMM_WERROR: NVRTC's log and ptxas, -Wall -Werror
for hiprtc and clang), so a warning is a compile error here.

Exit status 1 on: a compile error (any variant, any arch); a spill or scratch use in a
default variant (DEFAULT_FAMILIES, the fused kernel the default plan launches, float32 and
float64), in any variant of our own families (ALL_TRANSPOSES) or in a ragged one; a
disagreement between our model and LLVM's "Occupancy [waves/SIMD]" remark. A spill in
any other variant is printed as a "warning" line (a plan that picks such a variant warns
in its describe() too).

The LLVM check: LLVM's figure is min(register term, LDS term). Its register term
(VGPR/AGPR/SGPR files, waves per SIMD) is the hardware rule, and our model must give
exactly the same waves per SIMD. Its LDS term is an approximation (no allocation granule, and
in LLVM 15 the waves of a whole CU compared with the per-SIMD cap) - see llvm_lds_waves -
so the check takes that term from LLVM's formula, and one "note" line counts the cells where
our exact LDS rule binds below LLVM's figure (there, waves per CU / 4 is not a whole number
of waves per SIMD); --verbose lists them.

On gfx908/gfx90a the figure columns are hiprtc's (what the hip backend runs). LLVM's
remark comes from clang compiling the same source (hiprtc cannot print remarks), so the
model is checked on clang's figures from that same compile: "LLVM" and "model" columns.
hiprtc's pipeline (source -> bitcode with -amdgpu-prelink, link, optimise again) gives
slightly different register counts than clang's, so both are shown.

Nothing is cached across runs: NVRTC's cache goes to a fresh temporary directory and
hiprtc runs uncached.

Time (CI has 2 cores): the pool runs one task per variant (all its archs), slowest
first. clang starts every compile from the HIP headers precompiled once per arch at the
start (clang_amd.build_pch: the same code object and remark, about 40 % less CPU a
compile; --no-pch to compare), and each worker keeps one hiprtc child for all its
compiles (hiprtc_compile.Server) instead of a Python start-up and hip-python load per
cell. Every cell is still compiled by its own compiler with warnings as errors.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabulate import tabulate  # noqa: E402

from portgemm.errors import PortgemmError  # noqa: E402
from portgemm.kernels import amd_codeobject, clang_amd, nvrtc, offline  # noqa: E402
from portgemm.kernels.render import render  # noqa: E402
from portgemm.kernels.variants import SplitReduce, StageCopy, Variant, catalogue_variants, is_tf32  # noqa: E402
from portgemm.tiles import (FAMILY_DTYPES, HALF_FAMILIES, MFMA_FAMILIES,  # noqa: E402
                            PER_KIND_ONLY, family_builds_for)

HALF_DTYPES = frozenset(HALF_FAMILIES.values())

# The variants whose spills fail CI: the paper's family, fused and per-kind, both dtypes.
DEFAULT_FAMILIES = ("zhang2025",)
ARCHS = ("gfx908", "gfx90a", "gfx940", "sm_80", "sm_90")
# Our own families are compiled for every transpose pair (the 16-byte loads and the
# swizzled stores take different paths for each); the paper's families for nn only, and
# so are the tuning candidates (tiles.PER_KIND_ONLY: 25 kinds, whose other three
# transposes would double the matrix's time in CI; they were checked spill-free in all
# four when chosen, and their GPU tests run all four).
ALL_TRANSPOSES = tuple(f for f in FAMILY_DTYPES if f not in PER_KIND_ONLY)
TRANSPOSES = ((False, True), (True, False), (True, True))


def _catalogue(trans=((False, False),)) -> list[Variant]:
    """The catalogue variants of every arch of the matrix (the portable ones and the
    arch-specific families, AMD's MFMA kinds), each once; builds_for says where."""
    out: dict[str, Variant] = {}
    for a in (None, *ARCHS):
        for v in catalogue_variants(trans=trans, arch=a):
            out.setdefault(v.name, v)
    return list(out.values())


def matrix_variants() -> list[Variant]:
    """nn for every catalogue variant, and nt/tn/tt for those of ALL_TRANSPOSES."""
    more = [v for v in _catalogue(trans=TRANSPOSES)
            if all(k.family in ALL_TRANSPOSES for k in v.kinds)]
    # the entry points beside the GEMM's that render from the same source: the
    # device-offsets (ragged) GEMM and split-K's reduction (the tile expansion is covered
    # by its own tests)
    return (_catalogue() + more + ragged_variants()
            + [SplitReduce(d) for d in ("float32", "float64")] + [StageCopy("float16")])


def ragged_variants() -> list[Variant]:
    """The device-offsets entry point of every kind a packed call may run
    (grouped/ragged_kind.candidate_kinds): nn for the paper's kinds, all four transposes
    for our own families', as for the tile-list variants."""
    from portgemm.grouped.ragged_kind import candidate_kinds
    kinds = [(dtype, k) for dtype in ("float32", "float64", "float16", "bfloat16")
             for k in candidate_kinds(dtype)]
    kinds += [("float32", k) for p in ("tf32", "3xtf32")
              for k in candidate_kinds("float32", None, p)]
    out = [Variant((k,), dtype, "ragged", ta, tb) for dtype, k in kinds
           for ta, tb in ((False, False),) + (TRANSPOSES if k.family in ALL_TRANSPOSES else ())]
    # and the AMD archs' own candidates (the MFMA families; builds_for keeps them there)
    seen = {v.name for v in out}
    for a in ARCHS:
        for dtype in MFMA_FAMILIES.values():
            for k in candidate_kinds(dtype, a):
                for ta, tb in ((False, False),) + TRANSPOSES:
                    v = Variant((k,), dtype, "ragged", ta, tb)
                    if k.family in MFMA_FAMILIES and v.name not in seen:
                        seen.add(v.name)
                        out.append(v)
    return out


OCC_KEY = "Occupancy [waves/SIMD]"


def is_default(v: Variant) -> bool:
    # The fused kernel only: per-kind variants run when a caller asks for mode="per-kind".
    # (With NVRTC 13.0 here, ptxas gives the float64 medium-large per-kind kernel 80
    # registers and a 4-byte spill on sm_90; it now warns instead of failing.)
    return isinstance(v, Variant) and v.layout == "tile-list" and v.fused and \
        all(k.family in DEFAULT_FAMILIES for k in v.kinds) and v.dtype in ("float32", "float64")


def must_not_spill(v: Variant) -> bool:
    """Default variants, every variant of our own families and every ragged entry point
    (what a device-offsets call runs) fail CI when they spill."""
    return not isinstance(v, Variant) or is_default(v) or v.layout == "ragged" or \
        all(k.family in FAMILY_DTYPES for k in v.kinds)


REGISTER_LIMITS = ("waves", "vgpr", "agpr", "sgpr")


def _model(arch: str, threads: int, res) -> dict:
    from portgemm.occupancy import get_arch, occupancy
    a = get_arch(arch)
    try:
        o = occupancy(a, threads, res)
    except PortgemmError as e:
        return {"error": str(e)}
    out = {"waves": o.active_waves, "occ": o.occupancy, "limit": o.limited_by}
    if a.vendor == "amd":
        simds = a.rules.simds
        out["per_simd"] = o.active_waves / simds
        # The per-SIMD wave limit of the register files alone: what LLVM computes
        # exactly as the hardware does (getOccupancyWithNumVGPRs/SGPRs).
        out["reg_per_simd"] = min(o.wave_limits[k] for k in REGISTER_LIMITS
                                  if o.wave_limits.get(k) is not None) / simds
        out["llvm_lds"] = llvm_lds_waves(a, threads, res.shared_bytes)
    return out


# LLVM 15 compares waves per CU from LDS with the per-SIMD cap; current LLVM divides them
# by the SIMDs first (divideCeil(.., getEUsPerCU())). Verified here on clang 15 only; the
# release that changed it is assumed to be 18.
LLVM_LDS_PER_SIMD_SINCE = 18


def llvm_major() -> int:
    m = re.search(r"clang version (\d+)", clang_amd.version())
    return int(m.group(1)) if m else 0


def llvm_lds_waves(a, threads: int, lds: int, major: int | None = None) -> int:
    """LLVM's own LDS term (AMDGPUSubtarget::getOccupancyWithLocalMemSize): workgroups
    fitting in LDS (no allocation granule) x waves per workgroup, capped at the waves per
    SIMD. It is not the hardware rule, so the check below uses it only where LDS is what
    bounds LLVM's figure; our model keeps the exact rule (whole workgroups per CU)."""
    r = a.rules
    nw = -(-threads // a.wave_size)
    max_wg = a.max_waves_per_cu if nw == 1 else min(a.max_waves_per_cu // nw, r.barriers)
    groups = a.shared_per_cu // max(lds, 1)
    if groups == 0:
        return 1
    waves = min(groups, max_wg) * nw
    if (llvm_major() if major is None else major) >= LLVM_LDS_PER_SIMD_SINCE:
        waves = -(-waves // r.simds)
    return min(r.waves_per_simd, waves)


# A worker's long-lived hiprtc child (hiprtc_compile.Server): one Python start-up and
# hip-python load per worker instead of one per hiprtc cell.
_server = None


def _hiprtc_server():
    global _server
    if _server is None:
        from portgemm.kernels import hiprtc_compile
        _server = hiprtc_compile.Server()
    return _server


def _close_server():
    global _server
    if _server is not None:
        _server.close()
        _server = None


def compile_cell(variant, arch: str, pch=None):
    """(code, resources, clang's result or None) of one cell: the arch's own compiler
    and, on AMD, clang with LLVM's remark (the same compile on gfx940; a second one
    beside hiprtc's on gfx908/gfx90a, since hiprtc prints no remarks). ``pch``: clang's
    precompiled HIP headers for this arch (clang_amd.build_pch), or None."""
    which = offline.compiler_for(arch)
    r = render(variant)
    if which == "nvrtc":
        return (*offline.nvrtc_compile(r, arch), None)
    c = clang_amd.compile(r.source, r.name, arch, pch=pch)
    if which == "clang":
        return c.code, c.resources, c
    from portgemm.kernels import hiprtc_compile
    code, res = hiprtc_compile.compile(r.source, r.name, arch, cache=False,
                                       server=_hiprtc_server())
    return code, res, c


def cell(variant, arch: str, pch=None) -> dict:
    """One (variant, arch) cell: compile, read resources, run the model; for AMD also
    clang's compile with LLVM's remark. Errors come back as text, never raised."""
    row = {"variant": variant.name, "arch": arch, "default": is_default(variant),
           "no_spill": must_not_spill(variant), "threads": variant.threads}
    t0 = time.perf_counter()
    try:
        row["compiler"] = offline.compiler_for(arch)
        code, res, c = compile_cell(variant, arch, pch)
        if c is not None:
            row["scratch"] = amd_codeobject.parse(code).kernels[variant.name].scratch_bytes
        row["resources"] = res.as_dict()
        row["model"] = _model(arch, variant.threads, res)
        if c is not None:
            row["clang"] = c.resources.as_dict()
            row["remark"] = c.remark
            row["clang_model"] = _model(arch, variant.threads, c.resources)
    except PortgemmError as e:
        row["error"] = f"{type(e).__name__}: {e}"
    row["seconds"] = time.perf_counter() - t0
    return row


def builds_for(variant, arch: str) -> bool:
    """Whether ``variant`` is built for ``arch``: the arch-specific families only where
    they exist (tiles.FAMILY_ARCHS: the MFMA families on gfx908 / gfx90a / gfx94x, never
    on NVIDIA); on AMD the 16-bit dtypes only in the MFMA families (the NVIDIA mma.sync
    families' AMD emulation is never planned there: planner._half_request), and no TF32
    kinds (variants.is_tf32: NVIDIA tensor cores only, archs.TF32_MMA)."""
    kinds = getattr(variant, "kinds", ())
    if not all(family_builds_for(k.family, arch) for k in kinds):
        return False
    return not (arch.startswith("gfx") and (
        is_tf32(variant) or (getattr(variant, "dtype", None) in HALF_DTYPES
                             and any(k.family in HALF_FAMILIES for k in kinds))))


def job(args) -> list[dict]:
    """Every arch's cell of one variant (one task of the pool: the variant renders once
    and the worker's hiprtc child serves both hiprtc archs)."""
    variant, archs, pchs = args
    return [cell(variant, a, pchs.get(a)) for a in archs if builds_for(variant, a)]


def cost(variant) -> tuple:
    """A sort key, larger for slower variants (fused, float64, bigger tiles), so the pool
    starts the long tasks first and does not end on a straggler."""
    kinds = getattr(variant, "kinds", ())
    return (len(kinds), variant.dtype == "float64",
            max((k.tm * k.tn for k in kinds), default=0), variant.threads)


def build_pchs(archs, directory: Path) -> dict:
    """{arch: clang's precompiled HIP headers} for the AMD archs, built side by side;
    an arch whose PCH fails is compiled without one (its note says why)."""
    from concurrent.futures import ThreadPoolExecutor
    amd = [a for a in archs if a.startswith("gfx")]
    out = {}

    def one(a):
        try:
            return a, clang_amd.build_pch(a, directory / f"hip-{a}.pch"), None
        except PortgemmError as e:
            return a, None, e
    with ThreadPoolExecutor(max_workers=max(1, len(amd))) as ex:
        for a, path, err in ex.map(one, amd):
            if path is not None:
                out[a] = str(path)
            else:
                print(f"note: no precompiled HIP headers for {a} ({str(err).splitlines()[0]}); "
                      f"compiling without")
    return out


def check(row: dict) -> list[str]:
    """The reasons this cell fails CI (empty: it passes)."""
    if "error" in row:
        return [f"compile error: {row['error'].splitlines()[0]}"]
    bad = []
    spill, scratch = spills(row)
    if row.get("no_spill", row["default"]) and (spill or scratch):
        bad.append(f"{'default' if row['default'] else 'own-family'} variant spills ({spill} bytes spilled, {scratch} bytes scratch)")
    if "error" in row["model"]:
        bad.append(f"model: {row['model']['error']}")
    if "remark" in row:
        llvm, m, c = row["remark"].get(OCC_KEY), row["clang_model"], row["clang"]
        # Registers are checked against our model; LDS through LLVM's own formula.
        expect = None if "error" in m else min(m["reg_per_simd"], m["llvm_lds"])
        if llvm is None or expect != llvm:
            bad.append(f"model {expect} waves/SIMD != LLVM {llvm} (model: registers "
                       f"{m.get('reg_per_simd')}, LLVM's LDS term {m.get('llvm_lds')}; clang "
                       f"VGPR {c['registers']} AGPR {c['agprs']} SGPR {c['sgprs']} "
                       f"LDS {c['shared_bytes']})")
    return bad


def spills(row: dict) -> tuple[int, int]:
    """(bytes spilled by the compiler's report, scratch bytes of the AMD code object)."""
    return row["resources"]["spill_bytes"], row.get("scratch", 0)


def spill_warning(row: dict) -> str | None:
    """Why a non-default variant's cell deserves a warning (it spills), or None.
    Default variants that spill fail in ``check`` instead."""
    if "error" in row or row.get("no_spill", row["default"]):
        return None
    spill, scratch = spills(row)
    if not (spill or scratch):
        return None
    where = f" ({scratch} bytes scratch)" if "scratch" in row else ""
    return (f"spills {spill} bytes{where}; not a default variant, so not a failure, but "
            f"plans that use it may run slower than their occupancy suggests")


def notes_and_warnings(rows: list[dict], verbose: bool = False) -> list[str]:
    """Lines after the table that do not fail CI: one summary of the LDS-bound cells
    (each listed with ``verbose``) and one warning per spilling non-default cell."""
    lds = [r for r in rows if "remark" in r and not check(r)
           and r["clang_model"]["per_simd"] != r["remark"][OCC_KEY]]
    out = []
    if lds:
        out.append(f"note: {len(lds)} AMD cells are LDS-bound, where our exact model (whole "
                   f"workgroups per CU) gives fewer waves/SIMD than LLVM's remark (its LDS "
                   f"term counts whole-CU waves against the per-SIMD cap); all pass the "
                   f"register check{'' if verbose else '; --verbose lists them'}")
    for r in lds if verbose else ():
        m = r["clang_model"]
        out.append(f"note {r['variant']} {r['arch']}: LDS-bound; exact model "
                   f"{m['per_simd']:g} waves/SIMD, LLVM {r['remark'][OCC_KEY]}; registers "
                   f"agree at {m['reg_per_simd']:g}")
    for r in rows:
        why = spill_warning(r)
        if why:
            out.append(f"warning {r['variant']} {r['arch']}: {why}")
    return out


def _fmt_per_simd(x) -> str:
    return "-" if x is None else (f"{x:g}")


def table(rows: list[dict]) -> str:
    body = []
    for r in rows:
        if "error" in r:
            body.append([r["variant"], r["arch"], r.get("compiler", "?"), "ERROR", *[""] * 10])
            continue
        res, m = r["resources"], r["model"]
        occ = "err" if "error" in m else f"{m['waves']} ({m['occ']:.0%}, {m['limit']})"
        llvm = cm = ""
        if "remark" in r:
            llvm = r["remark"].get(OCC_KEY, "?")
            cm = _fmt_per_simd(r["clang_model"].get("per_simd"))
            if r["compiler"] == "hiprtc":
                llvm = f"{llvm} (clang V{r['clang']['registers']})"
        amd = r["arch"].startswith("gfx")
        body.append([r["variant"] + (" *" if r["default"] else ""), r["arch"], r["compiler"],
                     res["registers"], res["sgprs"] if amd else "-", res["agprs"] if amd else "-",
                     res["shared_bytes"], res["spill_bytes"],
                     r.get("scratch", "-"),
                     occ, llvm, cm, "FAIL" if check(r) else "ok"])
    return tabulate(body, headers=["variant (* default)", "arch", "compiler", "VGPR/regs", "SGPR",
                                   "AGPR", "LDS/smem", "spill", "scratch",
                                   "waves/CU (occ, limit)", "LLVM w/SIMD", "model w/SIMD", ""])


def usable_cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=usable_cores(),
                   help="worker processes (default: the cores this process may use)")
    p.add_argument("--arch", action="append", choices=ARCHS, help="default: all")
    p.add_argument("--family", action="append", help="only variants of these tile families")
    p.add_argument("--json", type=Path, help="also write every cell as JSON")
    p.add_argument("--no-pch", action="store_true",
                   help="clang parses the HIP headers in every compile (to compare)")
    p.add_argument("--verbose", action="store_true",
                   help="list every LDS-bound cell instead of one summary line")
    args = p.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="portgemm-matrix-")
    os.environ["PORTGEMM_CACHE_DIR"] = tmp
    os.environ[nvrtc.WERROR_ENV] = "1"   # the pool's workers and hiprtc's child inherit it

    archs = args.arch or list(ARCHS)
    variants = [v for v in matrix_variants()
                if not args.family or isinstance(v, Variant) and
                all(k.family in args.family for k in v.kinds)]
    t0 = time.perf_counter()
    print("compilers:")
    for a in archs:
        try:
            print(f"  {a:7s} {offline.compiler_for(a):7s} {offline.version(a)}")
        except PortgemmError as e:
            print(f"  {a:7s} unavailable: {e}")
    if any(a.startswith("gfx") for a in archs):
        try:
            print(f"  LLVM remarks from {clang_amd.version()} ({clang_amd.toolchain().clang})")
        except PortgemmError as e:
            print(f"  LLVM remarks unavailable: {e}")
    sys.stdout.flush()

    pchs = {} if args.no_pch else build_pchs(archs, Path(tmp))
    # One task per variant (all its archs), the slowest first.
    tasks = [(v, tuple(archs), pchs) for v in sorted(variants, key=cost, reverse=True)]
    if args.jobs <= 1:  # in this process (tests patch the compilers)
        try:
            done = [job(t) for t in tasks]
        finally:
            _close_server()
    else:
        with ProcessPoolExecutor(max_workers=args.jobs) as ex:
            done = list(ex.map(job, tasks))
    order = {(v.name, a): i for i, (v, a) in enumerate((v, a) for v in variants for a in archs
                                                        if builds_for(v, a))}
    rows = sorted((r for rs in done for r in rs), key=lambda r: order[(r["variant"], r["arch"])])
    wall = time.perf_counter() - t0

    print(table(rows))
    failures = [(r, why) for r in rows for why in check(r)]
    amd = [r for r in rows if "remark" in r]
    agree = sum(1 for r in amd if not any("LLVM" in w for w in check(r)))
    hip_vs_clang = [r for r in amd if r["compiler"] == "hiprtc"
                    and r["resources"]["registers"] != r["clang"]["registers"]]
    print(f"\n{len(rows)} cells ({len(variants)} variants over {len(archs)} archs; 16-bit: mma.sync "
          f"families on NVIDIA, MFMA families on AMD), "
          f"{sum(1 for r in rows if 'error' in r)} compile errors, "
          f"model vs LLVM: {agree}/{len(amd)} AMD cells agree, "
          f"hiprtc vs clang VGPRs differ in {len(hip_vs_clang)} cells; "
          f"{wall:.0f} s wall with {args.jobs} jobs "
          f"({sum(r['seconds'] for r in rows):.0f} s of compiling)")
    if args.json:
        args.json.write_text(json.dumps({"wall_s": wall, "rows": rows}, indent=1))
    for line in notes_and_warnings(rows, args.verbose):
        print(line)
    for r, why in failures:
        print(f"FAIL {r['variant']} {r['arch']}: {why}")
    for r in rows:
        if "error" in r:
            print(f"\n--- {r['variant']} {r['arch']} ---\n{r['error'][-3000:]}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
