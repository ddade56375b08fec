"""The 16-bit wgmma kinds' aligned windows (kernel: PgWgWindow, pg_wgmma_windows; switched
on per kind by render.WGMMA_WINDOWS, empty in the committed tables) on the CPU:

- the copy and shift logic, mirrored here in Python line for line (``copy``, ``shift``;
  keep them in step with the kernel), rebuilds every slice exactly, zeros past the
  matrix edges, from reads that never pass a row's last needed element nor start before
  the 16 bytes holding its first, over random leading dimensions, base offsets, slices
  and edges, in both stored-row layouts;
- the shared memory the windows take (render.window_elems) covers what the kernel's
  static_asserts ask for in every transpose pair, keeps raw slot 0 clear of the staged
  epilogue's parts, and costs neither kind a resident block on sm_90;
- the windowed variants compile for sm_90a without spills (where NVRTC is installed).

The kernel itself runs only on a GPU: tests/test_gpu_wg_windows.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from portgemm.kernels import nvrtc, render
from portgemm.kernels.variants import Variant
from portgemm.occupancy.archs import get_arch
from portgemm.occupancy.model import nv_shared_limit
from portgemm.occupancy.resources import KernelResources
from portgemm.tiles import FAMILIES

OPS = ((False, False), (False, True), (True, False), (True, True))


def copy(mem, X, ld, rbase, cbase, rlim, clim, rows, cont):
    """PgWgWindow::copy: the raw slot (rows x (cont / 8 + 1) units of 16 bytes) and the
    (address, bytes) of every read. ``mem``: bytes; ``X``: the matrix's byte address."""
    ru = cont // 8 + 1
    raw = np.zeros(rows * ru * 16, np.uint8)
    reads = []
    nc = 2 * max(0, min(cont, clim - cbase))
    for u in range(rows * ru):
        r, k = divmod(u, ru)
        row = X + 2 * ((rbase + r) * ld + cbase)
        b = row & 15
        n = max(0, min(16, b + nc - 16 * k)) if rbase + r < rlim and nc > 0 else 0
        if n:
            src = row - b + 16 * k
            raw[16 * u:16 * u + n] = mem[src:src + n]
            reads.append((rbase + r, src, n))
    return raw, reads


def shift(raw, X, ld, rbase, cbase, rows, cont):
    """PgWgWindow::shift over every item: the slice as stored rows of 16-bit elements."""
    ru = cont // 8 + 1
    words = raw.view("<u4").reshape(rows, ru * 4).astype(np.uint64)
    out = np.zeros((rows, cont * 2 // 4), np.uint32)
    for r in range(rows):
        b = (X + 2 * ((rbase + r) * ld + cbase)) & 15
        q, h = b >> 2, (b & 2) * 8
        for m in range(cont // 8):
            v = words[r, 4 * m:4 * m + 8]
            s = v[q:q + 5]
            out[r, 4 * m:4 * m + 4] = ((s[1:] << 32 | s[:4]) >> h) & 0xFFFFFFFF
    return out.view("<u2")


@pytest.mark.parametrize("cont", [32, 64, 128])
def test_windows_rebuild_every_slice_from_reads_inside_the_rows(cont):
    rng = np.random.default_rng(cont)
    for _ in range(60):
        rows = int(rng.choice([32, 64, 128]))
        srows, scols = int(rng.integers(1, 300)), int(rng.integers(1, 300))
        ld = scols + int(rng.integers(0, 9))
        off = int(rng.integers(0, 8))                 # elements past a 16-byte boundary
        alloc = 256 * int(rng.integers(1, 4))         # allocations start 256-byte aligned
        X = alloc + 2 * off
        end = X + 2 * ((srows - 1) * ld + scols)      # one past the matrix's last byte
        mem = rng.integers(0, 256, end + 64, dtype=np.uint8)
        rbase = int(rng.integers(0, srows + 8))
        cbase = int(rng.integers(0, scols + 8))
        raw, reads = copy(mem, X, ld, rbase, cbase, srows, scols, rows, cont)
        got = shift(raw, X, ld, rbase, cbase, rows, cont)
        want = np.zeros((rows, cont), np.uint16)
        for r in range(rows):
            for c in range(cont):
                row, col = rbase + r, cbase + c
                if row < srows and col < scols:
                    a = X + 2 * (row * ld + col)
                    want[r, c] = int(mem[a]) | int(mem[a + 1]) << 8
        np.testing.assert_array_equal(got, want)
        for row, src, n in reads:
            first = X + 2 * (row * ld + cbase)
            last = X + 2 * (row * ld + min(scols, cbase + cont))   # one past the last read
            assert src >= first - (first & 15) >= alloc and src + n <= last <= end


@pytest.mark.parametrize("kind", [k for k in FAMILIES["wgmma-f16"]], ids=lambda k: k.kind)
def test_window_shared_memory_fits_and_keeps_the_blocks(kind):
    key = ("wgmma-f16", kind.kind, "float16")
    base = Variant((kind,), "float16")
    st = render.stages(base)
    saved = render.WGMMA_WINDOWS
    render.WGMMA_WINDOWS = {key}
    try:
        for ta, tb in OPS:
            v = Variant((kind,), "float16", "tile-list", ta, tb)
            d = render.defines(v)
            assert d["PG_WG_WINDOWS"] == "1" and render.stages(v) == st
            tile = int(d["PG_SMEM_ELEMS_ASYNC"])
            # the kernel's figures (pg_wgmma_windows): each operand's raw rows and stage
            a_rows, a_cont = (kind.tk, kind.tm) if ta else (kind.tm, kind.tk)
            b_rows, b_cont = (kind.tn, kind.tk) if tb else (kind.tk, kind.tn)
            raw = sum(r * (c // 8 + 1) * 8 for r, c in ((a_rows, a_cont), (b_rows, b_cont)))
            fs = kind.tk * (kind.tm + kind.tn)
            assert -(-2 * raw // 512) * 512 + 2 * fs <= tile
            if render.staged_c(v):
                assert raw <= (st - 1) * kind.tk * kind.tm
            smem = render.dynamic_smem(v) or 2 * tile
            arch = get_arch("sm_90")
            assert smem <= arch.max_shared_per_workgroup
            # as many blocks an SM as the register cap allows (render.MIN_BLOCKS)
            res = KernelResources(registers=128, shared_bytes=smem)
            assert nv_shared_limit(arch, kind.threads // 32, res) >= render.min_blocks(v)
    finally:
        render.WGMMA_WINDOWS = saved
        render.render.cache_clear()


def test_committed_tables_take_no_windows():
    """Until they are measured on a device the windows stay off: no variant renders them."""
    assert render.WGMMA_WINDOWS == set()
    for k in FAMILIES["wgmma-bf16"]:
        assert "PG_WG_WINDOWS" not in render.defines(Variant((k,), "bfloat16"))


def test_windows_only_for_the_16bit_wgmma_kinds():
    saved = render.WGMMA_WINDOWS
    render.WGMMA_WINDOWS = render.WGMMA_16BIT | {("portgemm-f16", "128x128/w64x32", "float16")}
    try:
        assert not render.wg_windows(Variant((FAMILIES["portgemm-f16"][-1],), "float16"))
        assert all(render.wg_windows(Variant((k,), d)) for f, kind, d in render.WGMMA_16BIT
                   for k in FAMILIES[f] if k.kind == kind)
    finally:
        render.WGMMA_WINDOWS = saved


@pytest.mark.parametrize("layout", ["tile-list", "ragged"])
def test_windowed_variants_compile_without_spills(layout):
    try:
        nvrtc.version()
    except Exception as e:  # noqa: BLE001 - no NVRTC here
        pytest.skip(f"NVRTC not installed: {e}")
    saved = render.WGMMA_WINDOWS
    render.WGMMA_WINDOWS = render.WGMMA_16BIT
    try:
        for k in FAMILIES["wgmma-bf16"]:
            for ta, tb in OPS:
                r = render.render(Variant((k,), "bfloat16", layout, ta, tb))
                assert "#define PG_WG_WINDOWS 1" in r.source
                _, res = nvrtc.compile(r.source, r.name, "sm_90")
                assert res.spill_bytes == 0 and res.registers <= 128, (r.name, res)
    finally:
        render.WGMMA_WINDOWS = saved
        render.render.cache_clear()
