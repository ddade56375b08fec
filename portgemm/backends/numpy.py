"""The NumPy backend: executes a Plan on host arrays, tile by tile.

It is the reference that proves a plan right, so it does exactly what the plan says
and nothing more: every tile (clipped to M x N) is updated once per occurrence, in
plan order. A tile the plan misses is never written; a tile it lists twice is updated
twice (beta applied twice). Arithmetic stays in the arrays' dtype, as on the GPU, but
float16 and bfloat16, which the GPU computes in fp32 (products, sums, alpha and beta)
and rounds once on the store: so does this; and the tiles of precision "tf32", which
multiply TF32-rounded inputs (portgemm/precision.py): so do these. A
split-K plan runs its two phases as the GPU backends do (backends/split.py), and so does
a staged plan (backends/stage.py).
"""
from __future__ import annotations


import numpy as np

from ..arrays import info
from ..errors import DtypeError, ValidationError
from ..precision import round_tf32
from ..tiles import family_precision


class NumpyBackend:
    name = "numpy"
    fast_devices = ("cpu",)   # lists of host arrays take problem.validate's fast path

    def device_name(self) -> str:
        return "NumPy (host)"

    def arch(self):
        """The target whose plans this backend emulates: the planner's default
        ($PORTGEMM_ARCH, else sm_90)."""
        from ..planner import resolve_arch
        return resolve_arch(None)

    def array_info(self, x):
        a = info(x)
        if a.device != "cpu":
            raise DtypeError(f"the numpy backend takes host arrays (numpy.ndarray); got a "
                             f"{a.device} array ({type(x).__name__}): copy it to the host or "
                             f"pick its device's backend")
        return a

    def to_device(self, x):
        return np.array(x, copy=True)

    def to_host(self, x):
        return np.array(x, copy=True)

    def synchronize(self) -> None:
        pass

    def execute(self, plan, batch, gemms=None) -> None:
        if batch.size == 0:
            return None
        if plan.split is not None:   # both phases, as the GPU backends run them
            from .split import emulate
            return emulate(self, plan, batch)
        if plan.staging is not None:   # the copy, then the inner plan (backends/stage.py)
            from .stage import emulate as emulate_staged
            return emulate_staged(self, plan, batch)
        tiles = plan.tiles
        _check_tiles(tiles, batch.size)
        order = np.argsort(tiles["gemm"], kind="stable")  # group by GEMM, keep plan order
        t = tiles[order]
        g = t["gemm"]
        bounds = np.searchsorted(g, np.arange(batch.size + 1), side="left").tolist()
        m0, n0 = t["m0"].tolist(), t["n0"].tolist()
        m1 = (t["m0"] + t["tm"]).tolist()
        n1 = (t["n0"] + t["tn"]).tolist()
        dt = _compute_type(batch.dtype)
        tf32 = _tf32_kinds(plan)
        kind = t["kind"].tolist() if tf32 else None
        for i in range(batch.size):
            lo, hi = bounds[i], bounds[i + 1]
            if lo == hi:
                continue
            M, N, K = (int(v) for v in batch.shapes[i])
            alpha, beta = float(batch.alpha[i]), float(batch.beta[i])
            c = batch.C[i]
            a = batch.A[i].T if batch.trans_a else batch.A[i]
            b = batch.B[i].T if batch.trans_b else batch.B[i]
            if a.dtype.type is not dt:   # 16-bit operands: widened, the sum in fp32
                a, b = a.astype(dt), b.astype(dt)
            use_ab = alpha != 0.0 and K > 0  # alpha == 0: A and B are not read (BLAS)
            al, be = dt(alpha), dt(beta)
            rounded = None   # A and B rounded to TF32, made for the first "tf32" tile
            for k in range(lo, hi):
                r0, r1, c0, c1 = m0[k], min(m1[k], M), n0[k], min(n1[k], N)
                if r0 >= r1 or c0 >= c1:
                    continue  # wholly outside C: the kernel's guards make it a no-op
                if use_ab and tf32 and kind[k] in tf32:
                    if rounded is None:
                        rounded = round_tf32(a), round_tf32(b)
                    prod = rounded[0][r0:r1] @ rounded[1][:, c0:c1]
                elif use_ab:
                    prod = a[r0:r1] @ b[:, c0:c1]
                if use_ab:
                    prod *= al
                    if be != 0:  # beta == 0 (in C's dtype): C is not read, so NaN cannot leak
                        prod += be * c[r0:r1, c0:c1].astype(dt, copy=False)
                    c[r0:r1, c0:c1] = prod
                elif be != 0:
                    c[r0:r1, c0:c1] = be * c[r0:r1, c0:c1].astype(dt, copy=False)
                else:
                    c[r0:r1, c0:c1] = 0


    # -- ragged M, group ends on the device (here: the host emulation of its blocks) --
    def execute_ragged(self, job, arrays) -> None:
        """Run a device-offsets call (``arrays``: its RaggedArrays) as a GPU would: each
        block's group and tile found as the kernel finds them (ragged.emulate_slots),
        then those tiles; a block past its group's rows does nothing (its exit)."""
        from ..plan import TILE_DTYPE, Plan
        from ..problem import Batch
        from .ragged import emulate_slots
        if job.groups == 0 or job.n_tiles == 0:
            return None
        offs = np.asarray(arrays.offs)
        starts, M, dev_tiles = emulate_slots(job, offs)
        real = dev_tiles[dev_tiles["gemm"] >= 0]
        tiles = np.zeros(real.size, TILE_DTYPE)
        for f in ("gemm", "m0", "n0", "kind"):
            tiles[f] = real[f]
        tiles["tm"], tiles["tn"] = job.kind.tm, job.kind.tn
        G = job.groups
        stops = (starts + M).tolist()
        a, b, c = arrays.A, arrays.B, arrays.C
        A = [a[:, s:e] if job.trans_a else a[s:e] for s, e in zip(starts.tolist(), stops)]
        C = [c[s:e] for s, e in zip(starts.tolist(), stops)]
        B = [b[g] for g in range(G)]
        shapes = np.stack([M, np.full(G, job.N), np.full(G, job.K)], axis=1)
        isz = job.dtype.itemsize
        ptr = np.stack([job.a_ptr + starts * job.a_step * isz,
                        job.b_ptr + np.arange(G) * job.b_stride * isz,
                        job.c_ptr + starts * job.ldc * isz], axis=1).astype(np.uint64)
        ld = np.tile(np.array([job.lda, job.ldb, job.ldc], np.int64), (G, 1))
        alpha = job.alphas if job.alphas is not None else np.full(G, job.alpha)
        beta = job.betas if job.betas is not None else np.full(G, job.beta)
        batch = Batch(A, B, C, shapes, ptr, ld, alpha, beta, job.trans_a, job.trans_b, job.dtype, G)
        plan = Plan("ragged-device", self.arch(), job.dtype, shapes, (job.kind,), tiles,
                    np.arange(tiles.size + 1, dtype=np.int32), "per-kind", 0.0, 0.0, "-", {})
        self.execute(plan, batch)


def _tf32_kinds(plan) -> frozenset:
    """Indices of the plan's kinds that compute from TF32-rounded inputs: the MMA kinds
    of precision "tf32". "3xtf32" keeps fp32-level products, which this reference
    computes in fp32; the precision families' SIMT kind is IEEE fp32."""
    return frozenset(i for i, k in enumerate(plan.kinds)
                     if k.engine == "mma" and family_precision(k.family) == "tf32")


def _compute_type(dtype: np.dtype):
    """The scalar type the kernels compute in for ``dtype``: its own, fp32 for the 16-bit
    ones (float16, bfloat16)."""
    return np.float32 if dtype.itemsize == 2 else dtype.type


def _check_tiles(tiles, size):
    """A malformed tile would index out of bounds on a GPU; refuse it here."""
    if tiles.size == 0:
        return
    g = tiles["gemm"]
    bad = (g < 0) | (g >= size) | (tiles["m0"] < 0) | (tiles["n0"] < 0) \
        | (tiles["tm"] <= 0) | (tiles["tn"] <= 0)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValidationError(f"plan tile {k} is malformed: {tiles[k]}")


def create() -> NumpyBackend:
    return NumpyBackend()

