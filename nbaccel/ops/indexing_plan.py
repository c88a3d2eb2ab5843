"""Index encoding, planning and NumPy/CuPy key building for indexing.py's ops (no ops here).

An index is encoded as hashable params: a tuple of entries ``("i", k)`` int, ``("s", start,
stop, step)`` slice, ``("n",)`` None, ``("e",)`` Ellipsis, ``("t", j)`` integer tensor and
``("b", j)`` boolean mask, where ``j`` numbers the index tensors, which travel as op args
(so they trace). ``encode_index`` makes them; ``_plan`` splits them into a basic (slicing)
stage and an advanced stage and ``_result_shape`` gives the result's shape; ``_rebuild`` /
``_index_key``, ``_slice_key`` and ``_key`` turn params back into the index tuples that
NumPy and CuPy arrays take in the ops' impls, and ``_written_copy`` / ``_scatter_add`` write
through them.
"""
from __future__ import annotations

import numpy as np

from .meta import DataDependentShape, broadcast_shapes
from ..convert import asarray
from ..tensor import Tensor
from ..tensor_meta import is_tensor, is_traced

_FULL = ("s", None, None, None)
_BAD_INDEX = ("only integers, slices (`:`), ellipsis (`...`), None and integer or boolean "
              "tensors are valid indices")


def _index_tensor(obj, device=None):
    if isinstance(obj, Tensor):
        return obj
    if isinstance(obj, (list, tuple)) and len(obj) == 0:
        return asarray(np.zeros(0, np.int64), device=device, _np=False)
    return asarray(obj, device=device, _np=False)


# ---- index encoding and planning ------------------------------------------------------------

def encode_index(index, device=None):
    """A Python index -> (hashable entries, index tensors)."""
    if not isinstance(index, tuple):
        index = (index,)
    entries, tensors = [], []
    for e in index:
        if e is None:
            entries.append(("n",))
        elif e is Ellipsis:
            entries.append(("e",))
        elif isinstance(e, slice):
            vals = tuple(None if v is None else _as_int(v) for v in (e.start, e.stop, e.step))
            if vals[2] == 0:
                raise ValueError("slice step cannot be zero")
            entries.append(("s",) + vals)
        elif isinstance(e, (int, np.integer)) and not isinstance(e, (bool, np.bool_)):
            entries.append(("i", int(e)))
        elif isinstance(e, (bool, np.bool_, list, tuple, np.ndarray)) or is_tensor(e):
            t = _index_tensor(e, device)
            if t.dtype.kind == "b":
                entries.append(("b", len(tensors)))
            elif t.dtype.kind in "iu":
                entries.append(("t", len(tensors)))
            else:
                raise IndexError(f"{_BAD_INDEX}; got a tensor of dtype {t.dtype}")
            tensors.append(t)
        else:
            raise IndexError(f"{_BAD_INDEX}; got {type(e).__name__}")
    return tuple(entries), tuple(tensors)


def _as_int(v):
    if hasattr(v, "__index__"):
        return v.__index__()
    raise TypeError(f"slice indices must be integers or None, got {type(v).__name__}")


def _rebuild(entries, arrays):
    """Entries + arrays -> a NumPy/CuPy index tuple. A trailing Ellipsis keeps results arrays
    (a full integer index gives a 0-d view, not a scalar copy)."""
    out = []
    for e in entries:
        k = e[0]
        out.append(None if k == "n" else Ellipsis if k == "e" else slice(*e[1:]) if k == "s"
                   else e[1] if k == "i" else arrays[e[1]])
    if not any(e[0] == "e" for e in entries):
        out.append(Ellipsis)
    return tuple(out)


_KEYS: dict = {}


def _index_key(entries, arrays):
    """``_rebuild``, memoised for an index without tensors (ints, slices, None, ...: the same
    key every call, and ``x[2]`` is on every training loop's path)."""
    if arrays:
        return _rebuild(entries, arrays)
    key = _KEYS.get(entries)
    if key is None:
        if len(_KEYS) > 10_000:
            _KEYS.clear()
        key = _KEYS[entries] = _rebuild(entries, ())
    return key


def _plan(shape, entries, idx):
    """Split an index into a basic stage and an advanced stage.

    Returns (slices, mid, adv): ``slices`` is (start, stop, step) per input axis; ``mid`` the
    shape after slicing, dropping int axes (when nothing is advanced) and inserting None axes;
    ``adv`` a list of (positions in mid, entry) for the advanced indices (ints count as
    advanced when any tensor index is present, as in NumPy)."""
    ndim = len(shape)
    width = [idx[e[1]].ndim if e[0] == "b" else 0 if e[0] in "ne" else 1 for e in entries]
    n_ell = sum(e[0] == "e" for e in entries)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if sum(width) > ndim:
        raise IndexError(f"too many indices for tensor: tensor is {ndim}-dimensional, but "
                         f"{sum(width)} were indexed")
    fill = [_FULL] * (ndim - sum(width))
    entries = list(entries)
    if n_ell:
        i = [e[0] for e in entries].index("e")
        entries[i:i + 1] = fill
    else:
        entries += fill
    has_adv = any(e[0] in "tb" for e in entries)
    slices, mid, adv, axis = [], [], [], 0
    for e in entries:
        k = e[0]
        if k == "n":
            mid.append(1)
            continue
        if k == "b":
            m, ms = idx[e[1]].ndim, tuple(idx[e[1]].shape)
            if ms != tuple(shape[axis:axis + m]):
                raise IndexError(f"boolean index did not match indexed tensor along axis {axis}: "
                                 f"tensor shape {tuple(shape)}, mask shape {ms}")
            adv.append((tuple(range(len(mid), len(mid) + max(m, 1))), e))
            if m == 0:
                mid.append(1)
            for _ in range(m):
                slices.append((0, shape[axis], 1))
                mid.append(shape[axis])
                axis += 1
            continue
        n = shape[axis]
        if k == "s":
            st = slice(*e[1:]).indices(n)
            slices.append(st)
            mid.append(len(range(*st)))
        elif k == "i" and not has_adv:
            if not -n <= e[1] < n:
                raise IndexError(f"index {e[1]} is out of bounds for axis {axis} with size {n}")
            slices.append((e[1] % n, e[1] % n + 1, 1))
        else:
            if k == "i" and not -n <= e[1] < n:
                raise IndexError(f"index {e[1]} is out of bounds for axis {axis} with size {n}")
            slices.append((0, n, 1))
            adv.append(((len(mid),), e))
            mid.append(n)
        axis += 1
    return slices, mid, adv


def _mask_count(m):
    """Number of True values of a concrete mask; a traced mask has a data-dependent count."""
    if is_traced(m):
        raise DataDependentShape("boolean mask indexing")
    data = m._data if is_tensor(m) else m
    return int(data.sum())


def _adv_shape(shapes, positions, mid):
    """NumPy's rule: the broadcast index shape replaces adjacent advanced axes in place, or
    goes first when they are separated."""
    try:
        b = broadcast_shapes(*shapes)
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with "
                         "shapes " + " ".join(str(tuple(s)) for s in shapes)) from None
    if list(positions) == list(range(positions[0], positions[0] + len(positions))):
        return tuple(mid[:positions[0]]) + b + tuple(mid[positions[-1] + 1:])
    return b + tuple(s for i, s in enumerate(mid) if i not in positions)


def _result_shape(shape, entries, idx):
    slices, mid, adv = _plan(shape, entries, idx)
    if not adv:
        return tuple(mid)
    shapes = [() if e[0] == "i" else tuple(idx[e[1]].shape) if e[0] == "t"
              else (_mask_count(idx[e[1]]),) for _, e in adv]
    return _adv_shape(shapes, [p for pos, _ in adv for p in pos], mid)


# ---- NumPy/CuPy keys for the primitives' impls ------------------------------------------------

def _check_bounds(xp, arr, n, axis):
    """Explicit range check (CuPy would wrap out-of-range indices silently)."""
    if xp is not np and arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if hi >= n or lo < -n:
            raise IndexError(f"index {hi if hi >= n else lo} is out of bounds for axis {axis} "
                             f"with size {n}")


def _scatter_add(xp, out, key, values):
    """out[key] += values, accumulating repeated indices (the one xp-specific helper)."""
    if not any(hasattr(k, "shape") for k in key):
        # basic indexing (slices, ints): no element twice, so an in-place add of the view
        # does it; np.add.at's per-element loop took 45 ms of bench/eager.py's GPT step (180 ms)
        # in the backward of qkv.split's slices
        out[key] += values
        return
    if xp is np:
        np.add.at(out, key, values)
    else:
        import cupyx
        cupyx.scatter_add(out, key, values)


def _slice_key(slices):
    # slices are normalised by slice.indices(n): with a negative step, stop -1 means "past the
    # front" (None here) and start -1 means the slice is empty
    return tuple(slice(0, 0, c) if a < 0 else slice(a, b if b >= 0 else None, c) for a, b, c in slices)


def _key(xp, x, arrays, axes):
    key = [slice(None)] * x.ndim
    for a, arr in zip(axes, arrays):
        _check_bounds(xp, arr, x.shape[a], a)
        key[a] = arr
    return tuple(key)


def _written_copy(xp, x, key, values, accumulate):
    """A copy of x with x[key] set to (or, accumulating, increased by) values."""
    out = x.copy()
    if accumulate:
        _scatter_add(xp, out, key, values)
    else:
        out[key] = values
    return out
