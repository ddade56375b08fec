"""The child ncu profiles: run one benchmark method once per case between
cudaProfilerStart and cudaProfilerStop (after one call outside them that compiles and
uploads).

    python -m portgemm.benchmark.ncu_replay spec.json
"""
from __future__ import annotations

import json
import sys

import numpy as np


def main(argv=None) -> int:
    from .device import open_device
    from .entries import methods as entry_methods
    from .operands import make_operands
    from .peers import methods as peer_methods
    spec = json.load(open((argv or sys.argv[1:])[0]))
    dev = open_device("cuda")
    name = spec["method"]
    if "/" in name:
        entry, strategy = name.split("/", 1)
        method = entry_methods([entry], [strategy])[0]
    else:
        method = peer_methods([name])[0]
    start, stop = _profiler(dev.xp)
    for i, shapes in enumerate(spec["cases"]):
        ops = make_operands(dev, np.array(shapes, np.int64), spec["dtype"], seed=i,
                            reference=False)
        prep = method.make(dev, ops)
        prep.call()
        dev.synchronize()
        start()
        prep.call()
        dev.synchronize()
        stop()
    return 0


def _profiler(cp):
    """cudaProfilerStart/Stop through CuPy (its runtime module, else its profiler module)."""
    rt = cp.cuda.runtime
    if hasattr(rt, "profilerStart"):
        return rt.profilerStart, rt.profilerStop
    import cupy.cuda.profiler as prof
    return prof.start, prof.stop


if __name__ == "__main__":
    sys.exit(main())
