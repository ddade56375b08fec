"""NVIDIA cubin (ELF) -> per-kernel resource usage, read from the binary itself.

NVRTC's ptxas report (``--ptxas-options=-v``) is not always there: with a GPU driver whose
compute cache (``~/.nv/ComputeCache``) already holds the code, NVRTC returns a valid cubin
and an empty log. So the figures the occupancy model needs come from the cubin, which
always carries them (the same records ``cuobjdump -elf`` prints):

  .nv.info             EIATTR records for every function: EIATTR_REGCOUNT (registers per
                       thread) and EIATTR_FRAME_SIZE (stack frame bytes per thread, where
                       spilled registers live), each tagged with the function's symbol index
  .nv.shared.<name>    the function's static shared memory; on sm_90 and later it starts
                       with the block's reserved shared memory (1 KiB; the cubin then also
                       has a ``.nv.shared.reserved.*`` section), which ptxas's "bytes smem"
                       and our occupancy model count separately

Checked against ptxas's own report for every catalogue variant on sm_80 and sm_90
(tests/test_compile_cache.py). pyelftools reads the ELF (as for AMD code objects).
"""
from __future__ import annotations

import io
import struct

from ..errors import CompileError
from ..occupancy.resources import KernelResources

# EIATTR record formats and the attributes we read (cuobjdump's names).
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2F
RESERVED_SMEM_BYTES = 1024   # per block, sm_80 and later (cudaDevAttrReservedSharedMemoryPerBlock)


def _elf(cubin: bytes):
    try:
        from elftools.elf.elffile import ELFFile
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("reading cubins needs pyelftools (pip install 'portgemm[nvrtc]')") from e
    try:
        elf = ELFFile(io.BytesIO(cubin))
        if elf["e_machine"] != "EM_CUDA":
            raise CompileError(f"not a CUDA cubin (e_machine {elf['e_machine']})")
        return elf
    except CompileError:
        raise
    except Exception as e:  # pyelftools raises its own ELFError and struct errors
        raise CompileError(f"not a readable cubin ({len(cubin)} bytes): {e}") from e


def eiattr_records(data: bytes):
    """(format, attribute, payload) for each record of an .nv.info section."""
    i = 0
    while i + 2 <= len(data):
        fmt, attr = data[i], data[i + 1]
        if fmt == EIFMT_NVAL:
            yield fmt, attr, b""
            i += 2
        elif fmt in (EIFMT_BVAL, EIFMT_HVAL):
            yield fmt, attr, data[i + 2:i + 4]
            i += 4
        elif fmt == EIFMT_SVAL:
            (size,) = struct.unpack_from("<H", data, i + 2)
            yield fmt, attr, data[i + 4:i + 4 + size]
            i += 4 + size
        else:
            raise CompileError(f"unknown .nv.info record format {fmt} at byte {i}")


def function_attributes(elf, name: str) -> dict[int, int]:
    """{EIATTR code: value} of the (symbol index, value) records of function ``name``."""
    symtab = elf.get_section_by_name(".symtab")
    index = next((i for i, s in enumerate(symtab.iter_symbols()) if s.name == name), None) \
        if symtab is not None else None
    if index is None:
        raise CompileError(f"kernel {name!r} is not in the cubin")
    info = elf.get_section_by_name(".nv.info")
    out = {}
    for fmt, attr, payload in eiattr_records(info.data() if info is not None else b""):
        if fmt == EIFMT_SVAL and len(payload) == 8:
            sym, value = struct.unpack("<II", payload)
            if sym == index:
                out[attr] = value
    return out


def static_shared_bytes(elf, name: str) -> int:
    """The function's own static shared memory, without the block's reserved part."""
    sec = elf.get_section_by_name(f".nv.shared.{name}")
    if sec is None:
        return 0
    reserved = any(s.name.startswith(".nv.shared.reserved") for s in elf.iter_sections())
    return max(0, sec["sh_size"] - (RESERVED_SMEM_BYTES if reserved else 0))


def resources(cubin: bytes, name: str, source: str) -> KernelResources:
    """KernelResources of kernel ``name``. The cubin records no spill count, so
    ``spill_bytes`` is the stack frame size here: spills live in the frame, and our
    kernels keep no arrays in local memory, so it is > 0 exactly when the kernel spills
    (NVRTC's report, where present, gives the exact spill stores: see nvrtc.compile)."""
    elf = _elf(cubin)
    attrs = function_attributes(elf, name)
    if EIATTR_REGCOUNT not in attrs:
        raise CompileError(f"the cubin has no register count for {name!r}")
    return KernelResources(registers=attrs[EIATTR_REGCOUNT],
                           shared_bytes=static_shared_bytes(elf, name),
                           spill_bytes=attrs.get(EIATTR_FRAME_SIZE, 0), source=source)
