"""``python -m portgemm bench``: portgemm against the batched-GEMM peers a user would
otherwise call, on this device and these shapes, and zhang2025's §5 evaluation.

One job per module: workloads (what to run), device (arrays, clocks, L2 flush),
timing (the protocol), check (NaN-poisoned float64 check), entries (portgemm's entry
points), peers (cuBLAS, Triton, PyTorch), roofline (ceilings and arithmetic), runner
(cases x methods x modes), report (table, JSON, CSV, summary), plots, paper (§5), ncu
(measured occupancy), cli. GPU libraries are imported only where a method needs them.
"""
