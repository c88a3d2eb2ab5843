"""The fused kernels in numba: one loop nest per op, reductions in float64, no temporaries.

Row kernels take C-contiguous 2-D ``(rows, n)`` arrays and walk a row at a time (it stays in
cache between its passes); elementwise kernels take flat 1-D arrays. ``cache=True`` keeps the
machine code on disk, ``nogil=True`` lets other Python threads run meanwhile. Each loop is
serial; the public functions split a large call into contiguous chunks of rows (or elements)
run on the kernels' own threads (``_tasks``: the threads of attention and convolution), and
run a small one inline, where a thread handoff would cost more than it saves.

:func:`warm` compiles every kernel for float32 and float64 on tiny arrays (a background
thread of nbaccel does this on first use and keeps the NumPy path meanwhile).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import batch_norm, gelu32, xent32
from ._launch import FASTMATH, _JIT, _split
from .batch_norm import (batch_norm_affine_backward, batch_norm_backward,  # noqa: F401
                         batch_norm_forward, batch_norm_stats)
from .reference import INV_SQRT2, INV_SQRT_2PI

_LOG2E = 1.4426950408889634
_LN2_HI = 0.6931471803691238
_LN2_LO = 1.9082149292705877e-10


@njit(inline="always", fastmath=FASTMATH)
def _exp_nonpositive(x):
    """exp(x) for x <= 0 (a softmax's x - max) in float64 arithmetic that LLVM can vectorise
    (``math.exp`` is a scalar libm call: the softmax kernels ran 3x slower than NumPy's SIMD
    exp with it). 2**n times a degree-11 Taylor polynomial on |r| <= ln2 / 2 (relative error
    below 1e-13); 0 below -708, NaN stays NaN."""
    y = x if x > -708.0 else -708.0
    if x != x:
        y = x
    n = math.floor(y * _LOG2E + 0.5)
    r = (y - n * _LN2_HI) - n * _LN2_LO
    # the last coefficient as a product: r / 39916800 was a real division (no "arcp"), the
    # second of GELU's loop, whose vectorised body the divider bounded
    p = 1.0 + r * (1.0 + r * (0.5 + r * (1 / 6 + r * (1 / 24 + r * (1 / 120 + r * (
        1 / 720 + r * (1 / 5040 + r * (1 / 40320 + r * (1 / 362880 + r * (
            1 / 3628800 + r * (1 / 39916800)))))))))))
    scale = (np.int64(n) + 1023) << 52          # 2**n built in the exponent bits
    e = p * np.int64(scale).view(np.float64)
    return e if x > -708.0 or x != x else 0.0


@njit(**_JIT)
def _gelu_forward(x, out):
    for i in range(x.size):
        v = np.float64(x[i])
        out[i] = 0.5 * v * (1.0 + math.erf(v * INV_SQRT2))


@njit(**_JIT)
def _gelu_backward(g, x, out):
    for i in range(x.size):
        v = np.float64(x[i])
        d = 0.5 * (1.0 + math.erf(v * INV_SQRT2)) + v * math.exp(-0.5 * v * v) * INV_SQRT_2PI
        out[i] = g[i] * d


@njit(inline="always")
def _row_max(x, r, n):
    m = -np.inf
    for c in range(n):
        v = np.float64(x[r, c])
        if v > m or v != v:     # NaN propagates
            m = v
    if m == -np.inf:      # an all -inf row: exp(x - 0) is 0 and the result NaN, as NumPy's
        m = 0.0
    return m


@njit(**_JIT)
def _softmax_backward(g, y, out, log):
    rows, n = g.shape
    for r in range(rows):
        s = 0.0
        if log:
            for c in range(n):
                s += np.float64(g[r, c])
            for c in range(n):
                out[r, c] = np.float64(g[r, c]) - math.exp(np.float64(y[r, c])) * s
        else:
            for c in range(n):
                s += np.float64(g[r, c]) * np.float64(y[r, c])
            for c in range(n):
                out[r, c] = np.float64(y[r, c]) * (np.float64(g[r, c]) - s)


@njit(inline="always")
def _moments(x, r, n, eps):
    mean = 0.0
    for c in range(n):
        mean += np.float64(x[r, c])
    mean /= n
    var = 0.0
    for c in range(n):
        d = np.float64(x[r, c]) - mean
        var += d * d
    return mean, 1.0 / math.sqrt(var / n + eps)


# LayerNorm: the row's moments and sums in float64, the per-element passes in the input's
# dtype. Storing mean and rstd into a scratch array of x's dtype (``st``) and reading them back
# makes them that dtype, so float32 rows run float32 lanes (twice as many per vector, no
# conversions) as PyTorch's kernel does; float64 rows are unchanged. The mean goes in as a head
# and the rest of it, so that x - mean keeps float64's accuracy where the mean is large against
# the spread (x and the head are then close: their difference is exact). That order must hold,
# and "reassoc" would fold head and rest back into one rounded mean: the element passes are
# their own functions without it (fast-math flags are per instruction, so inlining keeps them).
# (1024, 128) float32, one thread: forward 118 -> 41 us, input gradient 165 -> 94 us.

_EXACT = dict(_JIT, fastmath={"contract", "nsz"})


@njit(inline="always")
def _row_stats(x, r, n, eps, st):
    """st[0] + st[1] = the row's mean (head and rest), st[2] = its rstd, in x's dtype."""
    mean, rstd = _moments(x, r, n, eps)
    st[0] = mean
    st[1] = mean - st[0]
    st[2] = rstd


@njit(**_EXACT)
def _ln_row(x, r, st, w, b, has_w, has_b, out):
    m, ml, s = st[0], st[1], st[2]
    for c in range(x.shape[1]):
        y = ((x[r, c] - m) - ml) * s
        if has_w:
            y = y * w[c]
        if has_b:
            y = y + b[c]
        out[r, c] = y


@njit(**_EXACT)
def _xhat_row(x, r, st, xh):
    m, ml, s = st[0], st[1], st[2]
    for c in range(xh.size):
        xh[c] = ((x[r, c] - m) - ml) * s


@njit(**_JIT)
def _layer_norm_forward(x, w, b, has_w, has_b, eps, out):
    rows, n = x.shape
    st = np.empty(3, x.dtype)
    for r in range(rows):
        _row_stats(x, r, n, eps, st)
        _ln_row(x, r, st, w, b, has_w, has_b, out)


@njit(**_JIT)
def _layer_norm_backward(g, x, w, has_w, eps, out):
    rows, n = x.shape
    st = np.empty(5, x.dtype)
    xh = np.empty(n, x.dtype)
    for r in range(rows):
        _row_stats(x, r, n, eps, st)
        _xhat_row(x, r, st, xh)
        s1 = 0.0     # sum of gh
        s2 = 0.0     # sum of gh * xhat
        for c in range(n):
            gh = g[r, c] * w[c] if has_w else g[r, c]
            s1 += np.float64(gh)
            s2 += np.float64(gh * xh[c])
        st[3], st[4] = s1 / n, s2 / n
        s, a, bb = st[2], st[3], st[4]
        for c in range(n):
            gh = g[r, c] * w[c] if has_w else g[r, c]
            out[r, c] = s * (gh - a - xh[c] * bb)


@njit(**_JIT)
def _layer_norm_affine_backward(g, x, eps, out):
    rows, n = x.shape
    acc = np.zeros((2, n))
    st = np.empty(3, x.dtype)
    xh = np.empty(n, x.dtype)
    for r in range(rows):
        _row_stats(x, r, n, eps, st)
        _xhat_row(x, r, st, xh)
        for c in range(n):
            gv = g[r, c]
            acc[0, c] += np.float64(gv * xh[c])
            acc[1, c] += np.float64(gv)
    for c in range(n):
        out[0, c] = acc[0, c]
        out[1, c] = acc[1, c]


@njit(**_JIT)
def _cross_entropy_forward(x, t, ignore_index, loss):
    rows, n = x.shape
    count = 0
    for r in range(rows):
        tr = t[r]
        if tr == ignore_index:
            loss[r] = 0.0
            continue
        count += 1
        m = _row_max(x, r, n)
        s = 0.0
        for c in range(n):
            s += _exp_nonpositive(np.float64(x[r, c]) - m)
        loss[r] = m + math.log(s) - np.float64(x[r, tr])
    return count


@njit(**_JIT)
def _cross_entropy_backward(x, t, ignore_index, scale, out):
    rows, n = x.shape
    for r in range(rows):
        tr = t[r]
        if tr == ignore_index:
            for c in range(n):
                out[r, c] = 0.0
            continue
        k = np.float64(scale[r])
        m = _row_max(x, r, n)
        s = 0.0
        for c in range(n):
            e = _exp_nonpositive(np.float64(x[r, c]) - m)
            out[r, c] = e
            s += e
        inv = k / s
        for c in range(n):
            out[r, c] = np.float64(out[r, c]) * inv
        out[r, tr] = np.float64(out[r, tr]) - k


@njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")   # no fastmath: NumPy's roundings
def _adam_update(p, g, m, v, sc, decay, decoupled, maximize):
    # sc (the parameter's dtype): weight_decay, beta1, 1 - beta1, beta2, 1 - beta2,
    # sqrt(bias correction 2), eps, lr / bias correction 1, 1 - lr * weight_decay
    for i in range(p.size):
        gi = -g[i] if maximize else g[i]
        pi = p[i]
        if decay:
            if decoupled:
                pi = pi * sc[8]
            else:
                gi = gi + sc[0] * pi
        mi = m[i] * sc[1] + gi * sc[2]
        vi = v[i] * sc[3] + (gi * gi) * sc[4]
        m[i] = mi
        v[i] = vi
        p[i] = pi - (sc[7] * mi) / (np.sqrt(vi) / sc[5] + sc[6])


@njit(**_JIT)
def _embedding_backward(g, idx, out):
    rows, dim = g.shape
    for r in range(rows):
        j = idx[r]
        for c in range(dim):
            out[j, c] += g[r, c]


@njit(**_JIT)
def _max_pool2d_backward(g, x, kh, kw, sh, sw, dh, dw, pt, pl, out):
    # the window's argmax with selects, not branches (random data mispredicts a branch per tap:
    # 6 ns a tap, no faster than NumPy's tap-by-tap passes); a NaN never wins the comparison, so
    # the first NaN is tracked beside it; -2 marks a maximum in the padding (no gradient)
    planes, h, w = x.shape
    _, oh, ow = g.shape
    for pln in range(planes):
        for r in range(h):
            for q in range(w):
                out[pln, r, q] = 0.0
        for a in range(oh):
            for b in range(ow):
                best = -np.inf
                at = -1
                nan_at = -1
                for i in range(kh):
                    r = a * sh + i * dh - pt
                    for j in range(kw):
                        q = b * sw + j * dw - pl
                        if 0 <= r < h and 0 <= q < w:
                            v = x[pln, r, q]
                            k = r * w + q
                            take = (v > best) | (at == -1)  # strictly greater: the first max
                            best = v if take else best
                            at = k if take else at
                            nan_at = k if (v != v) & (nan_at == -1) else nan_at
                        elif at == -1:
                            at = -2
                if nan_at >= 0:
                    at = nan_at
                if at >= 0:
                    out[pln, at // w, at % w] += g[pln, a, b]



@njit(**_JIT)
def _max_pool2d_backward_2x2(g, x, out):
    # 2x2 windows at stride 2 inside x (MaxPool2d(2)): every input position is written once, the
    # first maximum found from the window's maximum by comparisons, no select chain: LLVM
    # vectorises it (3-5x the general kernel). Any NaN in a window: its first NaN takes the
    # gradient (the window's "maximum" is then not used); rows and columns past the last
    # window get zeros
    planes, h, w = x.shape
    _, oh, ow = g.shape
    for pln in range(planes):
        for r in range(2 * oh, h):
            for q in range(w):
                out[pln, r, q] = 0.0
        for a in range(oh):
            r = 2 * a
            for q in range(2 * ow, w):
                out[pln, r, q] = 0.0
                out[pln, r + 1, q] = 0.0
            for b in range(ow):
                q = 2 * b
                v0, v1 = x[pln, r, q], x[pln, r, q + 1]
                v2, v3 = x[pln, r + 1, q], x[pln, r + 1, q + 1]
                m = max(max(v0, v1), max(v2, v3))
                n0, n1, n2, n3 = v0 != v0, v1 != v1, v2 != v2, v3 != v3
                nan = n0 | n1 | n2 | n3
                e0 = ((v0 == m) & ~nan) | n0
                e1 = ((v1 == m) & ~nan) | n1
                e2 = ((v2 == m) & ~nan) | n2
                e3 = ((v3 == m) & ~nan) | n3
                gv = g[pln, a, b]
                out[pln, r, q] = gv if e0 else 0.0
                out[pln, r, q + 1] = gv if e1 & ~e0 else 0.0
                out[pln, r + 1, q] = gv if e2 & ~(e0 | e1) else 0.0
                out[pln, r + 1, q + 1] = gv if e3 & ~(e0 | e1 | e2) else 0.0

# A call splits over the kernels' threads only when it would run longer than a thread handoff
# costs several times over (tens of us, more on a loaded machine): Adam's update of a 65,536
# value parameter ran 30 us inline and 90 us split. Each public function passes its measured
def gelu_forward(x, out):
    """out = gelu(x), the erf form; flat arrays. float32 runs in float32 arithmetic with a
    fitted erfc (:mod:`.gelu32`: within 3e-7 of the exact function), float64 ``math.erf``."""
    if x.dtype == np.float32:
        _split(gelu32.gelu_forward_f32, (x, out), (), 1.2)
    else:
        _split(_gelu_forward, (x, out), (), 12)


def gelu_backward(g, x, out):
    """out = g * gelu'(x), the erf form; flat arrays (float32 as gelu_forward)."""
    if x.dtype == np.float32:
        _split(gelu32.gelu_backward_f32, (g, x, out), (), 1.5)
    else:
        _split(_gelu_backward, (g, x, out), (), 15)


def gelu_tanh_forward(x, out):
    """out = gelu(x), the tanh form, float32 only (flat arrays; :mod:`.gelu32`)."""
    _split(gelu32.gelu_tanh_forward_f32, (x, out), (), 1)


def gelu_tanh_backward(g, x, out):
    """out = g * gelu'(x), the tanh form, float32 only (flat arrays)."""
    _split(gelu32.gelu_tanh_backward_f32, (g, x, out), (), 1.2)


def softmax_backward(g, y, out, log):
    """out = the gradient of softmax (``log``: log_softmax) from its output y, per row."""
    _split(_softmax_backward, (g, y, out), (log,), 1)


def layer_norm_forward(x, w, b, has_w, has_b, eps, out):
    """out = (x - mean) * rstd (* w) (+ b) per row; w, b are (n,) (ignored when flagged off)."""
    _split(lambda x_, out_, *a: _layer_norm_forward(x_, w, b, has_w, has_b, eps, out_),
           (x, out), (), 1)


def layer_norm_backward(g, x, w, has_w, eps, out):
    """out = LayerNorm's input gradient per row (mean and rstd recomputed)."""
    _split(lambda g_, x_, out_: _layer_norm_backward(g_, x_, w, has_w, eps, out_), (g, x, out), (),
           2)


def layer_norm_affine_backward(g, x, eps, out):
    """out[0] = sum over rows of g * xhat, out[1] = sum over rows of g (one pass)."""
    _layer_norm_affine_backward(g, x, eps, out)


def cross_entropy_forward(x, t, ignore_index, loss):
    """loss[r] = logsumexp(x[r]) - x[r, t[r]] (0 where t[r] == ignore_index); returns the
    number of rows not ignored. float32 runs float32 lanes (:mod:`.xent32`)."""
    if x.dtype == np.float32:
        return xent32.cross_entropy_forward_f32(x, t, ignore_index, loss)
    return _cross_entropy_forward(x, t, ignore_index, loss)


def cross_entropy_backward(x, t, ignore_index, scale, out):
    """out[r] = (softmax(x[r]) - onehot(t[r])) * scale[r], zero where t[r] == ignore_index."""
    kernel = xent32.cross_entropy_backward_f32 if x.dtype == np.float32 else \
        _cross_entropy_backward
    _split(lambda x_, t_, s_, out_: kernel(x_, t_, ignore_index, s_, out_),
           (x, t, scale, out), (), 2)


def adam_update(p, g, m, v, sc, decay, decoupled, maximize):
    """One Adam(W) step of one parameter, in place on the flat arrays p, m, v, in the
    parameter's dtype op for op as nbaccel's array path rounds (see reference.adam_update)."""
    _split(_adam_update, (p, g, m, v), (sc, decay, decoupled, maximize), 0.5)


def max_pool2d_backward(g, x, kh, kw, sh, sw, dh, dw, pt, pl, out):
    """out (P, H, W) = max pooling's input gradient: each g[p, a, b] added at its window's first
    maximum of x (a NaN maximum: its first NaN), windows at (a*sh - pt, b*sw - pl) with taps
    dilated by (dh, dw); positions outside x are -inf (the padding). One pass per plane."""
    if ((kh, kw, sh, sw, dh, dw, pt, pl) == (2, 2, 2, 2, 1, 1, 0, 0)
            and 2 * g.shape[1] <= x.shape[1] and 2 * g.shape[2] <= x.shape[2]):
        _split(_max_pool2d_backward_2x2, (g, x, out), (), 1)
        return
    _split(lambda g_, x_, out_: _max_pool2d_backward(g_, x_, kh, kw, sh, sw, dh, dw, pt, pl, out_),
           (g, x, out), (), kh * kw)             # about 1 ns a tap


def embedding_backward(g, idx, out):
    """out[idx[r]] += g[r] for every row r of (rows, dim) g (out starts zeroed by the caller)."""
    _embedding_backward(g, idx, out)


def warm():
    """Compile (or load from numba's disk cache) every kernel for float32 and float64."""
    for dt in (np.float32, np.float64):
        x = np.ones((2, 3), dt)
        o = np.empty_like(x)
        w = np.ones(3, dt)
        t = np.zeros(2, np.int64)
        for flag in (False, True):
            _softmax_backward(x, x, o, flag)
            _adam_update(o.ravel(), x.ravel(), np.zeros(6, dt), np.zeros(6, dt), np.ones(9, dt),
                         True, flag, False)
        _gelu_forward(x.ravel(), o.ravel())
        _gelu_backward(x.ravel(), x.ravel(), o.ravel())
        _layer_norm_forward(x, w, w, True, True, 1e-5, o)
        _layer_norm_backward(x, x, w, True, 1e-5, o)
        _layer_norm_affine_backward(x, x, 1e-5, np.empty((2, 3), dt))
        _cross_entropy_forward(x, t, -100, np.empty(2, dt))
        _cross_entropy_backward(x, t, -100, np.ones(2), o)
        batch_norm.warm(dt)
        if dt == np.float32:
            xent32.cross_entropy_forward_f32(x, t, -100, np.empty(2, dt))
            xent32.cross_entropy_backward_f32(x, t, -100, np.ones(2), o)
            gelu32.gelu_forward_f32(x.ravel(), o.ravel())
            gelu32.gelu_tanh_forward_f32(x.ravel(), o.ravel())
            gelu32.gelu_tanh_backward_f32(x.ravel(), x.ravel(), o.ravel())
            gelu32.gelu_backward_f32(x.ravel(), x.ravel(), o.ravel())
        _embedding_backward(x, t, np.zeros((2, 3), dt))
        x3 = np.ones((2, 3, 2), dt)
        _max_pool2d_backward(x3, x3, 2, 1, 1, 1, 1, 1, 0, 0, np.empty_like(x3))
        _max_pool2d_backward_2x2(x3[:, :1, :1], x3, np.empty_like(x3))
