"""Device ceilings, as data: the rates the planner's cost model divides by.

Per arch, ``ceilings_for(arch)`` gives a :class:`Ceilings`:

- a **measured** entry of ``ceilings.json`` (written on the device by
  ``python -m portgemm bench --ceilings``, portgemm/benchmark/ceilings.py) when there is
  one for the arch's name; otherwise
- a **modelled** one, derived from the arch's spec row in the same file and the
  architecture table's compute-unit count (so a part with more CUs scales):
  FMA rate = CUs x FP32 lanes per CU x 2 x clock x SUSTAINED (fp64: x fp64_ratio),
  copy bandwidth = DRAM spec x COPY_FRACTION, shared memory = bytes/clk/CU x clock.
  The two fractions are what the H100 measured against its spec sheet (51.6 of 66.9
  TFLOP/s; 3.0 of 3.35 TB/s), rounded; nothing else in a modelled row was measured.

``Ceilings.origin`` says which ("measured" or "modelled") so describe() and the
benchmark can tell the reader.

A measured entry may also carry ``kind_factors``: per tile kind (its catalogue name),
the measured / modelled tile time of that kind run alone, fitted on the device by
``python -m portgemm.tuning.kind_factors`` over the tuning sweep's uniform sizes. The
cost model multiplies the kind's tile time by it, as it does a tuned family's factors,
but only for a family every kind of which has one (:meth:`Ceilings.kind_factors_of`):
a half-corrected family would weigh corrected kinds against uncorrected ones. Where
none is measured (other archs, other families) nothing changes.

An entry may also carry ``kind_depth_factors``: per kind, the factor at each depth K of
the sweep ([[K, factor], ...], the geometric mean over that depth's sizes). Where every
kind of a family has one, the cost model reads the kind's factor at the batch's depth
(:meth:`Ceilings.kind_factors_of` with ``depth``: piecewise linear in log K, constant
beyond the ends) instead of the one figure: on the H100 the fp32 kinds with tk 8 run
10-32 % over the model at K = 32 and up to 11 % under it at K = 1024, while the tk 16
kinds' factors vary by under 3 % with K, so one figure per kind priced the 8-deep tiles as
cheaply on short GEMMs as on long ones (bench/NOTES.md, session 8).

And ``kind_step_floors``: per kind, the seconds one K step of a tile takes when the tile
is alone on its compute unit, on the 16-byte load path and on the scalar one ([aligned,
unaligned]), measured on the device by ``python -m portgemm.tuning.step_floors``. A
lone tile's step is its own chain of loads, a barrier and MMAs or FMAs; the throughput
figures above describe full waves, while a launch of about one tile per unit is bound by
this chain (on the H100's 16-bit grid a lone 64x64 tile took ~1.2-1.6 us a step where
the model, its factor included, charged ~0.6: bench/NOTES.md, session 17). The cost
model prices a step no shorter than the floor times how alone its tile is
(cost_model.lone_weight: all of it alone on a unit, none once the unit's warps can
overlap the chains). As for kind factors, a family is floored only where every kind has
a figure (:meth:`Ceilings.step_floors_of`); on the H100 the 16-bit mma.sync families
have them, the wgmma ones do not (theirs moved staged batches onto the slower wgmma
kind).

And ``kind_path_factors``: per 16-bit kind, its tile time on each of the kernel's three
copy paths for staged rows - 16-byte (rows a multiple of 16 bytes), 4-byte (even
leading dimensions) and 2-byte (odd ones) - relative to one another ([16-byte, 4-byte,
2-byte], the greatest 1), fitted with the kind factors by ``python -m
portgemm.tuning.kind_factors``. The cost model scales a kind's tile time by them,
weighted by the batch's share of staged loads on each path (occupancy/vector_path.py),
and the kind factors stored beside them are what the paths leave unexplained. One factor
fitted over aligned and odd sizes together priced a batch of random sizes (7 in 8 of its
rows off the 16-byte path) like neither (bench/NOTES.md, session 18). As for kind
factors, a family has them only where every kind has them; a family without any (the
wgmma ones, which copy aligned rows only) is 1 on every path beside one that has them.
"""
from __future__ import annotations

import json
import math
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .. import generation
from ..tiles import MFMA_FAMILIES, WGMMA_FAMILIES, mma_products, wgmma_tf32
from .archs import has_fp64_mma, has_half_mma, has_mfma, has_tf32_mma, has_wgmma

PATH = Path(__file__).with_name("ceilings.json")

SUSTAINED = 0.8       # sustained / peak FMA rate under a full load (H100: 0.77)
COPY_FRACTION = 0.9   # device-to-device copy / DRAM spec bandwidth (H100: 0.90)

# The MMA kinds without matrix units (kernels/compat.h): per lane and 8x8x4 MMA, 8 FMAs
# as SIMT would do them plus 16 shuffles; a model figure, not measured.
MMA_EMULATION = 0.25
# Optional in a measured entry (else modelled from the spec row's fp64_mma_ratio,
# half_mma_ratio, TF32_OF_HALF and MFMA_RATIOS; wgmma_flops_per_s: else 0, the wgmma kinds
# priced at the mma.sync rate).
MFMA_FIELDS = {"float16": "mfma_f16_flops_per_s", "bfloat16": "mfma_bf16_flops_per_s",
               "float64": "mfma_f64_flops_per_s"}
OPTIONAL_FIELDS = ("fp64_mma_flops_per_s", "half_mma_flops_per_s", "tf32_mma_flops_per_s",
                   *MFMA_FIELDS.values(), "wgmma_flops_per_s")
# The measured per-kind tile-time factors of a measured entry: {kind name: factor}.
KIND_FACTORS = "kind_factors"
# ... and per depth: {kind name: [[K, factor], ...]} (K ascending)
KIND_DEPTH_FACTORS = "kind_depth_factors"
# A tile's K step alone on its compute unit: {kind name: [aligned, unaligned] seconds}.
KIND_STEP_FLOORS = "kind_step_floors"
# A 16-bit kind's tile time per copy path: {kind name: [16-byte, 4-byte, 2-byte]}.
KIND_PATH_FACTORS = "kind_path_factors"

# AMD matrix cores (MFMA kinds, tiles.MFMA_FAMILIES): the spec row's key per dtype. The
# 16-bit ratios are to the unpacked fp32 vector rate (one FMA per lane and clock), fp64's
# to the fp64 SIMT rate, each the vendor's peak matrix figure over its peak vector figure
# (dense, no sparsity):
#   gfx908 (MI100 datasheet): fp16 184.6 / fp32 23.1 TFLOP/s = 8, bf16 92.3 / 23.1 = 4,
#     no fp64 MFMA;
#   gfx90a (MI210 datasheet): fp16 = bf16 181.0 / fp32 22.6 = 8, fp64 45.3 / 22.6 = 2;
#   gfx940 / gfx942 (MI300X datasheet): fp16 = bf16 1307.4 / 81.7 = 16 (81.7: fp32
#     without packed math, which is what our CUs x 64 x 2 x clock counts), fp64 163.4 /
#     81.7 = 2.
# Peak ratios scaled by SUSTAINED like the SIMT rates; none of it measured (no AMD GPU).
# The SIMT fp32 rate itself is twice the unpacked one on gfx90a and gfx94x (the spec row's
# fp32_packed: MI210 45.3 packed against 22.6, MI300X 163.4 against 81.7): there every
# FMA of our SIMT kinds' main loops is a packed v_pk_fma_f32 (kernels/amd_isa.py).
MFMA_RATIOS = {"float16": "mfma_f16_ratio", "bfloat16": "mfma_bf16_ratio",
               "float64": "mfma_f64_ratio"}
# TF32 over float16 MMA rate where no TF32 figure is measured: 1/2 on the A100 (156 / 312
# TFLOP/s) and the H100 SXM (494 / 989 dense), spec sheets.
TF32_OF_HALF = 0.5

FIELDS = ("copy_bytes_per_s", "smem_bytes_per_s_per_cu", "fp32_flops_per_s",
          "fp64_flops_per_s", "launch_s", "latency_s")


@dataclass(frozen=True)
class Ceilings:
    arch: str
    origin: str                      # "measured" | "modelled"
    copy_bytes_per_s: float          # whole device, read + write bytes of a large copy
    smem_bytes_per_s_per_cu: float   # shared memory (LDS) bandwidth of one compute unit
    fp32_flops_per_s: float          # whole device, SIMT FMA (2 FLOP each), sustained
    fp64_flops_per_s: float
    launch_s: float                  # one back-to-back launch, host side included
    latency_s: float                 # one dependent global load (DRAM)
    source: str = ""
    fp64_mma_flops_per_s: float = 0.0   # fp64 on matrix units (DMMA); 0: none (archs.FP64_MMA)
    # float16 / bfloat16 on tensor cores (mma.sync, fp32 accumulators); 0: none (archs.HALF_MMA)
    half_mma_flops_per_s: float = 0.0
    # AMD matrix cores: the MFMA kinds' rate per dtype (archs.MFMA); 0: none
    mfma_f16_flops_per_s: float = 0.0
    mfma_bf16_flops_per_s: float = 0.0
    mfma_f64_flops_per_s: float = 0.0
    # fp32 as TF32 on tensor cores (mma.sync m16n8k8, one TF32 product); 0: none (archs.TF32_MMA)
    tf32_mma_flops_per_s: float = 0.0
    # float16 / bfloat16 through the wgmma kinds (Hopper wgmma.mma_async, archs.WGMMA),
    # measured only; 0: none measured, the kinds are priced at half_mma's rate
    wgmma_flops_per_s: float = 0.0
    # measured / modelled tile time per kind, ((kind name, factor), ...) sorted by name
    # (a tuple, so a Ceilings stays hashable); () where none was measured
    kind_factors: tuple = ()
    # per kind, the factor per depth: ((kind name, ((K, factor), ...)), ...); () if none
    kind_depth_factors: tuple = ()
    # per kind, a lone tile's K step: ((kind name, (aligned s, unaligned s)), ...); ()
    kind_step_floors: tuple = ()
    # per kind, its tile time per copy path: ((kind name, (16-byte, 4-byte, 2-byte)), ...)
    kind_path_factors: tuple = ()

    def kind_factors_of(self, kinds, depth: float | None = None):
        """The measured factor of each of ``kinds`` (a float64 array, in their order), or
        None unless every one of them has one (module docstring). ``depth``: the batch's
        K (cost_model.depth_of); where every kind has factors per depth, each kind's
        factor at that K."""
        got = _every_kind(self.kind_factors, kinds)
        if got is None:
            return None
        if depth is not None and self.kind_depth_factors:
            prof = dict(self.kind_depth_factors)
            rows = [prof.get(k.name) for k in kinds]
            if None not in rows:
                x = math.log(max(float(depth), 1.0))
                got = [math.exp(float(np.interp(x, [math.log(d) for d, _ in r],
                                                [math.log(f) for _, f in r]))) for r in rows]
        return np.array(got, dtype=np.float64)

    def step_floors_of(self, kinds):
        """(aligned, unaligned): float64 arrays of the measured lone-tile K step of each
        of ``kinds`` on the 16-byte and the scalar load path, or None unless every one of
        them has one (module docstring)."""
        got = _every_kind(self.kind_step_floors, kinds)
        if got is None:
            return None
        return (np.array([a for a, _ in got], dtype=np.float64),
                np.array([u for _, u in got], dtype=np.float64))

    def path_factors_of(self, kinds):
        """(16-byte, 4-byte, 2-byte): float64 arrays of each of ``kinds``' measured tile
        time per copy path, or None where none has them or a family has them for some of
        its kinds only (module docstring). The kinds of a family without any are 1 on
        every path: the families weighed beside a 16-bit one (wgmma) copy aligned rows
        only, where their kind factors were fitted."""
        if not self.kind_path_factors:
            return None
        by_name = dict(self.kind_path_factors)
        rows = [by_name.get(k.name) for k in kinds]
        covered = {k.family for k, r in zip(kinds, rows) if r is not None}
        if not covered or any(r is None and k.family in covered for k, r in zip(kinds, rows)):
            return None
        rows = [(1.0, 1.0, 1.0) if r is None else r for r in rows]
        return tuple(np.array([r[i] for r in rows], dtype=np.float64) for i in range(3))

    def flops_per_s(self, dtype: str) -> float:
        return self.fp64_flops_per_s if dtype == "float64" else self.fp32_flops_per_s

    def mma_flops_per_s(self, dtype: str) -> float:
        """The rate of the MMA kinds (fp64, float16, bfloat16, float32 as TF32: one TF32
        product each; 3xtf32 takes three, tiles.mma_products): the matrix units' where
        the arch has them, else their shuffle emulation's, MMA_EMULATION of the SIMT
        rate (the 16-bit kinds' SIMT rate is fp32's: they compute in fp32)."""
        if self.fp64_mma_flops_per_s > 0 and dtype == "float64":
            return self.fp64_mma_flops_per_s
        if self.half_mma_flops_per_s > 0 and dtype in ("float16", "bfloat16"):
            return self.half_mma_flops_per_s
        if self.tf32_mma_flops_per_s > 0 and dtype == "float32":
            return self.tf32_mma_flops_per_s
        return self.flops_per_s(dtype) * MMA_EMULATION

    def kind_flops_per_s(self, kind, dtype: str) -> float:
        """The rate of one tile kind, by its engine: SIMT (flops_per_s), the NVIDIA MMA
        kinds (mma_flops_per_s over the MMAs a product takes; the wgmma kinds their own
        measured wgmma_flops_per_s where there is one), or AMD's MFMA kinds (mfma_flops_per_s; where this arch
        has none for the dtype, which the planner never asks, the emulation's rate)."""
        if kind.engine != "mma":
            return self.flops_per_s(dtype)
        if kind.family in MFMA_FAMILIES:
            return self.mfma_flops_per_s(dtype) or self.flops_per_s(dtype) * MMA_EMULATION
        if kind.family in WGMMA_FAMILIES and self.wgmma_flops_per_s > 0:
            # the 16-bit rate measured; TF32 runs at TF32_OF_HALF of it, 3xtf32 a third
            tf32 = TF32_OF_HALF if wgmma_tf32(kind.family) else 1.0
            return self.wgmma_flops_per_s * tf32 / mma_products(kind.family)
        # over the MMAs it issues per product (3xtf32: three)
        return self.mma_flops_per_s(dtype) / mma_products(kind.family)

    def mfma_flops_per_s(self, dtype: str) -> float:
        """The MFMA kinds' rate for ``dtype`` (0: this arch has none)."""
        return getattr(self, MFMA_FIELDS[dtype]) if dtype in MFMA_FIELDS else 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def _every_kind(pairs: tuple, kinds) -> list | None:
    """The values of ``pairs`` ((kind name, value), ...) for ``kinds``, in their order, or
    None unless every one of them has one."""
    if not pairs:
        return None
    by_name = dict(pairs)
    got = [by_name.get(k.name) for k in kinds]
    return None if not got or None in got else got


_lock = threading.Lock()
_data: dict | None = None


def write_kind_factors(arch_name: str, factors: dict, source: str, path: Path = PATH,
                       depth_factors: dict | None = None,
                       path_factors: dict | None = None) -> None:
    """Put measured per-kind factors ({kind name: factor}) and, if given, their values
    per depth ({kind name: [[K, factor], ...]}) and per copy path ({kind name: [16-byte,
    4-byte, 2-byte]}) into measured[arch] (which must exist: they correct a model whose
    ceilings were measured) and reload. The figures of the families named replace
    theirs, those not given included (the factors were fitted without them); other
    families' stay (another dtype's measurement), and their source lines with them."""
    kind_factors(factors, arch_name)   # refuse what the reader would refuse
    kind_depth_factors(depth_factors, arch_name)
    kind_path_factors(path_factors, arch_name)
    data, row = _measured_row(path, arch_name)
    families = {n.split(".", 1)[0] for n in factors}
    for key, new in ((KIND_FACTORS, {n: round(float(f), 4) for n, f in factors.items()}),
                     (KIND_DEPTH_FACTORS, {n: [[int(d), round(float(f), 4)] for d, f in r]
                                           for n, r in (depth_factors or {}).items()}),
                     (KIND_PATH_FACTORS, {n: [round(float(f), 4) for f in r]
                                          for n, r in (path_factors or {}).items()})):
        kept = {n: v for n, v in (row.get(key) or {}).items()
                if n.split(".", 1)[0] not in families}
        merged = dict(sorted({**kept, **new}.items()))
        if merged:
            row[key] = merged
        else:
            row.pop(key, None)
    sources = row.get(KIND_FACTORS + "_source")
    sources = dict(sources) if isinstance(sources, dict) else (
        {} if sources is None else {"portgemm-f64": sources})
    sources.update({f: source for f in families})
    row[KIND_FACTORS + "_source"] = dict(sorted(sources.items()))
    Path(path).write_text(json.dumps(data, indent=2) + "\n")
    reload()


def _measured_row(path: Path, arch_name: str) -> tuple[dict, dict]:
    """(the file's data, its measured entry for ``arch_name``), which must exist: the
    per-kind figures correct a model whose ceilings were measured."""
    data = json.loads(Path(path).read_text())
    row = data.get("measured", {}).get(arch_name)
    if row is None:
        raise ValueError(f"no measured ceilings for {arch_name}: measure them first "
                         "(python -m portgemm bench --ceilings)")
    return data, row


def _load() -> dict:
    global _data
    with _lock:
        if _data is None:
            _data = json.loads(PATH.read_text())
        return _data


_by_arch: dict = {}
# Bumped whenever the figures may have changed (reload, write_measured): the plan cache
# keys on it, so a plan predicted with old ceilings is not returned after new ones.
_version = 0


def version() -> int:
    """How many times the ceilings were reloaded in this process (0: never)."""
    return _version


def reload() -> None:
    """Forget the file read so far (after the benchmark wrote a new entry)."""
    global _data, _version
    with _lock:
        _data = None
        _by_arch.clear()
        _version += 1
    generation.bump()


def fp64_mma_modelled(arch, fp64_flops_per_s: float, spec: dict) -> float:
    """fp64 MMA rate: the spec row's fp64_mma_ratio times the fp64 SIMT rate, on the
    archs whose MMA kinds run on matrix units (archs.FP64_MMA); else 0."""
    return fp64_flops_per_s * spec.get("fp64_mma_ratio", 0.0) if has_fp64_mma(arch) else 0.0


def half_mma_modelled(arch, fp32_flops_per_s: float, spec: dict) -> float:
    """float16 / bfloat16 MMA rate: the spec row's half_mma_ratio times the fp32 SIMT
    rate, on the archs whose 16-bit MMA kinds run on tensor cores (archs.HALF_MMA)."""
    return fp32_flops_per_s * spec.get("half_mma_ratio", 0.0) if has_half_mma(arch) else 0.0


def mfma_modelled(arch, fp32: float, fp64: float, spec: dict) -> dict:
    """{Ceilings field: the MFMA kinds' rate}: MFMA_RATIOS times the vector rate of the
    same arithmetic (``fp32``: unpacked, one FMA per lane and clock, for the 16-bit
    dtypes; fp64), where the arch has them (archs.MFMA); 0 elsewhere."""
    return {MFMA_FIELDS[dt]: (fp64 if dt == "float64" else fp32) * spec.get(key, 0.0)
            if has_mfma(arch, dt) else 0.0 for dt, key in MFMA_RATIOS.items()}


def tf32_mma_modelled(arch, half_mma_flops_per_s: float, spec: dict) -> float:
    """TF32 MMA rate: the spec row's tf32_mma_ratio of the fp32 SIMT rate, else
    TF32_OF_HALF of the float16 MMA rate, on the archs of archs.TF32_MMA; else 0."""
    if not has_tf32_mma(arch):
        return 0.0
    return half_mma_flops_per_s * spec.get("tf32_of_half", TF32_OF_HALF)


def modelled(arch, spec: dict) -> Ceilings:
    cus = float(arch.compute_units)
    # one FMA per lane and clock; the SIMT kinds issue packed fp32 FMAs (two a lane) where
    # the arch has them (the spec row's fp32_packed: CDNA2, CDNA3; kernels/amd_isa.py)
    vector = cus * spec["fp32_fma_per_clk_per_cu"] * 2 * spec["clock_hz"] * SUSTAINED
    fp32 = vector * spec.get("fp32_packed", 1.0)
    fp64 = vector * spec["fp64_ratio"]
    half = half_mma_modelled(arch, fp32, spec)
    return Ceilings(arch=arch.name, origin="modelled",
                    copy_bytes_per_s=spec["dram_bytes_per_s"] * COPY_FRACTION,
                    smem_bytes_per_s_per_cu=spec["smem_bytes_per_clk_per_cu"] * spec["clock_hz"],
                    fp32_flops_per_s=fp32, fp64_flops_per_s=fp64,
                    launch_s=spec["launch_s"], latency_s=spec["latency_s"],
                    source="modelled from the spec row and the arch table",
                    fp64_mma_flops_per_s=fp64_mma_modelled(arch, fp64, spec),
                    half_mma_flops_per_s=half,
                    tf32_mma_flops_per_s=tf32_mma_modelled(arch, half, spec),
                    **mfma_modelled(arch, vector, fp64, spec))


# Used for an arch the file has no row for (a row added to the arch table later).
GENERIC_SPEC = {"clock_hz": 1.5e9, "fp32_fma_per_clk_per_cu": 64, "fp64_ratio": 0.5,
                "dram_bytes_per_s": 1.0e12, "smem_bytes_per_clk_per_cu": 128,
                "launch_s": 6e-6, "latency_s": 8e-7}


def ceilings_for(arch) -> Ceilings:
    """The measured entry for ``arch.name`` if the file has one, else modelled
    (memoised per arch name and compute-unit count until :func:`reload`)."""
    key = (arch.name, arch.compute_units)
    hit = _by_arch.get(key)
    if hit is None:
        hit = _by_arch[key] = _ceilings_for(arch)
    return hit


def _ceilings_for(arch) -> Ceilings:
    data = _load()
    row = data.get("measured", {}).get(arch.name)
    spec = data.get("specs", {}).get(arch.name, GENERIC_SPEC)
    if row is not None:
        fp64 = float(row["fp64_flops_per_s"])
        mma = row.get("fp64_mma_flops_per_s")
        mma = float(mma) if mma is not None and has_fp64_mma(arch) else \
            fp64_mma_modelled(arch, fp64, spec)
        half = row.get("half_mma_flops_per_s")
        half = float(half) if half is not None and has_half_mma(arch) else \
            half_mma_modelled(arch, float(row["fp32_flops_per_s"]), spec)
        tf32 = row.get("tf32_mma_flops_per_s")
        tf32 = float(tf32) if tf32 is not None and has_tf32_mma(arch) else \
            tf32_mma_modelled(arch, half, spec)
        mfma = mfma_modelled(arch, float(row["fp32_flops_per_s"]), fp64, spec)
        mfma.update({f: float(row[f]) for f in MFMA_FIELDS.values() if f in row})
        wgmma = float(row.get("wgmma_flops_per_s", 0.0)) if has_wgmma(arch) else 0.0
        return Ceilings(arch=arch.name, origin="measured",
                        source=row.get("source", row.get("device", "")),
                        fp64_mma_flops_per_s=mma, half_mma_flops_per_s=half,
                        tf32_mma_flops_per_s=tf32, wgmma_flops_per_s=wgmma, **mfma,
                        kind_factors=kind_factors(row.get(KIND_FACTORS), arch.name),
                        kind_depth_factors=kind_depth_factors(row.get(KIND_DEPTH_FACTORS),
                                                              arch.name),
                        kind_step_floors=kind_step_floors(row.get(KIND_STEP_FLOORS),
                                                          arch.name),
                        kind_path_factors=kind_path_factors(row.get(KIND_PATH_FACTORS),
                                                            arch.name),
                        **{f: float(row[f]) for f in FIELDS})
    return modelled(arch, spec)


def _per_kind(table, field: str, values: str, arch_name: str) -> bool:
    """Whether a measured entry has per-kind ``field``: False where absent or empty; a
    ValueError where it is not a mapping of kind names (to ``values``)."""
    if not table:
        return False
    if not isinstance(table, dict):
        raise ValueError(f"ceilings {arch_name}: {field} must map kind names to {values}")
    return True


def kind_factors(table, arch_name: str = "") -> tuple:
    """A measured entry's ``kind_factors`` ({kind name: factor}) as Ceilings holds them;
    () where absent. A name outside the tile catalogue or a factor that is not a
    positive number is a ValueError: the file is the project's own data."""
    if not _per_kind(table, KIND_FACTORS, "factors", arch_name):
        return ()
    from ..tiles import CATALOGUE
    for name, f in table.items():
        if name not in CATALOGUE:
            raise ValueError(f"ceilings {arch_name}: {KIND_FACTORS} names unknown kind {name!r}")
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) \
                or f <= 0:
            raise ValueError(f"ceilings {arch_name}: factor of {name} is {f!r}, "
                             "not a positive number")
    return tuple(sorted((str(n), float(f)) for n, f in table.items()))


def kind_depth_factors(table, arch_name: str = "") -> tuple:
    """A measured entry's ``kind_depth_factors`` ({kind name: [[K, factor], ...]}) as
    Ceilings holds them; () where absent. Unknown names, K not positive and ascending,
    or factors that are not positive numbers are a ValueError, as for kind_factors."""
    if not _per_kind(table, KIND_DEPTH_FACTORS, "[[K, factor], ...]", arch_name):
        return ()
    out = []
    for name, rows in table.items():
        kind_factors({name: 1.0}, arch_name)   # the name
        try:
            pairs = [(float(d), float(f)) for d, f in rows]
        except (TypeError, ValueError):
            raise ValueError(f"ceilings {arch_name}: {KIND_DEPTH_FACTORS} of {name} must be "
                             "[[K, factor], ...]") from None
        ks = [d for d, _ in pairs]
        if not pairs or ks != sorted(set(ks)) or ks[0] <= 0:
            raise ValueError(f"ceilings {arch_name}: depths of {name} must be positive and "
                             "ascending")
        for (_, f), (_, raw) in zip(pairs, rows):
            kind_factors({name: raw}, arch_name)   # a positive number, not a bool
        out.append((str(name), tuple(pairs)))
    return tuple(sorted(out))


def kind_step_floors(table, arch_name: str = "") -> tuple:
    """A measured entry's ``kind_step_floors`` ({kind name: [aligned, unaligned]}
    seconds) as Ceilings holds them; () where absent. Unknown names, or anything but
    two positive numbers, are a ValueError, as for kind_factors."""
    return _rows_of(table, KIND_STEP_FLOORS, "[aligned, unaligned] seconds", 2, arch_name)


def kind_path_factors(table, arch_name: str = "") -> tuple:
    """A measured entry's ``kind_path_factors`` ({kind name: [16-byte, 4-byte, 2-byte]})
    as Ceilings holds them; () where absent. Unknown names, or anything but three positive
    numbers, are a ValueError, as for kind_factors."""
    return _rows_of(table, KIND_PATH_FACTORS, "[16-byte, 4-byte, 2-byte]", 3, arch_name)


def _rows_of(table, field: str, labels: str, n: int, arch_name: str) -> tuple:
    """A per-kind ``field`` of ``n`` positive numbers a kind ({kind name: [...]}) as
    Ceilings holds it: ((kind name, (numbers)), ...) sorted by name; () where absent."""
    if not _per_kind(table, field, labels, arch_name):
        return ()
    out = []
    for name, row in table.items():
        if not isinstance(row, (list, tuple)) or len(row) != n:
            raise ValueError(f"ceilings {arch_name}: {field} of {name} must be {labels}")
        for f in row:
            kind_factors({name: f}, arch_name)   # a known name, a positive number
        out.append((str(name), tuple(float(f) for f in row)))
    return tuple(sorted(out))


def write_kind_step_floors(arch_name: str, floors: dict, source: str,
                           path: Path = PATH) -> None:
    """Put measured lone-tile steps ({kind name: (aligned, unaligned) seconds}) into
    measured[arch] (which must exist) and reload; the floors of the families named
    replace theirs, other families' stay, with their source lines."""
    kind_step_floors(floors, arch_name)   # refuse what the reader would refuse
    data, row = _measured_row(path, arch_name)
    families = {n.split(".", 1)[0] for n in floors}
    kept = {n: v for n, v in (row.get(KIND_STEP_FLOORS) or {}).items()
            if n.split(".", 1)[0] not in families}
    new = {n: [float(f"{float(a):.4g}"), float(f"{float(u):.4g}")] for n, (a, u) in floors.items()}
    row[KIND_STEP_FLOORS] = dict(sorted({**kept, **new}.items()))
    sources = dict(row.get(KIND_STEP_FLOORS + "_source") or {})
    sources.update({f: source for f in families})
    row[KIND_STEP_FLOORS + "_source"] = dict(sorted(sources.items()))
    Path(path).write_text(json.dumps(data, indent=2) + "\n")
    reload()


def use_in_memory(arch_name: str, entry: dict) -> None:
    """Plan and predict with ``entry`` (every name of FIELDS) as ``arch_name``'s measured
    ceilings in this process only, the file untouched: to replay the model with other
    figures (bench/planner_proof.py --replay --ceilings). Cached plans are not reused."""
    missing = [f for f in FIELDS if f not in entry]
    if missing:
        raise ValueError(f"ceilings entry lacks {', '.join(missing)}")
    global _version
    data = _load()
    with _lock:
        data.setdefault("measured", {})[arch_name] = dict(entry)
        _by_arch.clear()
        _version += 1
    generation.bump()


def write_measured(arch_name: str, entry: dict, path: Path = PATH) -> None:
    """Put ``entry`` (every name of FIELDS, plus device/source) under measured[arch];
    the optional figures of the entry there before (the MMA rates, the kind factors and
    their sources), measured by other programs, stay unless ``entry`` has them."""
    missing = [f for f in FIELDS if f not in entry]
    if missing:
        raise ValueError(f"ceilings entry lacks {', '.join(missing)}")
    data = json.loads(Path(path).read_text()) if Path(path).exists() else {"specs": {}}
    old = data.setdefault("measured", {}).get(arch_name, {})
    kept = {k: v for k, v in old.items() if k not in FIELDS and k not in entry
            and k not in ("device", "source")}
    data["measured"][arch_name] = {**entry, **kept}
    Path(path).write_text(json.dumps(data, indent=2) + "\n")
    reload()
