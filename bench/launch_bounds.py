"""Experiment: cap the kernels' registers with __launch_bounds__(threads, min_blocks) and
time the fused and per-kind modes (CUDA-graph replay) for each cap.

    python bench/launch_bounds.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import portgemm  # noqa: E402
from portgemm.backends import cuda as cuda_backend  # noqa: E402
from portgemm.kernels import render, resources  # noqa: E402
from portgemm.kernels.variants import variants_for  # noqa: E402
from portgemm.tiles import ZHANG2025  # noqa: E402
from timing import graph_bench, random_batch  # noqa: E402

CASES = [(128, 128, 1024), (256, 256, 64), (256, 256, 1024), (512, 512, 256), (1024, 512, 1024)]


def main():
    rng = np.random.default_rng(3)
    base = cuda_backend.create()
    cp = base.cp
    batches = [(c, random_batch(cp, rng, c[2], c[0], c[1])) for c in CASES]
    rows = []
    table = dict(render.MIN_BLOCKS)
    for min_blocks in (0, 1, 2, 3, 4):  # 0: no hint
        render.MIN_BLOCKS = {**table, ("zhang2025", "fused", "float32"): min_blocks}
        render.render.cache_clear()
        resources._registered.clear()
        portgemm.planner.clear_cache()
        be = cuda_backend.CudaBackend(cp)  # fresh function cache for this cap
        fused = be.function(variants_for(ZHANG2025, "fused", "float32")[0])
        regs = be.function_attributes(fused)["num_regs"]
        spill = resources.lookup(be.arch(), variants_for(ZHANG2025, "fused", "float32")[0]).spill_bytes
        row = [min_blocks, regs, spill]
        for mode in ("fused", "per-kind"):
            for (mmn, mk, b), (shapes, A, B, C) in batches:
                p = portgemm.plan(shapes, "float32", arch=be.arch(), mode=mode)
                flops = 2 * float((shapes[:, 0] * shapes[:, 1] * shapes[:, 2]).sum())
                row.append(flops / graph_bench(cp, lambda: p.run(A, B, C, backend=be)) / 1e6)
        rows.append(row)
    heads = ["min blocks", "fused regs", "fused spill"] + [
        f"{m} {a}/{k} b{b}" for m in ("fused", "per-kind") for a, k, b in CASES]
    print(f"device: {base.device_name()}; GFLOP/s by CUDA-graph replay")
    print(tabulate(rows, headers=heads, floatfmt=".0f"))


if __name__ == "__main__":
    main()
