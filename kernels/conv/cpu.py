"""The CPU convolution: im2col (a strided NumPy copy) + one BLAS GEMM per group and batch
chunk, or direct numba loops when each output sums over few inputs (depthwise: C // groups *
KH * KW small), or, at stride 1 with enough channels, shifted GEMMs with no im2col at all
(shifted.py).

* forward:  cols = im2col(x) (N, C*KH*KW, OH*OW); y[:, group] = w_group @ cols[:, group rows]
* input gradient (the transposed convolution): cols = w_group^T @ gy; gx = col2im(cols)
* weight gradient: gw_group = sum over images of gy[n, group] @ cols[n, group rows]^T

A 1x1 convolution with stride 1 and no padding needs no im2col: the input already is the
column matrix. The column buffer is built for chunks of the batch so that it stays under
``COLS_BYTES``. Inputs are float32 or float64 (the op computes other floats in float32).

>>> import numpy as np
>>> x = np.ones((1, 1, 3, 3), np.float32); w = np.ones((1, 1, 2, 2), np.float32)
>>> conv2d_forward(x, w, (1, 1), ((0, 0), (0, 0)), (1, 1), 1)[0, 0]
array([[4., 4.],
       [4., 4.]], dtype=float32)
"""
from __future__ import annotations

import math

import numpy as np

from .. import _tasks
from . import _loops, shifted
from .geometry import Conv2dGeometry

COLS_BYTES = 64 << 20      # the im2col buffer of one batch chunk stays under this
# C//groups * KH * KW below this, in a grouped convolution (depthwise): direct loops beat a
# GEMM per group. Not with one group: im2col and one batched GEMM ran 5-18x faster than the
# loops on 1-3 input channels (64x1x8x8 -> 16: 0.09 against 0.68 ms forward; 64x1x28x28 -> 16:
# 0.33 against 6.2 ms), where depthwise backward passes stay 1.5-3x faster as loops
DIRECT_BELOW = 32
SHIFTED_FROM = 16          # C//groups from this, stride 1: shifted GEMMs beat im2col (shifted.py)
# ... and output planes of at least this many pixels (the forward and the weight gradient; the
# input gradient takes them at any size, see _shifted). Measured in one thread's CPU time,
# batch 64, 16 -> 32 channels: im2col's forward and weight gradient cost less up to about 18x18
# (14x14: 1.9 against 2.5 ms and 3.0 against 3.7), shifted GEMMs from about 20x20 (28x28, 32
# channels: 16 against 24 ms forward; 56x56, 64 -> 64: 22 against 32). At 14x14 the shifted
# GEMMs stay: their blocks split over the kernels' threads, im2col's GEMMs run on one
# (OpenBLAS's count, see _openblas), so on two free cores they finish first
SHIFTED_MIN_PIXELS = 150
# the direct loops split over the kernels' threads from this many multiply-adds (below it,
# handing work to a thread costs more than the loop: 0.6 ms for notebook 11's first convolution)
DIRECT_SPLIT_FROM = 4_000_000


def _check_dtypes(*arrays):
    dt = arrays[0].dtype
    if dt not in (np.float32, np.float64) or any(a.dtype != dt for a in arrays):
        raise TypeError("conv kernels take float32 or float64 arrays of one dtype, got "
                        + ", ".join(str(a.dtype) for a in arrays))
    return dt


def _direct(g):
    return g.groups > 1 and g.cg * g.kh * g.kw < DIRECT_BELOW


def _shifted(g, input_gradient=False):
    # (the input gradient takes shifted GEMMs at any plane size: im2col's col2im adds nine
    # strided taps, slower than the GEMMs on small planes too: 64x16x4x4 -> 32, one thread,
    # 0.55 against 0.72 ms; 8x8: 1.24 against 1.55)
    return (shifted.applies(g) and g.cg >= SHIFTED_FROM and not _pointwise(g)
            and (input_gradient or g.oh * g.ow >= SHIFTED_MIN_PIXELS))


def _pointwise(g):
    """A 1x1, stride 1, unpadded convolution: x itself is the column matrix."""
    return (g.kh, g.kw, g.sh, g.sw, g.pt, g.pb, g.pl, g.pr) == (1, 1, 1, 1, 0, 0, 0, 0)


def _loop_args(g):
    return (g.sh, g.sw, g.pt, g.pl, g.dh, g.dw)


def _direct_run(kernel, g, x, w, y, per_image=True):
    """``kernel(x, w, y, ...)`` over the images, split over the kernels' threads when large.
    ``per_image``: y has one plane per image (forward, input gradient); otherwise y is the
    weight gradient, a sum over the images: each share sums its own images into a buffer."""
    args = (g.cg, g.og) + _loop_args(g)
    parts = 1
    if g.n >= 2 and g.n * g.o * g.oh * g.ow * g.cg * g.kh * g.kw >= DIRECT_SPLIT_FROM:
        parts = min(_tasks.num_threads(), g.n)
    if parts == 1:
        kernel(x, w, y, *args)
        return y
    bounds = [g.n * i // parts for i in range(parts + 1)]
    sums = [y] + [np.empty_like(y) for _ in range(parts - 1)] if not per_image else None

    def share(i, state):
        lo, hi = bounds[i], bounds[i + 1]
        if per_image:
            kernel(x[lo:hi], w, y[lo:hi], *args)
        else:
            kernel(x[lo:hi], w[lo:hi], sums[i], *args)
    _tasks.run_tasks(range(parts), share, parts)
    if not per_image:
        for part in sums[1:]:
            y += part
    return y


def _chunks(g, itemsize):
    per_image = g.c * g.kh * g.kw * g.oh * g.ow * itemsize
    step = max(1, min(g.n, COLS_BYTES // max(per_image, 1)))
    return [(n0, min(g.n, n0 + step)) for n0 in range(0, g.n, step)]


def _columns(x, g, n0, n1, buf):
    """im2col of images n0:n1 into (a view of) ``buf``: one strided NumPy copy from the
    windows of the padded input (measured here 5x less CPU time than a numba loop nest)."""
    if _pointwise(g):
        return x[n0:n1].reshape(n1 - n0, g.c, g.oh * g.ow)
    cols = buf[:n1 - n0]
    np.copyto(cols.reshape(n1 - n0, g.c, g.kh, g.kw, g.oh, g.ow), _windows(_padded(x[n0:n1], g), g))
    return cols


def _padded(x, g):
    if not (g.pt or g.pb or g.pl or g.pr):
        return x
    # (zeros and one copy: np.pad's Python took 0.1 ms a call, 10 ms of notebook 11's epoch)
    xp = np.zeros(x.shape[:2] + (x.shape[2] + g.pt + g.pb, x.shape[3] + g.pl + g.pr), x.dtype)
    xp[:, :, g.pt:g.pt + x.shape[2], g.pl:g.pl + x.shape[3]] = x
    return xp


def _windows(xp, g):
    """(n, C, KH, KW, OH, OW) strided view: [.., i, j, r, q] = xp[.., r*sh + i*dh, q*sw + j*dw]."""
    sn, sc, s_h, s_w = xp.strides
    return np.lib.stride_tricks.as_strided(
        xp, (xp.shape[0], g.c, g.kh, g.kw, g.oh, g.ow),
        (sn, sc, s_h * g.dh, s_w * g.dw, s_h * g.sh, s_w * g.sw), writeable=False)


def _col2im(cols, gx, g):
    """gx += the adjoint of im2col: each kernel tap's columns added into a strided slice of
    the padded gradient (one tap's slice never overlaps itself)."""
    n = cols.shape[0]
    hp, wp = g.h + g.pt + g.pb, g.w + g.pl + g.pr
    padded = (g.pt or g.pb or g.pl or g.pr)
    gxp = np.zeros((n, g.c, hp, wp), gx.dtype) if padded else gx
    taps = cols.reshape(n, g.c, g.kh, g.kw, g.oh, g.ow)
    for i in range(g.kh):
        for j in range(g.kw):
            rows = slice(i * g.dh, i * g.dh + g.sh * (g.oh - 1) + 1, g.sh)
            cs = slice(j * g.dw, j * g.dw + g.sw * (g.ow - 1) + 1, g.sw)
            gxp[:, :, rows, cs] += taps[:, :, i, j]
    if padded:
        gx += gxp[:, :, g.pt:g.pt + g.h, g.pl:g.pl + g.w]


def _buffer(g, chunks, dtype):
    if _pointwise(g):
        return None
    rows = max(n1 - n0 for n0, n1 in chunks)
    return np.empty((rows, g.c * g.kh * g.kw, g.oh * g.ow), dtype)


def _group_rows(g, k):
    kk = g.cg * g.kh * g.kw
    return slice(k * kk, (k + 1) * kk), slice(k * g.og, (k + 1) * g.og)


def conv2d_forward(x, w, stride, padding, dilation, groups, out=None):
    """y = conv2d(x, w) (N, O, OH, OW); see :mod:`.geometry` for the arguments."""
    g = Conv2dGeometry(x.shape, w.shape, stride, padding, dilation, groups)
    dt = _check_dtypes(x, w)
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
    y = np.empty(g.out_shape, dt) if out is None else out
    if y.size == 0:
        return y
    if x.size == 0 or w.size == 0:
        y[...] = 0
        return y
    if _direct(g):
        return _direct_run(_loops.direct_forward, g, x, w, y)
    if _shifted(g):
        return shifted.forward(x, w, g, y)
    w2 = w.reshape(g.o, -1)
    chunks = _chunks(g, x.itemsize)
    buf = _buffer(g, chunks, dt)
    for n0, n1 in chunks:
        cols = _columns(x, g, n0, n1, buf)
        y3 = y[n0:n1].reshape(n1 - n0, g.o, g.oh * g.ow)
        for k in range(g.groups):
            rows, outs = _group_rows(g, k)
            np.matmul(w2[outs], cols[:, rows], out=y3[:, outs])
    return y


def conv2d_backward_input(gy, w, input_hw, stride, padding, dilation, groups):
    """dL/dx of conv2d_forward for an input of spatial size ``input_hw`` (also the transposed
    convolution of ``gy`` with ``w``)."""
    n, c = gy.shape[0], w.shape[1] * groups
    g = Conv2dGeometry((n, c) + tuple(input_hw), w.shape, stride, padding, dilation, groups)
    if tuple(gy.shape) != g.out_shape:
        raise ValueError(f"conv2d_backward_input: gradient of shape {tuple(gy.shape)}, the "
                         f"convolution's output is {g.out_shape}")
    dt = _check_dtypes(gy, w)
    gy, w = np.ascontiguousarray(gy), np.ascontiguousarray(w)
    gx = np.zeros(g.x_shape, dt)
    if gx.size == 0 or gy.size == 0 or w.size == 0:
        return gx
    if _direct(g):
        return _direct_run(_loops.direct_backward_input, g, gy, w, gx)
    if _shifted(g, input_gradient=True) and shifted.backward_input(gy, w, g, gx):
        return gx
    w2 = w.reshape(g.o, -1)
    chunks = _chunks(g, gy.itemsize)
    cols = _buffer(g, chunks, dt)
    for n0, n1 in chunks:
        gy3 = gy[n0:n1].reshape(n1 - n0, g.o, g.oh * g.ow)
        target = gx[n0:n1].reshape(n1 - n0, g.c, g.oh * g.ow) if _pointwise(g) else cols[:n1 - n0]
        for k in range(g.groups):
            rows, outs = _group_rows(g, k)
            np.matmul(w2[outs].T, gy3[:, outs], out=target[:, rows])
        if not _pointwise(g):
            _col2im(target, gx[n0:n1], g)
    return gx


def conv2d_backward_weight(x, gy, kernel_hw, stride, padding, dilation, groups):
    """dL/dw of conv2d_forward for a kernel of spatial size ``kernel_hw``."""
    o = gy.shape[1]
    g = Conv2dGeometry(x.shape, (o, x.shape[1] // max(groups, 1)) + tuple(kernel_hw), stride,
                       padding, dilation, groups)
    if tuple(gy.shape) != g.out_shape:
        raise ValueError(f"conv2d_backward_weight: gradient of shape {tuple(gy.shape)}, the "
                         f"convolution's output is {g.out_shape}")
    dt = _check_dtypes(x, gy)
    x, gy = np.ascontiguousarray(x), np.ascontiguousarray(gy)
    gw = np.zeros(g.w_shape, dt)
    if gw.size == 0 or gy.size == 0 or x.size == 0:
        return gw
    if _direct(g):
        # (the weight gradient's "w" argument is gy: both inputs are split by images)
        return _direct_run(_loops.direct_backward_weight, g, x, gy, gw, per_image=False)
    if _shifted(g) and math.isfinite(x.sum()):
        # (shifted.py's GEMMs multiply zeros of gy by inputs outside the windows: an inf or NaN
        # there would add NaN where im2col's sum has none; a finite sum means none is there)
        return shifted.backward_weight(x, gy, g, gw)
    gw2 = gw.reshape(g.o, -1)
    for n0, n1 in _chunks(g, x.itemsize):
        cols = _columns_by_tap(x, g, n0, n1)
        gy3 = gy[n0:n1].reshape(n1 - n0, g.o, g.oh * g.ow)
        for k in range(g.groups):
            rows, outs = _group_rows(g, k)
            # one GEMM over the chunk's images, (O_g, n*P) @ (n*P, K_g): a GEMM and an add
            # per image from Python was most of notebook 11's weight gradients
            g2 = gy3[:, outs].transpose(1, 0, 2).reshape(g.og, -1)
            gw2[outs] += g2 @ cols[rows].T
    return gw


def _columns_by_tap(x, g, n0, n1):
    """im2col of images n0:n1 laid out (C*KH*KW, n*OH*OW): the images inside each row, so the
    weight gradient is one GEMM; one strided copy from the padded input's windows (64x16x4x4:
    0.41 ms for the weight gradient, against 0.98 with im2col's layout copied again)."""
    n = n1 - n0
    cols = np.empty((g.c, g.kh, g.kw, n, g.oh, g.ow), x.dtype)
    np.copyto(cols, _windows(_padded(x[n0:n1], g), g).transpose(1, 2, 3, 0, 4, 5))
    return cols.reshape(g.c * g.kh * g.kw, n * g.oh * g.ow)
