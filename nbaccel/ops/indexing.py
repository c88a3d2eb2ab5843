"""Indexing: getitem/setitem (NumPy semantics), take/gather/scatter, nonzero (sorting: sorting.py).

Primitives: ``strided_slice`` (basic slicing, a view), ``slice_scatter`` (its inverse),
``index`` (NumPy advanced integer indexing on some axes, full slices elsewhere),
``index_put`` (its scatter, optionally accumulating) and ``argwhere``.
``getitem`` and ``setitem`` are composites: a direct eager impl, a derivative, and a
decomposition into the primitives for the compiler.

An index is encoded as hashable params: a tuple of entries ``("i", k)`` int, ``("s", start,
stop, step)`` slice, ``("n",)`` None, ``("e",)`` Ellipsis, ``("t", j)`` integer tensor and
``("b", j)`` boolean mask, where ``j`` numbers the index tensors, which travel as op args
(so they trace).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D, ops, autograd
from .batching import batched_index_key, logical_ndim, pad_batched, with_batch
from .fronts import _tensor, apply, as_tensor, as_tensor_arg
from .meta import DataDependentShape, broadcast_shapes
from .registry import defalias, defop, OPS
from ..tensor import Tensor, asarray
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


def _zeros(x, dtype):
    # from the shape only: a gradient must not read the (possibly since modified) input
    return ops.full(tuple(x.shape), 0, dtype=dtype, device=x.device)


# ---- primitives ---------------------------------------------------------------------------------

def _slice_key(slices):
    # slices are normalised by slice.indices(n): with a negative step, stop -1 means "past the
    # front" (None here) and start -1 means the slice is empty
    return tuple(slice(0, 0, c) if a < 0 else slice(a, b if b >= 0 else None, c) for a, b, c in slices)


def _batch_slices(params, size):
    return {"slices": ((0, size, 1),) + tuple(params["slices"])}


strided_slice = defop(
    "strided_slice", kind="movement", view=True,
    layout=lambda lay, p, shape: lay.slice(p["slices"]),
    batch_rule=lambda args, batched, p, size: apply(strided_slice, args, _batch_slices(p, size)),
    impl=lambda xp, x, slices: x[_slice_key(slices)],
    infer=lambda args, p: (tuple(len(range(*s)) for s in p["slices"]), args[0].dtype),
    grad=lambda g, out, x, slices: (apply(slice_scatter, (_zeros(x, g.dtype), g),
                                          {"slices": slices}),),
    front=lambda x, slices: apply(strided_slice, (as_tensor(x),), {"slices": tuple(slices)}))


def _slice_scatter_impl(xp, x, src, slices):
    out = x.copy()
    out[_slice_key(slices)] = src
    return out


def _slice_scatter_batch(args, batched, params, size):
    (x, src), (bx, bs) = args, batched
    x = with_batch(x, bx, size)
    return apply(slice_scatter, (x, pad_batched(src, x.ndim - 1) if bs else src),
                 _batch_slices(params, size))


slice_scatter = defop(
    "slice_scatter", kind="movement", impl=_slice_scatter_impl, batch_rule=_slice_scatter_batch,
    infer=lambda args, p: (args[0].shape, args[0].dtype),
    grad=lambda g, out, x, src, slices: (
        apply(slice_scatter, (g, 0), {"slices": slices}),
        apply(strided_slice, (g,), {"slices": slices})),
    front=lambda x, src, slices: apply(slice_scatter, (as_tensor(x), as_tensor_arg(src)),
                                       {"slices": tuple(slices)}))


def _key(xp, x, arrays, axes):
    key = [slice(None)] * x.ndim
    for a, arr in zip(axes, arrays):
        _check_bounds(xp, arr, x.shape[a], a)
        key[a] = arr
    return tuple(key)


def _index_infer(args, p):
    x, arrays = args[0], args[1:]
    return _adv_shape([tuple(a.shape) for a in arrays], p["axes"], tuple(x.shape)), x.dtype


def _index_batch(args, batched, params, size):
    key = batched_index_key(args[0], batched[0], args[1:], batched[1:], params["axes"], size)
    if key is None:
        return NotImplemented
    x, arrays, axes = key
    return apply(index, (x,) + arrays, {"axes": axes})


index = defop(
    "index", kind="index", infer=_index_infer, batch_rule=_index_batch,
    impl=lambda xp, x, *arrays, axes: x[_key(xp, x, arrays, axes)],
    grad=lambda g, out, x, *arrays, axes: (
        apply(index_put, (_zeros(x, g.dtype), g) + arrays, {"axes": axes, "accumulate": True}),
    ) + (None,) * len(arrays),
    front=lambda x, *arrays, axes: apply(index, (as_tensor(x),) + arrays, {"axes": tuple(axes)}))


def _written_copy(xp, x, key, values, accumulate):
    """A copy of x with x[key] set to (or, accumulating, increased by) values."""
    out = x.copy()
    if accumulate:
        _scatter_add(xp, out, key, values)
    else:
        out[key] = values
    return out


def _put_grad(put_op, read_op, g, values, arrays, params, accumulate):
    """Gradient of a scatter: the written positions get no gradient (unless accumulating),
    the values get what is read back at those positions."""
    gx = g if accumulate else apply(put_op, (g, 0) + arrays, dict(params, accumulate=False))
    gv = apply(read_op, (g,) + arrays, params) if is_tensor(values) else None
    return (gx, gv) + (None,) * len(arrays)


def _index_put_impl(xp, x, values, *arrays, axes, accumulate):
    return _written_copy(xp, x, _key(xp, x, arrays, axes), values, accumulate)


def _index_put_grad(g, out, x, values, *arrays, axes, accumulate):
    return _put_grad(index_put, index, g, values, arrays, {"axes": axes}, accumulate)


def _index_put_batch(args, batched, params, size):
    x, values, arrays = args[0], args[1], args[2:]
    key = batched_index_key(x, batched[0], arrays, batched[2:], params["axes"], size)
    if key is None:
        return NotImplemented
    if batched[1]:     # as many logical dims as x[key] has, for broadcasting
        k = max((logical_ndim(a, b) for a, b in zip(arrays, batched[2:])), default=0)
        values = pad_batched(values, k + key[0].ndim - 1 - len(params["axes"]))
    x, arrays, axes = key
    return apply(index_put, (x, values) + arrays, dict(params, axes=axes))


index_put = defop(
    "index_scatter", kind="index", impl=_index_put_impl, grad=_index_put_grad,
    batch_rule=_index_put_batch,
    infer=lambda args, p: (args[0].shape, args[0].dtype),
    front=lambda x, values, *arrays, axes, accumulate=False: apply(
        index_put, (as_tensor(x), as_tensor_arg(values)) + arrays,
        {"axes": tuple(axes), "accumulate": bool(accumulate)}))


def _argwhere_infer(args, p):
    x = args[0]
    return (_mask_count(x.astype(bool) if x.dtype.kind != "b" and x._node is None else x),
            x.ndim), D.int64


argwhere = defop(
    "argwhere", kind="index", differentiable=False, infer=_argwhere_infer,
    impl=lambda xp, x: xp.argwhere(x),
    front=lambda x: apply(argwhere, (as_tensor(x),), {}), numpy="argwhere")


# ---- getitem and setitem ---------------------------------------------------------------------------

def _basic(x, slices, mid):
    y = x
    if any(s != (0, n, 1) for s, n in zip(slices, x.shape)):
        y = apply(strided_slice, (x,), {"slices": tuple(slices)})
    return y if tuple(mid) == tuple(y.shape) else y.reshape(tuple(mid))


def _adv_arrays(adv, idx, device):
    arrays, axes = [], []
    for pos, e in adv:
        if e[0] == "i":
            arrays.append(asarray(np.int64(e[1]), device=device, _np=False))
        elif e[0] == "t":
            arrays.append(idx[e[1]])
        elif idx[e[1]].ndim == 0:
            arrays.append(asarray(np.zeros(int(bool(idx[e[1]])), np.int64), device=device))
        else:
            nz = apply(argwhere, (idx[e[1]],), {})
            arrays.extend(nz[:, d] for d in range(len(pos)))
        axes.extend(pos)
    return tuple(arrays), tuple(axes)


def _getitem_decomp(x, *idx, index):
    slices, mid, adv = _plan(x.shape, index, idx)
    y = _basic(x, slices, mid)
    if not adv:
        return y
    arrays, axes = _adv_arrays(adv, idx, x.device)
    return apply(_index_op, (y,) + arrays, {"axes": axes})


_index_op = index


def _getitem_front(x, index):
    """``x[index]`` with NumPy semantics; basic indexing returns a view."""
    x = as_tensor(x)
    entries, tensors = encode_index(index, x.device)
    return apply(getitem, (x,) + tensors, {"index": entries})


getitem = defop(
    "getitem", kind="index", view=True, decomp=_getitem_decomp,
    impl=lambda xp, x, *arrays, index: x[_index_key(index, arrays)],
    # the result's shape is the index's and the input's shape, except that a boolean mask's
    # count is its values': memoised only without index tensors
    infer_memo="one input",
    infer=lambda args, p: (_result_shape(args[0].shape, p["index"], args[1:]), args[0].dtype),
    grad=lambda g, out, x, *idx, index: (
        apply(setitem, (_zeros(x, g.dtype), g) + idx, {"index": index, "accumulate": True}),
    ) + (None,) * len(idx),
    front=_getitem_front)


def _setitem_impl(xp, x, value, *arrays, index, accumulate):
    return _written_copy(xp, x, _rebuild(index, arrays), value, accumulate)


def _setitem_grad(g, out, x, value, *idx, index, accumulate):
    return _put_grad(setitem, getitem, g, value, idx, {"index": index}, accumulate)


def _setitem_decomp(x, value, *idx, index, accumulate):
    slices, mid, adv = _plan(x.shape, index, idx)
    y = _basic(x, slices, mid)
    value = as_tensor(value, like=x)
    if value.dtype is not x.dtype:
        value = value.astype(x.dtype)
    if adv:
        arrays, axes = _adv_arrays(adv, idx, x.device)
        new = apply(index_put, (y, value) + arrays, {"axes": axes, "accumulate": accumulate})
    else:
        new = (y + value).astype(x.dtype) if accumulate else value.broadcast_to(tuple(mid))
    new = new.reshape(tuple(len(range(*s)) for s in slices))
    return apply(slice_scatter, (x, new), {"slices": tuple(slices)})


def _strip_value(value, target):
    """Drop leading size-1 dims beyond the target's rank and check broadcasting (NumPy)."""
    shape = tuple(value.shape)
    while len(shape) > len(target) and shape[0] == 1:
        shape = shape[1:]
    try:
        ok = broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"could not broadcast input array from shape {tuple(value.shape)} into "
                         f"shape {tuple(target)}")
    return value if shape == tuple(value.shape) else value.reshape(shape)


def _whole_mask(x, index) -> bool:
    """Whether ``index`` is one boolean array (or Tensor) of ``x``'s shape."""
    if isinstance(index, np.ndarray):
        return index.dtype == np.bool_ and index.shape == tuple(x.shape)
    return is_tensor(index) and index.dtype.name == "bool" and tuple(index.shape) == tuple(x.shape)


def _setitem_front(x, index, value):
    """``x[index] = value`` in place: NumPy semantics, value broadcast and cast to x's dtype."""
    entries, tensors = encode_index(index, x.device)
    value = as_tensor_arg(value)
    is_t = is_tensor(value)
    tracing = x._node is not None or any(t._node is not None for t in (value,) + tensors
                                         if is_tensor(t)) or _tensor().active_trace() is not None
    try:
        target = _result_shape(x.shape, entries, tensors)
    except DataDependentShape:
        target = None
    if is_t and target is not None:
        value = _strip_value(value, target)
    grad = autograd.is_grad_enabled() and (x.requires_grad or (is_t and value.requires_grad))
    if tracing and _whole_mask(x, index) and (not is_t or value.ndim == 0):
        # x[mask] = v, a boolean mask of x's shape and one value: where(mask, v, x) needs no
        # data-dependent count, so a compiled function stays one graph
        new = OPS["where"].front(index, value, x)
        x._assign(new if new.dtype is x.dtype else new.astype(x.dtype), "setitem")
        return x
    if not grad and not tracing:
        # the eager fast path: write straight into the buffer (no full copy)
        data = x._value()
        data[_rebuild(entries, [t._value() for t in tensors])] = value._value() if is_t else value
        x._version[0] += 1
        return x
    fn = x.grad_fn
    if grad and x._data is not None and x._data.base is not None and (
            fn is None or fn.op is None or fn.op.view):
        raise RuntimeError(f"setitem with autograd on a view (a tensor of shape "
                           f"{tuple(x.shape)} that shares memory with another) is not supported: "
                           "write into the base tensor, or .clone() the view first")
    new = apply(setitem, (x, value) + tensors, {"index": entries, "accumulate": False})
    x._assign(new, "setitem")
    return x


setitem = defop(
    "setitem", kind="index", impl=_setitem_impl, grad=_setitem_grad, decomp=_setitem_decomp,
    infer=lambda args, p: (args[0].shape, args[0].dtype), front=_setitem_front,
    doc="Out-of-place ``x[index] = value`` (``accumulate``: ``+=``, repeated indices add up); "
        "``Tensor.__setitem__`` writes its result back in place.")


def _index_put_(x, indices, values, accumulate=False):
    """PyTorch ``index_put``: a copy of x with x[indices] set (or added) to values."""
    x = as_tensor(x)
    entries, tensors = encode_index(tuple(indices), x.device)
    return apply(setitem, (x, as_tensor_arg(values)) + tensors,
                 {"index": entries, "accumulate": bool(accumulate)})


defalias("index_put", _index_put_, methods="index_put")
