"""The per-tile softmax work of the CPU attention kernel, in numba (no GIL held, so tiles of
different (batch, head, block) tasks run on several threads at once).

Each function works on one tile of raw scores ``s = q_block @ k_block^T`` (the query rows
already multiplied by the softmax scale), rows ``row0 ..`` and columns ``col0 ..`` of the full
score matrix. Causal masking is an index compare, the additive mask a tile view (broadcast
views with zero strides are fine); ``use_mask`` is False when there is none.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ._fastexp import FASTMATH, vexp

_JIT = dict(nogil=True, fastmath=FASTMATH, cache=True, boundscheck=False)


@njit(**_JIT)
def softmax_tile(s, m, l, acc, row0, col0, causal, mask, use_mask):
    """One step of the online softmax: mask the tile, raise the running row max ``m``,
    rescale the running sum ``l`` and output ``acc`` by exp(old max - new max), and leave
    exp(s - new max) in ``s`` (the tile's unnormalised probabilities)."""
    neg_inf = s.dtype.type(-np.inf)
    zero = s.dtype.type(0)
    rows, cols = s.shape
    for r in range(rows):
        limit = row0 + r - col0            # causal: columns c <= limit are visible
        mx = m[r]
        for c in range(cols):
            x = s[r, c]
            if use_mask:
                x += mask[r, c]
            if causal and c > limit:
                x = neg_inf
            s[r, c] = x
            mx = max(mx, x)
        if mx == neg_inf:                   # nothing visible in this row yet
            for c in range(cols):
                s[r, c] = zero
            continue
        alpha = vexp(m[r] - mx)             # exp(-inf) = 0 on the first visible tile
        total = zero
        for c in range(cols):
            p = vexp(s[r, c] - mx)
            s[r, c] = p
            total += p
        l[r] = l[r] * alpha + total
        m[r] = mx
        for d in range(acc.shape[1]):
            acc[r, d] *= alpha


@njit(**_JIT)
def finish_rows(acc, m, l, out, lse):
    """out = acc / l and lse = m + log(l); rows that saw no visible score give 0 and -inf."""
    for r in range(acc.shape[0]):
        if l[r] > 0:
            inv = 1 / l[r]
            for d in range(acc.shape[1]):
                out[r, d] = acc[r, d] * inv
            lse[r] = m[r] + np.log(l[r])
        else:
            for d in range(acc.shape[1]):
                out[r, d] = 0
            lse[r] = -np.inf


@njit(**_JIT)
def probs_tile(s, lse, row0, col0, causal, mask, use_mask):
    """Rebuild the probabilities in place: p = exp(s + mask - lse), 0 where masked or where the
    whole row is masked (lse = -inf)."""
    zero = s.dtype.type(0)
    rows, cols = s.shape
    for r in range(rows):
        limit = row0 + r - col0
        shift = lse[r]
        if shift == -np.inf:
            for c in range(cols):
                s[r, c] = zero
            continue
        for c in range(cols):
            x = s[r, c]
            if use_mask:
                x += mask[r, c]
            p = vexp(x - shift)
            s[r, c] = zero if causal and c > limit else p


@njit(**_JIT)
def dscores_tile(p, dp, delta):
    """dp becomes ds = p * (dp - delta): the gradient with respect to the scaled scores."""
    rows, cols = p.shape
    for r in range(rows):
        dr = delta[r]
        for c in range(cols):
            dp[r, c] = p[r, c] * (dp[r, c] - dr)


@njit(**_JIT)
def add_into(dst, src):
    """dst += src (a tile of an accumulator), without holding the GIL."""
    for r in range(dst.shape[0]):
        for c in range(dst.shape[1]):
            dst[r, c] += src[r, c]
