"""Attention on short sequences with the whole score matrix of a few images at once.

When every (batch, head) pair fits one tile of the flash kernel (``cpu.py``: L <= block_q and
S <= block_k), its tiling saves no memory and its tasks cost more Python than arithmetic: one
task per (batch, head, query block), each a few small BLAS calls and numba calls (a GPT's
16 x 4 heads of 64 x 64 took 3.4 ms forward and 8.5 ms backward, PyTorch 0.4 and 1.0). Here a
task is a block of images: each product is one stacked ``np.matmul`` over the block's heads
(grouped-query heads broadcast against their key/value head), and the softmax, its rebuild
from the log-sum-exp and the score gradient are one numba pass each over the block's rows.
Extra memory is the block's (images, Hq, L, S) scores, kept per thread between calls.

Same layout, arguments and results as ``cpu.attention_forward`` / ``attention_backward``
(which call these); the values agree with ``reference`` to rounding (the exact softmax of
each row, not the online one).
"""
from __future__ import annotations

import numpy as np
from numba import njit
from numpy.lib.stride_tricks import as_strided

from .. import _tasks
from ._fastexp import FASTMATH, vexp

_JIT = dict(nogil=True, fastmath=FASTMATH, cache=True, boundscheck=False)
BUDGET = 1 << 20          # score elements per task (4 MiB in float32)


@njit(**_JIT)
def _softmax_rows(s, lse, causal, mask, use_mask):
    """Each row of s (n, H, L, S) becomes its softmax (masked, causal top-left), lse its
    log-sum-exp; a row with nothing visible gives zeros and lse = -inf."""
    neg_inf = s.dtype.type(-np.inf)
    zero = s.dtype.type(0)
    n, heads, rows, cols = s.shape
    for i in range(n):
        for h in range(heads):
            for r in range(rows):
                row = s[i, h, r]
                mx = neg_inf
                for c in range(cols):
                    x = row[c]
                    if use_mask:
                        x += mask[i, h, r, c]
                    if causal and c > r:
                        x = neg_inf
                    row[c] = x
                    mx = max(mx, x)
                if mx == neg_inf:
                    for c in range(cols):
                        row[c] = zero
                    lse[i, h, r] = neg_inf
                    continue
                total = zero
                for c in range(cols):
                    p = vexp(row[c] - mx)
                    row[c] = p
                    total += p
                inv = 1 / total
                for c in range(cols):
                    row[c] *= inv
                lse[i, h, r] = mx + np.log(total)


@njit(**_JIT)
def _probs_rows(s, lse, causal, mask, use_mask):
    """The probabilities rebuilt in place: exp(s + mask - lse), 0 where masked or where the
    whole row is (lse = -inf)."""
    zero = s.dtype.type(0)
    n, heads, rows, cols = s.shape
    for i in range(n):
        for h in range(heads):
            for r in range(rows):
                shift = lse[i, h, r]
                row = s[i, h, r]
                if shift == -np.inf:
                    for c in range(cols):
                        row[c] = zero
                    continue
                for c in range(cols):
                    x = row[c]
                    if use_mask:
                        x += mask[i, h, r, c]
                    p = vexp(x - shift)
                    row[c] = zero if causal and c > r else p


@njit(**_JIT)
def _dscores_rows(p, dp, delta):
    """dp becomes p * (dp - delta), the gradient with respect to the scaled scores."""
    n, heads, rows, cols = p.shape
    for i in range(n):
        for h in range(heads):
            for r in range(rows):
                d = delta[i, h, r]
                for c in range(cols):
                    dp[i, h, r, c] = p[i, h, r, c] * (dp[i, h, r, c] - d)


def fits(n_q, n_k, block_q, block_k):
    """Whether a (batch, head) pair is one tile of the flash kernel."""
    return n_q <= block_q and n_k <= block_k


def _chunks(b, per_image, threads):
    """Blocks of images: at least one per thread where there are enough, each within BUDGET."""
    threads = threads or _tasks.num_threads()
    size = max(1, min(-(-b // threads), BUDGET // max(per_image, 1)))
    return [(i, min(i + size, b)) for i in range(0, b, size)]


def _buffer(state, name, shape, dtype):
    n = int(np.prod(shape))
    buf = state.get(name)
    if buf is None or buf.size < n or buf.dtype != dtype:
        buf = state[name] = np.empty(n, dtype)
    return buf[:n].reshape(shape)


def _grouped(x, hkv):
    """(c, Hq, ...) viewed as (c, Hkv, group, ...): query heads by their key/value head. Always
    a view, whatever x's strides (the packed output's rows are strided), as results are
    written through it."""
    group = x.shape[1] // hkv
    return as_strided(x, (x.shape[0], hkv, group) + x.shape[2:],
                      (x.strides[0], x.strides[1] * group) + x.strides[1:])


def _scores(state, qs, kt, b0, b1, hkv, dt):
    """The block's raw scores (c, Hq, L, S) = (scale q) k^T, in a per-thread buffer; ``kt`` is
    k^T (B, Hkv, D, S), C-contiguous: a product with k's transposed view took 1.45x as long."""
    c, hq, n_q = b1 - b0, qs.shape[1], qs.shape[2]
    s = _buffer(state, "s", (c, hkv, hq // hkv, n_q, kt.shape[3]), dt)
    np.matmul(_grouped(qs[b0:b1], hkv), kt[b0:b1, :, None], out=s)
    return s.reshape(c, hq, n_q, kt.shape[3])


def _transposed(x):
    """x^T over its last two axes, C-contiguous (one copy of k or v per call)."""
    return np.ascontiguousarray(x.swapaxes(-1, -2))


def _rows(x):
    """x itself when its matrices' rows are contiguous (BLAS takes the row stride as the
    leading dimension: the heads of a (B, L, H, D) tensor transposed need no copy), else a
    C-contiguous copy."""
    return x if x.strides[-1] == x.itemsize else np.ascontiguousarray(x)


def _dummy(dt):
    """A stand-in for the mask argument when there is none (the kernels' signature is 4-D)."""
    return np.zeros((1, 1, 1, 1), dt)


def forward(qs, k, v, causal, mask4, out, lse, threads, dt):
    """Fill ``out`` and ``lse`` for scaled queries ``qs`` (cpu.attention_forward's checks done)."""
    b, hq, n_q = qs.shape[:3]
    dummy = _dummy(dt)
    hkv, n_k = k.shape[1], k.shape[2]
    kt, v = _transposed(k), _rows(v)

    def work(block, state):
        b0, b1 = block
        p = _scores(state, qs, kt, b0, b1, hkv, dt)
        _softmax_rows(p, lse[b0:b1], causal, dummy if mask4 is None else mask4[b0:b1],
                      mask4 is not None)
        np.matmul(_grouped(p, hkv), v[b0:b1, :, None], out=_grouped(out[b0:b1], hkv))

    _tasks.run_tasks(_chunks(b, hq * n_q * n_k, threads), work, threads)


def _add_folded(dst, tmp, hkv):
    """dst (c, Hkv, S, D) += tmp (c, Hkv, group, S, D) summed over the group."""
    if tmp.shape[2] == 1:
        dst += tmp[:, :, 0]
    else:
        dst += tmp.sum(axis=2)


def backward(do, qs, k, v, lse, delta, causal, mask4, dq, dk, dv, threads, dt):
    """Accumulate the unscaled dq (the caller scales it), dk and dv (cpu.attention_backward's
    preparation done: ``qs`` the scaled queries, ``delta`` rowsum(out * do))."""
    b, hq, n_q = qs.shape[:3]
    dummy = _dummy(dt)
    hkv, n_k, d_v, d_qk = k.shape[1], k.shape[2], v.shape[3], k.shape[3]
    group = hq // hkv
    kt, vt, k = _transposed(k), _transposed(v), _rows(k)

    def work(block, state):
        b0, b1 = block
        c = b1 - b0
        p = _scores(state, qs, kt, b0, b1, hkv, dt)
        _probs_rows(p, lse[b0:b1], causal, dummy if mask4 is None else mask4[b0:b1],
                    mask4 is not None)
        p5, do5 = _grouped(p, hkv), _grouped(do[b0:b1], hkv)
        tmp = _buffer(state, "dv", (c, hkv, group, n_k, d_v), dt)
        _add_folded(dv[b0:b1], np.matmul(p5.swapaxes(-1, -2), do5, out=tmp), hkv)
        ds = _buffer(state, "ds", (c, hkv, group, n_q, n_k), dt)
        np.matmul(do5, vt[b0:b1, :, None], out=ds)
        _dscores_rows(p, ds.reshape(p.shape), delta[b0:b1])
        tmp = _buffer(state, "dk", (c, hkv, group, n_k, d_qk), dt)
        _add_folded(dk[b0:b1], np.matmul(ds.swapaxes(-1, -2), _grouped(qs[b0:b1], hkv), out=tmp),
                    hkv)
        tmp = _buffer(state, "dq", (c, hkv, group, n_q, d_qk), dt)
        np.matmul(ds, k[b0:b1, :, None], out=tmp)
        dq[b0:b1] += tmp.reshape(c, hq, n_q, d_qk)

    _tasks.run_tasks(_chunks(b, hq * n_q * n_k, threads), work, threads)
