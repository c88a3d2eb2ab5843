"""Default user-facing functions ("fronts") for each kind of op, and argument conversion.

A front parses NumPy and PyTorch spellings (``axis``/``dim``, ``keepdims``/``keepdim``),
turns array-likes into Tensors and calls :func:`nbaccel.dispatch.apply`.

The op table sits below the engine that runs it: the fronts reach ``apply``, ``asarray``, the
Tensor class and the active trace through :data:`ENGINE`, which ``tensor.py`` fills in once
Tensor is made (:func:`bind`), instead of importing the modules that import the op table.
"""
from __future__ import annotations

import types

import numpy as np

from .meta import normalize_axis
from .. import dtypes as D
from ..tensor_meta import TensorMetadata

_SCALARS = (bool, int, float, complex)


def apply(op, args, params):
    return ENGINE.apply(op, args, params)


def override(func, args):
    """The ``__nbaccel_function__`` protocol (PyTorch's ``__torch_function__`` idea, reduced to
    the fronts that call it: ``linear`` and ``matmul``): an operand that is not a Tensor but
    defines ``__nbaccel_function__(self, func, args)`` (a compressed 2:4 weight, say) computes
    the call itself. Returns NotImplemented when no operand does."""
    plain = ENGINE.Tensor
    for a in args:
        if type(a) is plain:      # (the common case, and a cheap test: a missed getattr is not)
            continue
        f = getattr(type(a), "__nbaccel_function__", None)
        if f is not None:
            return f(a, func, args)
    return NotImplemented


# What the fronts call above the op table (dispatch.apply, convert.asarray, tensor.Tensor,
# dispatch.active_trace): None until tensor.py binds them, which import nbaccel does before any
# front can run
ENGINE = types.SimpleNamespace(Tensor=None, apply=None, asarray=None, active_trace=None)


def bind(**engine):
    """Hand the fronts the engine above them (tensor.py's last lines)."""
    vars(ENGINE).update(engine)


def numpy_made(t):
    """Mark ``t``, made by a creation op (no array argument to take the flavour from) for a
    NumPy-flavoured operand, NumPy-flavoured: its node too, so that the compiler's re-trace
    (capture/decompose.py) records it with NumPy's promotion again (float64 means of ints)."""
    t._np = True
    if t._node is not None:
        t._node.np_flavour = True
    return t


def as_tensor_arg(x):
    """Tensors pass; Python scalars stay (weakly typed); anything array-like becomes a Tensor."""
    if isinstance(x, TensorMetadata):   # (every Tensor is one, and nothing else: no lookup first)
        return x
    if isinstance(x, _SCALARS) and not isinstance(x, np.generic):
        return x
    return ENGINE.asarray(x)


def as_tensor(x, like=None):
    """Like as_tensor_arg, but Python scalars become 0-d Tensors too."""
    if isinstance(x, TensorMetadata):   # (on every front's path: nothing looked up first)
        return x
    asarray = ENGINE.asarray
    if isinstance(x, _SCALARS) and like is not None:
        dt = D.result_type(like, x, default_float=D.float64 if like._np else D.float32)
        return asarray(x, dtype=dt, device=like.device, _np=like._np)
    return asarray(x)


def reduce_params(x, axis=None, keepdims=False, dim=None, keepdim=None, dtype=None, *,
                  counts=False):
    """A reduction's params. ``counts``: the reduction counts the elements along its axes
    (mean, var, std), which changes what a 0-d NumPy array accepts (``_reduce_axis``)."""
    if dim is not None:
        if axis is not None:
            raise TypeError("give axis or dim, not both")
        axis = dim
    if keepdim is not None:
        keepdims = keepdim
    params = {"axis": _reduce_axis(x, axis, counts), "keepdims": bool(keepdims)}
    if dtype is not None:
        params["dtype"] = D.dtype(dtype)
    return params


def _reduce_axis(x, axis, counts):
    """The normalised axes of a reduction. A 0-d array has none, yet NumPy's ufunc reductions
    (sum, prod, max, argmax, any, ...) take a bare axis 0 or -1 there and reduce nothing (a
    legacy rule), while a tuple of axes, or mean/var/std (``counts``: they count the elements
    along the axes first), raise AxisError; PyTorch takes dim 0, -1 and (0,) alike. Where it is
    taken, a 0-d reduction is over all (no) axes: None."""
    if x.ndim or axis is None:
        return normalize_axis(axis, x.ndim)
    bare = hasattr(axis, "__index__")
    axes = (axis,) if bare else tuple(axis)
    if axes and x._np and (counts or not bare):
        raise np.exceptions.AxisError(int(axes[0]), 0)
    normalize_axis(axis, 0)                  # (range and duplicate checks)
    return None if axes else ()


def default_front(op):
    kind = op.kind
    # (the unary and binary fronts are on every eager op's path: Tensors skip conversion)
    if kind == "unary":
        def front(x):
            T = ENGINE
            return T.apply(op, (x if isinstance(x, T.Tensor) else as_tensor(x),), {})
    elif kind == "binary":
        def front(a, b):
            T = ENGINE
            if not (isinstance(a, T.Tensor) and isinstance(b, T.Tensor)):
                a, b = as_tensor_arg(a), as_tensor_arg(b)
                if not isinstance(a, T.Tensor) and not isinstance(b, T.Tensor):
                    a = as_tensor(a)
            return T.apply(op, (a, b), {})
    elif kind == "ternary":
        def front(a, b, c):
            args = [as_tensor_arg(v) for v in (a, b, c)]
            if not any(isinstance(v, TensorMetadata) for v in args):
                args[0] = as_tensor(args[0])
            return apply(op, tuple(args), {})
    elif kind == "reduce":
        def front(x, axis=None, keepdims=False, *, dim=None, keepdim=None, dtype=None, out=None):
            if not isinstance(x, TensorMetadata):
                x = as_tensor(x)
            if out is not None:
                raise TypeError(f"{op.name}: out= is not supported")
            if axis is None and dim is None and dtype is None:   # over all axes: nothing to check
                params = {"axis": None, "keepdims": bool(keepdims if keepdim is None else keepdim)}
            else:
                params = reduce_params(x, axis, keepdims, dim, keepdim, dtype)
            return ENGINE.apply(op, (x,), params)
    else:
        raise ValueError(f"op {op.name!r} of kind {kind!r} needs an explicit front")
    return front
