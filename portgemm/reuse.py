"""The reuse path: a call that repeats an earlier one on the same arrays only launches.

``gemm_vbatched`` and ``Plan.run`` look each call up here before validating. A call is
looked up by the identity of its arrays (``id`` of every element of A, B and C, in
order), its scalars, transposes, backend and strategy (or plan). An entry is made on the
second call with the same key, and holds what that call's validation and planning
produced, as the backend's bound call (``prepare``: descriptors uploaded and launch
arguments encoded once, addresses only, not the arrays) and the Plan. A hit then costs
``map(id)`` over the lists, the checks below and the raw launch. A call is first told
apart by its sampled key: the lengths of A and B and the ids of its first, middle and
last array. When that matches no entry and no call seen before, the call can neither hit
nor make an entry, so the ids of the others are never read (a call on new arrays pays
for three ids, not 3n); "seen" and "the second call with the same key" are judged by the
sampled key (a call sharing it with an earlier one, e.g. the same arrays with other
scalars, gets an entry one call early, nothing worse).

What a hit checks (everything a validation result depends on that can change while an
array object lives):
  - CuPy arrays: each array's length (``len(x)``, its rows) and ``ndim``. A CuPy array's
    data pointer, dtype, device and strides are read-only; its one public in-place
    change is ``x.shape = ...``, which keeps its size and sets strides to match, so the
    rows and ndim of a 2-D array say whether its shape changed (_cupy_same). (CuPy's
    private methods, such as ``_set_shape_and_strides`` or calling ``__init__`` again,
    are not in-place changes this path follows.)
  - torch tensors: each tensor's ``data_ptr()``, ``shape``, ``stride()``, ``dtype`` and
    ``get_device()`` (and its type), all of which in-place operations can change, and
    none of which another of them covers. Where the installed torch has them, two of
    its own C++ checks compare them in one call each (_torch_guards_same): the
    ``TensorGuards`` torch.compile guards its graphs with (type, dtype, device, sizes,
    strides, requires_grad and dispatch keys of every tensor) and the data-pointer
    check of its CUDA-graph trees (``_tensors_data_ptrs_at_indices_equal``). Else
    (where every tensor was contiguous when the entry was made, ``is_contiguous()``
    stands in for ``stride()``: see _torch_row_contiguous) one C-level map a read
    (_torch_columns_same). What each read sees:
      ``data_ptr()``  ``set_`` (another storage or offset), ``resize_`` growing the
                      storage, ``as_strided_`` with a storage offset, ``.data = y``;
      ``shape``       ``resize_``, ``as_strided_``, ``squeeze_``/``unsqueeze_``,
                      ``t_``/``transpose_`` of a non-square matrix, ``set_``;
      ``stride()``    ``t_``/``transpose_`` of a square matrix and ``as_strided_`` over
                      the same size (pointer and shape unchanged);
      ``dtype``       ``.data = x.data.view(torch.int32)`` (same pointer, shape and
                      strides; another element type);
      ``get_device()`` ``.data = y`` with ``y`` on another GPU (a different pointer
                      under unified addressing, but nothing here relies on that).
    ``_version`` would be one read, but it counts writes to the elements (a caller
    updating A in place would miss every call), and ``.data = y`` is not such a write:
    the tensor keeps its version counter, so it can replace none of the five. (On the
    H100 host the five, one map a read, cost about 2 us a GEMM at 1,024 GEMMs, against 3
    for one Python function a tensor; data_ptr() and shape alone already 2.5: the floor
    of reading them in Python, bench/NOTES.md session 7; torch's C++ checks read them
    without building a Python object.) A guard that fails for a reason validation does
    not read (requires_grad changed, another dispatch state) is a miss, never a wrong
    hit.
  - per-GEMM alpha/beta (sequences or arrays): their values, validated again and
    compared bit for bit; scalars are part of the key (type and value, sign of zero
    included).
A failed check is a miss: the call takes the full path (and raises its errors there).

The lists' own identity (``fast``): a call that hit once through its key leaves a
record under the ids of its three list objects, holding the very objects it was called
with (backend, strategy or plan, flags, scalar alpha and beta) and the ids of its 3n
arrays in order. A later call with the same three lists, the same objects in those
places (``is``) and the same array ids, element for element, skips the sampled key,
the scalars' keys and the hash of the full key: a list's id says nothing about its
contents, so the ids of the arrays in it are still compared every call (a changed
element in a reused list is seen), and then the same in-place check as above. (For
torch entries compared by columns, which compare every value validation reads of each
tensor, not only what can change in place, the ids are not needed and not compared: a
changed element is seen by its values, and one with the same values validates
alike.) A record is honoured only while its entry lives (``live``): an entry dropped
because one of its arrays went takes its records with it, so no record can pair an id
with a reused address.

Only lists or tuples of CuPy arrays or torch CUDA tensors on a GPU backend take this
path (not 3-D stacks, not NumPy): for those, the checks above cover every input of
validation, so a hit can give no answer (or miss no error) the full path would not.
Entries hold weak references to the arrays, never the arrays: when any of them is
garbage-collected its entry is dropped (the weakref callback runs before the object's
memory, and so its id, can be reused), so an id in a key always names the object it was
made from. At most MAX_ENTRIES entries are kept (oldest dropped first).
"""
from __future__ import annotations

import sys
import threading
import weakref
from collections import deque
from itertools import chain
from operator import attrgetter, eq, methodcaller

from .arrays import _kind, torch_readers
from .call_cache import VECTOR, scalar_key
from .plan import Plan
from .problem import Batch, _scalars

MAX_ENTRIES = 8     # array sets kept at once (over all backends)
SEEN = 8            # sampled keys remembered from first calls, to make an entry on the second

_entries: dict = {}
_seen: deque = deque(maxlen=SEEN)   # sampled keys (_sample) of calls seen once
_hot: frozenset = frozenset()       # sampled keys of the entries (replaced, never mutated)
_lock = threading.RLock()   # re-entrant: a weakref callback may run while it is held
_stats = {"hits": 0, "misses": 0}
# (id(A), id(B), id(C)) -> _Record of a call that hit (fast); replaced under _lock
_by_lists: dict = {}
RECORDS = 2 * MAX_ENTRIES

_SEQUENCES = (list, tuple)
_SHAPE, _DTYPE, _NDIM = attrgetter("shape"), attrgetter("dtype"), attrgetter("ndim")
_DATA_PTR = methodcaller("data_ptr")


def _torch_row(t):
    """What a hit compares of one torch tensor, in one visit (measured on the H100 host
    over 3,072 tensors: 0.52 us a tensor, against 1.07 for one pass per read, which
    touches every tensor's C++ object five times)."""
    return t.data_ptr(), t.shape, t.stride(), t.dtype, t.get_device()


def _torch_row_contiguous(t):
    """_torch_row for an entry whose tensors were all contiguous when it was made:
    ``is_contiguous()`` (a bool) in place of ``stride()`` (a new tuple). A tensor that is
    contiguous now and has the shape it had has the strides it had, except in length-1
    dimensions, whose strides validation never uses (problem._layout): so the hit
    still gives what validation of the present strides would."""
    return t.data_ptr(), t.shape, t.is_contiguous(), t.dtype, t.get_device()


# Whether entries of all-contiguous tensors compare is_contiguous() rather than stride()
# (tools/profile_host.py times both readers on the device).
TORCH_CONTIGUOUS_ROWS = True


def clear() -> None:
    global _hot
    with _lock:
        for e in _entries.values():
            e.live = False
        _entries.clear()
        _seen.clear()
        _by_lists.clear()
        _hot = frozenset()
        _stats.update(hits=0, misses=0)


def cache_info() -> dict:
    return {**_stats, "entries": len(_entries)}


def key(be, how, A, B, C, alpha, beta, trans_a, trans_b):
    """(the lookup key of a call, its arrays as one list A + B + C), or (None, None) when
    it cannot take the reuse path; (a _Cold key, None) for a call that can neither hit
    nor make an entry. ``how``: the strategy name (gemm_vbatched) or the Plan
    (run). The key holds one flat tuple of ids (one map over the 3n arrays, and one
    tuple to hash) and the lengths of A and B, which say where each list ends."""
    if type(A) not in _SEQUENCES or type(B) not in _SEQUENCES or type(C) not in _SEQUENCES \
            or type(trans_a) is not bool or type(trans_b) is not bool:
        return None, None
    if how is None:   # gemm_vbatched's default: no isinstance checks
        pass
    elif isinstance(how, Plan):
        how = id(how)   # an entry holds its plan, so this id is its plan's while it lives
    elif not isinstance(how, str):
        return None, None   # not a strategy name: the full path raises
    na, nb, nc = len(A), len(B), len(C)
    if na + nb + nc:   # the first, middle and last of A + B + C, without making that list
        mid, ab = (na + nb + nc) // 2, na + nb
        sample = (na, nb, id(A[0] if na else B[0] if nb else C[0]),
                  id(A[mid] if mid < na else B[mid - na] if mid < ab else C[mid - ab]),
                  id(C[-1] if nc else B[-1] if nb else A[-1]))
    else:
        sample = ()
    if sample not in _hot and not _maybe_seen(sample):
        return _Cold(sample), None   # no entry and not seen: no pass over the arrays
    X = [*A, *B, *C]
    # id(be), not be: a backend object need not be hashable (an entry holds it too)
    return (id(be), how, trans_a, trans_b, scalar_key(alpha), scalar_key(beta), len(A),
            len(B), tuple(map(id, X))), X


def _maybe_seen(sample) -> bool:
    """Whether ``sample`` is in _seen, read without the lock: a deque another thread
    changes meanwhile raises, and then the answer is yes (the full key is computed)."""
    try:
        return sample in _seen
    except RuntimeError:   # deque mutated during iteration
        return True


class _Cold:
    """The key of a call that can neither hit nor make an entry: a call whose sampled key
    (_sample: the lengths of A and B and the ids of the first, middle and last array)
    matches no entry and no call seen before. It holds only that sample, so a call on
    new arrays pays for three ids, not one per array."""
    __slots__ = ("sample",)

    def __init__(self, sample):
        self.sample = sample


def _sample(k):
    """The sampled key of a full key ``k`` (as key() builds it for the same call; equal
    keys have equal samples)."""
    ids = k[8]
    return (k[6], k[7], ids[0], ids[len(ids) // 2], ids[-1]) if ids else ()


def _torch_meta(X):
    return list(map(_torch_row, X))


def _torch_same(X, meta) -> bool:
    # compared as read, each row freed at once (as _cupy_same)
    return all(map(eq, map(_torch_row, X), meta))


def _torch_contiguous_same(X, meta) -> bool:
    return all(map(eq, map(_torch_row_contiguous, X), meta))


class _TorchColumns:
    """What a torch entry compares, one column a read (TORCH_COLUMNS): each tensor's
    data_ptr() and shape,
    their strides (None where all were contiguous: is_contiguous() compared instead, as
    _torch_row_contiguous), and the one dtype and device all of them had."""
    __slots__ = ("type", "ptrs", "shapes", "strides", "dtype", "device")


def _torch_columns(X):
    """_TorchColumns of the tensors X now, or None when they are not of one type, dtype
    and device (then the row form, which compares each tensor's own)."""
    t = type(X[0])
    if list(map(type, X)).count(t) != len(X):
        return None
    m = _TorchColumns()
    m.type = t
    data_ptr, stride, get_device = torch_readers(t)
    dtypes, devices = list(map(_DTYPE, X)), list(map(get_device, X))
    m.dtype, m.device = dtypes[0], devices[0]
    if dtypes.count(m.dtype) != len(X) or devices.count(m.device) != len(X):
        return None
    m.ptrs, m.shapes = list(map(data_ptr, X)), list(map(_SHAPE, X))
    contiguous = getattr(t, "is_contiguous", None)   # a tensor type without it: strides
    m.strides = None if (TORCH_CONTIGUOUS_ROWS and contiguous is not None and
                         all(map(contiguous, X))) else list(map(stride, X))
    return m


def _torch_columns_same(X, m) -> bool:
    """Whether the tensors X read now as ``m`` was (_torch_columns): one C-level map a
    read, no Python frame a tensor; the shapes and strides compared as read and freed
    at once (as _cupy_same: no n fresh tuples held), the cheapest reads first. The
    readers are the tensors' type's methods as they are now. This compares everything
    validation reads of a tensor (arrays._gather_torch: type, data_ptr(), shape,
    strides, dtype, device), so it holds for any tensor objects with these values, the
    entry's own or not: ``fast`` compares no ids for such an entry (BY_VALUE)."""
    t = m.type
    data_ptr, stride, get_device = torch_readers(t)
    n = len(X)
    return list(map(type, X)).count(t) == n and list(map(data_ptr, X)) == m.ptrs \
        and all(map(eq, map(_SHAPE, X), m.shapes)) \
        and (all(map(t.is_contiguous, X)) if m.strides is None
             else all(map(eq, map(stride, X), m.strides))) \
        and list(map(_DTYPE, X)).count(m.dtype) == n \
        and list(map(get_device, X)).count(m.device) == n


class _TorchGuards:
    """What a torch entry compares through torch's own C++ checks (_torch_guards): the
    guard's check, the data pointers, their indices (all), the pointer check."""
    __slots__ = ("check", "ptrs", "where", "ptrs_equal")


def _torch_guards(X):
    """_TorchGuards of the tensors X (a list) now, or None where the installed torch
    lacks either check (both are private: an older or newer torch takes the columns)."""
    torch = sys.modules.get("torch")
    try:
        guards = torch._C._dynamo.guards.TensorGuards
        ptrs_equal = torch._C._tensors_data_ptrs_at_indices_equal
    except AttributeError:
        return None
    m = _TorchGuards()
    # None: no dynamic dimensions, so every size and stride is compared exactly
    m.check = guards(*X, dynamic_dims_sizes=None, dynamic_dims_strides=None).check
    m.ptrs = list(map(_DATA_PTR, X))   # each tensor's own method (types may differ)
    m.where, m.ptrs_equal = list(range(len(X))), ptrs_equal
    return m


def _torch_guards_same(X, m) -> bool:
    """Whether the tensors X are as ``m`` saw them (_torch_guards): two C++ calls, no
    Python object a tensor. Like _torch_columns_same it compares everything validation
    reads of a tensor (type, data_ptr(), shape, strides, dtype, device), so it holds for
    any tensor objects with these values (BY_VALUE)."""
    return m.check(*X) and m.ptrs_equal(X, m.ptrs, m.where)


# Comparers that compare every value validation reads of each array (not only what can
# change in place): a record of such an entry needs no ids (fast).
BY_VALUE = frozenset((_torch_columns_same, _torch_guards_same))


# Whether torch entries compare one column a read (_torch_columns_same) rather than one
# row a tensor (_torch_row); tools/profile_host.py times both on the device.
TORCH_COLUMNS = True
# Whether torch entries compare through torch's C++ checks where it has them
# (_torch_guards_same); tools/profile_host.py times every form on the device.
TORCH_GUARDS = True


def _torch_snapshot(X):
    """(comparer, what it compares now) for torch tensors: by torch's C++ checks where
    it has them (TORCH_GUARDS); else by columns where they are of
    one type, dtype and device (TORCH_COLUMNS); else by rows, with is_contiguous() where
    every tensor is contiguous now (TORCH_CONTIGUOUS_ROWS), else with stride()."""
    if TORCH_GUARDS:
        m = _torch_guards(X)
        if m is not None:
            return _torch_guards_same, m
    if TORCH_COLUMNS:
        m = _torch_columns(X)
        if m is not None:
            return _torch_columns_same, m
    if TORCH_CONTIGUOUS_ROWS:
        try:
            rows = list(map(_torch_row_contiguous, X))
        except AttributeError:   # a tensor type without is_contiguous(): by strides
            rows = None
        if rows is not None and all(row[2] is True for row in rows):
            return _torch_contiguous_same, rows
    return _torch_same, _torch_meta(X)


def _cupy_meta(X):
    return list(map(len, X))


def _cupy_same(X, meta) -> bool:
    """Whether no CuPy array in X changed its shape in place since ``meta`` (_cupy_meta):
    each one's length (rows) as it was, and each still 2-D. The one public in-place
    change of a CuPy array is ``x.shape = ...``, which keeps the size (CuPy refuses
    any other: "cannot reshape array of size ..."), so for a 2-D array of the same
    size the rows fix the columns, and with them the shape, and the strides of every
    dimension longer than 1 (a no-copy reshape to the same shape keeps them; those of
    length-1 dimensions validation never uses). ``len(x)`` and ``ndim`` are plain C
    reads that build nothing (on the development CPU 0.02 + 0.03 us against 0.16 us
    for ``x.shape``, which builds a tuple); the lengths are ints, so a list of them
    sets off no garbage collection at any size."""
    return list(map(len, X)) == meta and list(map(_NDIM, X)).count(2) == len(X)


class _Entry:
    __slots__ = ("token", "refs", "same", "meta", "alpha", "beta", "plan", "call", "lists",
                 "backend", "live", "__weakref__")


class _Record:
    """What ``fast`` compares of a call that hit: the objects it was called with and the
    ids of its arrays (A + B + C, in order), for the entry it hit."""
    __slots__ = ("entry", "be", "how", "trans_a", "trans_b", "alpha", "beta", "n_a", "n_b",
                 "ids")


_SCALARS = (float, int)


def fast(be, how, A, B, C, alpha, beta, trans_a, trans_b) -> bool:
    """Launch a call that repeats a recorded hit on the same three list objects (see the
    module's docstring); False, having done nothing, when it is not one (the caller goes
    on with key and launch). The objects are compared by identity (alpha, beta: the
    record holds them, so an identical object is an equal value; per-GEMM sequences
    are never recorded), the lists' lengths and the ids of every array in them."""
    r = _by_lists.get((id(A), id(B), id(C)))
    if r is None or r.be is not be or r.how is not how or r.alpha is not alpha or \
            r.beta is not beta or r.trans_a is not trans_a or r.trans_b is not trans_b:
        return False
    e = r.entry
    if not e.live or len(A) != r.n_a or len(B) != r.n_b:
        return False
    X = [*A, *B, *C]
    if e.same not in BY_VALUE and list(map(id, X)) != r.ids:
        return False
    return _hit(e, X, A, B, C)


def _hit(e, X, A, B, C) -> bool:
    """Launch entry ``e`` over the arrays X (A + B + C) if none of them changed in place
    (its comparer); False, having launched nothing, otherwise."""
    try:
        if not e.same(X, e.meta):
            return False
    except Exception:  # noqa: BLE001 - e.g. a tensor made sparse in place: the full path says
        return False
    if e.lists:
        e.call(A, B, C)
    else:
        e.call()
    _stats["hits"] += 1
    return True


def _record(e, k, X, A, B, C, be, how, alpha, beta) -> None:
    """After a hit through the key ``k``: the record ``fast`` looks up (only for scalar
    alpha and beta, whose identity is their value while the record holds them)."""
    if type(alpha) not in _SCALARS or type(beta) not in _SCALARS:
        return
    r = _Record()
    r.entry, r.be, r.how, r.trans_a, r.trans_b = e, be, how, k[2], k[3]
    r.alpha, r.beta, r.n_a, r.n_b, r.ids = alpha, beta, k[6], k[7], list(k[8])
    with _lock:
        if not e.live:
            return
        _by_lists[(id(A), id(B), id(C))] = r
        while len(_by_lists) > RECORDS:
            del _by_lists[next(iter(_by_lists))]


def launch(k, X, A, B, C, alpha, beta, be=None, how=None) -> bool:
    """Run the call whose key is ``k`` (arrays ``X``: key's answers) from its entry if it
    hits; False on a miss. With ``be`` (and ``how`` as given to key), a hit leaves the
    record ``fast`` looks up next time."""
    if type(k) is _Cold:
        return False
    e = _entries.get(k)
    if e is None:
        return False
    if k[4] is VECTOR or k[5] is VECTOR:
        n = len(C)
        if k[4] is VECTOR and _scalars(alpha, n, "alpha").tobytes() != e.alpha.tobytes():
            return False
        if k[5] is VECTOR and _scalars(beta, n, "beta").tobytes() != e.beta.tobytes():
            return False
    if not _hit(e, X, A, B, C):
        return False
    if be is not None:
        _record(e, k, X, A, B, C, be, how, alpha, beta)
    return True


def snapshot(k, X):
    """Before a full call with key ``k`` over arrays ``X`` (A + B + C): when this key was
    seen before and the arrays are of one kind this path can check, (its comparer, what
    that compares now), taken before validation, so an entry never pairs later metadata
    with an earlier validation; else None, and the key is noted."""
    with _lock:
        if type(k) is _Cold:
            _seen.append(k.sample)
            return None
        if k not in _entries:
            sample = _sample(k)
            if sample not in _seen:
                _seen.append(sample)
                return None
    types = set(map(type, X))
    kind = _kind(types.pop()) if len(types) == 1 else None
    if kind not in ("cupy", "torch"):
        return None
    try:
        if kind == "torch":
            return _torch_snapshot(X)
        return _cupy_same, _cupy_meta(X)
    except Exception:  # noqa: BLE001 - an unreadable array: no entry; validation says why
        return None


def remember(k, be, batch, plan, gemms, snap) -> None:
    """After a full call with key ``k`` that succeeded: make its entry from ``snap``
    (snapshot's answer; None: no entry, and ``batch`` may be None)."""
    _stats["misses"] += 1
    if snap is None or type(k) is _Cold or not batch.device.startswith("cuda:") or \
            (gemms is None and plan.n_tiles):
        return
    if tuple(map(id, chain(batch.A, batch.B, batch.C))) != k[8] or len(batch.A) != k[6] \
            or len(batch.B) != k[7]:
        return   # a list changed while the call ran (another thread): no entry
    e = _Entry()
    e.token, e.live = object(), True
    try:
        drop = _dropper(k, e.token)
        e.refs = [weakref.ref(x, drop) for x in
                  {id(x): x for x in chain(batch.A, batch.B, batch.C)}.values()]
    except TypeError:   # an array type without weak references: no entry
        return
    e.same, e.meta = snap
    e.alpha, e.beta = batch.alpha, batch.beta
    e.plan, e.backend = plan, be
    e.call, e.lists = _launcher(be, plan, batch, gemms)
    with _lock:
        old = _entries.get(k)
        if old is not None:
            old.live = False
        _entries[k] = e
        while len(_entries) > MAX_ENTRIES:
            _entries.pop(next(iter(_entries))).live = False
        _rehot()


def _launcher(be, plan, batch, gemms):
    """(what a hit calls, whether it takes the call's lists): the backend's bound call
    (raw launches, arguments encoded once; it keeps addresses, not arrays; called with
    nothing) where it has one, else execute over a Batch of the call's lists (A, B, C)
    and the entry's flat arrays and descriptors. A split-K
    plan takes execute too: its bound call would allocate and upload a workspace and a
    reduction table now (this may run inside a graph capture), and execute reuses the
    ones its first call made on the caller's stream (backends/split.py); so does a staged
    plan (backends/stage.py)."""
    prepare = getattr(be, "prepare", None)
    if prepare is not None and plan.split is None and plan.staging is None:
        return prepare(plan, batch, gemms), False
    fields = (batch.shapes, batch.ptr, batch.ld, batch.alpha, batch.beta, batch.trans_a,
              batch.trans_b, batch.dtype, batch.size, batch.device)
    return (lambda A, B, C: be.execute(plan, Batch(list(A), list(B), list(C), *fields),
                                       gemms)), True


def _dropper(k, token):
    def drop(_ref):
        with _lock:
            e = _entries.get(k)
            if e is not None and e.token is token:
                e.live = False
                del _entries[k]
                _rehot()
    return drop


def _rehot() -> None:
    """Make _hot the entries' sampled keys again (under _lock): a new set, swapped in
    whole, so key() reads one without the lock. A reader that sees the old set at worst
    misses a new entry (and takes the full path) or computes a full key in vain."""
    global _hot
    _hot = frozenset(map(_sample, _entries))
    for lk in [lk for lk, r in _by_lists.items() if not r.entry.live]:
        del _by_lists[lk]
