"""One LSTM layer's time loop, forward and backward, on arrays.

``Y = lstm_scan_forward(xw, h0, c0, w_hh)``: ``xw`` (L, N, 4H) holds the input projections
with both biases, ``h0``/``c0`` (N, H) the initial state, ``w_hh`` (4H, H); ``Y`` (L, N, 6H)
holds per step ``h_t``, ``c_t`` and the activated gates i, f, g, o (PyTorch's order) side by
side, so the backward reads the gates instead of recomputing them.

``lstm_scan_backward(gY, Y, xw, h0, c0, w_hh)`` gives the gradients of ``xw`` (the gate
pre-activations, (L, N, 4H)), ``h0``, ``c0`` and ``w_hh``.

Each step is one small GEMM (N x H by H x 4H) and a few elementwise passes over N x 4H values.
The loops run with single-threaded BLAS (``_openblas.single_threaded``): waking OpenBLAS's
second thread for each 0.1 ms GEMM lost more than it gave, and when another process held a
core it turned the GEMM into 10 ms. Written on arrays, the backward loop costs a few
microseconds a step in Python where the same loop through the op table paid the op
dispatch of nine ops a step.

>>> import numpy as np
>>> xw = np.zeros((2, 1, 4), np.float32); z = np.zeros((1, 1), np.float32)
>>> Y = lstm_scan_forward(xw, z, z, np.zeros((4, 1), np.float32))
>>> Y.shape, float(Y[0, 0, 2])          # i = sigmoid(0)
((2, 1, 6), 0.5)
"""
from __future__ import annotations

import numpy as np

from .._openblas import single_threaded


def _sigmoid(xp, x, out):
    xp.negative(x, out=out)
    xp.exp(out, out=out)
    out += 1
    return xp.reciprocal(out, out=out)


def lstm_scan_forward(xw, h0, c0, w_hh, xp=np):
    L, N, G = xw.shape
    H = G // 4
    Y = xp.empty((L, N, 6 * H), dtype=xw.dtype)
    h, c = h0, c0
    wT = w_hh.T
    with single_threaded():
        for t in range(L):
            s = Y[t, :, 2 * H:]                         # this step's gates, activated in place
            xp.matmul(h, wT, out=s)
            s += xw[t]
            xp.tanh(s[:, 2 * H:3 * H], out=s[:, 2 * H:3 * H])
            for a, b in ((0, 2 * H), (3 * H, 4 * H)):
                _sigmoid(xp, s[:, a:b], s[:, a:b])
            c_new = Y[t, :, H:2 * H]
            xp.multiply(s[:, H:2 * H], c, out=c_new)
            c_new += s[:, :H] * s[:, 2 * H:3 * H]
            h_new = Y[t, :, :H]
            xp.tanh(c_new, out=h_new)
            h_new *= s[:, 3 * H:]
            h, c = h_new, c_new
    return Y


def lstm_scan_backward(gY, Y, xw, h0, c0, w_hh, xp=np):
    """(d xw, d h0, d c0, d w_hh) for the loss gradient ``gY`` of ``Y``."""
    L, N, G = xw.shape
    H = G // 4
    hs, cs = Y[..., :H], Y[..., H:2 * H]
    i, f, g, o = (Y[..., (2 + j) * H:(3 + j) * H] for j in range(4))
    tc = xp.tanh(cs)
    a = o * (1 - tc * tc)                               # dc from dh, per step
    act = xp.empty((L, N, G), Y.dtype)                  # each gate by its pre-activation
    act[..., :H] = i * (1 - i)
    act[..., H:2 * H] = f * (1 - f)
    act[..., 2 * H:3 * H] = 1 - g * g
    act[..., 3 * H:] = o * (1 - o)
    k = xp.empty((L, N, G), Y.dtype)                    # what dc (or dh) multiplies, per gate
    k[..., :H] = g
    k[0, :, H:2 * H] = c0
    k[1:, :, H:2 * H] = cs[:L - 1]
    k[..., 2 * H:3 * H] = i
    k[..., 3 * H:] = tc
    k *= act
    dgates = gY[..., 2 * H:] * act      # the gradient reaching Y's gate channels themselves
    gh, gc = gY[..., :H], gY[..., H:2 * H]
    dh_next = xp.zeros((N, H), Y.dtype)
    dc_next = xp.zeros((N, H), Y.dtype)
    dh = xp.empty((N, H), Y.dtype)
    with single_threaded():
        for t in range(L - 1, -1, -1):
            xp.add(gh[t], dh_next, out=dh)
            dc = gc[t] + dc_next
            dc += dh * a[t]
            dg, kt = dgates[t], k[t]
            for lo in (0, H, 2 * H):
                dg[:, lo:lo + H] += dc * kt[:, lo:lo + H]
            dg[:, 3 * H:] += dh * kt[:, 3 * H:]
            xp.matmul(dg, w_hh, out=dh_next)
            dc_next = dc * f[t]
    h_prev = xp.concatenate([h0.reshape((1, N, H)), hs[:L - 1]], 0)
    d_w = dgates.reshape((L * N, G)).T @ h_prev.reshape((L * N, H))
    return dgates, dh_next, dc_next, d_w
