"""The functional side of convolutional networks that is a composition of ops: batch and
group normalisation, adaptive average pooling, interpolation (nearest, linear to trilinear,
bicubic, area, antialiased bilinear and bicubic), padding, relu6 and channel
dropout (``nbaccel.nn.functional`` re-exports them). The convolutions and poolings
themselves are ops (``nbaccel/ops/conv.py``, ``nbaccel/ops/pooling.py``).

Everything here is written with nbaccel ops, so it runs eagerly, differentiates and traces
into compiled graphs; in eval mode ``batch_norm`` is pointwise work on per-channel constants,
which the compiler fuses into the kernel after a convolution.

>>> import nbaccel as nb
>>> import nbaccel.nn.functional as F
>>> F.interpolate(nb.arange(4.0).reshape(1, 1, 2, 2), scale_factor=2).shape
(1, 1, 4, 4)
"""
from __future__ import annotations

import math

import numpy as np

from .. import autograd, ops
from ..ops.fronts import as_tensor
from ..ops.nn import ShapeError, keep_mask
from ..ops.normalization import batch_norm_stats as _batch_norm_stats
from ..ops.normalization import batch_norm_train as _batch_norm_train
from ..ops.activations import hardtanh as _hardtanh_op
from ..ops.pooling import pad_constant

hardtanh = _hardtanh_op.front


def _channel_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


# ---- normalisation --------------------------------------------------------------------------------

def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """PyTorch's ``F.batch_norm`` over channel axis 1 of (N, C, *) input. In training mode the
    batch statistics normalise (biased variance) and the running statistics, when given, move
    by ``momentum`` towards them in place (unbiased variance); otherwise the running
    statistics normalise."""
    x = as_tensor(input)
    if x.ndim < 2:
        raise ShapeError(f"batch_norm: expected an input with at least 2 dims (N, C, ...), got "
                         f"{tuple(x.shape)}")
    c, shape = x.shape[1], _channel_shape(x)
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise ShapeError(f"batch_norm: {name} of shape {tuple(t.shape)}, expected ({c},) "
                             f"for input {tuple(x.shape)}")
    if training:
        count = x.numel() // c if c else 0
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {list(x.shape)}")
        # eagerly and traced alike: a compiled step keeps these ops whole and runs their fused
        # kernels as extern steps, as the eager step does (ops/normalization.py)
        return _batch_norm_training(x, running_mean, running_var, weight, bias, momentum, eps,
                                    count)
    if running_mean is None or running_var is None:
        raise ValueError("batch_norm: running_mean and running_var are needed when not "
                         "training")
    # eval: per-channel tensors are reshaped to (1, C, 1, ..) before any arithmetic: a compiled
    # graph then reads them as views of its inputs, and everything after the input (or a
    # convolution) is one pointwise kernel
    y = (x - running_mean.reshape(shape)) / ops.sqrt(running_var.reshape(shape) + eps)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def _batch_norm_training(x, running_mean, running_var, weight, bias, momentum, eps, count):
    """Training-mode BatchNorm as two ops: the running statistics' update (one pass for the
    statistics) and the normalisation with its affine (one pass per channel forward and one
    backward, ops/normalization.py)."""
    if running_mean is not None or running_var is not None:
        with autograd.no_grad():
            stats = _batch_norm_stats.front(x.detach())
            if running_mean is not None:
                running_mean.copy_(running_mean * (1 - momentum) + stats[0] * momentum)
            if running_var is not None:
                unbiased = stats[1] * (count / (count - 1))
                running_var.copy_(running_var * (1 - momentum) + unbiased * momentum)
    wb = tuple(as_tensor(t) for t in (weight, bias) if t is not None)
    return _batch_norm_train.front(x, *wb, eps=eps, affine=(weight is not None, bias is not None))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """PyTorch's ``F.group_norm``: normalise each of ``num_groups`` channel groups of each
    sample over its channels and positions, then the per-channel affine."""
    x = as_tensor(input)
    if x.ndim < 2:
        raise ShapeError(f"group_norm: expected an input with at least 2 dims, got {tuple(x.shape)}")
    n, c = x.shape[0], x.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise ValueError(f"group_norm: {c} channels are not divisible into {num_groups} groups")
    grouped = x.reshape((n, num_groups, -1))
    xc = grouped - grouped.mean(axis=-1, keepdims=True)
    y = (xc / ops.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)).reshape(tuple(x.shape))
    shape = _channel_shape(x)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


# ---- adaptive pooling and interpolation: separable matrices --------------------------------------

def _adaptive_matrix(n_in, n_out, dtype):
    """(n_out, n_in): row i averages input [floor(i*n/m), ceil((i+1)*n/m)), as PyTorch's bins."""
    m = np.zeros((n_out, n_in), dtype)
    for i in range(n_out):
        lo, hi = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


def _apply_separable(x, rows, cols):
    """rows @ x @ cols.T over the last two axes (either matrix None: that axis unchanged)."""
    return _apply_axes(x, [rows, cols])


def _apply_axes(x, mats):
    """Each (n_out, n_in) matrix of ``mats`` applied along its axis of the last len(mats)
    axes (None: that axis unchanged): the last axis x @ M.T, an earlier one M @ x with the
    axes after it flattened."""
    dt = x.dtype.np
    for k, m in zip(range(len(mats), 0, -1), mats):
        if m is None:
            continue
        if k == 1:
            x = x @ as_tensor(np.ascontiguousarray(np.asarray(m).T, dtype=dt)).to(x.device)
            continue
        shape = tuple(x.shape)
        a = len(shape) - k
        flat = x.reshape(shape[:a + 1] + (math.prod(shape[a + 1:]),))
        x = (as_tensor(np.asarray(m, dtype=dt)).to(x.device) @ flat).reshape(
            shape[:a] + (m.shape[0],) + shape[a + 1:])
    return x


def _size_pair(v, what):
    if isinstance(v, int) or v is None:
        return (v, v)
    v = tuple(v)
    if len(v) != 2:
        raise ValueError(f"{what}: output_size must be an int or a pair, got {v}")
    return v


def adaptive_avg_pool2d(input, output_size):
    """PyTorch's ``F.adaptive_avg_pool2d``: (N, C, H, W) or (C, H, W) averaged into
    ``output_size`` bins (None keeps that dim). (1, 1) is a mean; other sizes two small
    averaging matmuls."""
    x = as_tensor(input)
    if x.ndim not in (3, 4):
        raise ShapeError(f"adaptive_avg_pool2d: expected a 3-D or 4-D input, got {tuple(x.shape)}")
    if x.dtype.kind != "f":
        raise RuntimeError(f"adaptive_avg_pool2d: needs a floating point input, got {x.dtype}")
    h, w = x.shape[-2], x.shape[-1]
    oh, ow = _size_pair(output_size, "adaptive_avg_pool2d")
    oh, ow = h if oh is None else int(oh), w if ow is None else int(ow)
    if (oh, ow) == (1, 1):
        return x.mean(axis=(-2, -1), keepdims=True)
    rows = None if oh == h else _adaptive_matrix(h, oh, np.float64)
    cols = None if ow == w else _adaptive_matrix(w, ow, np.float64)
    return _apply_separable(x, rows, cols)


def adaptive_avg_pool1d(input, output_size):
    """PyTorch's ``F.adaptive_avg_pool1d`` on (N, C, L) or (C, L)."""
    x = as_tensor(input)
    o = int(output_size if isinstance(output_size, int) else tuple(output_size)[0])
    return _apply_separable(x, None, _adaptive_matrix(x.shape[-1], o, np.float64))


def adaptive_avg_pool3d(input, output_size):
    """PyTorch's ``F.adaptive_avg_pool3d`` on (N, C, D, H, W) or (C, D, H, W): three small
    averaging matmuls (None keeps that dim)."""
    x = as_tensor(input)
    if x.ndim not in (4, 5):
        raise ShapeError(f"adaptive_avg_pool3d: expected a 4-D or 5-D input, got {tuple(x.shape)}")
    if x.dtype.kind != "f":
        raise RuntimeError(f"adaptive_avg_pool3d: needs a floating point input, got {x.dtype}")
    size = (output_size,) * 3 if isinstance(output_size, int) or output_size is None \
        else tuple(output_size)
    if len(size) != 3:
        raise ValueError(f"adaptive_avg_pool3d: output_size must be an int or a triple, got {size}")
    n_in = tuple(x.shape[-3:])
    out = tuple(n if o is None else int(o) for n, o in zip(n_in, size))
    if out == (1, 1, 1):
        return x.mean(axis=(-3, -2, -1), keepdims=True)
    return _apply_axes(x, [None if o == n else _adaptive_matrix(n, o, np.float64)
                           for n, o in zip(n_in, out)])


_ADAPTIVE = {1: adaptive_avg_pool1d, 2: adaptive_avg_pool2d, 3: adaptive_avg_pool3d}


def _cubic_matrix(n_in, n_out, align_corners, scale):
    """(n_out, n_in) weights of PyTorch's bicubic: Keys' cubic convolution with A = -0.75 at
    the four inputs around each source position (not clamped to 0 when align_corners is
    False), the reads clamped to the border."""
    a = -0.75
    dst = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = dst * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
    else:
        src = (dst + 0.5) * (1.0 / scale if scale else n_in / n_out) - 0.5
    i0 = np.floor(src)
    t = src - i0
    near = lambda v: ((a + 2) * v - (a + 3)) * v * v + 1           # noqa: E731  |v| <= 1
    far = lambda v: ((a * v - 5 * a) * v + 8 * a) * v - 4 * a      # noqa: E731  1 < |v| < 2
    m = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    for k, wk in enumerate((far(t + 1), near(t), near(1 - t), far(2 - t))):
        np.add.at(m, (rows, np.clip(i0.astype(np.int64) - 1 + k, 0, n_in - 1)), wk)
    return m


def _interp_matrix(n_in, n_out, mode, align_corners, scale):
    """(n_out, n_in) weights of PyTorch's index arithmetic for one axis. ``scale`` is the
    user's scale factor (PyTorch then maps with 1/scale_factor), or None (n_in/n_out)."""
    m = np.zeros((n_out, n_in))
    dst = np.arange(n_out, dtype=np.float64)
    if mode in ("nearest", "nearest-exact"):
        ratio = 1.0 / scale if scale else n_in / n_out
        src = np.floor(dst * ratio) if mode == "nearest" else np.floor((dst + 0.5) * ratio)
        m[np.arange(n_out), np.minimum(src.astype(np.int64), n_in - 1)] = 1.0
        return m
    if align_corners:
        src = dst * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
    else:
        ratio = 1.0 / scale if scale else n_in / n_out
        src = np.maximum((dst + 0.5) * ratio - 0.5, 0.0)
    lo = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    hi = np.minimum(lo + 1, n_in - 1)
    frac = src - lo
    np.add.at(m, (np.arange(n_out), lo), 1.0 - frac)
    np.add.at(m, (np.arange(n_out), hi), frac)
    return m


def _antialias_filter(mode, v):
    """The kernels PyTorch's antialias path widens: the triangle for bilinear, Keys' cubic
    with A = -0.5 (not plain bicubic's -0.75) for bicubic."""
    v = np.abs(v)
    if mode == "bilinear":
        return np.maximum(0.0, 1.0 - v)
    a = -0.5
    return np.where(v < 1, ((a + 2) * v - (a + 3)) * v * v + 1,
                    np.where(v < 2, (((v - 5) * v + 8) * v - 4) * a, 0.0))


def _antialias_matrix(n_in, n_out, mode, align_corners, scale):
    """(n_out, n_in) weights of PyTorch's antialiased resampling along one axis: when
    downsampling by s = n_in / n_out (or 1 / scale_factor) the filter is stretched by s, its
    support (1 for the triangle, 2 for the cubic) likewise; output i reads the inputs whose
    centres lie within the support of s * (i + 0.5), and its weights are normalised to sum 1
    (which also handles the borders: no clamped reads)."""
    half = 1.0 if mode == "bilinear" else 2.0
    if align_corners:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        s = 1.0 / scale if scale else n_in / n_out
    support, stretch = (half * s, 1.0 / s) if s >= 1.0 else (half, 1.0)
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        centre = s * (i + 0.5)
        # int() truncates, as the C++ index arithmetic; the clamps make it a floor
        lo = max(int(centre - support + 0.5), 0)
        hi = min(int(centre + support + 0.5), n_in)
        w = _antialias_filter(mode, (np.arange(lo, hi) - centre + 0.5) * stretch)
        total = w.sum()
        m[i, lo:hi] = w / total if total else w
    return m


_MODES = {"nearest": 0, "nearest-exact": 0, "area": 0, "linear": 1, "bilinear": 2,
          "bicubic": 2, "trilinear": 3}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """PyTorch's ``F.interpolate`` for modes 'nearest', 'nearest-exact' and 'area' (3-D, 4-D
    or 5-D input), 'linear' (3-D), 'bilinear' and 'bicubic' (4-D) and 'trilinear' (5-D),
    with ``size`` or ``scale_factor`` and ``align_corners``; ``antialias=True`` for
    'bilinear' and 'bicubic' (PyTorch's filter widened by the downsampling factor). Each axis
    is a small resampling matmul ('area' is ``adaptive_avg_pool``), so gradients and
    compiling come from matmul."""
    x = as_tensor(input)
    if mode not in _MODES:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported (nbaccel has "
                                  f"{', '.join(map(repr, _MODES))})")
    if antialias and not (mode in ("bilinear", "bicubic") and x.ndim == 4):
        raise ValueError("Anti-alias option is restricted to bilinear and bicubic modes and "
                         "requires a 4-D tensor as input")
    spatial = x.ndim - 2
    if spatial not in (1, 2, 3) or (_MODES[mode] and _MODES[mode] != spatial):
        raise ShapeError(f"interpolate: mode {mode!r} does not take a {x.ndim}-D input "
                         f"(linear: 3-D, bilinear / bicubic: 4-D, trilinear: 5-D, nearest and "
                         f"area: 3-D to 5-D)")
    if _MODES[mode] == 0 and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    if x.dtype.kind != "f":
        raise RuntimeError(f"interpolate: needs a floating point input, got {x.dtype}")
    n_in = tuple(x.shape[2:])
    if size is not None:
        out = (size,) * spatial if isinstance(size, int) else tuple(int(s) for s in size)
        scales = (None,) * spatial
    else:
        scales = (scale_factor,) * spatial if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
        out = tuple(int(math.floor(n * float(s))) for n, s in zip(n_in, scales))
        if recompute_scale_factor:
            scales = (None,) * spatial
        scales = tuple(None if s is None else float(s) for s in scales)
    if len(out) != spatial or min(out) < 1:
        raise ValueError(f"interpolate: output size {out} does not fit a {x.ndim}-D input")
    if mode == "area":
        return _ADAPTIVE[spatial](x, out if spatial > 1 else out[0])
    if antialias:
        make = lambda n, o, ac, s: _antialias_matrix(n, o, mode, ac, s)  # noqa: E731
    elif mode == "bicubic":
        make = _cubic_matrix
    else:
        make = lambda n, o, ac, s: _interp_matrix(n, o, mode, ac, s)  # noqa: E731
    return _apply_axes(x, [make(n, o, bool(align_corners), s) for n, o, s in zip(n_in, out, scales)])


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """The old spelling of :func:`interpolate`."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """PyTorch's deprecated ``F.upsample_nearest``: interpolate(mode='nearest')."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """PyTorch's deprecated ``F.upsample_bilinear``: bilinear with align_corners=True."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---- padding, activations, dropout ----------------------------------------------------------------

def _pad_indices(n, lo, hi, mode):
    idx = np.arange(-lo, n + hi)
    if mode == "replicate":
        return np.clip(idx, 0, n - 1)
    if mode == "circular":
        return idx % n
    period = 2 * (n - 1)                     # reflect: mirror without repeating the edge
    idx = np.abs(idx) % period if period else np.zeros_like(idx)
    return np.where(idx >= n, period - idx, idx)


def pad(input, pad, mode="constant", value=None):
    """PyTorch's ``F.pad``: ``pad`` lists (left, right) pairs from the last axis backwards;
    negative amounts crop. Modes 'constant' (``value``, default 0), 'reflect', 'replicate'
    and 'circular'."""
    x = as_tensor(input)
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"pad: padding length must be even and at most 2 * {x.ndim}, got {len(pad)}")
    pairs = [(pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)][::-1]   # axis order
    first = x.ndim - len(pairs)
    crops = tuple(slice(max(0, -lo), x.shape[first + a] - max(0, -hi)) for a, (lo, hi) in enumerate(pairs))
    if any(lo < 0 or hi < 0 for lo, hi in pairs):
        x = x[(slice(None),) * first + crops]
        pairs = [(max(0, lo), max(0, hi)) for lo, hi in pairs]
    if mode == "constant":
        return pad_constant(x, pairs, 0.0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: mode {mode!r} is not supported")
    for a, (lo, hi) in enumerate(pairs, start=first):
        if not (lo or hi):
            continue
        n = x.shape[a]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise ValueError(f"pad: reflect padding ({lo}, {hi}) must be smaller than the "
                             f"input dimension {n}")
        if mode == "circular" and (lo > n or hi > n):
            raise ValueError(f"pad: circular padding ({lo}, {hi}) is larger than the dimension {n}")
        x = x[(slice(None),) * a + (_pad_indices(n, lo, hi, mode),)]
    return x


def relu6(input, inplace=False):
    """min(max(x, 0), 6): hardtanh(x, 0, 6)."""
    return _hardtanh_op.front(input, 0.0, 6.0, inplace)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels with probability p (and scale the rest by 1/(1-p)): (N, C, H, W),
    or (C, H, W) as one unbatched sample."""
    x = as_tensor(input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    if x.ndim not in (3, 4):
        raise ShapeError(f"dropout2d: expected a 3-D or 4-D input, got {tuple(x.shape)}")
    lead = 2 if x.ndim == 4 else 1
    mask = keep_mask(tuple(x.shape[:lead]) + (1,) * (x.ndim - lead), p, x.device)
    out = ops.where(mask, x * (0.0 if p == 1.0 else 1.0 / (1.0 - p)), 0).astype(x.dtype)
    return x._assign(out) if inplace else out
