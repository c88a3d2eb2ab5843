"""scaled_dot_product_attention: PyTorch's front, the math op, and the choice of backend.

The front checks its inputs (naming the shapes), expands grouped-query heads, turns masks into
the kernels' forms and picks a backend (see :mod:`.attention_backends`):

* FLASH_ATTENTION: the fused kernel (:mod:`.attention_flash`): O(L) memory, one extern kernel
  in a compiled graph, with its own backward.
* MATH: ``scaled_dot_product_attention``, a composite op that builds the L×S scores and that
  the compiler decomposes into primitives (it takes dropout, mask gradients and broadcasting).

Both give PyTorch's results, including zeros for a row whose every score is masked.
"""
from __future__ import annotations

import math

from .. import dtypes as D, ops
from . import attention_backends as backends
from . import attention_flash as flash
from .fronts import apply, as_tensor
from .meta import broadcast_shapes
from .nn import ShapeError, keep_mask
from .registry import defop

_NEG_INF = float("-inf")


def _arange(m, n, like, is_xp):
    return m.arange(n) if is_xp else m.arange(n, device=like.device)


# ---- the math op -------------------------------------------------------------------------------

def _attn_probs(m, s, is_xp):
    """Softmax over the last axis where a row that is masked out entirely gives zeros (not
    nan), as PyTorch's math attention does."""
    mx = m.max(s, axis=-1, keepdims=True) if is_xp else m.amax(s, axis=-1, keepdims=True).detach()
    mx = m.where(mx == _NEG_INF, 0, mx)
    e = m.exp(s - mx)
    den = m.sum(e, axis=-1, keepdims=True)
    return e / m.where(den == 0, 1, den)


def _attention(m, q, k, v, extra, scale, causal, mask, dropout, is_xp):
    kt = m.swapaxes(k, -1, -2)
    s = m.matmul(q, kt) * scale
    extra = list(extra)
    if mask == "bool":
        s = m.where(extra.pop(0), s, _NEG_INF)
    elif mask == "float":
        s = s + extra.pop(0)
    if causal:
        n_q, n_k = s.shape[-2], s.shape[-1]
        rows = _arange(m, n_q, q, is_xp).reshape((n_q, 1))
        cols = _arange(m, n_k, q, is_xp).reshape((1, n_k))
        s = m.where(cols <= rows, s, _NEG_INF)
    p = _attn_probs(m, s, is_xp)
    if dropout:   # the keep-mask comes last; p = 1 drops everything
        p = m.where(extra.pop(0), p * (0.0 if dropout == 1.0 else 1.0 / (1.0 - dropout)), 0)
    return m.matmul(p, v)


def _sdpa_impl(xp, q, k, v, *extra, scale, causal, mask, dropout):
    return _attention(xp, q, k, v, extra, scale, causal, mask, dropout, True)


def _sdpa_decomp(q, k, v, *extra, scale, causal, mask, dropout):
    return _attention(ops, q, k, v, extra, scale, causal, mask, dropout, False)


def _shapes(q, k, v):
    return f"query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}"


def _sdpa_infer(args, params):
    q, k, v = args[:3]
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ShapeError("scaled_dot_product_attention: query, key and value need at least 2 "
                         f"dims [..., L, E], got {_shapes(q, k, v)}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError("scaled_dot_product_attention: shapes don't match (query [.., L, E], "
                         f"key [.., S, E], value [.., S, Ev]): {_shapes(q, k, v)}")
    try:
        batch = broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ShapeError("scaled_dot_product_attention: the batch and head dims don't broadcast: "
                         f"{_shapes(q, k, v)} (enable_gqa=True lets query have more heads than "
                         "key and value)") from None
    scores = batch + (q.shape[-2], k.shape[-2])
    for a in args[3:]:
        try:
            ok = broadcast_shapes(a.shape, scores) == scores
        except ValueError:
            ok = False
        if not ok:
            raise ShapeError(f"scaled_dot_product_attention: attn_mask of shape {tuple(a.shape)} "
                             f"doesn't broadcast to the scores' shape {scores} ({_shapes(q, k, v)})")
    dt = D.result_type(q, k, v)
    if dt.kind != "f":
        raise TypeError("scaled_dot_product_attention needs floating point query, key and value, "
                        f"got {q.dtype}, {k.dtype}, {v.dtype}")
    return batch + (q.shape[-2], v.shape[-1]), dt


scaled_dot_product_attention = None     # the op, defined below (the front refers to it)


# ---- the front ---------------------------------------------------------------------------------

def _check(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """Validate what both backends need; returns the float scale."""
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t.dtype.kind != "f":
            raise TypeError(f"scaled_dot_product_attention: {name} must be a floating point "
                            f"tensor, got {t.dtype} ({_shapes(q, k, v)})")
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ShapeError("scaled_dot_product_attention: query, key and value need at least 2 "
                         f"dims [..., L, E], got {_shapes(q, k, v)}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError("scaled_dot_product_attention: shapes don't match (query [.., L, E], "
                         f"key [.., S, E], value [.., S, Ev]): {_shapes(q, k, v)}")
    if enable_gqa:
        if min(q.ndim, k.ndim, v.ndim) < 3:
            raise ShapeError("scaled_dot_product_attention: enable_gqa needs a head dim "
                             f"[.., H, L, E]: {_shapes(q, k, v)}")
        hq, hk, hv = q.shape[-3], k.shape[-3], v.shape[-3]
        if hk != hv or hk == 0 or hq % hk:
            raise ShapeError(f"scaled_dot_product_attention: with enable_gqa the query heads ({hq}) "
                             f"must be a multiple of the key/value heads ({hk}, {hv}): "
                             f"{_shapes(q, k, v)}")
    if attn_mask is not None and is_causal:
        raise RuntimeError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
    if attn_mask is not None and attn_mask.dtype.kind not in "bf":
        raise TypeError(f"scaled_dot_product_attention: attn_mask must be bool or floating point, "
                        f"got {attn_mask.dtype}")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if scale is None:
        return 1.0 / math.sqrt(q.shape[-1]) if q.shape[-1] else 1.0
    scale = float(scale)
    if not math.isfinite(scale):
        raise ValueError(f"scaled_dot_product_attention: scale must be finite, got {scale}")
    return scale


def _check_mask_shape(mask, q, k, v, gqa):
    """The batch dims broadcast, and the mask broadcasts to the scores (.., L, S)."""
    kv_batch = [tuple(t.shape[:-2]) for t in (k, v)]
    if gqa:
        kv_batch = [b[:-1] + (q.shape[-3],) for b in kv_batch]
    try:
        batch = broadcast_shapes(tuple(q.shape[:-2]), *kv_batch)
    except ValueError:
        raise ShapeError("scaled_dot_product_attention: the batch and head dims don't broadcast: "
                         f"{_shapes(q, k, v)} (enable_gqa=True lets query have more heads than "
                         "key and value)") from None
    if mask is None:
        return
    scores = batch + (q.shape[-2], k.shape[-2])
    try:
        ok = broadcast_shapes(tuple(mask.shape), scores) == scores
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(f"scaled_dot_product_attention: attn_mask of shape {tuple(mask.shape)} "
                         f"doesn't broadcast to the scores' shape {scores} ({_shapes(q, k, v)})")


def _expand_heads(x, hq):
    """(.., Hkv, S, E) -> (.., Hq, S, E), each key/value head repeated for its query group."""
    hkv = x.shape[-3]
    if hkv == hq:
        return x
    lead = tuple(x.shape[:-3])
    grouped = x.reshape(lead + (hkv, 1) + tuple(x.shape[-2:]))
    return grouped.broadcast_to(lead + (hkv, hq // hkv) + tuple(x.shape[-2:])) \
        .reshape(lead + (hq,) + tuple(x.shape[-2:]))


def _as_4d(t):
    """(..., H, L, E) with any leading dims -> (B, H, L, E)."""
    shape = tuple(t.shape)
    if t.ndim == 2:
        return t.reshape((1, 1) + shape)
    return t.reshape((math.prod(shape[:-3]),) + shape[-3:])


def _flash_mask(mask, q):
    """The mask as the kernel takes it: additive, in q's dtype, broadcastable to (B, H, L, S)."""
    if mask is None:
        return None
    if mask.dtype.kind == "b":
        mask = ops.where(mask, 0.0, _NEG_INF)
    # the front checked that the mask broadcasts to the scores, and the kernel takes q.ndim <= 4,
    # so the mask has at most 4 dims and broadcasts against (B, H, L, S) as it is
    return mask.astype(q.dtype)


def _flash(q, k, v, mask, scale, is_causal):
    packed = flash.apply_forward(_as_4d(q), _as_4d(k), _as_4d(v), _flash_mask(mask, q),
                                 scale, is_causal)
    d_v = v.shape[-1]
    return flash.slice_last(packed, 0, d_v).reshape(tuple(q.shape[:-1]) + (d_v,))


def _math(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    if enable_gqa:
        k, v = _expand_heads(k, q.shape[-3]), _expand_heads(v, q.shape[-3])
    args, kind = (q, k, v), None
    if attn_mask is not None:
        kind = "bool" if attn_mask.dtype.kind == "b" else "float"
        args += (attn_mask,)
    if dropout_p > 0:
        shape, _ = _sdpa_infer(args, {})
        args += (keep_mask(tuple(shape[:-1]) + (k.shape[-2],), dropout_p, q.device),)
    return apply(scaled_dot_product_attention, args,
                 {"scale": scale, "causal": bool(is_causal), "mask": kind,
                  "dropout": float(dropout_p)})


def _sdpa_front(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                enable_gqa=False):
    """PyTorch's ``scaled_dot_product_attention``: softmax(q k^T scale + mask) v.

    Inputs are (..., L, E) queries and (..., S, E) / (..., S, Ev) keys and values; a bool
    ``attn_mask`` keeps its True positions, a float one is added to the scores; ``is_causal``
    keeps column j of row i when j <= i; ``enable_gqa`` lets the query have a multiple of the
    key/value heads (dim -3). The flash kernel runs when it can take the inputs (no dropout,
    float32/float64 on the CPU, matching batch dims), else the math path;
    ``nbaccel.nn.attention.sdpa_kernel`` restricts the choice.

    >>> import nbaccel as nb
    >>> q = nb.randn(2, 4, 16, 8)
    >>> nb.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).shape
    (2, 4, 16, 8)
    """
    q, k, v = as_tensor(query), as_tensor(key), as_tensor(value)
    mask = None if attn_mask is None else as_tensor(attn_mask)
    dropout_p = float(dropout_p)
    scale = _check(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa)
    gqa = bool(enable_gqa) and q.shape[-3] != k.shape[-3]
    _check_mask_shape(mask, q, k, v, gqa)
    backend = backends.choose(q, k, v, mask, dropout_p, gqa)
    if backend == backends.SDPBackend.FLASH_ATTENTION:
        return _flash(q, k, v, mask, scale, is_causal)
    return _math(q, k, v, mask, dropout_p, is_causal, scale, gqa)


scaled_dot_product_attention = defop(
    "scaled_dot_product_attention", kind="nn", infer=_sdpa_infer, impl=_sdpa_impl,
    decomp=_sdpa_decomp, front=_sdpa_front,
    doc="softmax(q @ k^T * scale + mask) @ v (``is_causal``: top-left aligned lower-triangular "
        "mask; bool masks keep True positions; rows masked out entirely give zeros). The front "
        "runs the fused ``flash_attention`` op when it can; this op is the math path.")
