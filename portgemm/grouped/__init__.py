"""The packed (grouped) API: one buffer per operand, sizes as arrays.

- ``gemm_grouped``: ragged M (mixture of experts), A (T, K) rows packed, B (G, K, N),
  C (T, N), group ends ``offs`` as in ``torch._grouped_mm``, on the host or the device.
- ``gemm_grouped_general``: MAGMA's vbatched form, flat A, B, C buffers with (G, 3)
  sizes, per-group element offsets and leading dimensions.

Neither splits K (planner/split_k.py): their plans are made with ``split_k=False``; the
lists API, Plan.run and Plan.bind do split where the planner finds it faster.
"""
from .general import gemm_grouped_general
from .ragged import gemm_grouped

__all__ = ["gemm_grouped", "gemm_grouped_general"]
