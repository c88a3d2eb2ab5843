"""Which scaled_dot_product_attention backend runs: the SDPBackend enum, the ``sdpa_kernel``
context manager (PyTorch's ``torch.nn.attention`` spelling) and each backend's conditions.

>>> from nbaccel.ops.attention_backends import SDPBackend, sdpa_kernel, enabled_backends
>>> with sdpa_kernel(SDPBackend.MATH):
...     enabled_backends()
[<SDPBackend.MATH: 0>]
"""
from __future__ import annotations

import contextlib
import enum
import threading


class SDPBackend(enum.IntEnum):
    """The attention backends, named as in ``torch.nn.attention.SDPBackend``. nbaccel has
    MATH (the composite op, which the compiler decomposes and fuses) and FLASH_ATTENTION (the
    fused kernel); the others exist so PyTorch code that names them runs, and never apply."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_ALL = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
        SDPBackend.MATH]
_state = threading.local()


def enabled_backends() -> list:
    """The backends scaled_dot_product_attention may choose from on this thread, in order."""
    return list(getattr(_state, "enabled", _ALL))


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Restrict scaled_dot_product_attention to ``backends`` (one SDPBackend or a list) inside
    the block. With ``set_priority=True`` the list order is the order they are tried in;
    otherwise the flash kernel is preferred over the math path, as in PyTorch.

    >>> import nbaccel as nb
    >>> from nbaccel.nn.attention import sdpa_kernel, SDPBackend
    >>> q = nb.randn(1, 2, 4, 8)
    >>> with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
    ...     out = nb.nn.functional.scaled_dot_product_attention(q, q, q)
    """
    if isinstance(backends, SDPBackend):
        backends = [backends]
    backends = list(backends)
    for b in backends:
        if not isinstance(b, SDPBackend):
            raise TypeError(f"sdpa_kernel: expected SDPBackend members, got {b!r}")
    if not set_priority:
        backends = [b for b in _ALL if b in backends]
    prev = getattr(_state, "enabled", None)
    _state.enabled = backends
    try:
        yield
    finally:
        if prev is None:
            del _state.enabled
        else:
            _state.enabled = prev


def flash_refusal(q, k, v, mask, dropout_p, gqa) -> str | None:
    """Why the fused kernel cannot take these inputs, or None when it can."""
    if dropout_p > 0:
        return (f"dropout_p={dropout_p}: the fused kernel applies no dropout (nbaccel's dropout "
                "draws an L×S keep-mask from its seeded generator); use dropout_p=0 or the math path")
    if q.dtype.name not in ("float32", "float64") and q.device.type == "cpu":
        return f"the CPU kernel takes float32 or float64, got {q.dtype}"
    if q.dtype.name not in ("float16", "bfloat16", "float32") and q.device.type != "cpu":
        return f"the Triton kernel takes float16, bfloat16 or float32, got {q.dtype}"
    if not (q.dtype == k.dtype == v.dtype):
        return f"query, key and value have different dtypes ({q.dtype}, {k.dtype}, {v.dtype})"
    if q.ndim > 4 or not (q.ndim == k.ndim == v.ndim):
        return (f"the fused kernel takes inputs of 2 to 4 dims, all alike: query {tuple(q.shape)}, "
                f"key {tuple(k.shape)}, value {tuple(v.shape)}")
    lead = 3 if gqa else 2     # GQA heads (dim -3) may differ; everything before must match
    if tuple(q.shape[:-lead]) != tuple(k.shape[:-lead]) or tuple(k.shape[:-1]) != tuple(v.shape[:-1]):
        return (f"the fused kernel does not broadcast batch dims: query {tuple(q.shape)}, key "
                f"{tuple(k.shape)}, value {tuple(v.shape)}")
    if mask is not None and mask.requires_grad:
        return "attn_mask requires grad, and the fused kernel gives no gradient for the mask"
    if q.requires_grad or k.requires_grad or v.requires_grad:
        if q.device.type != "cpu" and q.dtype.name != "float32":
            return "the Triton backward takes float32"
    return None


def refusal(backend, q, k, v, mask, dropout_p, gqa) -> str | None:
    if backend == SDPBackend.MATH:
        return None
    if backend == SDPBackend.FLASH_ATTENTION:
        return flash_refusal(q, k, v, mask, dropout_p, gqa)
    return f"{backend.name} is not implemented in nbaccel"


def choose(q, k, v, mask, dropout_p, gqa) -> SDPBackend:
    """The first enabled backend that can take the inputs; a RuntimeError listing every
    enabled backend's reason when none can."""
    reasons = []
    for b in enabled_backends():
        why = refusal(b, q, k, v, mask, dropout_p, gqa)
        if why is None:
            return b
        reasons.append(f"{b.name}: {why}")
    if not reasons:
        raise RuntimeError("scaled_dot_product_attention: no backend is enabled (sdpa_kernel([]))")
    raise RuntimeError("scaled_dot_product_attention: no enabled backend can take these inputs:\n  "
                       + "\n  ".join(reasons))
