"""``MultiheadAttention`` with PyTorch's parameters, masks and layouts, and the attention
backend controls of ``torch.nn.attention``: ``sdpa_kernel`` and ``SDPBackend``.

>>> import nbaccel as nb
>>> mha = nb.nn.MultiheadAttention(8, 2, batch_first=True)
>>> x = nb.randn(3, 5, 8)
>>> out, w = mha(x, x, x)
>>> out.shape, w.shape
((3, 5, 8), (3, 5, 5))
"""
from __future__ import annotations

import math

from .. import ops
from ..ops import OPS
from ..ops.attention_backends import SDPBackend, enabled_backends, sdpa_kernel  # noqa: F401
from . import functional as F
from . import init
from .module import Module
from .modules import Linear, _empty


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's class of ``MultiheadAttention.out_proj``: a Linear (PyTorch's dynamic
    quantization skips it by this type)."""


def _rows(t, start, stop):
    """t[start:stop] along the first axis."""
    if "getitem" in OPS:
        return t[start:stop]
    # no slicing op yet: a 0/1 selection matrix does the same, differentiably
    sel = ops.arange(start, stop, device=t.device).reshape((-1, 1)) == \
        ops.arange(t.shape[0], device=t.device).reshape((1, -1))
    return sel.astype(t.dtype) @ t


def _additive(mask, dtype):
    """A bool mask (True = not allowed, MultiheadAttention's convention) becomes 0 / -inf;
    a float mask is added as it is."""
    if mask.dtype.kind == "b":
        return ops.where(mask, float("-inf"), 0.0).astype(dtype)
    return mask.astype(dtype)


class MultiheadAttention(Module):
    """Multi-head attention: ``forward(query, key, value) -> (output, weights)``.

    Inputs are (L, N, E), or (N, L, E) with ``batch_first``, or unbatched (L, E).
    ``attn_mask`` is (L, S) or (N * num_heads, L, S); ``key_padding_mask`` is (N, S); bool
    masks mark the positions that may *not* be attended to. ``need_weights`` returns the
    attention weights, averaged over heads unless ``average_attn_weights=False``.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be a positive multiple of "
                             f"num_heads ({num_heads})")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv / add_zero_attn are not "
                                      "supported")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.batch_first = batch_first
        if self._qkv_same_embed_dim:
            self.in_proj_weight = _empty((3 * embed_dim, embed_dim), device, dtype)
            for n in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(n, None)
        else:
            self.q_proj_weight = _empty((embed_dim, embed_dim), device, dtype)
            self.k_proj_weight = _empty((embed_dim, self.kdim), device, dtype)
            self.v_proj_weight = _empty((embed_dim, self.vdim), device, dtype)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = _empty((3 * embed_dim,), device, dtype)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        device=device, dtype=dtype)
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _projections(self):
        e = self.embed_dim
        if self._qkv_same_embed_dim:
            ws = [_rows(self.in_proj_weight, i * e, (i + 1) * e) for i in range(3)]
        else:
            ws = [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
        b = self.in_proj_bias
        bs = [None] * 3 if b is None else [_rows(b, i * e, (i + 1) * e) for i in range(3)]
        return ws, bs

    def _mask(self, attn_mask, key_padding_mask, is_causal, n, l, s, dtype):
        """One additive float mask broadcastable to (N, H, L, S), or None."""
        h = self.num_heads
        mask = None
        if attn_mask is None and is_causal:
            rows = ops.arange(l, device=self.out_proj.weight.device).reshape((l, 1))
            attn_mask = ops.arange(s, device=rows.device).reshape((1, s)) > rows
        if attn_mask is not None:
            if tuple(attn_mask.shape) == (l, s):
                mask = _additive(attn_mask, dtype)
            elif tuple(attn_mask.shape) == (n * h, l, s):
                mask = _additive(attn_mask, dtype).reshape((n, h, l, s))
            else:
                raise ValueError(f"attn_mask has shape {tuple(attn_mask.shape)}, expected "
                                 f"{(l, s)} or {(n * h, l, s)}")
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (n, s):
                raise ValueError(f"key_padding_mask has shape {tuple(key_padding_mask.shape)}, "
                                 f"expected {(n, s)}")
            kpm = _additive(key_padding_mask, dtype).reshape((n, 1, 1, s))
            mask = kpm if mask is None else mask + kpm
        return mask

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        batched = query.ndim == 3
        if not batched:
            query, key, value = (t.reshape((1,) + tuple(t.shape)) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.reshape((1,) + tuple(key_padding_mask.shape))
        elif not self.batch_first:
            query, key, value = (t.swapaxes(0, 1) for t in (query, key, value))
        n, l, e = query.shape
        s = key.shape[1]
        if e != self.embed_dim:
            raise ValueError(f"query has embedding size {e}, expected {self.embed_dim}")
        h, d = self.num_heads, self.head_dim
        (wq, wk, wv), (bq, bk, bv) = self._projections()

        def heads(x, w, b, length):
            return F.linear(x, w, b).reshape((n, length, h, d)).permute(0, 2, 1, 3)

        q, k, v = heads(query, wq, bq, l), heads(key, wk, bk, s), heads(value, wv, bv, s)
        mask = self._mask(attn_mask, key_padding_mask, is_causal, n, l, s, q.dtype)
        p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            scores = (q @ k.swapaxes(-1, -2)) * (1.0 / math.sqrt(d))
            weights = F.softmax(scores + mask if mask is not None else scores, dim=-1)
            out = F.dropout(weights, p) @ v if p > 0 else weights @ v
            if average_attn_weights:
                weights = weights.mean(axis=1)
            if not batched:
                weights = weights.reshape(tuple(weights.shape[1:]))
        elif attn_mask is None and key_padding_mask is None and is_causal:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        out = self.out_proj(out.permute(0, 2, 1, 3).reshape((n, l, e)))
        if not batched:
            out = out.reshape((l, e))
        elif not self.batch_first:
            out = out.swapaxes(0, 1)
        return out, weights

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, " \
               f"batch_first={self.batch_first}"
