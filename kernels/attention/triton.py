"""FlashAttention-2 in Triton: forward, and a backward in two kernels (dK/dV, then dQ).

Block sizes are ``tl.constexpr``; products accumulate in float32 whatever the input dtype
(float16, bfloat16, float32); causal masking is by block (key blocks past a query block's
diagonal are never loaded) plus an index compare inside the diagonal block. The backward
rebuilds probabilities from the saved log-sum-exp; one program owns one key block (dK, dV,
summed over the query heads of its group for GQA) or one query block (dQ), so nothing is
written by two programs and no atomics are needed.

Triton is imported when a kernel is first used, and the kernels are decorated then, so
``TRITON_INTERPRET=1`` set any time before the first call runs them on the CPU on NumPy
arrays (how the tests run them). Same layout and results as :mod:`.reference`, including the
additive mask (read through a broadcast view with zero strides, never expanded).
"""
from __future__ import annotations

import functools

import numpy as np

from .._triton_args import array_module, as_triton_arg
from .checks import check_inputs


@functools.lru_cache(maxsize=None)
def _kernels():
    from . import _triton_kernels as k  # lazy: it imports Triton, and only a GPU call needs it
    return k.forward_kernel, k.dkdv_kernel, k.dq_kernel


def _pow2(n):
    return max(16, 1 << (int(n) - 1).bit_length())


def _strides(a, n):
    return tuple(s // a.itemsize for s in a.strides[:n])


def _prepare(q, k, v, mask):
    dims = check_inputs(q, k, v, mask)
    xp = array_module(q)
    q, k, v = (xp.ascontiguousarray(a) for a in (q, k, v))
    if mask is None:       # the kernels never read it (HAS_MASK=False): any pointer will do
        return dims, xp, q, k, v, (q, 0, 0, 0, 0), False
    b, hq, n_q, _, n_k, _, _ = dims
    m = xp.broadcast_to(xp.asarray(mask, dtype=q.dtype), (b, hq, n_q, n_k))   # 0-stride view
    return dims, xp, q, k, v, (m,) + _strides(m, 4), True


def attention_forward(q, k, v, scale, causal=False, mask=None, block_m=64, block_n=64):
    """``(out, lse)`` as :func:`.reference.attention_forward` (``lse`` in float32)."""
    (b, hq, n_q, hkv, n_k, d_v, _), xp, q, k, v, m_args, has_mask = _prepare(q, k, v, mask)
    out = xp.empty((b, hq, n_q, d_v), q.dtype)
    lse = xp.empty((b, hq, n_q), np.float32)
    fwd = _kernels()[0]
    grid = (-(-n_q // block_m), b * hq)
    fwd[grid](*map(as_triton_arg, (q, k, v, out, lse)), *_strides(q, 3), *_strides(k, 3),
              *_strides(v, 3), *_strides(out, 3), *_strides(lse, 2), hq, hq // hkv, n_q, n_k,
              float(scale), as_triton_arg(m_args[0]), *m_args[1:],
              **_constants(q, d_v, has_mask, causal, block_m, block_n))
    return out, lse


def _constants(q, d_v, has_mask, causal, block_m, block_n):
    return dict(HAS_MASK=has_mask, D=q.shape[-1], DV=d_v, BLOCK_D=_pow2(q.shape[-1]),
                BLOCK_DV=_pow2(d_v), BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=bool(causal))


def attention_backward(do, q, k, v, out, lse, scale, causal=False, mask=None, block_m=64,
                       block_n=64):
    """``(dq, dk, dv)`` as :func:`.reference.attention_backward`."""
    (b, hq, n_q, hkv, n_k, d_v, _), xp, q, k, v, m_args, has_mask = _prepare(q, k, v, mask)
    do = xp.ascontiguousarray(do, dtype=q.dtype)
    lse = xp.ascontiguousarray(lse, dtype=np.float32)
    delta = xp.ascontiguousarray((do.astype(np.float32) * out.astype(np.float32)).sum(-1))
    dq, dk, dv = xp.empty_like(q), xp.empty_like(k), xp.empty_like(v)
    _, dkdv, dqk = _kernels()
    common = _constants(q, d_v, has_mask, causal, block_m, block_n)
    strides = _strides(q, 3) + _strides(k, 3) + _strides(v, 3) + _strides(lse, 2)
    args = tuple(map(as_triton_arg, (q, k, v, do, lse, delta)))
    mask_args = (as_triton_arg(m_args[0]),) + tuple(m_args[1:])
    dkdv[(-(-n_k // block_n), b * hkv)](*args, as_triton_arg(dk), as_triton_arg(dv), *strides,
                                        hkv, hq // hkv, n_q, n_k, float(scale), *mask_args,
                                        **common)
    dqk[(-(-n_q // block_m), b * hq)](*args, as_triton_arg(dq), *strides, hq, hq // hkv, n_q,
                                      n_k, float(scale), *mask_args, **common)
    return dq, dk, dv
