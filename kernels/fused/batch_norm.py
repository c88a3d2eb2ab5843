"""BatchNorm in training mode as per-channel passes over (N, C, L) arrays: the statistics, the
normalisation with the affine, the input gradient and the affine's gradient, each reading a
channel once or twice (sums in float64). A channel's statistics need every image, so the
threads split the channels, not the rows."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .. import _tasks
from ._launch import _JIT, _worth_splitting


@njit(inline="always")
def _channel_moments(x, c, eps):
    n_img, _, length = x.shape
    s = 0.0
    for n in range(n_img):
        for i in range(length):
            s += np.float64(x[n, c, i])
    mean = s / (n_img * length)
    v = 0.0
    for n in range(n_img):
        for i in range(length):
            d = np.float64(x[n, c, i]) - mean
            v += d * d
    var = v / (n_img * length)
    return mean, var, 1.0 / math.sqrt(var + eps)


# The BatchNorm kernels take (N, C, L) arrays and a channel range [c0, c1): a channel's
# statistics need every image, so the threads split the channels (see _split_channels).

@njit(**_JIT)
def _batch_norm_stats(x, out, c0, c1):
    for c in range(c0, c1):
        mean, var, _ = _channel_moments(x, c, 1.0)
        out[0, c] = mean
        out[1, c] = var


@njit(**_JIT)
def _batch_norm_forward(x, w, b, has_w, has_b, eps, out, c0, c1):
    n_img, _, length = x.shape
    for c in range(c0, c1):
        mean, _, rstd = _channel_moments(x, c, eps)
        scale = rstd * (np.float64(w[c]) if has_w else 1.0)
        shift = (np.float64(b[c]) if has_b else 0.0) - mean * scale
        for n in range(n_img):
            for i in range(length):
                out[n, c, i] = np.float64(x[n, c, i]) * scale + shift


@njit(inline="always")
def _channel_grad_sums(g, x, c, mean):
    """sum(g) and sum(g * (x - mean)) over channel c."""
    n_img, _, length = x.shape
    s1 = 0.0
    s2 = 0.0
    for n in range(n_img):
        for i in range(length):
            gv = np.float64(g[n, c, i])
            s1 += gv
            s2 += gv * (np.float64(x[n, c, i]) - mean)
    return s1, s2


@njit(**_JIT)
def _batch_norm_backward(g, x, w, has_w, eps, out, c0, c1):
    n_img, _, length = x.shape
    count = n_img * length
    for c in range(c0, c1):
        mean, _, rstd = _channel_moments(x, c, eps)
        s1, s2 = _channel_grad_sums(g, x, c, mean)
        k = (np.float64(w[c]) if has_w else 1.0) * rstd
        a = s1 / count
        bb = s2 * rstd * rstd / count
        for n in range(n_img):
            for i in range(length):
                out[n, c, i] = k * (np.float64(g[n, c, i]) - a - (np.float64(x[n, c, i]) - mean) * bb)


@njit(**_JIT)
def _batch_norm_affine_backward(g, x, eps, out, c0, c1):
    for c in range(c0, c1):
        mean, _, rstd = _channel_moments(x, c, eps)
        s1, s2 = _channel_grad_sums(g, x, c, mean)
        out[0, c] = s2 * rstd
        out[1, c] = s1


def _split_channels(kernel, x, *args):
    """``kernel(..., c0, c1)`` over chunks of the channels of (N, C, L) x on the kernels' threads
    (each chunk writes its own channels), inline when the call is small."""
    channels = x.shape[1]
    if channels < 2 or not _worth_splitting(x.size, 1):
        kernel(*args, 0, channels)
        return
    parts = min(_tasks.num_threads(), channels)
    bounds = [channels * i // parts for i in range(parts + 1)]
    _tasks.run_tasks(range(parts), lambda i, state: kernel(*args, bounds[i], bounds[i + 1]), parts)


def batch_norm_stats(x, out):
    """out[0] = the mean, out[1] = the biased variance of each channel of (N, C, L) x."""
    _split_channels(_batch_norm_stats, x, x, out)


def batch_norm_forward(x, w, b, has_w, has_b, eps, out):
    """out = (x - mean_c) * rstd_c (* w_c) (+ b_c) over (N, C, L), batch statistics."""
    _split_channels(_batch_norm_forward, x, x, w, b, has_w, has_b, eps, out)


def batch_norm_backward(g, x, w, has_w, eps, out):
    """out = BatchNorm's (training mode) input gradient over (N, C, L)."""
    _split_channels(_batch_norm_backward, x, g, x, w, has_w, eps, out)


def batch_norm_affine_backward(g, x, eps, out):
    """out[0, c] = sum of g * xhat, out[1, c] = sum of g over channel c of (N, C, L)."""
    _split_channels(_batch_norm_affine_backward, x, g, x, eps, out)


def warm(dt):
    """Compile (or load) the BatchNorm kernels for dtype ``dt``."""
    x3 = np.ones((2, 3, 2), dt)
    o3 = np.empty_like(x3)
    w = np.ones(3, dt)
    _batch_norm_stats(x3, np.empty((2, 3), dt), 0, 3)
    _batch_norm_forward(x3, w, w, True, True, 1e-5, o3, 0, 3)
    _batch_norm_backward(x3, x3, w, True, 1e-5, o3, 0, 3)
    _batch_norm_affine_backward(x3, x3, 1e-5, np.empty((2, 3), dt), 0, 3)
