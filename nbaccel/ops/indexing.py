"""Indexing ops: getitem/setitem (NumPy semantics) and their primitives (take/gather/scatter,
nonzero: gather.py; sorting: sorting.py).

Primitives: ``strided_slice`` (basic slicing, a view), ``slice_scatter`` (its inverse),
``index`` (NumPy advanced integer indexing on some axes, full slices elsewhere),
``index_put`` (its scatter, optionally accumulating) and ``argwhere``.
``getitem`` and ``setitem`` are composites: a direct eager impl, a derivative, and a
decomposition into the primitives for the compiler.

The ops are defined here; how an index is encoded as hashable params (its tensors travel as
op args, so they trace), planned, and turned back into NumPy/CuPy keys is indexing_plan.py.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D, ops, autograd
from .batching import batched_index_key, logical_ndim, pad_batched, with_batch
from .fronts import ENGINE, apply, as_tensor, as_tensor_arg
from .indexing_plan import _KEYS as _INDEX_KEYS
from .indexing_plan import (_adv_shape, _index_key, _key, _mask_count, _plan, _rebuild,
                            _result_shape, _slice_key, _written_copy, encode_index)
from .meta import DataDependentShape, broadcast_shapes
from .registry import defalias, defop, OPS
from ..convert import asarray
from ..tensor_meta import TensorMetadata, is_tensor


def _zeros(x, dtype):
    # from the shape only: a gradient must not read the (possibly since modified) input. A
    # broadcast view of one zero: the scatter that takes it (setitem, slice_scatter, index_put)
    # copies it first, so a filled array of x's size would be written and then read once more
    # (qkv.split's backward: 2.7 -> 2.0 ms for the three pieces of a GPT block's (16, 64, 384))
    return ops.full((), 0, dtype=dtype, device=x.device).broadcast_to(tuple(x.shape))


# ---- primitives ---------------------------------------------------------------------------------

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
    if not isinstance(x, TensorMetadata):
        x = as_tensor(x)
    if type(index) is int:           # x[2]: encode_index's entry for it, without the call
        return apply(getitem, (x,), {"index": (("i", index),)})
    entries, tensors = encode_index(index, x.device)
    return apply(getitem, (x,) + tensors, {"index": entries})


getitem = defop(
    "getitem", kind="index", view=True, decomp=_getitem_decomp,
    # (an index without tensors finds its NumPy key in _index_key's memo directly: a call less;
    # a key is never empty, so ``or`` falls through only on a miss)
    impl=lambda xp, x, *arrays, index: x[(not arrays and _INDEX_KEYS.get(index))
                                         or _index_key(index, arrays)],
    # the result's shape is the index's and the input's shape, except that a boolean mask's
    # count is its values': memoised only without index tensors
    infer_memo="one input",
    infer=lambda args, p: (_result_shape(args[0].shape, p["index"], args[1:]), args[0].dtype),
    grad=lambda g, out, x, *idx, index: (
        apply(setitem, (_zeros(x, g.dtype), g) + idx, {"index": index, "accumulate": True}),
    ) + (None,) * len(idx),
    front=_getitem_front, methods="__getitem__")   # (Tensor.__getitem__ is the front itself)


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
    if x._read_only():       # NumPy refuses before it reads the index (t[0] of a size-0 view)
        raise ValueError("assignment destination is read-only")
    entries, tensors = encode_index(index, x.device)
    value = as_tensor_arg(value)
    is_t = is_tensor(value)
    tracing = x._node is not None or any(t._node is not None for t in (value,) + tensors
                                         if is_tensor(t)) or ENGINE.active_trace() is not None
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
