"""Input checks shared by the attention kernels: clear errors that name the shapes."""
from __future__ import annotations

import numpy as np


def check_inputs(q, k, v, mask=None):
    """Validate (B, Hq, L, D) / (B, Hkv, S, D) / (B, Hkv, S, Dv) inputs and an additive mask
    broadcastable to (B, Hq, L, S). Returns ``(B, Hq, L, Hkv, S, Dv, dtype)``."""
    shapes = f"query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}"
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"attention kernels take 4-D (batch, heads, length, dim) arrays, got {shapes}")
    b, hq, n_q, d = q.shape
    bk, hkv, n_k, dk = k.shape
    if v.shape[:3] != k.shape[:3] or bk != b or dk != d:
        raise ValueError(f"attention: shapes don't match (query [B, Hq, L, D], key [B, Hkv, S, D], "
                         f"value [B, Hkv, S, Dv]): {shapes}")
    if hkv == 0 or hq % hkv:
        raise ValueError(f"attention: query heads ({hq}) must be a multiple of key/value heads "
                         f"({hkv}): {shapes}")
    dt = np.result_type(q.dtype, k.dtype, v.dtype)
    if dt.kind != "f":
        raise TypeError(f"attention needs floating point arrays, got {q.dtype}, {k.dtype}, {v.dtype}")
    if mask is not None:
        try:
            ok = np.broadcast_shapes(mask.shape, (b, hq, n_q, n_k)) == (b, hq, n_q, n_k)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"attention: mask of shape {tuple(mask.shape)} doesn't broadcast to "
                             f"the scores' shape {(b, hq, n_q, n_k)}") 
    return b, hq, n_q, hkv, n_k, v.shape[3], dt
