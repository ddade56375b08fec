"""Dynamic shared memory (PG_DYN_SMEM): the wgmma variants whose stages pass the 48 KiB a
static array may hold declare them as the launch's dynamic shared memory; the CUDA backend
opts the function in once and passes the bytes in every launch, and the occupancy model
counts them. No GPU: the render, and the backend over a fake CuPy (tests/test_gpu_wgmma.py
runs the kinds on the H100)."""
from __future__ import annotations

import types

import pytest

from portgemm.backends import cuda as cudabe
from portgemm.kernels import render as rd
from portgemm.kernels import resources as kres
from portgemm.kernels.variants import ITEMSIZE, Variant, catalogue_variants
from portgemm.occupancy import get_arch
from portgemm.occupancy.resources import KernelResources
from portgemm.tiles import FAMILIES, WGMMA_FAMILIES

ALL = {v.name: v for arch in (None, "sm_90", "gfx90a")
       for v in catalogue_variants(trans=((False, False), (True, True)), arch=arch)}


def _tile_bytes(v) -> int:
    return rd.smem_elems_async(v.kinds, v.dtype, rd.stages(v)) * ITEMSIZE[v.dtype]


@pytest.mark.parametrize("name", sorted(ALL))
def test_only_wgmma_stages_past_48_kib_are_dynamic(name):
    v = ALL[name]
    src = rd.render(v).source
    dyn = rd.dynamic_smem(v)
    if dyn:
        assert any(k.family in WGMMA_FAMILIES for k in v.kinds)
        assert _tile_bytes(v) > rd.STATIC_SMEM_BYTES
        assert dyn == _tile_bytes(v) + rd.DYNAMIC_SMEM_SLACK
        assert dyn <= get_arch("sm_90").max_shared_per_workgroup
        assert "#define PG_DYN_SMEM 1" in src
    else:
        assert "#define PG_DYN_SMEM" not in src
        if rd.stages(v) >= 2:
            assert _tile_bytes(v) <= rd.STATIC_SMEM_BYTES


def test_the_wgmma_128x128_kind_runs_four_stages_in_dynamic_memory():
    for fam, dtype in WGMMA_FAMILIES.items():
        if dtype == "float32":
            continue    # wgmma-3xtf32: the test below
        kind = next(k for k in FAMILIES[fam] if k.kind == "128x128/g64x128")
        v = Variant((kind,), dtype, "tile-list")
        assert (kind.tk, rd.stages(v)) == (32, 4)
        assert rd.dynamic_smem(v) == 4 * (128 + 128) * 32 * 2 + rd.DYNAMIC_SMEM_SLACK
        small = Variant((next(k for k in FAMILIES[fam] if k.kind == "64x128/g64x128"),),
                        dtype, "tile-list")
        assert rd.dynamic_smem(small) == 0 and rd.stages(small) == 4


def _fake_cupy(calls):
    attrs = {1: 2048, 3: 0, 4: 128}   # static shared, local, registers

    class Module:
        def get_function(self, name):
            return types.SimpleNamespace(ptr=4242, name=name)
    driver = types.SimpleNamespace(
        CUDADriverError=RuntimeError,
        funcSetAttribute=lambda fn, attr, value: calls.append((fn, attr, value)),
        funcGetAttribute=lambda attr, fn: attrs[attr])
    runtime = types.SimpleNamespace(
        getDevice=lambda: 0, getDeviceCount=lambda: 1,
        getDeviceProperties=lambda d: {"name": b"Fake H100", "major": 9, "minor": 0,
                                       "multiProcessorCount": 132})
    return types.SimpleNamespace(cuda=types.SimpleNamespace(
        driver=driver, runtime=runtime, function=types.SimpleNamespace(Module=Module),
        get_current_stream=lambda: types.SimpleNamespace(ptr=0))), Module


@pytest.mark.parametrize("kind", ["128x128/g64x128", "64x128/g64x128"])
def test_the_backend_opts_a_dynamic_variant_in_and_counts_its_bytes(monkeypatch, kind):
    calls = []
    cp, Module = _fake_cupy(calls)
    monkeypatch.setattr(kres, "_registered", {})
    monkeypatch.setattr(cudabe.compile_cache, "load", lambda compile, load: (
        Module(), b"", KernelResources(registers=128, shared_bytes=2048, source="fake")))
    be = cudabe.CudaBackend(cp, launch_kernel=lambda *a: 0)
    k = next(k for k in FAMILIES["wgmma-bf16"] if k.kind == kind)
    v = Variant((k,), "bfloat16", "tile-list")
    dyn = rd.render(v).dynamic_smem
    be.function(v)
    be.function(v)   # loaded once: the attribute is set once
    assert calls == ([(4242, cudabe._MAX_DYNAMIC_SHARED_SIZE_BYTES, dyn)] if dyn else [])
    assert kres.lookup("sm_90", v).shared_bytes == 2048 + dyn


def test_a_launch_passes_its_dynamic_bytes():
    seen = []
    item = cudabe._encoded_gemm(7, 12, 256, 1, 2, 3, 0, "k", 99312)
    cudabe._run(lambda *a: seen.append(a) or 0, item, 5)
    assert seen[0][7] == 99312 and seen[0][8] == 5   # sharedMemBytes, then the stream
    seen.clear()
    cudabe._run(lambda *a: seen.append(a) or 0, cudabe._encoded_gemm(7, 12, 256, 1, 2, 3, 0, "k"), 5)
    assert seen[0][7] == 0


def test_the_3xtf32_wgmma_kinds_hold_their_split_stage_and_two_64x128_blocks_an_sm():
    """3 cp.async stages (A padded as the TF32 kinds', B's k-major rows by 4 for their
    aligned windows, its n-major rows unpadded), then B's split stage
    (big and small, 1 KiB aligned): 64x128 must leave two blocks an SM (sm_90 reserves
    1 KiB of shared memory a block), which it measured to need, and 64x64 three
    (bench/NOTES.md, session 11)."""
    for kind, a_stage in (("64x128/g64x128", 64 * 36), ("128x128/g64x128", 128 * 36),
                          ("64x64/g64x64", 64 * 36)):
        k = next(k for k in FAMILIES["wgmma-3xtf32"] if k.kind == kind)
        v = Variant((k,), "float32", "tile-list")
        assert (k.tk, rd.stages(v), rd.split_stage_elems(k)) == (32, 3, 2 * k.tn * 32)
        stages = 3 * (a_stage + 32 * (k.tn + 4))
        tiles = -(-stages // 256) * 256 + 2 * k.tn * 32
        assert rd.smem_elems_async(v.kinds, "float32", 3) == tiles
        assert rd.dynamic_smem(v) == 4 * tiles + rd.DYNAMIC_SMEM_SLACK
    small = Variant((next(k for k in FAMILIES["wgmma-3xtf32"] if k.kind == "64x128/g64x128"),),
                    "float32", "tile-list")
    assert 2 * (rd.dynamic_smem(small) + 1024) <= get_arch("sm_90").shared_per_cu
    smallest = Variant((next(k for k in FAMILIES["wgmma-3xtf32"] if k.kind == "64x64/g64x64"),),
                       "float32", "tile-list")
    assert 3 * (rd.dynamic_smem(smallest) + 1024) <= get_arch("sm_90").shared_per_cu
