"""Scaled-dot-product attention written as plain array math: the oracle the fused kernels are
tested against.

Layout used by every version in this package: ``q`` is (B, Hq, L, D), ``k`` is (B, Hkv, S, D),
``v`` is (B, Hkv, S, Dv), with ``Hq`` a multiple of ``Hkv`` (grouped-query attention: query head
``h`` reads key/value head ``h // (Hq // Hkv)``). ``mask`` is an optional additive float mask
that broadcasts to (B, Hq, L, S). ``causal`` keeps column ``j`` of row ``i`` when ``j <= i``
(top-left aligned, as PyTorch's ``is_causal``).

The forward returns ``(out, lse)``: ``lse`` (B, Hq, L) is the log-sum-exp of each row of scaled
scores, which is all a backward pass needs to rebuild the probabilities. A row whose every
score is masked has ``lse = -inf`` and gives zeros (PyTorch's result), and zero gradients.

>>> import numpy as np
>>> q = k = v = np.ones((1, 1, 2, 4))
>>> out, lse = attention_forward(q, k, v, scale=0.5, causal=True)
>>> out.shape, lse.shape
((1, 1, 2, 4), (1, 1, 2))
"""
from __future__ import annotations

import numpy as np


def _expand_heads(x, hq, xp):
    """Repeat key/value heads so each query head has its own (GQA)."""
    group = hq // x.shape[1]
    return x if group == 1 else xp.repeat(x, group, axis=1)


def _fold_heads(g, hkv):
    """Sum a per-query-head gradient back onto the key/value heads it was expanded from."""
    b, hq = g.shape[:2]
    return g.reshape((b, hkv, hq // hkv) + g.shape[2:]).sum(axis=2)


def _scores(q, k, scale, causal, mask, xp):
    s = xp.matmul(q, xp.swapaxes(_expand_heads(k, q.shape[1], xp), -1, -2)) * scale
    if mask is not None:
        s = s + mask
    if causal:
        rows = xp.arange(s.shape[-2]).reshape(-1, 1)
        cols = xp.arange(s.shape[-1]).reshape(1, -1)
        s = xp.where(cols <= rows, s, -xp.inf)
    return s


def _probs(s, lse, xp):
    """exp(s - lse) with fully masked rows (lse = -inf) giving zeros instead of nan."""
    finite = xp.isfinite(lse)[..., None]
    return xp.where(finite, xp.exp(s - xp.where(finite, lse[..., None], 0)), 0)


def attention_forward(q, k, v, scale, causal=False, mask=None, xp=np):
    """``(softmax(q @ k^T * scale + mask) @ v, lse)``, computed with the full score matrix."""
    s = _scores(q, k, scale, causal, mask, xp)
    m = s.max(axis=-1)
    m_safe = xp.where(xp.isfinite(m), m, 0)
    total = xp.exp(s - m_safe[..., None]).sum(axis=-1)
    with np.errstate(divide="ignore"):
        lse = xp.where(total > 0, m_safe + xp.log(xp.where(total > 0, total, 1)), -xp.inf)
    p = _probs(s, lse, xp)
    out = xp.matmul(p, _expand_heads(v, q.shape[1], xp))
    return out.astype(q.dtype), lse.astype(q.dtype)


def attention_backward(do, q, k, v, out, lse, scale, causal=False, mask=None, xp=np):
    """Gradients ``(dq, dk, dv)`` of ``sum(out * do)``, rebuilding the probabilities from ``lse``."""
    hq, hkv = q.shape[1], k.shape[1]
    p = _probs(_scores(q, k, scale, causal, mask, xp), lse, xp)
    ke, ve = _expand_heads(k, hq, xp), _expand_heads(v, hq, xp)
    dv = xp.matmul(xp.swapaxes(p, -1, -2), do)
    dp = xp.matmul(do, xp.swapaxes(ve, -1, -2))
    delta = (do * out).sum(axis=-1, keepdims=True)    # = rowsum(p * dp)
    ds = p * (dp - delta) * scale
    dq = xp.matmul(ds, ke)
    dk = xp.matmul(xp.swapaxes(ds, -1, -2), q)
    return dq.astype(q.dtype), _fold_heads(dk, hkv).astype(k.dtype), _fold_heads(dv, hkv).astype(v.dtype)
