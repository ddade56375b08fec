"""The lean edge code (kernels/render.py lean, PG_LEAN): which variants take it, and that
every other variant renders as it did before it (no define, so the kernel source's
`#ifndef PG_LEAN` default, 0, keeps their code)."""
from __future__ import annotations

import pytest

from portgemm.kernels import render
from portgemm.kernels.variants import Variant
from portgemm.tiles import FAMILIES


def _kind(family, kind):
    return next(k for k in FAMILIES[family] if k.kind == kind)


@pytest.mark.parametrize("family, kind, dtype", [
    ("portgemm", "64x128/8x8", "float32"),
    ("portgemm", "128x128/16x8", "float32"),
    ("portgemm-f64", "128x64/8x4", "float64"),
    ("tune", "128x64/8x8/k8", "float32"),
])
@pytest.mark.parametrize("trans", [(False, False), (True, True)])
def test_our_simt_kinds_per_kind_are_lean(family, kind, dtype, trans):
    v = Variant((_kind(family, kind),), dtype, "tile-list", *trans)
    assert render.lean(v)
    assert render.defines(v)["PG_LEAN"] == "1"


@pytest.mark.parametrize("variant", [
    Variant(FAMILIES["portgemm"], "float32", "tile-list", False, False),          # fused
    Variant((_kind("portgemm", "64x64/8x4"),), "float32", "ragged", False, False),
    Variant((_kind("zhang2025", "large"),), "float32", "tile-list", False, False),
    Variant((_kind("magma", "V504"),), "float32", "grid-z", False, False),
    Variant((_kind("portgemm-f64", "64x64/w32x32"),), "float64", "tile-list", False, False),
    Variant((_kind("portgemm-f16", "32x32/4x4"),), "float16", "tile-list", False, False),
    Variant((_kind("portgemm-f64", "64x64/4x4"),), "float64", "tile-list", False, False),
], ids=["fused", "ragged", "paper", "grid-z", "mma", "f16-simt", "f64-pipelined"])
def test_other_variants_render_without_the_define(variant):
    assert not render.lean(variant)
    assert "PG_LEAN" not in render.defines(variant)


TRANS = [(False, False), (False, True), (True, False), (True, True)]


@pytest.mark.parametrize("family, kind", [
    ("portgemm", "64x128/8x8"), ("portgemm", "128x64/8x8"), ("portgemm", "64x64/8x4"),
    ("portgemm", "128x128/16x8"), ("tune", "64x128/8x8/k8"), ("tune", "64x64/8x4/k16"),
])
@pytest.mark.parametrize("trans", TRANS, ids=["nn", "nt", "tn", "tt"])
def test_short_k_kinds_take_the_lean_step(family, kind, trans):
    """The four fp32 kinds of the short-K cells (and their tuning candidates) take
    PG_LEAN_STEP in every op but 64x64/8x4 A^T B (where it cost a block an SM)."""
    v = Variant((_kind(family, kind),), "float32", "tile-list", *trans)
    off = kind.startswith("64x64/8x4") and trans == (True, False)
    assert render.lean_step(v) is not off
    assert render.defines(v).get("PG_LEAN_STEP") == (None if off else "1")


@pytest.mark.parametrize("family, kind, dtype", [
    ("portgemm", "32x32/4x4", "float32"),
    ("portgemm", "128x128/8x8", "float32"),
    ("portgemm-f64", "128x64/8x4", "float64"),
    ("tune-f64", "64x32/4x4/k8", "float64"),
])
def test_other_lean_kinds_keep_their_step(family, kind, dtype):
    """Other lean kinds render as in session 9: no PG_LEAN_STEP define (the kernel's
    default, 0), so their registers and blocks an SM stay as they were."""
    v = Variant((_kind(family, kind),), dtype, "tile-list", False, False)
    assert render.lean(v) and not render.lean_step(v)
    assert "PG_LEAN_STEP" not in render.defines(v)
