"""The 2:4 sparse x dense products (numba), on the row-chunk launcher of ``kernels/_pool.py``,
and the compression (``compress``, which calls ``_key``).

Top-level functions of their own module (imported on first use by ``cpu._build``): numba's
disk cache keys a function by its closure's contents too, and a closure holding other jitted
functions (dispatchers pickle with a per-process id) missed the cache in every new process
(1.9 s of compilation on each first GEMV; ``compress``, calling ``_key``, likewise).

Each kernel is the whole job of one thread: it claims chunks of output rows from ``ctr``
until none is left (``_pool.claim`` / ``_pool.finish``); called alone with one chunk it is the
serial kernel. Both ask for 512-bit vectors (``_pool.wide_vectors``).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .. import _pool

# no-NaN/no-Inf assumptions stay off (see FINDINGS.md: they turn overflow into NaN)
_JIT = dict(nogil=True, cache=True, fastmath={"reassoc", "contract", "arcp", "nsz", "afn"})


@njit(inline="always", **_JIT)
def _key(v):
    a = abs(np.float64(v))
    return np.inf if a != a else a


@njit(parallel=True, **_JIT)
def compress(w, values, meta):
    rows, cols = w.shape
    groups = cols // 4
    for r in prange(rows):
        for g in range(groups):
            key = (_key(w[r, 4 * g]), _key(w[r, 4 * g + 1]), _key(w[r, 4 * g + 2]),
                   _key(w[r, 4 * g + 3]))
            nib = 0
            slot = 0
            for i in range(4):
                beaten = 0   # entries that outrank i: larger, or equal at a smaller position
                for j in range(4):
                    if key[j] > key[i] or (key[j] == key[i] and j < i):
                        beaten += 1
                if beaten < 2:
                    values[r, 2 * g + slot] = w[r, 4 * g + i]
                    nib |= i << (2 * slot)
                    slot += 1
            if g % 2 == 0:
                meta[r, g // 2] = nib
            else:
                meta[r, g // 2] |= nib << 4


@njit(inline="always", **_JIT)
def _pick(m, x0, x1, x2, x3, x4, x5, x6, x7):
    # a group's first kept position is 0, 1 or 2 and its second 1, 2 or 3: selects over
    # the eight loaded inputs vectorise, where gathers x[c + p] did not
    p0 = m & 3
    p1 = (m >> 2) & 3
    p2 = (m >> 4) & 3
    p3 = m >> 6
    a0 = x0 if p0 == 0 else (x1 if p0 == 1 else x2)
    a1 = x3 if p1 == 3 else (x2 if p1 == 2 else x1)
    a2 = x4 if p2 == 0 else (x5 if p2 == 1 else x6)
    a3 = x7 if p3 == 3 else (x6 if p3 == 2 else x5)
    return a0, a1, a2, a3


@njit(inline="always", **_JIT)
def _gemv_tail(x, vr, mr, pairs, groups, zero):
    acc = zero
    if groups % 2:                  # a last group alone in its byte
        m = np.int32(mr[pairs])
        c = 8 * pairs
        j = 4 * pairs
        acc += vr[j] * x[c + (m & 3)] + vr[j + 1] * x[c + ((m >> 2) & 3)]
    return acc


@njit(inline="always", **_JIT)
def _gemv_rows(x, xp, values, meta, out, zero, r0, r1):
    # xp: x deinterleaved, xp[i, b] = x[8 * b + i] (contiguous loads per position; every
    # row reuses it, so the shuffles are paid once instead of once per row). Four rows
    # per pass: each load of the eight input planes serves four rows, and four rows'
    # values and metadata stream at once.
    groups = values.shape[1] // 2
    pairs = groups // 2
    r = r0
    while r + 4 <= r1:
        v0, v1, v2, v3 = values[r], values[r + 1], values[r + 2], values[r + 3]
        m0, m1, m2, m3 = meta[r], meta[r + 1], meta[r + 2], meta[r + 3]
        c0 = c1 = c2 = c3 = zero        # of the values' dtype: float32 stays float32
        for b in range(pairs):          # one metadata byte: two groups, four kept values
            j = 4 * b
            x0, x1, x2, x3 = xp[0, b], xp[1, b], xp[2, b], xp[3, b]
            x4, x5, x6, x7 = xp[4, b], xp[5, b], xp[6, b], xp[7, b]
            a0, a1, a2, a3 = _pick(np.int32(m0[b]), x0, x1, x2, x3, x4, x5, x6, x7)
            c0 += v0[j] * a0 + v0[j + 1] * a1 + v0[j + 2] * a2 + v0[j + 3] * a3
            a0, a1, a2, a3 = _pick(np.int32(m1[b]), x0, x1, x2, x3, x4, x5, x6, x7)
            c1 += v1[j] * a0 + v1[j + 1] * a1 + v1[j + 2] * a2 + v1[j + 3] * a3
            a0, a1, a2, a3 = _pick(np.int32(m2[b]), x0, x1, x2, x3, x4, x5, x6, x7)
            c2 += v2[j] * a0 + v2[j + 1] * a1 + v2[j + 2] * a2 + v2[j + 3] * a3
            a0, a1, a2, a3 = _pick(np.int32(m3[b]), x0, x1, x2, x3, x4, x5, x6, x7)
            c3 += v3[j] * a0 + v3[j + 1] * a1 + v3[j + 2] * a2 + v3[j + 3] * a3
        out[r] = c0 + _gemv_tail(x, v0, m0, pairs, groups, zero)
        out[r + 1] = c1 + _gemv_tail(x, v1, m1, pairs, groups, zero)
        out[r + 2] = c2 + _gemv_tail(x, v2, m2, pairs, groups, zero)
        out[r + 3] = c3 + _gemv_tail(x, v3, m3, pairs, groups, zero)
        r += 4
    while r < r1:
        vr = values[r]
        mr = meta[r]
        acc = zero
        for b in range(pairs):
            j = 4 * b
            a0, a1, a2, a3 = _pick(np.int32(mr[b]), xp[0, b], xp[1, b], xp[2, b], xp[3, b],
                                   xp[4, b], xp[5, b], xp[6, b], xp[7, b])
            acc += vr[j] * a0 + vr[j + 1] * a1 + vr[j + 2] * a2 + vr[j + 3] * a3
        out[r] = acc + _gemv_tail(x, vr, mr, pairs, groups, zero)
        r += 1


@njit(**_JIT)
def gemv(x, xp, values, meta, out, zero, chunk, ctr, n_chunks, wait):
    # the whole kernel for one thread: claims chunks of rows until none is left (_pool)
    _pool.wide_vectors()
    rows = values.shape[0]
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        _gemv_rows(x, xp, values, meta, out, zero, c * chunk, min(rows, (c + 1) * chunk))
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)


@njit(inline="always", **_JIT)
def _gemm_rows(xt, values, meta, outt, r0, r1, block):
    # outt = W @ xt: W is (rows, cols) 2:4, xt the batch transposed, (cols, m) contiguous.
    # Each output row accumulates axpys of whole xt rows (the batch is the vector axis).
    # The columns go in blocks of ``block`` metadata bytes (8 columns each) whose xt rows
    # fit in L1, each block serving every row of the chunk before the next is loaded
    # (unblocked, each row streamed all of xt, 1 MiB at batch 64, from L2).
    groups = values.shape[1] // 2
    pairs = groups // 2
    m_cols = xt.shape[1]
    for r in range(r0, r1):
        o = outt[r]
        for i in range(m_cols):
            o[i] = 0
    for b0 in range(0, pairs, block):
        b1 = min(pairs, b0 + block)
        for r in range(r0, r1):
            o = outt[r]
            vr = values[r]
            mr = meta[r]
            for b in range(b0, b1):     # four kept values per pass over the output row
                m = np.int64(mr[b])
                c = 8 * b
                j = 4 * b
                xa = xt[c + (m & 3)]
                xb = xt[c + ((m >> 2) & 3)]
                xc = xt[c + 4 + ((m >> 4) & 3)]
                xd = xt[c + 4 + (m >> 6)]
                va, vb, vc, vd = vr[j], vr[j + 1], vr[j + 2], vr[j + 3]
                for i in range(m_cols):
                    o[i] += va * xa[i] + vb * xb[i] + vc * xc[i] + vd * xd[i]
    if groups % 2:
        for r in range(r0, r1):
            o = outt[r]
            vr = values[r]
            m = np.int64(meta[r, pairs])
            xa = xt[8 * pairs + (m & 3)]
            xb = xt[8 * pairs + ((m >> 2) & 3)]
            va, vb = vr[4 * pairs], vr[4 * pairs + 1]
            for i in range(m_cols):
                o[i] += va * xa[i] + vb * xb[i]


@njit(**_JIT)
def gemm_t(xt, values, meta, outt, block, chunk, ctr, n_chunks, wait):
    _pool.wide_vectors()
    rows = values.shape[0]
    while True:
        c = _pool.claim(ctr, n_chunks)
        if c < 0:
            break
        _gemm_rows(xt, values, meta, outt, c * chunk, min(rows, (c + 1) * chunk), block)
        _pool.finish(ctr, False, n_chunks)
    _pool.finish(ctr, wait, n_chunks)
