"""Autotuning: ``python -m portgemm tune`` times every candidate tile kind on the present
device and writes the per-architecture data file the planner reads
(occupancy/tuned/<arch>.json, loaded by occupancy/tuned.py).

MAGMA's approach for variable-size batches (abdelfattah2016): a pruned space of kernel
instances (the candidate families of tiles.py, each legal and spill-free on every
vendor target), timed on fixed-size batches that span the size space, then a small set
of winners that together stay within a few per cent of the best on every size. The
planner chooses among that set per GEMM with its cost model, which the sweep also
calibrates: per kind, the factor by which the model's tile time must be scaled to match
what was measured.

Modules: space (the sizes and batches), model (the planner's view of one kind: its plan
and its predicted time), choose (the set cover and the factors), sweep (the
measurements, with the device, timer and clock as parameters so it runs without a
GPU in tests), report (the data file and the table), cli (the command).
"""
