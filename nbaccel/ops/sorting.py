"""Sorting: argsort (the primitive), sort (composite: take_along_axis of argsort), topk.

Every sort is stable, so ties come out in a deterministic order (their original one, also when
``descending``). NumPy's ``np.sort`` and the Array API's ``sort`` return values; PyTorch's
``Tensor.sort`` and ``topk`` return (values, indices) namedtuples.
"""
from __future__ import annotations

import collections

from .. import dtypes as D, ops
from .batching import axis_param_rule
from .fronts import apply, as_tensor
from .gather import _take_along_axis
from .movement import axis_index
from .registry import defalias, defmethod, defop


# ---- sorting ---------------------------------------------------------------------------------------

SortResult = collections.namedtuple("sort", ["values", "indices"])
TopKResult = collections.namedtuple("topk", ["values", "indices"])


def _argsort_impl(xp, x, axis, descending):
    if not descending:
        return xp.argsort(x, axis=axis, kind="stable")
    # stable descending: sort the reversed tensor, reverse back, map positions back
    r = xp.argsort(xp.flip(x, axis), axis=axis, kind="stable")
    return (x.shape[axis] - 1) - xp.flip(r, axis)


def _sort_params(x, axis, descending):
    if x.ndim == 0:
        axis_index(axis, 1)
        return None
    return {"axis": axis_index(axis, x.ndim), "descending": bool(descending)}


def _argsort_front(x, axis=-1, kind=None, order=None, *, descending=False, stable=True,
                   dim=None):
    """Indices that sort x along an axis (None: flattened). Always stable: ties keep order."""
    x = as_tensor(x)
    axis = dim if dim is not None else axis
    if axis is None:
        x, axis = x.reshape(-1), 0
    p = _sort_params(x, axis, descending)
    if p is None:
        return ops.zeros_like(x, dtype=D.int64)
    return apply(argsort, (x,), p)


argsort = defop(
    "argsort", kind="other", differentiable=False, impl=_argsort_impl,
    batch_rule=axis_param_rule("argsort"),
    infer=lambda args, p: (args[0].shape, D.int64), front=_argsort_front,
    methods="argsort", numpy="argsort")


def _sort_front(x, axis=-1, kind=None, order=None, *, descending=False, stable=True, dim=None):
    """Sorted values along an axis (None: flattened); stable; ``descending`` reverses."""
    x = as_tensor(x)
    axis = dim if dim is not None else axis
    if axis is None:
        x, axis = x.reshape(-1), 0
    p = _sort_params(x, axis, descending)
    return x.clone() if p is None else apply(sort, (x,), p)


def _sort_decomp(x, axis, descending):
    return _take_along_axis(x, apply(argsort, (x,), {"axis": axis, "descending": descending}),
                            axis)


sort = defop(
    "sort", kind="other", decomp=_sort_decomp, front=_sort_front, numpy="sort",
    impl=lambda xp, x, axis, descending: xp.take_along_axis(
        x, _argsort_impl(xp, x, axis, descending), axis),
    infer=lambda args, p: (args[0].shape, args[0].dtype))


def _sort_method(self, dim=-1, descending=False, stable=False):
    """PyTorch ``Tensor.sort``: a (values, indices) namedtuple."""
    idx = _argsort_front(self, dim, descending=descending)
    vals = self.clone() if self.ndim == 0 else _take_along_axis(self, idx, dim)
    return SortResult(vals, idx)


defmethod("sort", _sort_method)


def _topk(x, k, dim=-1, largest=True, sorted=True):
    """The k largest (or smallest) along ``dim``: a (values, indices) namedtuple, PyTorch-style."""
    x = as_tensor(x)
    n = x.shape[axis_index(dim, x.ndim, "dim")] if x.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"topk: k={k} is out of range for a dimension of size {n}")
    idx = _argsort_front(x, dim, descending=largest)
    if x.ndim == 0:
        return TopKResult(x.clone(), idx)
    idx = idx[(slice(None),) * axis_index(dim, x.ndim) + (slice(0, k),)]
    return TopKResult(_take_along_axis(x, idx, dim), idx)


defalias("topk", _topk, methods="topk")
