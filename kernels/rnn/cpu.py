"""One LSTM layer's time loop, forward and backward, on arrays.

``Y = lstm_scan_forward(xw, h0, c0, w_hh)``: ``xw`` (L, N, 4H) holds the input projections
with both biases, ``h0``/``c0`` (N, H) the initial state, ``w_hh`` (4H, H); ``Y`` (L, N, 6H)
holds per step ``h_t``, ``c_t`` and the activated gates i, f, g, o (PyTorch's order) side by
side, so the backward reads the gates instead of recomputing them.

``lstm_scan_backward(gY, Y, xw, h0, c0, w_hh)`` gives the gradients of ``xw`` (the gate
pre-activations, (L, N, 4H)), ``h0``, ``c0`` and ``w_hh``.

Each step is one small GEMM (N x H by H x 4H) and a few elementwise passes over N x 4H values.
Each loop picks its BLAS threads by measuring its first steps (``_openblas.StepThreads``):
on a quiet machine BLAS's second thread gains 10-40% on the step's GEMM, but when another
process holds a core it turned a 0.1 ms GEMM into 10 ms. Written on arrays, the backward loop costs a few
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

from .._openblas import StepThreads


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
    threads = StepThreads()
    for t in range(L):
        with threads.step():
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
    """(d xw, d h0, d c0, d w_hh) for the loss gradient ``gY`` of ``Y``. Each step's gate
    derivatives are computed inside the loop on (N, H) slices that stay in cache; built for
    the whole sequence first they were ten passes over (L, N, 4H) arrays, half the time."""
    L, N, G = xw.shape
    H = G // 4
    dt = Y.dtype
    dgates = xp.empty((L, N, G), dt)
    dh_next = xp.zeros((N, H), dt)
    dc_next = xp.zeros((N, H), dt)
    dh, dc, tc, u, v = (xp.empty((N, H), dt) for _ in range(5))
    threads = StepThreads()
    for t in range(L - 1, -1, -1):
        with threads.step():
            y, gy, dg = Y[t], gY[t], dgates[t]
            i, f, g, o = (y[:, (2 + j) * H:(3 + j) * H] for j in range(4))
            c_prev = c0 if t == 0 else Y[t - 1, :, H:2 * H]
            xp.tanh(y[:, H:2 * H], out=tc)
            xp.add(gy[:, :H], dh_next, out=dh)
            # dc = gc + dc_next + dh * o * (1 - tanh(c)^2)
            xp.multiply(tc, tc, out=u)
            xp.subtract(1, u, out=u)
            u *= o
            u *= dh
            xp.add(gy[:, H:2 * H], dc_next, out=dc)
            dc += u
            # each gate: (what multiplies it + its own gradient in Y) * d(activation)
            for j, (gate, by, d) in enumerate(((i, g, dc), (f, c_prev, dc), (g, i, dc), (o, tc, dh))):
                out = dg[:, j * H:(j + 1) * H]
                xp.multiply(d, by, out=out)
                out += gy[:, (2 + j) * H:(3 + j) * H]
                if j == 2:                             # tanh: 1 - g^2
                    xp.multiply(gate, gate, out=v)
                    xp.subtract(1, v, out=v)
                else:                                  # sigmoid: s (1 - s)
                    xp.subtract(1, gate, out=v)
                    v *= gate
                out *= v
            xp.matmul(dg, w_hh, out=dh_next)
            xp.multiply(dc, f, out=dc_next)
    h_prev = xp.concatenate([h0.reshape((1, N, H)), Y[:L - 1, :, :H]], 0)
    d_w = dgates.reshape((L * N, G)).T @ h_prev.reshape((L * N, H))
    return dgates, dh_next, dc_next, d_w
