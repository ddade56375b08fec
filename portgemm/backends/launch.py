"""Launch geometry and per-call descriptors shared by the GPU backends (no GPU library)."""
from __future__ import annotations

import ctypes
import sys
import threading
import weakref
from collections import OrderedDict

import numpy as np

from ..kernels.render import DEVICE_TILE_DTYPE, GEMM_DTYPE
from ..small_batch import descriptor_bytes
from ..kernels.variants import GRID_YZ_MAX, variants_for
from .expand import expansion, per_kind_launches
from . import persistent

DESCRIPTOR_CACHE = 8   # descriptor sets kept per plan (distinct array sets in rotation)

# Kernel arguments as (kind, value) pairs (ragged.gemm_args, expand.expand_args) and the
# ctypes that carry each kind to cuLaunchKernel / hipModuleLaunchKernel: "p" a pointer,
# "i" int32, "q" int64, "d" double.
ARG_CTYPES = {"p": ctypes.c_void_p, "i": ctypes.c_int32, "q": ctypes.c_int64,
              "d": ctypes.c_double}


def typed_args(args) -> list:
    """ctypes values of (kind, value) kernel arguments, in order."""
    return [ARG_CTYPES[k](v) for k, v in args]


# Launch state per plan, owned here (the Plan itself is immutable): weakly keyed, so it
# goes with its plan.
_STATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_states_lock = threading.Lock()


def plan_state(plan, device_key, trans_a: bool, trans_b: bool, upload, expand=None) -> dict:
    """A plan's launch state, made once per (device, transposes) and kept while the plan
    lives: its variants, the launches [(variant index, base, grid)], the tile list and
    block pointers on the device, and a descriptor cache. A one-tile-per-block plan's
    list is written on the device by ``expand(Expansion) -> (tiles, block_ptr, table)``
    (device buffers; the backend launches the expansion kernel), so the host never
    builds it; other plans' lists are uploaded with ``upload(host array) -> device
    buffer``. With ``upload=None`` it is only looked up (None when not made yet)."""
    key = (device_key, trans_a, trans_b)
    states = _STATES.get(plan)
    st = None if states is None else states.get(key)
    if st is None and upload is not None:   # upload=None: only look it up
        st = _new_state(plan, trans_a, trans_b, upload, expand)
        with _states_lock:
            _STATES.setdefault(plan, {})[key] = st
    return st


def plan_states(plan) -> dict:
    """Every launch state made for ``plan`` so far: (device, trans_a, trans_b) -> state."""
    return dict(_STATES.get(plan, {}))


def _new_state(plan, trans_a, trans_b, upload, expand=None) -> dict:
    dtype = np.dtype(plan.dtype).name
    st = {"variants": variants_for(plan.kinds, plan.mode, dtype, trans_a, trans_b),
          "fns": {}, "desc": OrderedDict(), "tiles": None, "block_ptr": None,
          "mode": plan.mode}
    if plan.mode == "grid-z":
        st["launches"] = grid_z_launches(plan, GRID_YZ_MAX)
        return st
    if _persist(plan, st, upload):
        return st
    if expand is not None and _expand_on_device(plan, st, expand):
        return st
    tiles, block_ptr, st["launches"] = host_device_tiles(plan)
    st["tiles"], st["block_ptr"] = upload(tiles), upload(block_ptr)
    return st


def _persist(plan, st, upload) -> bool:
    """Fill ``st`` with persistent launches (backends/persistent.py) where a per-kind
    plan's launches outnumber the device's resident workgroups: the tile list, reordered
    round robin, is built and uploaded from the host (the expansion kernel writes a
    block per tile). False when no launch would change."""
    if plan.mode != "per-kind" or not persistent.enabled() or not plan.occupancy:
        return False
    counts = plan.tile_counts().tolist()
    if sum(n > 0 for n in counts) < persistent.MIN_LAUNCHES:
        return False
    if plan.layout is not None:     # a block per tile: most plans fit without a list
        slots = [persistent.resident_blocks(plan, k) for k in range(len(plan.kinds))]
        if all(n <= s or s == 0 for n, s in zip(counts, slots)):
            return False
    tiles, block_ptr, launches = host_device_tiles(plan)
    got = persistent.persistent_launches(plan, block_ptr, launches)
    if got is None:
        return False
    order, st_ptr, st["launches"] = got
    st["tiles"], st["block_ptr"] = upload(tiles[order]), upload(st_ptr)
    return True


def host_device_tiles(plan):
    """The device tile list (DEVICE_TILE_DTYPE), block pointers (int32) and launches of a
    tile-list plan, built on the host from ``plan.tiles``: what a plan without a layout
    uploads, and what the expansion kernel must write for one with a layout."""
    if plan.mode == "per-kind":
        tiles, block_ptr, launches = per_kind_layout(plan)
    else:
        tiles, block_ptr, launches = plan.tiles, plan.block_ptr, [(0, 0, plan.n_blocks)]
    dt = np.empty(len(tiles), DEVICE_TILE_DTYPE)
    for f in ("gemm", "m0", "n0", "kind"):
        dt[f] = tiles[f]
    if plan.mode == "per-kind":
        dt["kind"] = 0  # each per-kind entry point holds one kind, id 0
    return dt, np.ascontiguousarray(block_ptr, np.int32), launches


def _expand_on_device(plan, st, expand) -> bool:
    """Fill ``st`` from the plan's layout, the list written on the device; False when
    the plan has no layout the kernel can expand (li2019's packed blocks), or per-kind
    launches would need its kinds reordered."""
    per_kind = plan.mode == "per-kind"
    exp = expansion(plan.layout, kind_zero=per_kind) if plan.layout is not None else None
    launches = [(0, 0, plan.n_blocks)]
    if exp is not None and per_kind:
        launches = per_kind_launches(plan.layout)
    if exp is None or launches is None:
        return False
    st["tiles"], st["block_ptr"], st["expand_table"] = expand(exp)
    st["launches"] = launches
    return True


_desc_lock = threading.Lock()


def cached_descriptors(st: dict, batch, upload):
    """The batch's device descriptors, uploaded once per distinct set of arrays/scalars
    (the key is the descriptors' bytes), so repeated calls neither allocate nor copy.
    The cache keeps the last DESCRIPTOR_CACHE sets per plan; a caller that must keep
    one alive (a bound call, a captured graph) holds the returned buffer."""
    return cached_upload(st["desc"], descriptors(batch), upload)


def cached_upload(cache: OrderedDict, host: np.ndarray, upload, kept: int = DESCRIPTOR_CACHE):
    """upload(host), made once per distinct ``host`` bytes and kept in ``cache`` (the
    last ``kept``)."""
    key = host.tobytes()   # ~20 ns a GEMM to copy and hash: small beside validation
    with _desc_lock:
        dev = cache.get(key)
        if dev is not None:
            cache.move_to_end(key)
            return dev
    dev = upload(host)
    with _desc_lock:
        cache[key] = dev
        while len(cache) > kept:
            cache.popitem(last=False)
    return dev


def torch_device(batch):
    """The device of the batch's C when it is a torch tensor, else None: such a call
    launches on torch's current stream for that device rather than CuPy's."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    c = batch.C[0] if isinstance(batch.C, list) else batch.C
    return c.device if isinstance(c, torch.Tensor) else None


def torch_stream(device) -> int:
    """torch's current stream on ``device``, as a raw handle: read with
    ``torch._C._cuda_getCurrentRawStream(index)`` where torch has it (what torch's own
    compiler emits per launch: no Stream object is made), else through
    ``torch.cuda.current_stream`` (a few microseconds a call)."""
    torch = sys.modules["torch"]
    raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    index = getattr(device, "index", None)
    if raw is not None and type(index) is int:
        return raw(index)
    return torch.cuda.current_stream(device).cuda_stream


def descriptors(batch) -> np.ndarray:
    """The per-GEMM device descriptors (struct PgGemm) of a validated batch. (Field by
    field: measured faster than filling the records as int32 words, which needs casts; a
    small batch checked in pure Python is packed from its flat lists in one pass.)"""
    flat = getattr(batch, "flat", None)
    if flat is not None:
        raw = descriptor_bytes(*flat, batch.alpha.tolist(), batch.beta.tolist())
        return np.frombuffer(raw, GEMM_DTYPE)
    d = np.zeros(batch.size, GEMM_DTYPE)
    d["A"], d["B"], d["C"] = batch.ptr[:, 0], batch.ptr[:, 1], batch.ptr[:, 2]
    d["lda"], d["ldb"], d["ldc"] = batch.ld[:, 0], batch.ld[:, 1], batch.ld[:, 2]
    d["M"], d["N"], d["K"] = batch.shapes[:, 0], batch.shapes[:, 1], batch.shapes[:, 2]
    d["alpha"], d["beta"] = batch.alpha, batch.beta
    return d


def per_kind_layout(plan):
    """Reorder blocks so each kind's are contiguous: (tiles, block_ptr, launches) with
    launches = [(variant index, first block, n blocks)] in plan.kinds order."""
    sizes = np.diff(plan.block_ptr)
    kind_of_block = plan.tiles["kind"][plan.block_ptr[:-1]]
    # Kinds keep the order in which the plan first uses them (the planner puts the
    # heaviest first, so its launch starts first); a stable sort of the tiles by their
    # block's rank keeps every block contiguous and in plan order within its kind.
    kinds, first = np.unique(kind_of_block, return_index=True)
    kinds = kinds[np.argsort(first)]
    rank = np.empty(len(plan.kinds), np.int64)
    rank[kinds] = np.arange(len(kinds))
    block_rank = rank[kind_of_block]
    tiles = plan.tiles[np.argsort(np.repeat(block_rank, sizes), kind="stable")]
    sizes = sizes[np.argsort(block_rank, kind="stable")]
    block_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    counts = np.bincount(kind_of_block, minlength=len(plan.kinds))[kinds]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    launches = [(int(k), int(s), int(c)) for k, s, c in zip(kinds, starts, counts)]
    return tiles, block_ptr, launches


def grid_z_launches(plan, zmax: int):
    """MAGMA layout: one (tiles_m, tiles_n, gemms) grid per chunk of at most zmax GEMMs."""
    gx, gy, batch = plan.grid
    kind = 0 if len(plan.kinds) == 1 else int(plan.tiles["kind"][0])   # magma: one kind
    return [(kind, z0, (gx, gy, min(zmax, batch - z0))) for z0 in range(0, batch, zmax)]
