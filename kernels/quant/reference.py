"""NumPy references of the quantized matmuls: the oracle the numba and Triton versions are
tested against. They dequantize the whole weight (clarity over speed) and accumulate in
float64 so that they are at least as accurate as the kernels they check.

Every matmul takes activations ``x [M, K]`` and a weight in the formats of :mod:`.packing`
(``[N, K]``, out_features first, like ``nn.Linear``) and returns ``x @ w.T (+ bias)`` as
``[M, N]`` in ``x``'s dtype.
"""
from __future__ import annotations

import numpy as np

from .packing import deinterleave_int4, dequantize_int4, dequantize_int8, quantize_per_token_int8


def _finish(acc, x, bias):
    if bias is not None:
        acc = acc + np.asarray(bias, np.float64)
    return acc.astype(x.dtype)


def int8_weight_only_matmul(x, q, scale, bias=None):
    """``x @ (q * scale[:, None]).T + bias``."""
    x = np.asarray(x)
    w = dequantize_int8(q, scale, np.float64)
    return _finish(x.astype(np.float64) @ w.T, x, bias)


def int4_weight_only_matmul(x, packed, scales, zeros=None, group_size=128, bias=None,
                            layout="rows"):
    """``x @ dequantize_int4(...).T + bias`` (``layout``: see :mod:`.packing`)."""
    x = np.asarray(x)
    if layout != "rows":
        packed = deinterleave_int4(packed)
    w = dequantize_int4(packed, scales, zeros, group_size, np.float64)
    return _finish(x.astype(np.float64) @ w.T, x, bias)


def int8_int8_matmul(xq, wq):
    """Exact ``xq @ wq.T`` of int8 matrices, accumulated in int32 (``[M, N]`` int32)."""
    return np.asarray(xq).astype(np.int32) @ np.asarray(wq).astype(np.int32).T


def int8_dynamic_matmul(x, wq, wscale, bias=None):
    """Dynamic quantization: ``x`` is quantized per token to int8, multiplied with the int8
    weight in int32, and rescaled by ``xscale[m] * wscale[n]``."""
    x = np.asarray(x)
    xq, xs = quantize_per_token_int8(x)
    acc = int8_int8_matmul(xq, wq).astype(np.float64)
    acc *= xs.astype(np.float64)[:, None] * np.asarray(wscale, np.float64)[None, :]
    return _finish(acc, x, bias)
