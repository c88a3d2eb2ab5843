"""Pooling: ``max_pool2d`` and ``avg_pool2d`` as composite ops (a max or a sum over the
KH*KW strided slices of the padded input: movement ops and pointwise ops, so the compiler
fuses a pooling into one kernel), with analytic gradients: a first-max scatter primitive
(``max_pool2d_backward``) for max pooling, a depthwise transposed convolution for average
pooling. ``max_pool1d`` / ``avg_pool1d`` are the 2-D ops on a height of 1.

Params: ``kernel`` (kh, kw), ``stride``, ``padding`` ((top, bottom), (left, right)) where the
bottom/right entries include the extra rows ``ceil_mode`` adds, ``dilation`` (max only), and
for average pooling ``include_pad`` (which padding counts in the divisor: the symmetric user
padding, never the ceil_mode overhang) and ``divisor`` (an override, or 0).
"""
from __future__ import annotations

import math

from .. import dtypes as D, ops
from .fronts import apply, as_tensor
from .nn import ShapeError
from .registry import defalias, defop
from .batching import with_batch
from .conv import conv_transpose2d
from .kernel_modules import fused_for


def _pair(v, name):
    if isinstance(v, int):
        return (int(v), int(v))
    v = tuple(int(a) for a in v)
    if len(v) == 1:
        return v * 2
    if len(v) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, got {v}")
    return v


def _out_len(n, k, s, p, d, ceil_mode):
    """PyTorch's pooling output length; with ceil_mode the last window must start inside the
    input or the left padding."""
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _geometry(x, kernel_size, stride, padding, dilation, ceil_mode, what):
    if x.ndim not in (3, 4):
        raise ShapeError(f"{what}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got "
                         f"shape {tuple(x.shape)}")
    k = _pair(kernel_size, "kernel_size")
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _pair(stride, "stride")
    p, d = _pair(padding, "padding"), _pair(dilation, "dilation")
    if min(k) < 1 or min(s) < 1 or min(d) < 1:
        raise ValueError(f"{what}: kernel_size, stride and dilation must be positive")
    for a in range(2):
        if p[a] < 0 or p[a] > k[a] // 2:
            raise ValueError(f"{what}: pad should be at most half of effective kernel size, but "
                             f"got pad={p[a]}, kernel_size={k[a]}")
    h, w = x.shape[-2], x.shape[-1]
    out = tuple(_out_len(n, k[a], s[a], p[a], d[a], ceil_mode) for a, n in enumerate((h, w)))
    if min(out) < 1:
        raise ShapeError(f"{what}: input of spatial size {(h, w)} is too small for kernel {k} "
                         f"(padding {p}, dilation {d}): the output would be {out}")
    pads = tuple((p[a], max(0, (out[a] - 1) * s[a] + d[a] * (k[a] - 1) + 1 - n - p[a]))
                 for a, n in enumerate((h, w)))
    return {"kernel": k, "stride": s, "padding": pads, "dilation": d}, out


def _taps(m, xp_, p, out_hw):
    """The KH*KW strided slices of the padded input, each (N, C, OH, OW)."""
    (kh, kw), (sh, sw), (dh, dw) = p["kernel"], p["stride"], p["dilation"]
    oh, ow = out_hw
    for i in range(kh):
        for j in range(kw):
            yield xp_[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]


def _out_hw(x_shape, p):
    (kh, kw), (sh, sw), (dh, dw) = p["kernel"], p["stride"], p["dilation"]
    (pt, pb), (pl, pr) = p["padding"]
    return ((x_shape[2] + pt + pb - dh * (kh - 1) - 1) // sh + 1,
            (x_shape[3] + pl + pr - dw * (kw - 1) - 1) // sw + 1)


def _lowest(dtype):
    import numpy as np
    dt = np.dtype(dtype)
    return -math.inf if dt.kind == "f" else (False if dt.kind == "b" else int(np.iinfo(dt).min))


def pad_constant(x, pads, value):
    """x padded on its last len(pads) axes with ``value``: pads ((lo, hi), ...) in axis order.
    Written with nbaccel ops (full + concatenate), so it traces and differentiates."""
    nd = x.ndim
    for a, (lo, hi) in enumerate(pads, start=nd - len(pads)):
        parts = []
        for n in (lo, hi):
            shape = tuple(x.shape[:a]) + (n,) + tuple(x.shape[a + 1:])
            parts.append(ops.full(shape, value, dtype=x.dtype, device=x.device) if n else None)
        if parts[0] is not None or parts[1] is not None:
            x = ops.concatenate([t for t in (parts[0], x, parts[1]) if t is not None], axis=a)
    return x


def _padded(m, x, p, value, is_xp):
    (pt, pb), (pl, pr) = p["padding"]
    if not (pt or pb or pl or pr):
        return x
    if is_xp:
        return m.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=value)
    return pad_constant(x, ((pt, pb), (pl, pr)), value)


# ---- max pooling --------------------------------------------------------------------------------

def _max_pool(m, x, p, is_xp):
    taps = _taps(m, _padded(m, x, p, _lowest(x.dtype.np if not is_xp else x.dtype), is_xp), p,
                 _out_hw(x.shape, p))
    out = next(taps)
    for t in taps:
        out = m.maximum(out, t)
    return out


def _max_pool_grad(g, out, x, **p):
    return (apply(max_pool2d_backward, (g, x), p),)


def _max_pool_backward_impl(xp, g, x, **p):
    """Each output's gradient goes to the first position of its window holding the maximum
    (PyTorch's choice among ties); a NaN maximum is its NaN's position. The maxima are taken
    again from ``x`` here rather than passed in: a compiled graph may compute the forward's
    output in another kernel, with other rounding, and the equality test needs the same bits."""
    (pt, pb), (pl, pr) = p["padding"]
    k = fused_for(xp, g, x) if g.size else None
    if k is not None:       # one pass per plane (nbaccel_kernels.fused), NumPy while it loads
        gx = xp.empty(x.shape, g.dtype)
        planes = lambda a: xp.ascontiguousarray(a).reshape((-1,) + tuple(a.shape[2:]))  # noqa: E731
        k.max_pool2d_backward(planes(g), planes(x), *p["kernel"], *p["stride"], *p["dilation"],
                              pt, pl, gx.reshape((-1,) + tuple(x.shape[2:])))
        return gx
    fill = _lowest(x.dtype)
    xpad = xp.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill)
    out = _max_pool(xp, x, p, True)
    gx = xp.zeros(xpad.shape, g.dtype)
    taken = xp.zeros(out.shape, bool)
    nan_out = out != out
    for t, view in zip(_taps(xp, xpad, p, out.shape[2:]), _taps(xp, gx, p, out.shape[2:])):
        hit = ~taken & ((t == out) | (nan_out & (t != t)))
        view += xp.where(hit, g, 0)
        taken |= hit
    return gx[:, :, pt:pt + x.shape[2], pl:pl + x.shape[3]]


def _max_pool_backward_batch_rule(args, batched, params, size):
    """vmap: the vmapped dim folds into N (pooling treats every (image, channel) alike)."""
    g, x = (with_batch(a, b, size) for a, b in zip(args, batched))
    fold = lambda t: t.reshape((size * t.shape[1],) + tuple(t.shape[2:]))  # noqa: E731
    out = apply(max_pool2d_backward, (fold(g), fold(x)), params)
    return out.reshape((size, x.shape[1]) + tuple(out.shape[1:]))


max_pool2d_backward = defop(
    "max_pool2d_backward", kind="nn", impl=_max_pool_backward_impl,
    infer=lambda args, p: (args[1].shape, args[0].dtype), differentiable=False,
    batch_rule=_max_pool_backward_batch_rule,
    front=lambda g, x, **p: apply(max_pool2d_backward, (g, x), p),
    doc="The gradient of max_pool2d: each output gradient added at its window's first maximum.")


def _max_pool_infer(args, p):
    x = args[0]
    return (tuple(x.shape[:2]) + _out_hw(x.shape, p)), x.dtype


def _with_batch(x, fn):
    """Run fn on a 4-D tensor; (C, H, W) input gets a batch dim for the call."""
    if x.ndim == 4:
        return fn(x)
    y = fn(x.reshape((1,) + tuple(x.shape)))
    return y.reshape(tuple(y.shape[1:]))


def _max_pool2d_front(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                      return_indices=False):
    """PyTorch's ``F.max_pool2d`` ((N, C, H, W) or (C, H, W); padding counts as -inf)."""
    x = as_tensor(input)
    p, _ = _geometry(x, kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d")
    y = _with_batch(x, lambda t: apply(max_pool2d, (t,), p))
    if not return_indices:
        return y
    return y, _with_batch(x, lambda t: apply(max_pool2d_indices, (t,), p))


def _max_pool_indices_impl(xp, x, **p):
    """PyTorch's ``return_indices``: per output, the flat index ``h * W + w`` in its (H, W)
    plane of the window's first maximum (a NaN maximum: its NaN), padding never chosen."""
    (pt, pb), (pl, pr) = p["padding"]
    (kh, kw), (sh, sw), (dh, dw) = p["kernel"], p["stride"], p["dilation"]
    h, w = x.shape[2], x.shape[3]
    xpad = xp.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=_lowest(x.dtype))
    out = _max_pool(xp, x, p, True)
    oh, ow = out.shape[2:]
    idx = xp.zeros(out.shape, xp.int64)
    taken = xp.zeros(out.shape, bool)
    nan_out = out != out
    rows0, cols0 = xp.arange(oh) * sh - pt, xp.arange(ow) * sw - pl
    taps = _taps(xp, xpad, p, (oh, ow))
    for i in range(kh):
        for j in range(kw):
            t = next(taps)
            r, c = rows0 + i * dh, cols0 + j * dw
            inside = ((r >= 0) & (r < h))[:, None] & ((c >= 0) & (c < w))[None, :]
            hit = ~taken & inside & ((t == out) | (nan_out & (t != t)))
            idx = xp.where(hit, r[:, None] * w + c[None, :], idx)
            taken |= hit
    return idx


def _max_pool_indices_batch_rule(args, batched, params, size):
    """vmap: the vmapped dim folds into N (each (image, channel) plane has its own indices)."""
    x = with_batch(args[0], batched[0], size)
    out = apply(max_pool2d_indices, (x.reshape((size * x.shape[1],) + tuple(x.shape[2:])),), params)
    return out.reshape((size, x.shape[1]) + tuple(out.shape[1:]))


max_pool2d_indices = defop(
    "max_pool2d_indices", kind="nn", impl=_max_pool_indices_impl, differentiable=False,
    batch_rule=_max_pool_indices_batch_rule,
    infer=lambda args, p: (tuple(args[0].shape[:2]) + _out_hw(args[0].shape, p), D.int64),
    front=lambda x, **p: apply(max_pool2d_indices, (x,), p),
    doc="The indices max_pool2d(return_indices=True) returns: each window's first maximum as a "
        "flat index into its (H, W) plane (max_unpool2d's input).")


max_pool2d = defop(
    "max_pool2d", kind="nn", infer=_max_pool_infer, front=_max_pool2d_front,
    impl=lambda xp, x, **p: _max_pool(xp, x, p, True),
    decomp=lambda x, **p: _max_pool(ops, x, p, False), grad=_max_pool_grad,
    doc="2-D max pooling (kernel, stride, padding, dilation, ceil_mode); one fused kernel in "
        "compiled graphs.")


# ---- average pooling ----------------------------------------------------------------------------

def _avg_divisor(m, x, p, is_xp):
    """What each window sum is divided by: the override, kh*kw, or per window the count of
    positions it covers in the counted region (the input, plus the user padding when
    count_include_pad; never the ceil_mode overhang)."""
    if p["divisor"]:
        return float(p["divisor"])
    (pt, pb), (pl, pr) = p["padding"]
    h, w = x.shape[2], x.shape[3]
    hp, wp = h + pt + pb, w + pl + pr                   # the padded input the windows read
    sym = p["include_pad"]
    if sym is not None:     # counted: padded rows [0, h + 2 * ph) (the top padding is ph)
        rows, cols = (0, min(hp, h + 2 * sym[0])), (0, min(wp, w + 2 * sym[1]))
    else:
        rows, cols = (pt, pt + h), (pl, pl + w)
    if rows == (0, hp) and cols == (0, wp):
        return float(p["kernel"][0] * p["kernel"][1])   # every window lies inside it
    shape = (1, 1, rows[1] - rows[0], cols[1] - cols[0])
    ones = m.ones(shape, dtype=x.dtype) if is_xp else \
        ops.full(shape, 1.0, dtype=x.dtype, device=x.device)
    q = dict(p, padding=((rows[0], hp - rows[1]), (cols[0], wp - cols[1])))
    return _sum_taps(m, _padded(m, ones, q, 0.0, is_xp), q, _out_hw(x.shape, p))


def _sum_taps(m, xp_, p, out_hw):
    taps = _taps(m, xp_, p, out_hw)
    out = next(taps)
    for t in taps:
        out = out + t
    return out


def _avg_pool(m, x, p, is_xp):
    s = _sum_taps(m, _padded(m, x, p, 0.0, is_xp), p, _out_hw(x.shape, p))
    return s / _avg_divisor(m, x, p, is_xp)


def _avg_pool_grad(g, out, x, **p):
    div = _avg_divisor(ops, x, p, False)
    c = x.shape[1]
    ones = ops.full((c, 1) + tuple(p["kernel"]), 1.0, dtype=g.dtype, device=g.device)
    q = {"stride": p["stride"], "padding": p["padding"], "dilation": (1, 1), "groups": c,
         "kernel": "cpu" if g.device.type == "cpu" else "triton", "size": tuple(x.shape[2:])}
    return (apply(conv_transpose2d, ((g / div), ones), q),)


def _avg_pool2d_front(input, kernel_size, stride=None, padding=0, ceil_mode=False,
                      count_include_pad=True, divisor_override=None):
    """PyTorch's ``F.avg_pool2d``."""
    x = as_tensor(input)
    if x.dtype.kind != "f":
        raise RuntimeError(f"avg_pool2d: needs a floating point input, got {x.dtype}")
    p, _ = _geometry(x, kernel_size, stride, padding, 1, ceil_mode, "avg_pool2d")
    if divisor_override is not None and int(divisor_override) <= 0:
        raise ValueError("avg_pool2d: divisor must be not zero")
    sym = _pair(padding, "padding")
    p.update(include_pad=sym if count_include_pad else None,
             divisor=int(divisor_override) if divisor_override is not None else 0)
    return _with_batch(x, lambda t: apply(avg_pool2d, (t,), p))


avg_pool2d = defop(
    "avg_pool2d", kind="nn", infer=_max_pool_infer, front=_avg_pool2d_front,
    impl=lambda xp, x, **p: _avg_pool(xp, x, p, True).astype(x.dtype, copy=False),
    decomp=lambda x, **p: _avg_pool(ops, x, p, False), grad=_avg_pool_grad,
    doc="2-D average pooling (count_include_pad, divisor_override, ceil_mode); one fused "
        "kernel in compiled graphs.")


def _as_2d(x, what):
    if x.ndim not in (2, 3):
        raise ShapeError(f"{what}: expected a 2-D (C, L) or 3-D (N, C, L) input, got {tuple(x.shape)}")
    return x.reshape(tuple(x.shape[:-1]) + (1, x.shape[-1]))


def _first(v):
    return v if isinstance(v, int) else tuple(v)[0]


def _max_pool1d_front(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                      return_indices=False):
    """PyTorch's ``F.max_pool1d``."""
    x = as_tensor(input)
    y = _max_pool2d_front(_as_2d(x, "max_pool1d"), (1, _first(kernel_size)),
                          None if stride is None else (1, _first(stride)), (0, _first(padding)),
                          (1, _first(dilation)), ceil_mode, return_indices)
    flat = lambda t: t.reshape(tuple(t.shape[:-2]) + (t.shape[-1],))  # noqa: E731
    return (flat(y[0]), flat(y[1])) if return_indices else flat(y)


def _avg_pool1d_front(input, kernel_size, stride=None, padding=0, ceil_mode=False,
                      count_include_pad=True):
    """PyTorch's ``F.avg_pool1d``."""
    x = as_tensor(input)
    y = _avg_pool2d_front(_as_2d(x, "avg_pool1d"), (1, _first(kernel_size)),
                          None if stride is None else (1, _first(stride)), (0, _first(padding)),
                          ceil_mode, count_include_pad)
    return y.reshape(tuple(y.shape[:-2]) + (y.shape[-1],))


max_pool1d = defalias("max_pool1d", _max_pool1d_front)
avg_pool1d = defalias("avg_pool1d", _avg_pool1d_front)
