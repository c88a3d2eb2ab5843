"""3-D pooling and max unpooling, written on the 2-D pooling ops of ``pooling.py``.

Max and average pooling are separable: a 3-D window's maximum is the maximum over its depth
of the (H, W) windows' maxima, and its average (with PyTorch's divisors, which are products
of per-axis counts) the depth average of the (H, W) averages. So ``max_pool3d`` /
``avg_pool3d`` are a ``max_pool2d`` / ``avg_pool2d`` over (H, W) with the depth folded into
the channels, then one over depth with the (H, W) positions as the width: the same ops, the
same gradients (first maximum: first along depth, then within the plane, which is PyTorch's
raster order) and one fused kernel each when compiled.

``max_unpool1d/2d/3d`` scatter each value to its flat index in its output plane (PyTorch's
``return_indices`` convention, ``h * W + w`` and ``(d * H + h) * W + w``); the gradient is
the gather at the same indices.

>>> import nbaccel as nb
>>> import nbaccel.nn.functional as F
>>> y, i = F.max_pool2d(nb.arange(16.0).reshape(1, 1, 4, 4), 2, return_indices=True)
>>> i[0, 0]
tensor([[ 5,  7],
        [13, 15]])
>>> F.max_unpool2d(y, i, 2)[0, 0, 1]
tensor([0., 5., 0., 7.])
"""
from __future__ import annotations

import math

from .conv import _pair
from .fronts import as_tensor
from .nn import ShapeError
from .pooling import _avg_pool2d_front, _max_pool2d_front
from .registry import ALIASES, defalias
from .. import ops


def _triple(v, name, n=3):
    return _pair(v, name, n)        # conv's size parser, for three axes by default


def _batched5(x, what):
    if x.ndim == 4:
        return x.reshape((1,) + tuple(x.shape)), True
    if x.ndim != 5:
        raise ShapeError(f"{what}: expected a 4-D (C, D, H, W) or 5-D (N, C, D, H, W) input, got "
                         f"shape {tuple(x.shape)}")
    return x, False


def _max_pool3d_front(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                      return_indices=False):
    """PyTorch's ``F.max_pool3d`` on (N, C, D, H, W) or (C, D, H, W) input."""
    x, unbatched = _batched5(as_tensor(input), "max_pool3d")
    k = _triple(kernel_size, "kernel_size")
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _triple(stride, "stride")
    p, d = _triple(padding, "padding"), _triple(dilation, "dilation")
    n, c, dd, h, w = x.shape
    y1 = _max_pool2d_front(x.reshape((n, c * dd, h, w)), k[1:], s[1:], p[1:], d[1:], ceil_mode,
                           return_indices)
    y1, i1 = y1 if return_indices else (y1, None)
    oh, ow = y1.shape[2], y1.shape[3]
    y2 = _max_pool2d_front(y1.reshape((n, c, dd, oh * ow)), (k[0], 1), (s[0], 1), (p[0], 0),
                           (d[0], 1), ceil_mode, return_indices)
    y2, i2 = y2 if return_indices else (y2, None)
    shape = (n, c, y2.shape[2], oh, ow)
    y = y2.reshape(shape)
    if return_indices:
        depth = i2 // (oh * ow)                          # the depth each maximum came from
        plane = ops.take_along_axis(i1.reshape((n, c, dd, oh * ow)), depth, axis=2)
        idx = (depth * (h * w) + plane).reshape(shape)
        if unbatched:
            return y.reshape(shape[1:]), idx.reshape(shape[1:])
        return y, idx
    return y.reshape(shape[1:]) if unbatched else y


def _avg_pool3d_front(input, kernel_size, stride=None, padding=0, ceil_mode=False,
                      count_include_pad=True, divisor_override=None):
    """PyTorch's ``F.avg_pool3d`` on (N, C, D, H, W) or (C, D, H, W) input."""
    x, unbatched = _batched5(as_tensor(input), "avg_pool3d")
    k = _triple(kernel_size, "kernel_size")
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _triple(stride, "stride")
    p = _triple(padding, "padding")
    if divisor_override is not None and int(divisor_override) <= 0:
        raise ValueError("avg_pool3d: divisor must be not zero")
    div = None if divisor_override is None else 1
    n, c, dd, h, w = x.shape
    y1 = _avg_pool2d_front(x.reshape((n, c * dd, h, w)), k[1:], s[1:], p[1:], ceil_mode,
                           count_include_pad, div)
    oh, ow = y1.shape[2], y1.shape[3]
    y2 = _avg_pool2d_front(y1.reshape((n, c, dd, oh * ow)), (k[0], 1), (s[0], 1), (p[0], 0),
                           ceil_mode, count_include_pad, div)
    if divisor_override is not None:
        y2 = y2 / float(divisor_override)
    y = y2.reshape((n, c, y2.shape[2], oh, ow))
    return y.reshape(tuple(y.shape[1:])) if unbatched else y


# ---- max_unpool ---------------------------------------------------------------------------------

def _unpool_size(x, n, k, s, p, output_size, what):
    default = tuple((x.shape[x.ndim - n + a] - 1) * s[a] - 2 * p[a] + k[a] for a in range(n))
    if output_size is None:
        return default
    size = tuple(int(v) for v in output_size)
    if len(size) == n + 2:
        size = size[2:]
    if len(size) != n:
        raise ValueError(f"{what}: output_size should be a sequence containing {n} or {n + 2} "
                         f"elements, but it has a length of '{len(size)}'")
    for a in range(n):
        if not default[a] - s[a] < size[a] < default[a] + s[a]:
            raise ValueError(f"{what}: invalid output_size {size} (dim {a} must be between "
                             f"{default[a] - s[a]} and {default[a] + s[a]})")
    return size


def _max_unpool(input, indices, kernel_size, stride, padding, output_size, n, what):
    x, idx = as_tensor(input), as_tensor(indices)
    if x.ndim not in (n + 1, n + 2):
        raise ShapeError(f"{what}: expected a {n + 1}-D or {n + 2}-D input, got {tuple(x.shape)}")
    if tuple(idx.shape) != tuple(x.shape):
        raise RuntimeError(f"{what}: Expected shape of indices to be same as that of the input "
                           f"tensor ({tuple(x.shape)}) but got indices tensor with shape "
                           f"{tuple(idx.shape)}")
    if idx.dtype.kind not in "iu":
        raise RuntimeError(f"{what}: indices must be an integer tensor, got {idx.dtype}")
    k = _triple(kernel_size, "kernel_size", n)
    s = k if stride is None else _triple(stride, "stride", n)
    p = _triple(padding, "padding", n)
    size = _unpool_size(x, n, k, s, p, output_size, what)
    lead = tuple(x.shape[:x.ndim - n])
    planes, plane = math.prod(lead), math.prod(size)
    flat_i = idx.reshape((planes, -1)).astype("int64")
    z = ops.zeros((planes, plane), dtype=x.dtype, device=x.device)
    y = ALIASES["scatter"](z, 1, flat_i, x.reshape((planes, -1)))
    return y.reshape(lead + size)


def _max_unpool1d_front(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """PyTorch's ``F.max_unpool1d``: the partial inverse of ``max_pool1d(return_indices=True)``."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")


def _max_unpool2d_front(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """PyTorch's ``F.max_unpool2d``: values at their indices, zeros elsewhere."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")


def _max_unpool3d_front(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """PyTorch's ``F.max_unpool3d``."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")


max_pool3d = defalias("max_pool3d", _max_pool3d_front)
avg_pool3d = defalias("avg_pool3d", _avg_pool3d_front)
max_unpool1d = defalias("max_unpool1d", _max_unpool1d_front)
max_unpool2d = defalias("max_unpool2d", _max_unpool2d_front)
max_unpool3d = defalias("max_unpool3d", _max_unpool3d_front)
