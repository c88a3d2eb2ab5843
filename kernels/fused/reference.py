"""The NumPy versions of the fused kernels: the same signatures as :mod:`.cpu` (outputs are
written into the arrays passed in), several array passes each. The oracle of the tests."""
from __future__ import annotations

import math

import numpy as np

INV_SQRT2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def gelu_forward(x, out):
    """The exact erf form (the float32 kernel fits erfc instead: within 3e-7 of this)."""
    v = x.astype(np.float64)
    out[...] = 0.5 * v * (1 + _erf(v * INV_SQRT2))


def gelu_backward(g, x, out):
    v = x.astype(np.float64)
    d = 0.5 * (1 + _erf(v * INV_SQRT2)) + v * np.exp(-0.5 * v * v) * INV_SQRT_2PI
    out[...] = g * d


def _softmax_rows(x, log):
    """softmax (``log``: log_softmax) of each row in float64 (no kernel of its own: NumPy's
    SIMD exp beats a row kernel, see nbaccel/ops/nn.py)."""
    v = x.astype(np.float64)
    m = v.max(axis=1, keepdims=True)
    m = np.where(m == -np.inf, 0, m)     # an all -inf row gives NaN, +inf NaN too (as NumPy)
    s = v - m
    lse = np.log(np.exp(s).sum(axis=1, keepdims=True))
    return s - lse if log else np.exp(s - lse)


def softmax_backward(g, y, out, log):
    g64, y64 = g.astype(np.float64), y.astype(np.float64)
    if log:
        out[...] = g64 - np.exp(y64) * g64.sum(axis=1, keepdims=True)
    else:
        out[...] = y64 * (g64 - (g64 * y64).sum(axis=1, keepdims=True))


def layer_norm_forward(x, w, b, has_w, has_b, eps, out):
    v = x.astype(np.float64)
    xc = v - v.mean(axis=1, keepdims=True)
    y = xc / np.sqrt((xc * xc).mean(axis=1, keepdims=True) + eps)
    if has_w:
        y = y * w
    if has_b:
        y = y + b
    out[...] = y


def _xhat(x, eps):
    v = x.astype(np.float64)
    xc = v - v.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt((xc * xc).mean(axis=1, keepdims=True) + eps)
    return xc * rstd, rstd


def layer_norm_backward(g, x, w, has_w, eps, out):
    xhat, rstd = _xhat(x, eps)
    gh = g.astype(np.float64) * (w if has_w else 1)
    out[...] = rstd * (gh - gh.mean(axis=1, keepdims=True)
                       - xhat * (gh * xhat).mean(axis=1, keepdims=True))


def layer_norm_affine_backward(g, x, eps, out):
    """out[0] = sum over rows of g * xhat (the weight's gradient), out[1] = sum of g (the bias')."""
    xhat, _ = _xhat(x, eps)
    out[0] = (g * xhat).sum(axis=0)
    out[1] = g.astype(np.float64).sum(axis=0)


def cross_entropy_forward(x, t, ignore_index, loss):
    """Per-row loss of class-index targets (0 for an ignored row); returns the valid count."""
    v = x.astype(np.float64)
    valid = t != ignore_index
    m = v.max(axis=1, keepdims=True)
    m = np.where(m == -np.inf, 0, m)     # an all -inf row gives NaN, +inf NaN too (as NumPy)
    lse = (np.log(np.exp(v - m).sum(axis=1, keepdims=True)) + m)[:, 0]
    tt = np.where(valid, t, 0)
    picked = v[np.arange(len(t)), tt]
    loss[...] = np.where(valid, lse - picked, 0)
    return int(valid.sum())


def cross_entropy_backward(x, t, ignore_index, scale, out):
    """out = (softmax(x) - onehot(t)) * scale[row], zero on ignored rows."""
    v = x.astype(np.float64)
    valid = t != ignore_index
    sm = _softmax_rows(v, False)
    onehot = np.zeros_like(v)
    rows = np.arange(len(t))
    onehot[rows[valid], t[valid]] = 1
    out[...] = (sm - onehot) * (scale * valid)[:, None]


def batch_norm_stats(x, out):
    v = x.astype(np.float64)
    out[0] = v.mean(axis=(0, 2))
    out[1] = v.var(axis=(0, 2))


def _bn_xhat(x, eps):
    v = x.astype(np.float64)
    mean = v.mean(axis=(0, 2), keepdims=True)
    rstd = 1 / np.sqrt(v.var(axis=(0, 2), keepdims=True) + eps)
    return (v - mean) * rstd, rstd


def batch_norm_forward(x, w, b, has_w, has_b, eps, out):
    y, _ = _bn_xhat(x, eps)
    if has_w:
        y = y * w[None, :, None]
    if has_b:
        y = y + b[None, :, None]
    out[...] = y


def batch_norm_backward(g, x, w, has_w, eps, out):
    xhat, rstd = _bn_xhat(x, eps)
    gh = g.astype(np.float64) * (w[None, :, None] if has_w else 1)
    out[...] = rstd * (gh - gh.mean(axis=(0, 2), keepdims=True)
                       - xhat * (gh * xhat).mean(axis=(0, 2), keepdims=True))


def batch_norm_affine_backward(g, x, eps, out):
    xhat, _ = _bn_xhat(x, eps)
    out[0] = (g * xhat).sum(axis=(0, 2))
    out[1] = g.astype(np.float64).sum(axis=(0, 2))


def embedding_backward(g, idx, out):
    np.add.at(out, idx, g)


def adam_update(p, g, m, v, sc, decay, decoupled, maximize):
    """One Adam(W) step of one parameter, in place on p, m, v (amsgrad is not fused), each
    operation in the parameter's dtype. ``sc`` holds, in that dtype: weight_decay, beta1,
    1 - beta1, beta2, 1 - beta2, sqrt(1 - beta2**t), eps, lr / (1 - beta1**t), 1 - lr * wd."""
    g = -g if maximize else g
    if decay and decoupled:
        p *= sc[8]
    elif decay:
        g = g + sc[0] * p
    m *= sc[1]
    m += g * sc[2]
    v *= sc[3]
    v += (g * g) * sc[4]
    p -= (sc[7] * m) / (np.sqrt(v) / sc[5] + sc[6])


def max_pool2d_backward(g, x, kh, kw, sh, sw, dh, dw, pt, pl, out):
    """Max pooling's input gradient over (P, H, W) planes, window by window (the spec): each
    g[p, a, b] goes to the first tap holding the window's maximum (np.maximum's, so a NaN
    wins), positions outside x being -inf padding that takes no gradient."""
    planes, h, w = x.shape
    out[...] = 0
    for pln, a, b in np.ndindex(g.shape):
        taps = [(a * sh + i * dh - pt, b * sw + j * dw - pl) for i in range(kh) for j in range(kw)]
        vals = [x[pln, r, q] if 0 <= r < h and 0 <= q < w else -np.inf for r, q in taps]
        top = vals[0]
        for v in vals[1:]:
            top = np.maximum(top, v)
        first = next(k for k, v in enumerate(vals) if v == top or (top != top and v != v))
        r, q = taps[first]
        if 0 <= r < h and 0 <= q < w:
            out[pln, r, q] += g[pln, a, b]
