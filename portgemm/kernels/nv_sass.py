"""The instructions of an NVIDIA kernel's main loop, read from its cubin's SASS (cuobjdump
from the pip package nvidia-cuda-cuobjdump, or $PORTGEMM_CUOBJDUMP; no GPU needed): how
many non-FFMA instructions a k step issues beside its FFMAs (bench/NOTES.md, session 10).

The k loop is the innermost loop holding most of the kernel's FFMAs. Its hot path is the
fewest instructions from the loop head to its back edge that still store a next stage
(every block with a shared store, STS) and skip the code between the loop's first
forward branch and that branch's target (the carry's prefetch of the last step, the only
step that stores nothing). A cp.async loop has no STS: its hot path is the step without
the copies, which the branch before them skips. ``unaligned`` also skips blocks with 16-byte global loads or
copies that no predicate guards: the path of scalar operands (a block that picks its
loads by predicate serves both). Predicated-off instructions count (they issue)."""
from __future__ import annotations

import collections
import heapq
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import DeviceUnavailable

_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_TARGET = re.compile(r"0x([0-9a-f]+)\s*$")


@dataclass(frozen=True)
class Ins:
    addr: int
    pred: str | None
    op: str          # the opcode with its modifiers, "LDG.E.128.CONSTANT"
    text: str

    @property
    def base(self) -> str:
        return self.op.split(".")[0]

    @property
    def target(self) -> int | None:
        m = _TARGET.search(self.text) if self.base == "BRA" else None
        return int(m.group(1), 16) if m else None


@dataclass(frozen=True)
class LoopCount:
    start: int
    end: int
    static: int                 # instructions in the loop's address range
    hot: int                    # instructions on the hot path (one k step)
    ffma: int                   # of them FFMA
    mix: tuple                  # (opcode, count), most common first

    @property
    def other(self) -> int:
        return self.hot - self.ffma


@lru_cache(maxsize=1)
def cuobjdump() -> str:
    """cuobjdump: $PORTGEMM_CUOBJDUMP, PATH, or the nvidia pip packages' bin/."""
    cands = [os.environ.get("PORTGEMM_CUOBJDUMP"), shutil.which("cuobjdump")]
    try:
        import nvidia
        cands += [str(p) for root in nvidia.__path__ for p in Path(root).glob("*/bin/cuobjdump")]
    except ImportError:
        pass
    for c in cands:
        if c and os.path.exists(c):
            return c
    raise DeviceUnavailable("no cuobjdump (pip install nvidia-cuda-cuobjdump, or set "
                            "PORTGEMM_CUOBJDUMP)")


def instructions(cubin: bytes) -> list[Ins]:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([cuobjdump(), "-sass", f.name], capture_output=True, text=True,
                              check=True, timeout=120).stdout
    out = []
    for m in _LINE.finditer(text):
        body, pred = m.group(2).strip(), None
        if body.startswith("@"):
            pred, body = body.split(None, 1)
        out.append(Ins(int(m.group(1), 16), pred, body.split()[0], body))
    return out


def _conditional(i: Ins) -> bool:
    return i.pred is not None or re.search(r"BRA\s+!?U?P", i.text) is not None


def k_loop(ins: list[Ins]) -> tuple[int, int]:
    """(head, back edge) of the innermost loop holding >= half the most FFMAs any loop
    holds (the epilogue's FFMAs, and the k-major pipeline's last k step, which follows
    the loop, put the tile loop above the k loop: 1,536 FFMAs to its 1,024 there)."""
    loops = []
    for i in ins:
        t = i.target
        if t is not None and t < i.addr:
            ffma = sum(j.base == "FFMA" for j in ins if t <= j.addr <= i.addr)
            loops.append((ffma, i.addr - t, t, i.addr))
    if not loops:
        raise ValueError("no loop in this kernel")
    most = max(lp[0] for lp in loops)
    _, _, head, back = min((lp for lp in loops if lp[0] >= 0.5 * most), key=lambda lp: lp[1])
    return head, back


def _blocks(body: list[Ins]) -> dict[int, tuple[list[Ins], list[int]]]:
    lo, hi = body[0].addr, body[-1].addr
    leaders = {lo}
    for n, i in enumerate(body):
        if i.base in ("BRA", "EXIT", "RET"):
            if i.target is not None and lo <= i.target <= hi:
                leaders.add(i.target)
            if n + 1 < len(body):
                leaders.add(body[n + 1].addr)
        elif i.base == "BSYNC":
            leaders.add(i.addr)
    blocks: dict[int, list[Ins]] = {}
    for i in body:
        if i.addr in leaders:
            blocks[i.addr] = []
        blocks[max(a for a in blocks)].append(i)
    starts = sorted(blocks)
    out = {}
    for n, s in enumerate(starts):
        last, nxt = blocks[s][-1], (starts[n + 1] if n + 1 < len(starts) else None)
        succ = []
        if last.base == "BRA":
            if last.target is not None and lo <= last.target <= hi:
                succ.append(last.target)
            if _conditional(last) and nxt is not None:
                succ.append(nxt)
        elif nxt is not None:
            succ.append(nxt)
        out[s] = (blocks[s], succ)
    return out


def main_loop(cubin: bytes, unaligned: bool = False) -> LoopCount:
    """The k loop's hot path (module docstring)."""
    ins = instructions(cubin)
    head, back = k_loop(ins)
    body = [i for i in ins if head <= i.addr <= back]
    bl = _blocks(body)
    skip: set[int] = set()
    first = next((i for i in body if i.base == "BRA" and _conditional(i)
                  and i.target is not None and i.target > i.addr), None)
    if first is not None:
        skip = {s for s in bl if first.addr < s < first.target}
    if unaligned:
        skip |= {s for s, (xs, _) in bl.items()
                 if any(x.base in ("LDG", "LDGSTS") and ".128" in x.op and x.pred is None
                        for x in xs)}
    must = sorted(s for s, (xs, _) in bl.items() if s not in skip
                  and any(x.base == "STS" for x in xs))
    last = max(bl)

    def shortest(src: int, dst: int) -> list[int]:
        dist, prev, q = {src: len(bl[src][0])}, {}, [(len(bl[src][0]), src)]
        while q:
            d, u = heapq.heappop(q)
            if u == dst:
                break
            if d > dist[u]:
                continue
            for v in bl[u][1]:
                if v in skip or (v <= head and v != dst):
                    continue
                if d + len(bl[v][0]) < dist.get(v, 1 << 30):
                    dist[v], prev[v] = d + len(bl[v][0]), u
                    heapq.heappush(q, (dist[v], v))
        if dst not in dist:
            raise ValueError(f"no path {src:#x} -> {dst:#x} in the k loop")
        path = [dst]
        while path[-1] != src:
            path.append(prev[path[-1]])
        return path[::-1]

    # Through every STS block in address order; one that the path so far cannot reach
    # lies on an alternative path (the compiler may duplicate a step's stores into both
    # arms of a branch), so it is passed by.
    path, at = [head], head
    for b in [*must, last]:
        if b == at:
            continue
        try:
            path += shortest(at, b)[1:]
        except ValueError:
            if b == last:
                raise
            continue
        at = b
    mix = collections.Counter(i.base for s in path for i in bl[s][0])
    return LoopCount(head, back, len(body), sum(mix.values()), mix["FFMA"],
                     tuple(mix.most_common()))
