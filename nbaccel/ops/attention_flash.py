"""The fused attention ops: ``flash_attention`` and its backward, run whole by the kernels in
``nbaccel_kernels.attention`` (CPU: BLAS tiles + numba; CUDA: Triton).

Ops have one output, so the forward's output packs the log-sum-exp the backward needs beside
the attention output: ``flash_attention`` returns (B, Hq, L, Dv + 1), the last column being
each row's LSE, and the front slices the output off it (a view). The backward op returns the
three gradients flattened and concatenated; the grad rule slices them apart. Neither op
decomposes: the compiler runs each as one extern step, labelled ``flash`` in the report.
"""
from __future__ import annotations

import math

from .registry import defop
from .indexing import strided_slice
from .fronts import apply
from . import kernel_modules


def _kernels(xp):
    return kernel_modules.kernels("attention", xp)


def _flash_impl(xp, q, k, v, *mask, scale, causal, kernel):
    mask = mask[0] if mask else None
    if kernel == "cpu":        # the kernel writes straight into the packed buffer
        packed = xp.empty(tuple(q.shape[:-1]) + (v.shape[-1] + 1,), q.dtype)
        _kernels(xp).attention_forward(q, k, v, scale, causal, mask, out=packed[..., :-1],
                                       lse=packed[..., -1])
        return packed
    out, lse = _kernels(xp).attention_forward(q, k, v, scale, causal, mask)
    return xp.concatenate([out, lse[..., None].astype(out.dtype)], axis=-1)


def _flash_infer(args, params):
    q, _, v = args[:3]
    return tuple(q.shape[:-1]) + (v.shape[-1] + 1,), q.dtype


def slice_last(t, start, stop):
    """t[..., start:stop] as a strided_slice (a view whose gradient is a slice_scatter, not the
    general index scatter of getitem)."""
    slices = tuple((0, n, 1) for n in t.shape[:-1]) + ((start, stop, 1),)
    return strided_slice.front(t, slices)


def _flash_grad(g, out, q, k, v, *mask, scale, causal, kernel):
    flat = apply_backward(g, q, k, v, out, mask, scale, causal)
    nq, nk = math.prod(q.shape), math.prod(k.shape)
    dq = slice_last(flat, 0, nq).reshape(tuple(q.shape))
    dk = slice_last(flat, nq, nq + nk).reshape(tuple(k.shape))
    dv = slice_last(flat, nq + nk, flat.shape[0]).reshape(tuple(v.shape))
    return (dq, dk, dv) + (None,) * len(mask)


def _flash_backward_impl(xp, g, q, k, v, packed, *mask, scale, causal, kernel):
    d_v = v.shape[-1]
    args = (g[..., :d_v], q, k, v, packed[..., :d_v], packed[..., d_v], scale, causal,
            mask[0] if mask else None)
    if kernel == "cpu":        # the kernel accumulates straight into views of the flat result
        nq, nk = q.size, k.size
        flat = xp.zeros(nq + nk + v.size, q.dtype)
        _kernels(xp).attention_backward(*args, dq=flat[:nq].reshape(q.shape),
                                        dk=flat[nq:nq + nk].reshape(k.shape),
                                        dv=flat[nq + nk:].reshape(v.shape))
        return flat
    dq, dk, dv = _kernels(xp).attention_backward(*args)
    return xp.concatenate([dq.reshape(-1), dk.reshape(-1), dv.reshape(-1)])


def _flash_backward_infer(args, params):
    q, k, v = args[1:4]
    return (math.prod(q.shape) + math.prod(k.shape) + math.prod(v.shape),), q.dtype


def apply_forward(q, k, v, mask, scale, causal):
    """The packed (B, Hq, L, Dv + 1) output of the fused kernel on 4-D tensors."""
    args = (q, k, v) + ((mask,) if mask is not None else ())
    return apply(flash_attention, args, {"scale": float(scale), "causal": bool(causal),
                                         "kernel": _kernel_name(q)})


def apply_backward(g, q, k, v, packed, mask, scale, causal):
    return apply(flash_attention_backward, (g, q, k, v, packed) + tuple(mask),
                 {"scale": float(scale), "causal": bool(causal), "kernel": _kernel_name(q)})


def _kernel_name(q):
    """Which kernel the impl will run, kept in the params so the report can say it."""
    return "cpu" if q.device.type == "cpu" else "triton"


def _label(params):
    return "flash" if params.get("kernel", "cpu") == "cpu" else "triton-flash"


flash_attention = defop(
    "flash_attention", kind="nn", impl=_flash_impl, infer=_flash_infer, grad=_flash_grad,
    front=lambda q, k, v, mask=None, scale=1.0, causal=False: apply_forward(q, k, v, mask, scale, causal),
    extern_backend=_label,
    doc="Fused attention on (B, Hq, L, D) / (B, Hkv, S, D) / (B, Hkv, S, Dv) tensors with an "
        "optional additive mask: softmax(q k^T scale + mask) v with the row log-sum-exp packed "
        "as a last column (B, Hq, L, Dv + 1). Used by scaled_dot_product_attention's flash "
        "backend.")

flash_attention_backward = defop(
    "flash_attention_backward", kind="nn", impl=_flash_backward_impl,
    infer=_flash_backward_infer, differentiable=False,
    front=lambda g, q, k, v, packed, mask=None, scale=1.0, causal=False: apply_backward(
        g, q, k, v, packed, () if mask is None else (mask,), scale, causal),
    extern_backend=_label,
    doc="Gradients of flash_attention, rebuilt from its saved log-sum-exp: dq, dk and dv "
        "flattened and concatenated.")
