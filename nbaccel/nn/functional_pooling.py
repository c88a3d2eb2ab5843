"""Adaptive max pooling and power-average (LP) pooling, PyTorch's ``F.adaptive_max_pool1d/2d/3d``
and ``F.lp_pool1d/2d/3d``, as compositions of ops (``nbaccel.nn.functional`` re-exports them).
They add no op to the table: gradients, vmap and compiled tracing are those of the gathers,
arg-reductions, poolings and pointwise ops they are written with.

Adaptive max pooling is separable, as 3-D max pooling is: the maximum of a window is the
maximum over its last axis, then over the axis before, and so on. Along one axis PyTorch's
bins are [floor(i*n/m), ceil((i+1)*n/m)); each bin is gathered into a row of the longest bin's
length (a short bin repeats its last element, which never changes the maximum or the first
maximum's position), ``argmax`` picks the first maximum and ``take_along_axis`` takes its
value, so the gradient reaches exactly the chosen element (as PyTorch's, not split between
ties as ``amax``'s). First along the last axis, then the earlier ones, is PyTorch's raster
order: the returned index is the first maximum's flat index in its (N, C) plane.

>>> import nbaccel as nb
>>> import nbaccel.nn.functional as F
>>> y, i = F.adaptive_max_pool1d(nb.tensor([[[1.0, 5.0, 2.0, 4.0, 3.0]]]), 2, return_indices=True)
>>> y, i
(tensor([[[5., 4.]]]), tensor([[[1, 3]]]))
"""
from __future__ import annotations

import math

import numpy as np

from .. import ops
from ..ops.fronts import as_tensor
from ..ops.nn import ShapeError
from ..ops.pooling import _avg_pool2d_front, _avg_pool1d_front, _max_pool1d_front, _max_pool2d_front
from ..ops.pooling_nd import _avg_pool3d_front, _max_pool3d_front
from ..ops.registry import OPS


# ---- adaptive max pooling -----------------------------------------------------------------------

def _bins(n_in, n_out):
    """PyTorch's adaptive bins along one axis: (starts, (n_out, L) gather indices)."""
    starts = np.array([(i * n_in) // n_out for i in range(n_out)], np.int64)
    ends = np.array([-(-((i + 1) * n_in) // n_out) for i in range(n_out)], np.int64)
    length = int((ends - starts).max())
    idx = np.minimum(starts[:, None] + np.arange(length)[None, :], ends[:, None] - 1)
    return starts, idx


def _max_along(x, axis, n_out):
    """(values, positions in [0, n_in)) of the adaptive max over ``axis``."""
    shape = tuple(x.shape)
    starts, idx = _bins(shape[axis], n_out)
    rest = (1,) * (len(shape) - axis - 1)
    start_t = as_tensor(starts.reshape((n_out,) + rest)).to(x.device)
    if idx.shape[1] == 1:                      # every bin one element: a plain gather
        vals = x[(slice(None),) * axis + (idx[:, 0],)]
        return vals, ops.broadcast_to(start_t, tuple(vals.shape))
    rows = x[(slice(None),) * axis + (idx.ravel(),)]
    rows = rows.reshape(shape[:axis] + idx.shape + shape[axis + 1:])
    first = ops.argmax(rows, axis=axis + 1, keepdims=True)
    out_shape = shape[:axis] + (n_out,) + shape[axis + 1:]
    vals = ops.take_along_axis(rows, first, axis=axis + 1).reshape(out_shape)
    return vals, first.reshape(out_shape) + start_t


def _adaptive_max(input, output_size, return_indices, n, what):
    x = as_tensor(input)
    if x.ndim not in (n + 1, n + 2):
        raise ShapeError(f"{what}: expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) input, "
                         f"got shape {tuple(x.shape)}")
    if x.dtype.kind != "f":
        raise NotImplementedError(f"{what}: not implemented for {x.dtype} (floating point only, "
                                  "as PyTorch)")
    sizes = (output_size,) * n if isinstance(output_size, int) or output_size is None \
        else tuple(output_size)
    if len(sizes) != n:
        raise ValueError(f"{what}: output_size must be an int or a tuple of {n}, got {output_size}")
    spatial = tuple(x.shape[x.ndim - n:])
    out = tuple(s if o is None else int(o) for s, o in zip(spatial, sizes))
    if min(out) < 0 or (min(spatial) == 0 and math.prod(out)):
        raise ValueError(f"{what}: cannot pool an input of spatial size {spatial} to {out}")
    if not math.prod(out):                       # an empty output, as PyTorch returns
        shape = tuple(x.shape[:x.ndim - n]) + out
        vals = ops.zeros(shape, dtype=x.dtype, device=x.device) + x.sum() * 0
        return (vals, ops.zeros(shape, dtype="int64", device=x.device)) if return_indices else vals
    vals, flat, inner = x, None, 1
    for k in range(n - 1, -1, -1):               # last axis first: PyTorch's raster order
        axis = x.ndim - n + k
        vals, pos = _max_along(vals, axis, out[k])
        # the plane index so far: this axis' position times the sizes of the axes after it,
        # plus the index already found within the chosen slice
        flat = pos if flat is None else \
            pos * inner + ops.take_along_axis(flat, pos, axis=axis)
        inner *= spatial[k]
    return (vals, flat) if return_indices else vals


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """PyTorch's ``F.adaptive_max_pool1d`` on (N, C, L) or (C, L): the maximum of each of
    ``output_size`` bins, and with ``return_indices`` its position."""
    return _adaptive_max(input, output_size, return_indices, 1, "adaptive_max_pool1d")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """PyTorch's ``F.adaptive_max_pool2d`` on (N, C, H, W) or (C, H, W); ``output_size`` an int
    or a pair (None keeps that dim); indices are ``h * W + w``."""
    return _adaptive_max(input, output_size, return_indices, 2, "adaptive_max_pool2d")


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """PyTorch's ``F.adaptive_max_pool3d`` on (N, C, D, H, W) or (C, D, H, W); indices are
    ``(d * H + h) * W + w``."""
    return _adaptive_max(input, output_size, return_indices, 3, "adaptive_max_pool3d")


# ---- power-average pooling ----------------------------------------------------------------------

_MAX = {1: _max_pool1d_front, 2: _max_pool2d_front, 3: _max_pool3d_front}
_AVG = {1: _avg_pool1d_front, 2: _avg_pool2d_front, 3: _avg_pool3d_front}


def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, n):
    """PyTorch's definition: the window mean of x**p, times the kernel's size, to the power
    1/p; sign(s) * relu(|s|) keeps PyTorch's values and gradient where the mean is negative
    or zero (an odd p on negative inputs; a zero gradient at a zero sum). p = +-inf is the
    max of |x| (the min, for -inf)."""
    x = as_tensor(input)
    if norm_type == math.inf:
        return _MAX[n](ops.abs(x), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -_MAX[n](-ops.abs(x), kernel_size, stride, 0, 1, ceil_mode)
    k = (int(kernel_size),) * n if isinstance(kernel_size, int) else tuple(int(v) for v in kernel_size)
    area = math.prod(k) if len(k) == n else int(k[0]) ** n
    mean = _AVG[n](x ** norm_type, kernel_size, stride, 0, ceil_mode)
    total = ops.sign(mean) * OPS["relu"].front(ops.abs(mean)) * area
    return total ** (1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """PyTorch's ``F.lp_pool1d``: (sum over each window of x**p) ** (1/p) on (N, C, L) or (C, L).

    >>> import nbaccel as nb
    >>> lp_pool1d(nb.tensor([[3.0, 4.0]]), 2, 2)
    tensor([[5.]])
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """PyTorch's ``F.lp_pool2d`` on (N, C, H, W) or (C, H, W)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """PyTorch's ``F.lp_pool3d`` on (N, C, D, H, W) or (C, D, H, W)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3)
