"""Reductions over axes. Primitives: sum, max, min, prod, argmax, argmin. The rest compose."""
from __future__ import annotations

from .registry import defop


def _ops():
    from .. import ops
    return ops


def _expand_back(g, x, axis, keepdims):
    """Broadcast a reduced gradient back to the input's shape."""
    if not keepdims and axis is not None:
        shape = list(x.shape)
        for a in axis:
            shape[a] = 1
        g = g.reshape(tuple(shape))
    elif not keepdims:
        g = g.reshape((1,) * x.ndim)
    return g.broadcast_to(x.shape)


def _sum_impl(xp, x, axis, keepdims, dtype=None):
    return xp.sum(x, axis=axis, keepdims=keepdims, dtype=None if dtype is None else dtype.np)


sum_ = defop("sum", kind="reduce", impl=_sum_impl, dtype_rule="sum",
             grad=lambda g, out, x, axis, keepdims, dtype=None: (_expand_back(g, x, axis, keepdims),),
             methods="sum", numpy="sum", scalar="+")


def _minmax_grad(g, out, x, axis, keepdims, dtype=None):
    ops = _ops()
    o = _expand_back(out, x, axis, keepdims)
    mask = ops.equal(x, o).astype(g.dtype)
    count = mask.sum(axis=axis, keepdims=True) if axis is not None else mask.sum().reshape((1,) * x.ndim)
    return (_expand_back(g, x, axis, keepdims) * mask / count,)


def _max_impl(xp, x, axis, keepdims):
    if x.size == 0 and (axis is None or any(x.shape[a] == 0 for a in axis)):
        raise ValueError("max/min of an empty tensor along a zero-size axis has no identity")
    return xp.max(x, axis=axis, keepdims=keepdims)


def _min_impl(xp, x, axis, keepdims):
    if x.size == 0 and (axis is None or any(x.shape[a] == 0 for a in axis)):
        raise ValueError("max/min of an empty tensor along a zero-size axis has no identity")
    return xp.min(x, axis=axis, keepdims=keepdims)


amax = defop("amax", kind="reduce", impl=_max_impl, grad=_minmax_grad, dtype_rule="same",
             methods="amax", numpy=("amax", "max"), scalar="max")
amin = defop("amin", kind="reduce", impl=_min_impl, grad=_minmax_grad, dtype_rule="same",
             methods="amin", numpy=("amin", "min"), scalar="min")


def _mean(x, axis=None, keepdims=False, dtype=None):
    ops = _ops()
    n = 1
    for a in (axis if axis is not None else range(x.ndim)):
        n *= x.shape[a]
    s = ops.sum(x.astype(dtype) if dtype is not None else
                x if x.dtype.kind == "f" else x.astype(ops.meta.default_float([x])),
                axis=axis, keepdims=keepdims)
    return s / n if n else s * float("nan")


mean = defop("mean", kind="reduce", decomp=_mean, dtype_rule="float",
             impl=lambda xp, x, axis, keepdims, dtype=None: xp.mean(
                 x, axis=axis, keepdims=keepdims, dtype=None if dtype is None else dtype.np),
             methods="mean", numpy="mean")
