"""Joining and splitting: concat (a primitive), stack, split/chunk/unbind and friends."""
from __future__ import annotations

import itertools

from .. import dtypes as D
from .batching import with_batch
from .fronts import apply, as_tensor
from .meta import shape_error
from .movement import _expand_dims, _numpy, axis_index
from .registry import defalias, defop


def _concat_mismatch(args, axis, i, first, s):
    """The error for input ``i`` of shape ``s`` that doesn't line up with input 0's ``first``:
    NumPy's text or PyTorch's."""
    if len(s) != len(first):
        return shape_error(args, f"all the input arrays must have same number of dimensions, but "
                           f"the array at index 0 has {len(first)} dimension(s) and the array at "
                           f"index {i} has {len(s)} dimension(s)",
                           f"Tensors must have same number of dimensions: got {len(first)} and "
                           f"{len(s)}")
    d = next(d for d in range(len(s)) if d != axis and s[d] != first[d])
    return shape_error(args, f"all the input array dimensions except for the concatenation axis "
                       f"must match exactly, but along dimension {d}, the array at index 0 has "
                       f"size {first[d]} and the array at index {i} has size {s[d]}",
                       f"Sizes of tensors must match except in dimension {axis}. Expected size "
                       f"{first[d]} but got size {s[d]} for tensor number {i} in the list.")


def _concat_infer(args, p):
    axis, first = p["axis"], tuple(args[0].shape)
    for i, a in enumerate(args[1:], 1):
        s = tuple(a.shape)
        if len(s) != len(first) or s[:axis] + s[axis + 1:] != first[:axis] + first[axis + 1:]:
            raise _concat_mismatch(args, axis, i, first, s)
    return first[:axis] + (sum(a.shape[axis] for a in args),) + first[axis + 1:], p["dtype"]


def _concat_grad(g, out, *xs, axis, dtype):
    grads, start = [], 0
    for x in xs:
        n = x.shape[axis]
        grads.append(g[(slice(None),) * axis + (slice(start, start + n),)])
        start += n
    return tuple(grads)


def _concat_front(tensors, axis=0, *, dim=None, dtype=None, out=None, casting=None):
    """Join tensors along an existing axis (None: flatten first); dtypes promote."""
    if out is not None:
        raise TypeError("concat: out= is not supported")
    axis = dim if dim is not None else axis
    ts = [as_tensor(t) for t in tensors]
    if not ts:
        raise ValueError("concat: need at least one tensor to concatenate")
    if axis is None:
        ts, axis = [t.reshape(-1) for t in ts], 0
    if ts[0].ndim == 0:
        raise shape_error(ts, "zero-dimensional arrays cannot be concatenated",
                          "zero-dimensional tensor (at position 0) cannot be concatenated")
    for i, t in enumerate(ts[1:], 1):
        if t.ndim != ts[0].ndim:
            raise _concat_mismatch(ts, 0, i, tuple(ts[0].shape), tuple(t.shape))
    dt = D.dtype(dtype) if dtype is not None else D.result_type(*ts)
    return apply(concat, tuple(ts), {"axis": axis_index(axis, ts[0].ndim), "dtype": dt})


def _concat_batch(args, batched, params, size):
    xs = tuple(with_batch(x, b, size) for x, b in zip(args, batched))
    return apply(concat, xs, dict(params, axis=params["axis"] + 1))


concat = defop(
    "concat", kind="movement", infer=_concat_infer, grad=_concat_grad, front=_concat_front,
    batch_rule=_concat_batch,
    impl=lambda xp, *xs, axis, dtype: xp.concatenate([x.astype(dtype.np, copy=False) for x in xs],
                                                     axis=axis),
    numpy=("concatenate", "concat"))
defalias("cat", _concat_front)


def _stack(tensors, axis=0, *, dim=None, out=None, dtype=None):
    """Join same-shaped tensors along a new axis."""
    axis = dim if dim is not None else axis
    ts = [as_tensor(t) for t in tensors]
    if not ts:
        raise ValueError("stack: need at least one tensor to stack")
    for i, t in enumerate(ts[1:], 1):
        if tuple(t.shape) != tuple(ts[0].shape):
            raise shape_error(ts, "all input arrays must have the same shape",
                              f"stack expects each tensor to be equal size, but got "
                              f"{list(ts[0].shape)} at entry 0 and {list(t.shape)} at entry {i}")
    axis = axis_index(axis, ts[0].ndim + 1)
    return _concat_front([_expand_dims(t, axis) for t in ts], axis, dtype=dtype, out=out)


defalias("stack", _stack, numpy="stack")
defalias("hstack", lambda tup, **kw: _concat_front(
    [as_tensor(t).reshape(-1) if as_tensor(t).ndim == 0 else t for t in tup],
    0 if all(as_tensor(t).ndim <= 1 for t in tup) else 1, **kw), numpy="hstack")
defalias("vstack", lambda tup, **kw: _concat_front(
    [as_tensor(t).reshape(1, -1) if as_tensor(t).ndim < 2 else t for t in tup], 0, **kw),
    numpy="vstack")


def _pieces(x, bounds, axis):
    pre = (slice(None),) * axis
    return tuple(x[pre + (slice(a, b),)] for a, b in zip(bounds[:-1], bounds[1:]))


def _torch_split(x, split_size_or_sections, dim=0):
    """PyTorch split: an int is the size of each piece (the last may be smaller); a list gives
    the sizes, which must add up to the axis length."""
    x = as_tensor(x)
    dim = axis_index(dim, x.ndim, "dim")
    n, s = x.shape[dim], split_size_or_sections
    if isinstance(s, int):
        if s <= 0 and not (s == 0 and n == 0):
            raise RuntimeError(f"split: split_size must be positive, got {s}")
        bounds = list(range(0, n, s)) + [n] if n else [0, 0]
    else:
        sizes = [int(v) for v in s]
        if sum(sizes) != n or any(v < 0 for v in sizes):
            raise RuntimeError(f"split: sizes {sizes} don't add up to the size {n} of dim {dim}")
        bounds = [0] + list(itertools.accumulate(sizes))
    return _pieces(x, bounds, dim)


def _array_split(x, indices_or_sections, axis=0, *, _equal=False):
    """NumPy array_split: an int N gives N nearly equal sections; a list gives split points."""
    x = as_tensor(x)
    axis = axis_index(axis, x.ndim)
    n, s = x.shape[axis], indices_or_sections
    if isinstance(s, int):
        if s <= 0:
            raise ValueError("number sections must be larger than 0.")
        if _equal and n % s:
            raise ValueError(f"array split does not result in an equal division: {n} into {s}")
        q, r = divmod(n, s)
        bounds = [0] + list(itertools.accumulate(q + 1 if i < r else q for i in range(s)))
    else:
        bounds = [0] + [int(p) for p in s] + [n]   # Python slicing rules, as NumPy
    return _pieces(x, bounds, axis)


defalias("split", _torch_split, methods="split")
_numpy("split", lambda x, indices_or_sections, axis=0: _array_split(x, indices_or_sections, axis,
                                                                    _equal=True))
defalias("array_split", _array_split, numpy="array_split")


def _chunk(x, chunks, dim=0):
    """PyTorch chunk: pieces of size ceil(n / chunks) (possibly fewer than ``chunks``)."""
    x = as_tensor(x)
    if chunks <= 0:
        raise RuntimeError(f"chunk: chunks must be positive, got {chunks}")
    n = x.shape[axis_index(dim, x.ndim, "dim")]
    return _torch_split(x, max(-(-n // chunks), 1), dim)


defalias("chunk", _chunk, methods="chunk")


def _unbind(x, dim=0):
    """The slices along ``dim``, each without that dim."""
    x = as_tensor(x)
    dim = axis_index(dim, x.ndim, "dim")
    return tuple(x[(slice(None),) * dim + (i,)] for i in range(x.shape[dim]))


defalias("unbind", _unbind, methods="unbind")


def _unstack(x, axis=0):
    return _unbind(x, axis)


defalias("unstack", _unstack)
