"""``lstm_scan``: the time loop of one LSTM layer and direction as one op.

Written as ops, a time loop's backward slices the per-step input projections out of one
tensor: each slice's gradient is a full-size zero tensor with one step written into it, so
backpropagation through L steps moves O(L^2) data. As one op, the forward runs its loop on
the arrays and the derivative is one backward loop that stacks the per-step gate gradients:
O(L).

``lstm_scan(xw, h0, c0, w_hh) -> Y``: ``xw`` (L, N, 4H) are the input projections with both
biases, ``h0``/``c0`` (N, H), ``w_hh`` (4H, H); ``Y`` (L, N, 6H) holds, per step, ``h_t``,
``c_t`` and the four activated gates i, f, g, o (PyTorch's order) side by side: the layer's
output is ``Y[..., :H]``, its final state ``Y[-1, :, :2H]``, and the derivative reads the
gates instead of recomputing them.
"""
from __future__ import annotations

import numpy as np
from nbaccel_kernels._openblas import StepThreads
from nbaccel_kernels.rnn import cpu as rnn_kernels

from ..autograd import is_grad_enabled
from ..dispatch import active_trace
from .fronts import apply, as_tensor
from .registry import defop
from .. import ops


def _impl(xp, xw, h0, c0, w_hh):
    return rnn_kernels.lstm_scan_forward(xw, h0, c0, w_hh, xp=xp)


def _grad(gY, Y, xw, h0, c0, w_hh):
    """The derivative: on the arrays (nbaccel_kernels.rnn) when no graph of it is recorded,
    else written with ops (create_graph, a compiled training step's trace)."""
    args = (gY, Y, xw, h0, c0, w_hh)
    if not is_grad_enabled() and active_trace() is None and \
            all(t._node is None and isinstance(t._data, np.ndarray) for t in args):
        return tuple(as_tensor(a) for a in rnn_kernels.lstm_scan_backward(*(t._data for t in args)))
    return _grad_ops(*args)


def _grad_ops(gY, Y, xw, h0, c0, w_hh):
    L, N, G = xw.shape
    H = G // 4
    hs, cs = Y[..., :H], Y[..., H:2 * H]
    i, f, g, o = (Y[..., (2 + j) * H:(3 + j) * H] for j in range(4))
    h_prev = ops.cat([h0.reshape((1, N, H)), hs[:L - 1]], 0)
    c_prev = ops.cat([c0.reshape((1, N, H)), cs[:L - 1]], 0)
    tc = ops.tanh(cs)
    a = o * (1 - tc * tc)                              # dc from dh, per step
    # the derivative of each activated gate by its pre-activation
    act = ops.cat([i * (1 - i), f * (1 - f), 1 - g * g, o * (1 - o)], -1)
    k = ops.cat([g, c_prev, i, tc], -1) * act
    gh, gc = gY[..., :H], gY[..., H:2 * H]
    direct = gY[..., 2 * H:] * act       # gradient reaching the gate channels of Y themselves
    dh_next = dc_next = None
    steps = [None] * L
    threads = StepThreads()           # the same BLAS thread choice as the array loops
    for t in range(L - 1, -1, -1):
        with threads.step():
            dh = gh[t] if dh_next is None else gh[t] + dh_next
            dc = gc[t] + dh * a[t] if dc_next is None else gc[t] + dc_next + dh * a[t]
            dg = ops.cat([dc, dc, dc, dh], -1) * k[t] + direct[t]
            steps[t] = dg
            dh_next = ops.matmul(dg, w_hh)
            dc_next = dc * f[t]
    dgates = ops.stack(steps, 0)
    d_w = ops.matmul(dgates.reshape((L * N, G)).T, h_prev.reshape((L * N, H)))
    return dgates, dh_next, dc_next, d_w


def _infer(args, params):
    xw = args[0]
    L, N, G = xw.shape
    return (L, N, G // 4 * 6), xw.dtype


def _front(xw, h0, c0, w_hh):
    xw, h0, c0, w_hh = (as_tensor(a) for a in (xw, h0, c0, w_hh))
    L, N, G = xw.shape
    if G % 4 or tuple(h0.shape) != (N, G // 4) or tuple(c0.shape) != (N, G // 4) or \
            tuple(w_hh.shape) != (G, G // 4) or L == 0:
        raise ValueError(f"lstm_scan: shapes {tuple(xw.shape)}, {tuple(h0.shape)}, "
                         f"{tuple(c0.shape)}, {tuple(w_hh.shape)} do not fit (L>0, N, 4H)")
    return apply(lstm_scan, (xw, h0, c0, w_hh), {})


lstm_scan = defop(
    "lstm_scan", kind="nn", impl=_impl, infer=_infer, grad=_grad, front=_front,
    batch_rule=lambda args, batched, params, size: NotImplemented,   # vmap loops over examples
    doc="The time loop of one LSTM layer and direction (see nbaccel/ops/rnn_scan.py).")
