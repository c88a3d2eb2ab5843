"""take, index_select, take_along_axis, gather, scatter and nonzero: spellings over the
indexing primitives (``index``, ``index_put``, ``argwhere``); they add no op of their own."""
from __future__ import annotations

import numpy as np

from .fronts import apply, as_tensor, as_tensor_arg
from .indexing import argwhere, index, index_put
from .indexing_plan import _index_tensor
from .meta import broadcast_shapes
from .movement import axis_index
from .registry import defalias, defmethod
from ..convert import asarray
from ..tensor_meta import is_tensor


def _int_index(indices, x, what):
    t = _index_tensor(indices, x.device)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{what}: indices must be integers, got {t.dtype}")
    return t


def _take(x, indices, axis=None, *, out=None, mode=None):
    """Elements along an axis (of the flattened tensor when axis is None) (NumPy take)."""
    x = as_tensor(x)
    idx = _int_index(indices, x, "take")
    if axis is None:
        x, axis = x.reshape(-1), 0
    return apply(index, (x, idx), {"axes": (axis_index(axis, x.ndim),)})


defalias("take", _take, numpy="take", methods="take")


def _index_select(x, dim, index_):
    x = as_tensor(x)
    idx = _int_index(index_, x, "index_select")
    if idx.ndim > 1:
        raise RuntimeError(f"index_select: index must be a vector, got shape {tuple(idx.shape)}")
    return _take(x, idx.reshape(-1), dim)


defalias("index_select", _index_select, methods="index_select")


def _grids(x, idx, axis, shape):
    """Index arrays for every axis: ``idx`` on ``axis``, position grids elsewhere."""
    arrays = []
    for d in range(x.ndim):
        if d == axis:
            arrays.append(idx if tuple(idx.shape) == tuple(shape) else idx.broadcast_to(shape))
            continue
        view = [1] * x.ndim
        view[d] = shape[d]
        # a size-1 axis of x broadcasts against the indices (take_along_axis)
        g = np.zeros(shape[d], np.int64) if x.shape[d] == 1 else np.arange(shape[d])
        arrays.append(asarray(g.reshape(view), device=x.device, _np=False))
    return tuple(arrays)


def _along_shape(x, idx, axis, what):
    if idx.ndim != x.ndim:
        raise ValueError(f"{what}: indices of shape {tuple(idx.shape)} need as many dimensions "
                         f"as the tensor of shape {tuple(x.shape)}")
    xs = tuple(1 if d == axis else s for d, s in enumerate(x.shape))
    ishape = tuple(1 if d == axis else s for d, s in enumerate(idx.shape))
    shape = list(broadcast_shapes(xs, ishape))
    shape[axis] = idx.shape[axis]
    return tuple(shape)


def _take_along_axis(x, indices, axis=-1):
    """NumPy take_along_axis: pick along ``axis`` with same-rank indices (broadcasting)."""
    x = as_tensor(x)
    idx = _int_index(indices, x, "take_along_axis")
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = axis_index(axis, x.ndim)
    shape = _along_shape(x, idx, axis, "take_along_axis")
    return apply(index, (x,) + _grids(x, idx, axis, shape), {"axes": tuple(range(x.ndim))})


defalias("take_along_axis", _take_along_axis, numpy="take_along_axis")


def _gather(x, dim, index_):
    """PyTorch gather: out[i][j] = x[index[i][j]][j] (dim 0), over index's shape."""
    x = as_tensor(x)
    idx = _int_index(index_, x, "gather")
    dim = axis_index(dim, x.ndim, "dim")
    if idx.ndim != x.ndim or any(i > s for d, (i, s) in enumerate(zip(idx.shape, x.shape))
                                 if d != dim):
        raise RuntimeError(f"gather: index of shape {tuple(idx.shape)} doesn't fit a tensor of "
                           f"shape {tuple(x.shape)} along dim {dim}")
    return apply(index, (x,) + _grids(x, idx, dim, tuple(idx.shape)),
                 {"axes": tuple(range(x.ndim))})


defalias("gather", _gather, methods="gather")


def _scatter(x, dim, index_, src=None, *, value=None, accumulate=False):
    x = as_tensor(x)
    idx = _int_index(index_, x, "scatter")
    dim = axis_index(dim, x.ndim, "dim")
    src = value if src is None else src
    if is_tensor(src) and src.ndim:
        src = src[tuple(slice(0, s) for s in idx.shape)]
    grids = _grids(x, idx, dim, tuple(idx.shape))
    return apply(index_put, (x, as_tensor_arg(src)) + grids,
                 {"axes": tuple(range(x.ndim)), "accumulate": accumulate})


defalias("scatter", lambda x, dim, index, src=None, *, value=None: _scatter(
    x, dim, index, src, value=value), methods="scatter")
defalias("scatter_add", lambda x, dim, index, src: _scatter(x, dim, index, src, accumulate=True),
         methods="scatter_add")


def _nonzero(x, *, as_tuple=True):
    """Indices of the non-zero elements: a tuple of 1-d tensors (NumPy, Array API), or a
    (count, ndim) tensor with ``as_tuple=False`` (PyTorch's default for ``Tensor.nonzero``)."""
    x = as_tensor(x)
    if x.ndim == 0 and as_tuple:
        raise ValueError("nonzero of a 0-d tensor is not allowed: use atleast_1d(x) first")
    nz = apply(argwhere, (x,), {})
    return tuple(nz[:, d] for d in range(x.ndim)) if as_tuple else nz


defalias("nonzero", _nonzero, numpy="nonzero")
defmethod("nonzero", lambda self, *, as_tuple=False: _nonzero(self, as_tuple=as_tuple))
