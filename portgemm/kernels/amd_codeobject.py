"""AMD code object (ELF, ``amdgcn-amd-amdhsa``) -> per-kernel resource usage, no GPU needed.

The compiler (hiprtc or clang) writes each kernel's resource usage into the
``NT_AMDGPU_METADATA`` note as a MessagePack map (code object v3+), the same data
``llvm-readelf --notes`` prints as YAML. We read the ELF with pyelftools and the note with
msgpack: both are small, pure-Python-installable and well kept, they parse the binary
itself (no LLVM needed, so the fixture test runs on every CI machine), and they do not
depend on the textual format of one readelf version.

Metadata keys used (LLVM AMDGPUUsage, "Code Object V3+ Metadata"):
  .vgpr_count   VGPRs for occupancy: on gfx90a/gfx94x alignTo(arch VGPRs, 4) + AGPRs
                (one unified file), on gfx908 max(arch VGPRs, AGPRs)
  .agpr_count   AGPRs (only on targets with MFMA; the MFMA kinds' accumulators, and on
                gfx90a/gfx94x whatever else the allocator puts there)
  .sgpr_count   SGPRs including VCC, FLAT_SCRATCH and XNACK reserved ones
  .group_segment_fixed_size    static LDS bytes per workgroup
  .private_segment_fixed_size  scratch bytes per work-item
  .vgpr_spill_count / .sgpr_spill_count
"""
from __future__ import annotations

import io
import re
from dataclasses import dataclass

from ..errors import CompileError
from ..occupancy.resources import KernelResources

NT_AMDGPU_METADATA = 32
# Targets whose VGPR file is unified (arch VGPRs then AGPRs, arch part aligned to 4).
_UNIFIED = re.compile(r"^gfx9(0a|4[0-9a-f])$")


@dataclass(frozen=True)
class KernelMeta:
    name: str
    vgpr_count: int
    agpr_count: int
    sgpr_count: int
    lds_bytes: int
    scratch_bytes: int
    vgpr_spill_count: int
    sgpr_spill_count: int
    wavefront_size: int
    max_flat_workgroup_size: int

    def arch_vgprs(self, arch: str) -> int:
        """Architectural VGPRs. The note only carries the occupancy total: on unified
        targets it is alignTo(arch, 4) + agpr, so this returns alignTo(arch, 4) (the
        model aligns to 4 anyway); on gfx908 it is max(arch, agpr), exact when
        agpr == 0 and an upper bound otherwise (the MFMA kinds hold their accumulators
        in AGPRs there). The bound gives the exact occupancy all the same: gfx908's
        two files limit waves separately (occupancy/model.py amd_vgpr_limit and
        amd_agpr_limit), and max(arch, agpr) bounds both no tighter than the larger.
        clang's remark (clang_amd) has the exact arch count where it is needed."""
        if self.agpr_count and _UNIFIED.match(arch):
            return self.vgpr_count - self.agpr_count
        return self.vgpr_count


@dataclass(frozen=True)
class CodeObject:
    target: str               # e.g. "amdgcn-amd-amdhsa--gfx90a"
    kernels: dict             # name -> KernelMeta
    producers: tuple          # the .comment strings (compiler and linker versions)

    @property
    def arch(self) -> str:
        """The processor, e.g. "gfx90a" (target features such as :xnack- dropped)."""
        return self.target.rsplit("-", 1)[-1].split(":")[0]

    @property
    def compiler(self) -> str:
        """The newest "clang version" among the producers: the compiler of the kernel
        (older entries come from the prebuilt device libraries linked in)."""
        clangs = [p for p in self.producers if "clang version" in p]
        if not clangs:
            return self.producers[0] if self.producers else "unknown compiler"
        return max(clangs, key=_version_key)


def _version_key(s: str):
    m = re.search(r"clang version (\d+)\.(\d+)\.(\d+)", s)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)


def _libs():
    try:
        import msgpack
        from elftools.elf.elffile import ELFFile
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("reading AMD code objects needs pyelftools and msgpack "
                          "(pip install 'portgemm[rocm]')") from e
    return ELFFile, msgpack


def parse(code_object: bytes) -> CodeObject:
    """Read the metadata note and the producer strings of an AMDGPU code object."""
    ELFFile, msgpack = _libs()
    try:
        elf = ELFFile(io.BytesIO(code_object))
    except Exception as e:  # pyelftools raises its own ELFError and struct errors
        raise CompileError(f"not an ELF code object ({len(code_object)} bytes): {e}") from e
    if elf["e_machine"] != "EM_AMDGPU":
        raise CompileError(f"not an AMDGPU code object (e_machine {elf['e_machine']})")
    meta = None
    for sec in elf.iter_sections():
        if sec["sh_type"] != "SHT_NOTE":
            continue
        for note in sec.iter_notes():
            if note["n_name"] == "AMDGPU" and note["n_type"] == NT_AMDGPU_METADATA:
                desc = note["n_desc"]
                meta = msgpack.unpackb(desc if isinstance(desc, bytes) else desc.encode("latin-1"))
    if meta is None:
        raise CompileError("code object has no NT_AMDGPU_METADATA note (code object v2?)")
    kernels = {}
    for k in meta.get("amdhsa.kernels", []):
        kernels[k[".name"]] = KernelMeta(
            name=k[".name"], vgpr_count=k[".vgpr_count"], agpr_count=k.get(".agpr_count", 0),
            sgpr_count=k[".sgpr_count"], lds_bytes=k[".group_segment_fixed_size"],
            scratch_bytes=k[".private_segment_fixed_size"],
            vgpr_spill_count=k.get(".vgpr_spill_count", 0),
            sgpr_spill_count=k.get(".sgpr_spill_count", 0),
            wavefront_size=k.get(".wavefront_size", 64),
            max_flat_workgroup_size=k.get(".max_flat_workgroup_size", 1024))
    comment = elf.get_section_by_name(".comment")
    producers = tuple(s.decode(errors="replace") for s in comment.data().split(b"\0") if s) \
        if comment is not None else ()
    return CodeObject(target=meta.get("amdhsa.target", ""), kernels=kernels, producers=producers)


def resources(code_object: bytes | CodeObject, name: str, source: str | None = None) -> KernelResources:
    """KernelResources of kernel ``name``. ``spill_bytes`` counts spilled registers at
    4 bytes each (VGPR spills go to scratch; SGPR spills to VGPR lanes or scratch);
    scratch that is not a spill is visible through :func:`parse`."""
    co = parse(code_object) if isinstance(code_object, (bytes, bytearray)) else code_object
    k = co.kernels.get(name)
    if k is None:
        raise CompileError(f"kernel {name!r} not in the code object (has: {', '.join(co.kernels)})")
    return KernelResources(
        registers=k.arch_vgprs(co.arch), shared_bytes=k.lds_bytes, sgprs=k.sgpr_count,
        agprs=k.agpr_count, spill_bytes=4 * (k.vgpr_spill_count + k.sgpr_spill_count),
        source=source or f"{co.compiler} ({co.arch})")
