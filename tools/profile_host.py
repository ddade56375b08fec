"""Where a gemm_vbatched call spends its host time, on the present CUDA device.

Prints: the cost of each attribute read on a CuPy array (and a torch tensor, where torch
is installed), whether weak references work on them, the stage times of one call
(validate, plan-cache hit, execute), the full-miss path's parts (calls on new array
objects and at new addresses, a descriptor upload step by step), the new-memory gap
probe at batch 8 (tools/host_stages.gap_probe: back to back as the host table times it,
with the collector off, by alignment half, with no device sync, each step timed inside
real calls, CuPy's pool growth), the new-array-objects path against the reads it makes
(read_floors: each read as a C-level map, their sum, the gather, the call; CuPy and
torch), the torch hit's three check forms, and a cProfile of gemm_vbatched at batches
8 and 1024.

    python tools/profile_host.py
"""
from __future__ import annotations

import cProfile
import io
import itertools
import pstats
import sys
import time
import timeit
import weakref
from collections import deque
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import portgemm  # noqa: E402
from portgemm.api import _validate  # noqa: E402
from portgemm.backends.base import get_backend  # noqa: E402
from portgemm.planner import plan as make_plan  # noqa: E402


def per_op_us(stmt, glb, number=20000):
    return min(timeit.repeat(stmt, globals=glb, number=number, repeat=5)) / number * 1e6


def attribute_costs(cp):
    x = cp.zeros((64, 32), cp.float32)
    rows = {s: per_op_us(s, {"x": x, "id": id, "type": type}) for s in (
        "x.data.ptr", "x.data", "x.shape", "x.strides", "x.dtype", "x.data.device_id",
        "type(x)", "id(x)", "x.ndim", "x.size", "x.itemsize", "x.__cuda_array_interface__")}
    try:
        weakref.ref(x)
        rows["weakref.ref(x)"] = per_op_us("ref(x)", {"x": x, "ref": weakref.ref})
    except TypeError as e:
        rows["weakref.ref(x)"] = f"unsupported ({e})"
    try:
        import torch
        t = torch.zeros((64, 32), device="cuda")
        from portgemm.reuse import _torch_row, _torch_row_contiguous
        for s in ("t.data_ptr()", "t.shape", "t.stride()", "t.dtype", "t.get_device()",
                  "t.device", "t.is_contiguous()", "t.size()", "t.ndim",
                  "row(t)", "crow(t)"):
            rows["torch " + s] = per_op_us(s, {"t": t, "row": _torch_row,
                                              "crow": _torch_row_contiguous}, 5000)
        rows["torch weakref.ref(t)"] = per_op_us("ref(t)", {"t": t, "ref": weakref.ref})
    except ImportError:
        pass
    for k, v in rows.items():
        print(f"  {k:36s} {v if isinstance(v, str) else f'{v:.3f} us'}")


def stages(be, cp, batch, rng):
    shapes = np.stack([rng.integers(16, 129, batch) for _ in range(3)], 1)
    A = [cp.random.random((m, k), dtype=cp.float32) for m, _, k in shapes]
    B = [cp.random.random((k, n), dtype=cp.float32) for _, n, k in shapes]
    C = [cp.empty((m, n), dtype=cp.float32) for m, n, _ in shapes]
    portgemm.gemm_vbatched(A, B, C, backend=be)
    cp.cuda.Device().synchronize()
    b = _validate(be, A, B, C, 1.0, 0.0, False, False)
    p = make_plan(b.shapes, dtype=b.dtype, arch=be.arch())

    t = _timer(cp, warm=False)
    res = {"validate": t(lambda: _validate(be, A, B, C, 1.0, 0.0, False, False)),
           "plan (cache hit)": t(lambda: make_plan(b.shapes, dtype=b.dtype, arch=be.arch())),
           "be.arch()": t(lambda: be.arch()),
           "execute": t(lambda: be.execute(p, b)),
           "gemm_vbatched": t(lambda: portgemm.gemm_vbatched(A, B, C, backend=be)),
           "bound": t(p.bind(A, B, C, backend=be))}
    print(f"batch {batch}: " + ", ".join(f"{k} {v:.1f} us" for k, v in res.items()))
    miss_stages(be, cp, batch, A, B, C, p, t)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(20):
        portgemm.gemm_vbatched(A, B, C, backend=be)
    prof.disable()
    cp.cuda.Device().synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
    print("\n".join(s.getvalue().splitlines()[:45]))


def miss_stages(be, cp, batch, A, B, C, p, t):
    """The full-miss path's parts on this device: the calls on new array objects (views
    of the same memory: the layout cache) and at new addresses (read, validated, planned,
    uploaded), and the upload's own steps, so that what the host spends beside the
    launch is visible stage by stage."""
    from portgemm import api, reuse
    from portgemm.problem import gather_lists
    from portgemm.backends.launch import DESCRIPTOR_CACHE, descriptors
    sets = max(api._layouts.kept, reuse.SEEN, DESCRIPTOR_CACHE) + 4
    views = itertools.cycle([[[x.view() for x in X] for X in (A, B, C)] for _ in range(sets)])
    # arrays at new addresses: each set one pool per operand, shifted by 64 bytes a set
    fresh = itertools.cycle([[_shifted(cp, X, j) for X in (A, B, C)] for j in range(sets)])
    batches = itertools.cycle([_validate(be, *next(fresh), 1.0, 0.0, False, False)
                               for _ in range(sets)])
    host = descriptors(next(batches))
    stream = cp.cuda.get_current_stream()
    parts = {
        "gather_lists (one pass of reads)": lambda: gather_lists(A, B, C, be.fast_devices),
        "gemm_vbatched (new arrays)": lambda: portgemm.gemm_vbatched(*next(views), backend=be),
        "gemm_vbatched (new memory)": lambda: portgemm.gemm_vbatched(*next(fresh), backend=be),
        "execute (new descriptors)": lambda: be.execute(p, next(batches)),
        "descriptors()": lambda: descriptors(next(batches)),
        "staging upload": lambda: be._staging.upload(host, stream),
        "cp.empty(n, uint8)": lambda: cp.empty(host.nbytes, dtype=cp.uint8),
        "cp.cuda.alloc(n)": lambda: cp.cuda.alloc(host.nbytes),
        "get_current_stream": cp.cuda.get_current_stream,
        "with stream: pass": lambda: _enter(stream),
    }
    out = []
    for name, fn in parts.items():
        try:
            fn()
            out.append(f"{name} {t(fn):.1f} us")
        except Exception as e:  # noqa: BLE001 - a part this CuPy lacks: say so, go on
            out.append(f"{name} n/a ({type(e).__name__})")
    print(f"batch {batch}, full-miss parts: " + ", ".join(out))


def _shifted(cp, X, j):
    """Views like X's matrices in one new pool, the set's start shifted by 16 j elements."""
    sizes = [int(x.size) for x in X]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    buf = cp.zeros(int(sum(sizes)) + 16 * (j + 1), X[0].dtype)
    return [buf[s + 16 * j:s + 16 * j + x.size].reshape(x.shape) for s, x in zip(starts, X)]


def _enter(stream):
    with stream:
        pass


def _timer(cp, reps=50, warm=True):
    """t(fn): the median host time (us) of one call of fn, the device idle before each
    (``warm``: after one untimed call)."""
    def t(fn):
        out = []
        if warm:
            fn()
        for _ in range(reps):
            cp.cuda.Device().synchronize()
            s = time.perf_counter()
            fn()
            out.append(time.perf_counter() - s)
        return float(np.median(out)) * 1e6
    return t


def small_batch_sweep(be, cp, rng):
    """The small-batch path (portgemm/small_batch.py) against the vectorised one, per
    batch size: what SMALL_BATCH is chosen by. Each row: validate (read and checked in
    full), descriptors(), a call on new array objects (layout-cache hit) and one at new
    addresses (validated, planned, uploaded), with the small path on and off."""
    from portgemm import problem
    from portgemm.backends.launch import descriptors
    t = _timer(cp)
    old = problem.SMALL_BATCH
    print(f"small-batch path (SMALL_BATCH = {old}) against the vectorised path, us per call:")
    rows = []
    for n in (4, 8, 16, 32, 64, 128):
        shapes = np.stack([rng.integers(16, 129, n) for _ in range(3)], 1)
        A = [cp.random.random((m, k), dtype=cp.float32) for m, _, k in shapes]
        B = [cp.random.random((k, nn), dtype=cp.float32) for _, nn, k in shapes]
        C = [cp.empty((m, nn), dtype=cp.float32) for m, nn, _ in shapes]
        row = [n]
        for limit in (10**9, -1):   # small path on every size, then off
            problem.SMALL_BATCH = limit
            try:
                b = _validate(be, A, B, C, 1.0, 0.0, False, False)
                views = itertools.cycle([[[x.view() for x in X] for X in (A, B, C)]
                                         for _ in range(24)])
                fresh = itertools.cycle([[_shifted(cp, X, j) for X in (A, B, C)]
                                         for j in range(24)])
                row += [t(lambda: _validate(be, A, B, C, 1.0, 0.0, False, False)),
                        t(lambda: descriptors(b)),
                        t(lambda: portgemm.gemm_vbatched(*next(views), backend=be)),
                        t(lambda: portgemm.gemm_vbatched(*next(fresh), backend=be))]
            finally:
                problem.SMALL_BATCH = old
        rows.append(row)
    parts = ("validate", "descriptors", "new arrays", "new memory")
    heads = ["batch"] + [f"{p} ({w})" for w in ("small", "vectorised") for p in parts]
    from tabulate import tabulate
    print(tabulate(rows, headers=heads, floatfmt=".1f"))


def torch_rows(be, cp, rng):
    """The reuse path's torch check in its four forms (reuse.py): torch's C++ guards
    (TORCH_GUARDS, the default where torch has them), one C-level map a read
    (TORCH_COLUMNS), one row a tensor with is_contiguous(), one row with stride(); a
    repeated call each (the device idle before it), us a call and a GEMM."""
    try:
        import torch
    except ImportError:
        return
    from portgemm import reuse
    t = _timer(cp)
    out = []
    forms = {"guards": (True, True, True), "columns": (False, True, True),
             "rows, is_contiguous": (False, False, True), "rows, stride": (False, False, False)}
    for n in (8, 1024):
        shapes = np.stack([rng.integers(16, 129, n) for _ in range(3)], 1).tolist()
        A = [torch.rand((m, k), device="cuda") for m, _, k in shapes]
        B = [torch.rand((k, nn), device="cuda") for _, nn, k in shapes]
        C = [torch.empty((m, nn), device="cuda") for m, nn, _ in shapes]
        for name, (guards, columns, contiguous) in forms.items():
            reuse.TORCH_GUARDS, reuse.TORCH_COLUMNS, reuse.TORCH_CONTIGUOUS_ROWS = \
                guards, columns, contiguous
            reuse.clear()
            us = t(lambda: portgemm.gemm_vbatched(A, B, C, backend=be))
            out.append(f"batch {n} {name}: {us:.1f} us ({us / n:.2f} a GEMM)")
        reuse.TORCH_GUARDS = reuse.TORCH_COLUMNS = reuse.TORCH_CONTIGUOUS_ROWS = True
        reuse.clear()
    print("torch reuse hits: " + ", ".join(out))


def read_floors(be, cp, rng):
    """The new-array-objects path against its reads: per batch, over 16 sets of fresh
    views of the same memory rotated (as the host table's new arrays), us per GEMM (3
    arrays) of each read the lists path makes of a CuPy array as one C-level map alone,
    their sum (the floor of an exact read of a new array), arrays.gather /
    small_batch.gather (problem.gather_lists) and the whole gemm_vbatched call; and the
    same for torch tensors (from_dlpack views: new tensor objects each call)."""
    from operator import attrgetter
    from portgemm import problem
    from portgemm.arrays import torch_readers
    try:
        import torch
    except ImportError:
        torch = None
    shape, dtype, data, ptr, dev, cc = (attrgetter(a) for a in (
        "shape", "dtype", "data", "ptr", "device_id", "_c_contiguous"))
    for n in (8, 64, 1024):
        shapes = np.stack([rng.integers(16, 129, n) for _ in range(3)], 1)
        A = [cp.random.random((m, k), dtype=cp.float32) for m, _, k in shapes]
        B = [cp.random.random((k, nn), dtype=cp.float32) for _, nn, k in shapes]
        C = [cp.empty((m, nn), dtype=cp.float32) for m, nn, _ in shapes]
        portgemm.gemm_vbatched(A, B, C, backend=be)
        sets = [[[x.view() for x in X] for X in (A, B, C)] for _ in range(16)]
        reads = {"type": lambda X: list(map(type, X)), "dtype": lambda X: list(map(dtype, X)),
                 "shape": lambda X: deque(map(shape, X), 0),
                 "_c_contiguous": lambda X: list(map(cc, X)),
                 "data": lambda X: list(map(data, X)),
                 "data.ptr": lambda X: list(map(ptr, map(data, X))),
                 "data.device_id": lambda X: list(map(dev, map(data, X)))}
        res = {k: _rotated_us(fn, sets, n, flat=True) for k, fn in reads.items()}
        res["sum of reads (type, dtype, shape, _c_contiguous, data.ptr, data.device_id)"] = \
            sum(v for k, v in res.items() if k != "data")
        res["gather_lists"] = _rotated_us(lambda L: problem.gather_lists(*L, be.fast_devices),
                                          sets, n)
        res["gemm_vbatched (new arrays)"] = _rotated_us(
            lambda L: portgemm.gemm_vbatched(*L, backend=be), sets, n)
        if torch is not None:
            tsets = [[[torch.from_dlpack(x) for x in X] for X in L] for L in sets]
            tdp, tst, tgd = torch_readers(torch.Tensor)
            treads = {"torch data_ptr": lambda X: list(map(tdp, X)),
                      "torch shape": lambda X: deque(map(shape, X), 0),
                      "torch stride": lambda X: deque(map(tst, X), 0),
                      "torch dtype": lambda X: list(map(dtype, X)),
                      "torch get_device": lambda X: list(map(tgd, X))}
            tres = {k: _rotated_us(fn, tsets, n, flat=True) for k, fn in treads.items()}
            res.update(tres)
            res["torch sum of reads"] = sum(tres.values())
            res["torch gather_lists"] = _rotated_us(
                lambda L: problem.gather_lists(*L, be.fast_devices), tsets, n)
            res["torch gemm_vbatched (new tensors)"] = _rotated_us(
                lambda L: portgemm.gemm_vbatched(*L, backend=be), tsets, n)
        cp.cuda.Device().synchronize()
        print(f"batch {n}, new objects, us per GEMM: " +
              ", ".join(f"{k} {v:.3f}" for k, v in res.items()))


def _rotated_us(fn, sets, n, flat=False, reps=60):
    """Median us per GEMM of fn over ``sets`` rotated (each set (A, B, C); ``flat``: fn
    takes A + B + C as one list), back to back (no device sync: reads and host work)."""
    args = [[*L[0], *L[1], *L[2]] if flat else L for L in sets]
    rot, out = itertools.cycle(args), []
    for i in range(reps + len(args)):
        a = next(rot)
        s = time.perf_counter()
        fn(a)
        if i >= len(args):
            out.append(time.perf_counter() - s)
    return float(np.median(out)) * 1e6 / n


def packed_parts(be, cp, rng):
    """A repeated gemm_grouped call with device offsets against the bound call of the
    same GEMMs: host time of each (us, the device idle before), device time (event-timed
    back-to-back), and the host parts of the packed call."""
    if not hasattr(portgemm, "gemm_grouped"):
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from timing import do_bench
    from portgemm.grouped import ragged
    t = _timer(cp, 100)
    for groups, max_mn, k in ((8, 256, 128), (64, 256, 128), (8, 1024, 512)):
        m = rng.integers(0, max_mn + 1, groups)
        offs = np.cumsum(m).astype(np.int32)
        T = int(offs[-1])
        A = cp.random.random((T, k), dtype=cp.float32)
        B = cp.random.random((groups, k, max_mn), dtype=cp.float32)
        C = cp.empty((T, max_mn), cp.float32)
        d_offs = cp.asarray(offs)
        starts = np.concatenate([[0], offs[:-1]])
        la = [A[s:e] for s, e in zip(starts, offs)]
        lb = [B[g] for g in range(groups)]
        lc = [C[s:e] for s, e in zip(starts, offs)]
        shapes = np.stack([m, np.full(groups, max_mn), np.full(groups, k)], 1)
        bound = portgemm.plan(shapes, "float32", arch=be.arch()).bind(la, lb, lc, backend=be)
        dev = lambda: portgemm.gemm_grouped(A, B, C, d_offs, backend=be)  # noqa: E731
        host = lambda: portgemm.gemm_grouped(A, B, C, offs, backend=be)  # noqa: E731
        key = lambda: ragged._fast_key(be, A, B, C, d_offs, 1.0, 0.0, False, False,  # noqa: E731
                                       None, None)
        dev()   # the first call validates and makes the entry the parts below use
        fk = key()
        entry = ragged._fast.get(fk)
        arrays = ragged.RaggedArrays(d_offs, A, B, C)
        res = {"device offs (host us)": t(dev), "host offs (host us)": t(host),
               "bound (host us)": t(bound), "_fast_key": t(key),
               "_fast.get": t(lambda: ragged._fast.get(fk)),
               "execute_ragged": t(lambda: be.execute_ragged(entry, arrays)),
               "device offs (do_bench us)": do_bench(cp, dev) * 1e3,
               "bound (do_bench us)": do_bench(cp, bound) * 1e3}
        print(f"packed G={groups} MaxMN={max_mn} K={k}: " +
              ", ".join(f"{n} {v:.1f}" for n, v in res.items()))


def call_stages(be, cp, rng):
    """tools/host_stages.py on this device: the full path's steps of a new-memory call
    (arrays at new addresses: views into pools shifted per set) at 8 and 64 GEMMs, and a
    repeated call's (the reuse hit) at 8 and 1,024 GEMMs with CuPy arrays and torch
    tensors, each step timed inside the call's own sequence, with the device idle before
    each call; the floors beside them: the reads a hit cannot skip."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import host_stages
    from portgemm import api, reuse
    sync = cp.cuda.Device().synchronize
    try:
        import torch
    except ImportError:
        torch = None
    for n in (8, 64, 1024):
        shapes = np.stack([rng.integers(16, 129, n) for _ in range(3)], 1)
        A = [cp.random.random((m, k), dtype=cp.float32) for m, _, k in shapes]
        B = [cp.random.random((k, nn), dtype=cp.float32) for _, nn, k in shapes]
        C = [cp.empty((m, nn), dtype=cp.float32) for m, nn, _ in shapes]
        if n <= 64:
            sets = [[_shifted(cp, X, j) for X in (A, B, C)]
                    for j in range(max(api._layouts.kept, reuse.SEEN) + 8)]
            host_stages.show(f"batch {n}, new-memory call stages",
                             host_stages.miss_stages(be, sets, before=sync))
            del sets
        if n == 8:   # the back-to-back gap: twice the sets, so either half still misses
            sets = [[_shifted(cp, X, j) for X in (A, B, C)]
                    for j in range(2 * (max(api._layouts.kept, reuse.SEEN) + 4))]
            host_stages.show(f"batch {n}, new-memory gap probe",
                             host_stages.gap_probe(be, sets, before=sync))
            del sets
        if n == 64:
            continue
        host_stages.show(f"batch {n}, repeated call stages (CuPy)",
                         host_stages.hit_stages(be, A, B, C, before=sync))
        X = [*A, *B, *C]
        bound = make_plan(shapes, "float32", arch=be.arch()).bind(A, B, C, backend=be)
        # consumed as read (deque of length 0): no list of 3n tuples for the GC to see
        reads = _loop_us(lambda: deque(map(_shape, X), 0))
        ids = _loop_us(lambda: tuple(map(id, X)))
        bound_us = _loop_us(bound, 50)
        sync()
        print(f"  floors, batch {n}: {3 * n} shape reads {reads:.1f} us, {3 * n} ids "
              f"{ids:.1f} us, the bound call back to back (host) {bound_us:.1f} us")
        if n == 8:
            launch_forms(be, cp, bound)
        if torch is not None:
            T = [[torch.as_tensor(x, device="cuda") for x in L] for L in (A, B, C)]
            host_stages.show(f"batch {n}, repeated call stages (torch)",
                             host_stages.hit_stages(be, *T, before=sync))
            _torch_floors(reuse, [*T[0], *T[1], *T[2]], n)


def launch_forms(be, cp, bound):
    """One encoded launch (the bound call's) made through the driver's cuLaunchKernel by
    ctypes (the full path's _run) and through CuPy's launchKernel binding (the lean
    calls'), back to back: the host cost of each form alone."""
    import ctypes
    from portgemm.backends.cuda import _run
    enc = getattr(bound._launch, "encoded", None)
    if enc is None or be._cu_raising is None:
        print("  launch forms: n/a (no single encoded launch, or no CuPy launchKernel)")
        return
    item, = enc
    fn, (gx, gy, gz), threads, params, _, _ = item
    sp, at = cp.cuda.get_current_stream().ptr, ctypes.addressof(params)
    forms = {"ctypes cuLaunchKernel (_run)": lambda: _run(be._cu_launch, item, sp),
             "CuPy driver.launchKernel": lambda: be._cu_raising(fn, gx, gy, gz, threads, 1, 1,
                                                                0, sp, at, 0)}
    res = {}
    for k, fn_ in forms.items():
        res[k] = _loop_us(fn_, 50)
        cp.cuda.Device().synchronize()
    print("  one launch, host us (back to back): " +
          ", ".join(f"{k} {v:.2f}" for k, v in res.items()))


def _shape(x):
    return x.shape


def _loop_us(fn, reps=200):
    """Least of 5 means over ``reps`` back-to-back calls (us): a floor, no device sync."""
    out = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        out.append((time.perf_counter() - t) / reps)
    return min(out) * 1e6


def _torch_floors(reuse, X, n):
    """What the torch hit's in-place check costs over the 3n tensors, its reads alone and
    two cheaper-looking forms: the five reads as C-level maps zipped (one visit per
    tensor, no Python frame), and four reads (no get_device(): not used, see the notes)."""
    from operator import attrgetter, eq, methodcaller
    d, s, c, t, g = (methodcaller("data_ptr"), attrgetter("shape"),
                     methodcaller("is_contiguous"), attrgetter("dtype"),
                     methodcaller("get_device"))
    meta = list(map(reuse._torch_row_contiguous, X))
    four = [r[:4] for r in meta]
    row4 = lambda x: (x.data_ptr(), x.shape, x.is_contiguous(), x.dtype)  # noqa: E731
    cols, guards = reuse._torch_columns(X), reuse._torch_guards(X)
    res = {
        **({"guards (reuse, as used)": lambda: reuse._torch_guards_same(X, guards)}
           if guards is not None else {}),
        "columns": lambda: reuse._torch_columns_same(X, cols),
        "rows (TORCH_COLUMNS off)": lambda: all(map(eq, map(reuse._torch_row_contiguous, X),
                                                    meta)),
        "five reads, zipped maps": lambda: all(map(eq, zip(map(d, X), map(s, X), map(c, X),
                                                           map(t, X), map(g, X)), meta)),
        "four reads (no get_device)": lambda: all(map(eq, map(row4, X), four)),
        "data_ptr() + shape only": lambda: all(map(eq, zip(map(d, X), map(s, X)),
                                                   [r[:2] for r in meta])),
    }
    print(f"  torch in-place check over {3 * n} tensors, us per GEMM: " + ", ".join(
        f"{k} {_loop_us(fn, 50) / n:.2f}" for k, fn in res.items()))


def main():
    be = get_backend("cuda")
    cp = be.cp
    print("attribute reads (us per read):")
    attribute_costs(cp)
    rng = np.random.default_rng(3)
    for part in (call_stages, read_floors, small_batch_sweep, torch_rows, packed_parts):
        try:
            part(be, cp, rng)
        except Exception as e:  # noqa: BLE001 - one part failing must not lose the others
            print(f"{part.__name__} failed: {type(e).__name__}: {e}")
    for batch in (8, 1024):
        stages(be, cp, batch, rng)


if __name__ == "__main__":
    main()
