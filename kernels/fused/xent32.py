"""Cross-entropy over float32 logits with class-index targets, forward and backward, in
float32 lanes (``cpu.cross_entropy_forward`` / ``_backward`` dispatch here for float32).

The float64 kernels ran 4-5x PyTorch's time on the GPT's (1024, 256) logits: their row max
was a scalar loop (NaN tracked through every comparison, so LLVM could not vectorise it) and
their exp a float64 polynomial. Here, per row:

* the max takes eight running maxima side by side (a select each, which LLVM keeps in one
  vector register) and combines them; a NaN never wins a comparison, and needs not: it
  reaches the exp below and makes the row's sum NaN, so the loss and gradient are NaN as in
  NumPy and PyTorch. An all -inf row takes 0, as ``cpu._row_max`` does (its loss is NaN);
* exp(x - max) is the float32 exp of :mod:`.gelu32` in a function without "reassoc" (its range
  reduction must keep its order), written into a scratch row (forward) or the gradient's row
  (backward);
* the row's sum is float64 (vectorised with "reassoc"), the loss m + log(sum) - x[t] float64.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._launch import _JIT
from .gelu32 import JIT32, exp32

_ZERO = np.float32(0.0)


@njit(inline="always")
def _row_max8(x, r, n):
    n8 = n - n % 8
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = x[r, 0]
    for c in range(0, n8, 8):
        v0, v1, v2, v3 = x[r, c], x[r, c + 1], x[r, c + 2], x[r, c + 3]
        v4, v5, v6, v7 = x[r, c + 4], x[r, c + 5], x[r, c + 6], x[r, c + 7]
        m0 = v0 if v0 > m0 else m0
        m1 = v1 if v1 > m1 else m1
        m2 = v2 if v2 > m2 else m2
        m3 = v3 if v3 > m3 else m3
        m4 = v4 if v4 > m4 else m4
        m5 = v5 if v5 > m5 else m5
        m6 = v6 if v6 > m6 else m6
        m7 = v7 if v7 > m7 else m7
    for c in range(n8, n):
        v = x[r, c]
        m0 = v if v > m0 else m0
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    m4 = m5 if m5 > m4 else m4
    m6 = m7 if m7 > m6 else m6
    m0 = m2 if m2 > m0 else m0
    m4 = m6 if m6 > m4 else m4
    m0 = m4 if m4 > m0 else m0
    return _ZERO if m0 == -np.inf else m0


@njit(**JIT32)
def _exp_row(x, r, m, e):
    for c in range(e.size):
        e[c] = exp32(x[r, c] - m, _ZERO)


@njit(**_JIT)
def cross_entropy_forward_f32(x, t, ignore_index, loss):
    rows, n = x.shape
    e = np.empty(n, np.float32)
    count = 0
    for r in range(rows):
        tr = t[r]
        if tr == ignore_index:
            loss[r] = 0.0
            continue
        count += 1
        m = _row_max8(x, r, n)
        _exp_row(x, r, m, e)
        s = 0.0
        for c in range(n):
            s += np.float64(e[c])
        loss[r] = np.float64(m) + math.log(s) - np.float64(x[r, tr])
    return count


@njit(**_JIT)
def cross_entropy_backward_f32(x, t, ignore_index, scale, out):
    rows, n = x.shape
    st = np.empty(1, np.float32)
    for r in range(rows):
        tr = t[r]
        if tr == ignore_index:
            for c in range(n):
                out[r, c] = 0.0
            continue
        k = np.float64(scale[r])
        m = _row_max8(x, r, n)
        row = out[r]
        _exp_row(x, r, m, row)
        s = 0.0
        for c in range(n):
            s += np.float64(row[c])
        st[0] = k / s
        inv = st[0]
        for c in range(n):
            row[c] = row[c] * inv
        row[tr] = np.float64(row[tr]) - k
