"""Reading AMD machine code: which fp32 FMA instructions a compiled kernel's main loop
issues (no GPU needed; LLVM's disassembler).

Why: CDNA2 and CDNA3 (gfx90a, gfx94x) have a packed fp32 FMA, ``v_pk_fma_f32``: two
FMAs per lane in one instruction, which is how those GPUs reach their listed fp32 vector
peak (twice CUs x 64 lanes x 2 FLOP x clock; gfx908 has no packed fp32). Our SIMT kinds
hold each thread's micro-tile of accumulators in registers, and LLVM pairs adjacent
accumulators into packed FMAs by itself (its SLP vectoriser; the A value is broadcast
through op_sel_hi, no extra moves). The cost model counts the packed rate for those
archs only because this module finds that pairing in the code objects: the planner's
rate is what the compiled loop issues, checked by tests/test_amd_packed_fma.py.

The main loop is taken to be the basic block (code between branch targets and branches)
with the most FMA lanes: a packed FMA counts two, a scalar one.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache

from ..errors import DeviceUnavailable

_OBJDUMPS = (*(f"llvm-objdump-{v}" for v in range(15, 21)), "/opt/rocm/llvm/bin/llvm-objdump",
             "llvm-objdump")
_MNEMONIC = re.compile(r"^\s+([a-z][a-z0-9_]*)(?:\s|$)")
_PACKED = "v_pk_fma_f32"
# scalar fp32 FMAs as LLVM spells them on CDNA (VOP2 / VOP3 forms drop the _e32 / _e64)
_SCALAR = frozenset(("v_fma_f32", "v_fmac_f32", "v_mac_f32", "v_mad_f32",
                     "v_fma_legacy_f32", "v_fmac_legacy_f32"))


@dataclass(frozen=True)
class FmaMix:
    """fp32 FMA instructions of a kernel's main loop: packed (two lanes each) and scalar."""
    packed: int
    scalar: int

    @property
    def packed_share(self) -> float:
        """The share of the loop's FMA lanes issued by packed instructions (0 if none)."""
        lanes = 2 * self.packed + self.scalar
        return 2 * self.packed / lanes if lanes else 0.0


@lru_cache(maxsize=1)
def objdump() -> str:
    """LLVM's disassembler (PORTGEMM_LLVM_OBJDUMP overrides); DeviceUnavailable if none."""
    for name in (os.environ.get("PORTGEMM_LLVM_OBJDUMP"), *_OBJDUMPS):
        path = name and shutil.which(name)
        if path:
            return path
    raise DeviceUnavailable("no llvm-objdump found (install llvm, or set PORTGEMM_LLVM_OBJDUMP)")


def disassemble(code_object: bytes, arch: str) -> str:
    """The code object's text section as LLVM prints it for ``arch``."""
    with tempfile.NamedTemporaryFile(suffix=".co") as f:
        f.write(code_object)
        f.flush()
        out = subprocess.run([objdump(), "-d", f"--mcpu={arch}", f.name], capture_output=True,
                             text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"llvm-objdump failed on a {arch} code object: {out.stderr.strip()}")
    return out.stdout


def basic_blocks(text: str) -> list[list[str]]:
    """The mnemonics of each basic block of a disassembly: a block ends at a branch and
    starts anew at a label (a symbol or a branch target)."""
    blocks, cur = [], []
    for line in text.splitlines():
        if line.endswith(">:") or line.startswith(".LBB") or line.rstrip().endswith(":"):
            blocks.append(cur)
            cur = []
            continue
        m = _MNEMONIC.match(line)
        if not m:
            continue
        op = re.sub(r"_e(32|64)$", "", m.group(1))
        cur.append(op)
        if op.startswith("s_cbranch") or op in ("s_branch", "s_setpc_b64", "s_endpgm"):
            blocks.append(cur)
            cur = []
    blocks.append(cur)
    return [b for b in blocks if b]


def main_loop_fma(code_object: bytes, arch: str) -> FmaMix:
    """The fp32 FMA mix of the kernel's main loop (module docstring)."""
    best = FmaMix(0, 0)
    for block in basic_blocks(disassemble(code_object, arch)):
        mix = FmaMix(block.count(_PACKED), sum(op in _SCALAR for op in block))
        if 2 * mix.packed + mix.scalar > 2 * best.packed + best.scalar:
            best = mix
    return best
