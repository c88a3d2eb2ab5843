"""Normalisation ops: LayerNorm, RMSNorm and BatchNorm's training mode (batch statistics), with
LayerNorm's and BatchNorm's gradients as ops of their own.

Eagerly, on float32/float64 NumPy arrays, LayerNorm and BatchNorm forward and backward each
run one fused kernel (``nbaccel_kernels.fused``: the statistics, the normalisation and the
affine in one or two passes over a row or a channel, the sums in float64) once its numba
code has loaded in the background; meanwhile, on CuPy and in other dtypes, the NumPy
expressions run. ``decomp`` spells every op in primitives for the compiler, which fuses
them itself; the gradients' own gradients (double backward) go through those decompositions.

BatchNorm's four training ops and LayerNorm's three also declare an ``extern_backend``
(``fused_extern``): a compiled graph on the CPU keeps them whole and calls the same fused
kernels (compiler/capture/decompose.py), so both modes run one kernel with one rounding, and
the compiled step traces fewer nodes (the CNN step 60 fewer). Measured: the CNN step as fast
as with the generated statistics-and-normalise kernels or a little faster, the GPT step 1.16x
(docs/benchmarks.md, "Compiled training steps against eager").
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D, ops
from .fronts import apply, as_tensor
from .kernel_modules import fused_extern, fused_for as _fused, rows as _rows
from .meta import ShapeError, default_float
from .nn import _float_input, _float_infer, _grad_infer, _split
from .registry import defop
from ..autograd import needs_input_grad as need


# ---- normalisation --------------------------------------------------------------------------

def _norm_shape(x, normalized_shape, name):
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    ns = tuple(int(s) for s in ns)
    if len(ns) > x.ndim or tuple(x.shape[x.ndim - len(ns):]) != ns:
        raise ShapeError(f"{name}: normalized_shape={list(ns)} expects an input of shape "
                         f"[*, {', '.join(map(str, ns))}], got {list(x.shape)}")
    return ns


def _check_affine(t, ns, what, name):
    if t is not None and tuple(t.shape) != ns:
        raise ShapeError(f"{name}: {what} has shape {tuple(t.shape)}, expected normalized_shape "
                         f"{ns}")


def _norm_infer(args, params):
    dt = D.result_type(*args, default_float=default_float(args))
    return args[0].shape, dt if dt.kind == "f" else default_float(args)


def _layer_norm_front(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    x = _float_input(input, "layer_norm")
    ns = _norm_shape(x, normalized_shape, "layer_norm")
    weight = None if weight is None else as_tensor(weight)
    bias = None if bias is None else as_tensor(bias)
    _check_affine(weight, ns, "weight", "layer_norm")
    _check_affine(bias, ns, "bias", "layer_norm")
    args = (x,) + tuple(t for t in (weight, bias) if t is not None)
    return apply(layer_norm, args, {"ndims": len(ns), "eps": float(eps),
                                    "affine": (weight is not None, bias is not None)})


def _last_axes(x, ndims):
    return tuple(range(x.ndim - ndims, x.ndim))


def _layer_norm_impl(xp, x, *wb, ndims, eps, affine):
    """Written against an array namespace: NumPy/CuPy for eager, nbaccel itself for the
    decomposition (whose mean and sqrt then decompose further into primitives)."""
    w, b = _split(wb, affine)
    k = _fused(xp, x, *wb)
    if k is not None and x.size:
        n = math.prod(x.shape[x.ndim - ndims:])
        out = np.empty(x.shape, x.dtype)
        dummy = x.reshape(-1)[:1]
        k.layer_norm_forward(_rows(x, n), dummy if w is None else _rows(w, n)[0],
                             dummy if b is None else _rows(b, n)[0], w is not None, b is not None,
                             float(eps), out.reshape(-1, n))
        return out
    axes = _last_axes(x, ndims)
    xc = x - xp.mean(x, axis=axes, keepdims=True)
    y = xc / xp.sqrt(xp.mean(xc * xc, axis=axes, keepdims=True) + eps)
    y = y * w if w is not None else y
    return y + b if b is not None else y


def _layer_norm_decomp(x, *wb, ndims, eps, affine):
    return _layer_norm_impl(ops, x, *wb, ndims=ndims, eps=eps, affine=affine)


def _affine_grads(g, xhat, x, ndims, w, b):
    batch = tuple(range(x.ndim - ndims))
    out = []
    if w is not None:
        out.append((g * xhat).sum(axis=batch) if batch else g * xhat)
    if b is not None:
        out.append(g.sum(axis=batch) if batch else g)
    return out


def _ln_stats(m, x, ndims, eps):
    axes = _last_axes(x, ndims)
    xc = x - m.mean(x, axis=axes, keepdims=True)
    rstd = 1 / m.sqrt(m.mean(xc * xc, axis=axes, keepdims=True) + eps)
    return xc * rstd, rstd


def _ln_backward_impl(m, g, x, *w, ndims, eps):
    """LayerNorm's input gradient, written against an array namespace."""
    axes = _last_axes(x, ndims)
    xhat, rstd = _ln_stats(m, x, ndims, eps)
    gh = g * w[0] if w else g
    return rstd * (gh - m.mean(gh, axis=axes, keepdims=True)
                   - xhat * m.mean(gh * xhat, axis=axes, keepdims=True))


def _ln_backward_eager(xp, g, x, *w, ndims, eps):
    k = _fused(xp, g, x, *w) if g.shape == x.shape and x.size else None
    if k is not None:
        n = math.prod(x.shape[x.ndim - ndims:])
        out = np.empty(x.shape, x.dtype)
        k.layer_norm_backward(_rows(g, n), _rows(x, n), _rows(w[0], n)[0] if w else x.reshape(-1)[:1],
                              bool(w), float(eps), out.reshape(-1, n))
        return out
    return _ln_backward_impl(xp, g, x, *w, ndims=ndims, eps=eps)


layer_norm_backward = defop(
    "layer_norm_backward", kind="nn", infer=_grad_infer, impl=_ln_backward_eager,
    extern_backend=fused_extern,
    decomp=lambda g, x, *w, ndims, eps: _ln_backward_impl(ops, g, x, *w, ndims=ndims, eps=eps),
    front=lambda g, x, *w, ndims, eps: apply(layer_norm_backward, (g, x) + tuple(w),
                                             {"ndims": int(ndims), "eps": float(eps)}),
    doc="LayerNorm's input gradient (``w``: its weight, when affine): one fused pass per row "
        "eagerly (the mean and rstd recomputed in cache); its gradient goes through the "
        "decomposition.")


def _ln_affine_impl(m, g, x, ndims, eps, stack):
    xhat, _ = _ln_stats(m, x, ndims, eps)
    batch = tuple(range(x.ndim - ndims))
    return stack([m.sum(g * xhat, axis=batch), m.sum(g, axis=batch)])


def _ln_affine_eager(xp, g, x, ndims, eps):
    k = _fused(xp, g, x) if g.shape == x.shape and x.size else None
    if k is not None:
        ns = x.shape[x.ndim - ndims:]
        n = math.prod(ns)
        out = np.empty((2, n), x.dtype)
        k.layer_norm_affine_backward(_rows(g, n), _rows(x, n), float(eps), out)
        return out.reshape((2,) + ns)
    return _ln_affine_impl(xp, g, x, ndims, eps, xp.stack)


layer_norm_affine_backward = defop(
    "layer_norm_affine_backward", kind="nn", impl=_ln_affine_eager, extern_backend=fused_extern,
    infer=lambda args, p: ((2,) + tuple(args[1].shape[args[1].ndim - p["ndims"]:]),
                           _grad_infer(args, p)[1]),
    decomp=lambda g, x, ndims, eps: _ln_affine_impl(ops, g, x, ndims, eps, ops.stack),
    front=lambda g, x, ndims, eps: apply(layer_norm_affine_backward, (g, x),
                                         {"ndims": int(ndims), "eps": float(eps)}),
    doc="LayerNorm's weight and bias gradients stacked, ``[sum(g * xhat), sum(g)]`` over the "
        "batch dims: one fused pass eagerly.")


def _layer_norm_grad(g, out, x, *wb, ndims, eps, affine):
    w, b = _split(wb, affine)
    gx = layer_norm_backward.front(g, x, *((w,) if w is not None else ()), ndims=ndims, eps=eps) \
        if need(0) else None
    grads = [gx]
    if w is not None or b is not None:
        wants = [need(i + 1) for i in range(len(wb))]
        ab = layer_norm_affine_backward.front(g, x, ndims, eps) if any(wants) else None
        if w is not None:
            grads.append(ab[0] if wants[0] else None)
        if b is not None:
            grads.append(ab[1] if wants[-1] else None)
    return tuple(grads)


layer_norm = defop("layer_norm", kind="nn", infer=_norm_infer, decomp=_layer_norm_decomp,
                   impl=_layer_norm_impl, grad=_layer_norm_grad, front=_layer_norm_front,
                   extern_backend=fused_extern,
                   doc="(x - mean) / sqrt(var + eps) * weight + bias over the trailing "
                       "``normalized_shape`` dims (biased variance, as PyTorch).")


# ---- batch normalisation (training mode: batch statistics) ----------------------------------------
# ``nn.functional.batch_norm`` in training mode: (x - mean_c) / sqrt(var_c + eps) * w_c + b_c over
# channel axis 1 of (N, C, *) input, the statistics over every other axis. Eval mode is plain
# pointwise arithmetic on the running statistics (the compiler fuses it after a convolution).

def _bn_axes(x):
    return (0,) + tuple(range(2, x.ndim))


def _channel(t, x):
    return t.reshape((1, x.shape[1]) + (1,) * (x.ndim - 2))


def _bn3(x):
    """(N, C, L) C-contiguous view of (N, C, *) x."""
    return np.ascontiguousarray(x).reshape(x.shape[0], x.shape[1], -1)


def _bn_stats_impl(m, x, stack):
    axes = _bn_axes(x)
    mean = m.mean(x, axis=axes, keepdims=True)
    xc = x - mean
    return stack([m.reshape(mean, (x.shape[1],)),
                  m.reshape(m.mean(xc * xc, axis=axes), (x.shape[1],))])


def _bn_stats_eager(xp, x):
    k = _fused(xp, x) if x.size else None
    if k is not None:
        out = np.empty((2, x.shape[1]), x.dtype)
        k.batch_norm_stats(_bn3(x), out)
        return out
    return _bn_stats_impl(xp, x, xp.stack)


batch_norm_stats = defop(
    "batch_norm_stats", kind="nn", impl=_bn_stats_eager, differentiable=False,
    extern_backend=fused_extern,
    infer=lambda args, p: ((2, args[0].shape[1]), _float_infer(args, p)[1]),
    decomp=lambda x: _bn_stats_impl(ops, x, ops.stack),
    front=lambda x: apply(batch_norm_stats, (x,), {}),
    doc="``[mean, biased variance]`` of each channel (axis 1) of (N, C, *) x, stacked: one "
        "pass per channel eagerly (BatchNorm's running statistics).")


def _bn_train_impl(m, x, *wb, eps, affine):
    axes = _bn_axes(x)
    xc = x - m.mean(x, axis=axes, keepdims=True)
    y = xc / m.sqrt(m.mean(xc * xc, axis=axes, keepdims=True) + eps)
    w, b = _split(wb, affine)
    y = y * _channel(w, x) if w is not None else y
    return y + _channel(b, x) if b is not None else y


def _bn_train_eager(xp, x, *wb, eps, affine):
    k = _fused(xp, x, *wb) if x.size else None
    if k is not None:
        w, b = _split(wb, affine)
        out = np.empty(x.shape, x.dtype)
        dummy = x.reshape(-1)[:1]
        k.batch_norm_forward(_bn3(x), dummy if w is None else np.ascontiguousarray(w),
                             dummy if b is None else np.ascontiguousarray(b), w is not None,
                             b is not None, float(eps), out.reshape(_bn3(x).shape))
        return out
    return _bn_train_impl(xp, x, *wb, eps=eps, affine=affine)


def _bn_backward_impl(m, g, x, *w, eps):
    axes = _bn_axes(x)
    xc = x - m.mean(x, axis=axes, keepdims=True)
    rstd = 1 / m.sqrt(m.mean(xc * xc, axis=axes, keepdims=True) + eps)
    xhat = xc * rstd
    gh = g * _channel(w[0], x) if w else g
    return rstd * (gh - m.mean(gh, axis=axes, keepdims=True)
                   - xhat * m.mean(gh * xhat, axis=axes, keepdims=True))


def _bn_backward_eager(xp, g, x, *w, eps):
    k = _fused(xp, g, x, *w) if g.shape == x.shape and x.size else None
    if k is not None:
        out = np.empty(x.shape, x.dtype)
        k.batch_norm_backward(_bn3(g), _bn3(x), np.ascontiguousarray(w[0]) if w else
                              x.reshape(-1)[:1], bool(w), float(eps), out.reshape(_bn3(x).shape))
        return out
    return _bn_backward_impl(xp, g, x, *w, eps=eps)


batch_norm_backward = defop(
    "batch_norm_backward", kind="nn", infer=_grad_infer, impl=_bn_backward_eager,
    extern_backend=fused_extern,
    decomp=lambda g, x, *w, eps: _bn_backward_impl(ops, g, x, *w, eps=eps),
    front=lambda g, x, *w, eps: apply(batch_norm_backward, (g, x) + tuple(w), {"eps": float(eps)}),
    doc="BatchNorm's (training mode) input gradient: one fused pass per channel eagerly; its "
        "gradient goes through the decomposition.")


def _bn_affine_impl(m, g, x, eps, stack):
    axes = _bn_axes(x)
    xc = x - m.mean(x, axis=axes, keepdims=True)
    xhat = xc / m.sqrt(m.mean(xc * xc, axis=axes, keepdims=True) + eps)
    return stack([m.sum(g * xhat, axis=axes), m.sum(g, axis=axes)])


def _bn_affine_eager(xp, g, x, eps):
    k = _fused(xp, g, x) if g.shape == x.shape and x.size else None
    if k is not None:
        out = np.empty((2, x.shape[1]), x.dtype)
        k.batch_norm_affine_backward(_bn3(g), _bn3(x), float(eps), out)
        return out
    return _bn_affine_impl(xp, g, x, eps, xp.stack)


batch_norm_affine_backward = defop(
    "batch_norm_affine_backward", kind="nn", extern_backend=fused_extern, impl=_bn_affine_eager,
    infer=lambda args, p: ((2, args[1].shape[1]), _grad_infer(args, p)[1]),
    decomp=lambda g, x, eps: _bn_affine_impl(ops, g, x, eps, ops.stack),
    front=lambda g, x, eps: apply(batch_norm_affine_backward, (g, x), {"eps": float(eps)}),
    doc="BatchNorm's weight and bias gradients stacked, ``[sum(g * xhat), sum(g)]`` per "
        "channel: one pass eagerly.")


def _bn_train_grad(g, out, x, *wb, eps, affine):
    w, b = _split(wb, affine)
    gx = batch_norm_backward.front(g, x, *((w,) if w is not None else ()), eps=eps) \
        if need(0) else None
    grads = [gx]
    if w is not None or b is not None:
        wants = [need(i + 1) for i in range(len(wb))]
        ab = batch_norm_affine_backward.front(g, x, eps) if any(wants) else None
        if w is not None:
            grads.append(ab[0] if wants[0] else None)
        if b is not None:
            grads.append(ab[1] if wants[-1] else None)
    return tuple(grads)


batch_norm_train = defop(
    "batch_norm_train", kind="nn", infer=_norm_infer, impl=_bn_train_eager,
    extern_backend=fused_extern,
    decomp=lambda x, *wb, eps, affine: _bn_train_impl(ops, x, *wb, eps=eps, affine=affine),
    grad=_bn_train_grad,
    front=lambda x, *wb, eps, affine: apply(batch_norm_train, (x,) + tuple(wb),
                                            {"eps": float(eps), "affine": tuple(affine)}),
    doc="BatchNorm in training mode over channel axis 1 with the batch's statistics (biased "
        "variance) and the per-channel affine: one fused pass per channel eagerly.")


def _rms_norm_front(input, normalized_shape, weight=None, eps=None):
    x = _float_input(input, "rms_norm")
    ns = _norm_shape(x, normalized_shape, "rms_norm")
    weight = None if weight is None else as_tensor(weight)
    _check_affine(weight, ns, "weight", "rms_norm")
    eps = float(D.finfo(x.dtype).eps) if eps is None else float(eps)
    args = (x,) + ((weight,) if weight is not None else ())
    return apply(rms_norm, args, {"ndims": len(ns), "eps": eps, "affine": (weight is not None,)})


def _rms_norm_decomp(x, *w, ndims, eps, affine):
    y = x / ops.sqrt(ops.mean(x * x, axis=_last_axes(x, ndims), keepdims=True) + eps)
    return y * w[0] if w else y


def _rms_norm_impl(xp, x, *w, ndims, eps, affine):
    y = x / xp.sqrt(xp.mean(x * x, axis=_last_axes(x, ndims), keepdims=True) + eps)
    return y * w[0] if w else y


def _rms_norm_grad(g, out, x, *w, ndims, eps, affine):
    axes = _last_axes(x, ndims)
    rstd = 1 / ops.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    xhat = x * rstd
    w = w[0] if w else None
    gh = g * w if w is not None else g
    gx = rstd * (gh - xhat * (gh * xhat).mean(axis=axes, keepdims=True))
    return (gx, *_affine_grads(g, xhat, x, ndims, w, None))


rms_norm = defop("rms_norm", kind="nn", infer=_norm_infer, decomp=_rms_norm_decomp,
                 impl=_rms_norm_impl, grad=_rms_norm_grad, front=_rms_norm_front,
                 doc="x / sqrt(mean(x**2) + eps) * weight over the trailing dims "
                     "(eps defaults to the dtype's machine epsilon, as PyTorch).")
