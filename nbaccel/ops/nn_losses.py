"""Losses (cross_entropy, mse_loss). scaled_dot_product_attention lives in :mod:`nbaccel.ops.attention`.

cross_entropy works with the class axis last (the front moves it there): the target becomes
a per-class weight ``a = weight * q`` (q the one-hot or probability target, label-smoothed),
the loss of a row is ``-sum(a * log_softmax(x))`` and its gradient ``softmax(x) * sum(a) - a``.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D, ops
from .fronts import apply, as_tensor
from .meta import broadcast_shapes, default_float
from .kernel_modules import fused_extern, fused_for as _fused
from .nn import ShapeError, _grad_infer, log_softmax
from .registry import defop
from ..autograd import needs_input_grad as need

_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(reduction, name):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


# ---- cross entropy ---------------------------------------------------------------------------

def _arange(m, n, like, is_xp):
    return m.arange(n) if is_xp else m.arange(n, device=like.device)


def _class_weights(m, x, t, w, probs, ignore_index, smoothing, is_xp):
    """(a, wrow): a = per-class target weights, shaped like x; wrow = the weight of each row's
    true class (one-hot times weight: its sum is the 'mean' denominator), None for
    probability targets."""
    n = x.shape[-1]
    if probs:
        q = t * (1 - smoothing) + smoothing / n if smoothing else t
        return (q * w if w is not None else q), None
    classes = _arange(m, n, x, is_xp).reshape((1,) * t.ndim + (n,))
    tt = t.reshape(tuple(t.shape) + (1,))
    valid = (tt != ignore_index).astype(x.dtype)
    onehot = (tt == classes).astype(x.dtype) * valid
    q = onehot * (1 - smoothing) + valid * (smoothing / n) if smoothing else onehot
    wrow = onehot * w if w is not None else onehot
    return (q * w if w is not None else q), wrow


def _reduce(m, loss, wrow, x, reduction, is_xp):
    if reduction == "none":
        return loss
    total = m.sum(loss)
    if reduction == "sum":
        return total
    if wrow is None:   # probability targets: mean over the rows
        rows = math.prod(x.shape[:-1])
        return total / rows if rows else total * float("nan")
    denom = m.sum(wrow)
    if is_xp and not denom:   # every target ignored: nan, as PyTorch (without a warning)
        return total * float("nan")
    return total / denom


def _ce_impl(xp, x, t, *w, reduction, ignore_index, label_smoothing, probs):
    n = x.shape[-1]
    if not probs and t.size:
        bad = (t != ignore_index) & ((t < 0) | (t >= n))
        if bad.any():
            raise IndexError(f"cross_entropy: target {int(t[bad].reshape(-1)[0])} is out of "
                             f"bounds for {n} classes")
    if not probs and not w and not label_smoothing and x.size:
        k = _fused(xp, x)
        if k is not None:     # class indices, no weights, no smoothing: one pass per row
            x2 = np.ascontiguousarray(x).reshape(-1, n)
            loss = np.empty(x2.shape[0], x.dtype)
            count = k.cross_entropy_forward(x2, np.ascontiguousarray(t, np.int64).reshape(-1),
                                            ignore_index, loss)
            if reduction == "none":
                return loss.reshape(t.shape)
            total = loss.sum(dtype=np.float64)
            if reduction == "mean":
                total = total / count if count else float("nan")
            return np.asarray(total, x.dtype)
    w = w[0] if w else None
    s = x - xp.max(x, axis=-1, keepdims=True) if x.size else x
    logp = s - xp.log(xp.sum(xp.exp(s), axis=-1, keepdims=True))
    a, wrow = _class_weights(xp, x, t, w, probs, ignore_index, label_smoothing, True)
    # a is 0 where the target is 0: keep -inf logits from turning 0 * -inf into nan
    loss = -xp.sum(xp.where(a != 0, a * logp, 0), axis=-1)
    return _reduce(xp, loss, wrow, x, reduction, True)


def _ce_decomp(x, t, *w, reduction, ignore_index, label_smoothing, probs):
    w = w[0] if w else None
    logp = log_softmax.front(x, -1)
    a, wrow = _class_weights(ops, x, t, w, probs, ignore_index, label_smoothing, False)
    loss = -ops.sum(ops.where(a != 0, a * logp, 0), axis=-1)
    return _reduce(ops, loss, wrow, x, reduction, False)


def _ce_backward_impl(m, g, x, t, *w, reduction, ignore_index, label_smoothing, probs,
                      is_xp=False):
    """The logits' gradient of cross_entropy, written against an array namespace (NumPy/CuPy,
    or nbaccel's ops for the decomposition)."""
    wt = w[0] if w else None
    a, wrow = _class_weights(m, x, t, wt, probs, ignore_index, label_smoothing, is_xp)
    if reduction == "none":
        scale = m.reshape(g, tuple(g.shape) + (1,))
    elif reduction == "sum":
        scale = g
    elif wrow is None:
        scale = g / math.prod(x.shape[:-1])
    else:
        scale = g / m.sum(wrow)
    if is_xp:
        e = m.exp(x - m.max(x, axis=-1, keepdims=True)) if x.size else x
        sm = e / m.sum(e, axis=-1, keepdims=True)
    else:
        sm = m.softmax(x, -1)
    return (sm * m.sum(a, axis=-1, keepdims=True) - a) * scale


def _ce_backward_eager(xp, g, x, t, *w, reduction, ignore_index, label_smoothing, probs):
    if not probs and not w and not label_smoothing and x.size:
        k = _fused(xp, x)
        if k is not None:
            n = x.shape[-1]
            x2 = np.ascontiguousarray(x).reshape(-1, n)
            t1 = np.ascontiguousarray(t, np.int64).reshape(-1)
            if reduction == "none":
                scale = np.ascontiguousarray(g, np.float64).reshape(-1)
            else:
                gv = float(g)
                if reduction == "mean":
                    count = int(np.count_nonzero(t1 != ignore_index))
                    gv = gv / count if count else float("nan")
                scale = np.full(x2.shape[0], gv)
            out = np.empty(x.shape, x.dtype)
            k.cross_entropy_backward(x2, t1, ignore_index, scale, out.reshape(-1, n))
            return out
    return _ce_backward_impl(xp, g, x, t, *w, reduction=reduction, ignore_index=ignore_index,
                             label_smoothing=label_smoothing, probs=probs, is_xp=True)


def _ce_backward_front(g, x, t, *w, reduction, ignore_index, label_smoothing, probs):
    return apply(cross_entropy_backward, (g, x, t) + tuple(w),
                 {"reduction": reduction, "ignore_index": int(ignore_index),
                  "label_smoothing": float(label_smoothing), "probs": bool(probs)})


def _ce_extern(params):
    """Compiled graphs keep cross-entropy whole where its fused kernel applies (class indices,
    no label smoothing; a weight is an argument and takes the NumPy path inside the same op);
    probabilities and smoothing decompose into the generated kernels."""
    return None if params.get("probs") or params.get("label_smoothing") else fused_extern(params)


cross_entropy_backward = defop(
    "cross_entropy_backward", kind="nn", impl=_ce_backward_eager, extern_backend=_ce_extern,
    infer=lambda args, p: (args[1].shape, _grad_infer(args[1:2], p)[1]),
    decomp=lambda g, x, t, *w, **p: _ce_backward_impl(ops, g, x, t, *w, **p),
    front=_ce_backward_front,
    doc="cross_entropy's gradient with respect to the logits (class axis last): "
        "``(softmax(x) * sum(a) - a) * scale``; one fused pass per row eagerly for class-index "
        "targets without weights or smoothing. Its gradient goes through the decomposition.")


def _ce_grad(g, out, x, t, *w, reduction, ignore_index, label_smoothing, probs):
    wt = w[0] if w else None
    gx = _ce_backward_front(g, x, t, *w, reduction=reduction, ignore_index=ignore_index,
                            label_smoothing=label_smoothing, probs=probs) if need(0) else None
    gt = None
    if probs and t.requires_grad:   # probability targets are differentiable too
        if reduction == "none":
            scale = g.reshape(tuple(g.shape) + (1,))
        elif reduction == "sum":
            scale = g
        else:
            scale = g / math.prod(x.shape[:-1])
        logp = log_softmax.front(x, -1)
        d = -logp * (1 - label_smoothing)
        gt = (d * wt if wt is not None else d) * scale
    return (gx, gt) + ((None,) if w else ())


def _ce_infer(args, params):
    x = args[0]
    shape = tuple(x.shape[:-1]) if params["reduction"] == "none" else ()
    return shape, x.dtype


def _cross_entropy_front(input, target, weight=None, size_average=None, ignore_index=-100,
                         reduce=None, reduction="mean", label_smoothing=0.0):
    if size_average is not None or reduce is not None:
        raise TypeError("cross_entropy: size_average/reduce are deprecated; use reduction=")
    _check_reduction(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    x, t = as_tensor(input), as_tensor(target)
    if x.dtype.kind != "f":
        raise TypeError(f"cross_entropy: input must be floating point, got {x.dtype}")
    if x.ndim == 0:
        raise ShapeError("cross_entropy: input must have a class dimension, got a 0-d tensor")
    probs = t.dtype.kind == "f"
    if probs and tuple(t.shape) != tuple(x.shape):
        raise ShapeError(f"cross_entropy: probability target of shape {tuple(t.shape)} must "
                         f"match input of shape {tuple(x.shape)}")
    if not probs:
        if t.dtype.kind not in "iu":
            raise TypeError(f"cross_entropy: target must be class indices (integers) or "
                            f"probabilities (floats), got {t.dtype}")
        want = tuple(x.shape[:1]) + tuple(x.shape[2:]) if x.ndim > 1 else ()
        if tuple(t.shape) != want:
            raise ShapeError(f"cross_entropy: target of shape {tuple(t.shape)} doesn't match "
                             f"input of shape {tuple(x.shape)} (expected {want})")
    if x.ndim > 2:   # (N, C, d1, ...) -> (N, d1, ..., C): the class axis goes last
        perm = (0,) + tuple(range(2, x.ndim)) + (1,)
        x = x.permute(perm)
        if probs:
            t = t.permute(perm)
    args = (x, t)
    if weight is not None:
        weight = as_tensor(weight)
        if tuple(weight.shape) != (x.shape[-1],):
            raise ShapeError(f"cross_entropy: weight of shape {tuple(weight.shape)} must be "
                             f"({x.shape[-1]},), one per class")
        args += (weight,)
    params = {"reduction": reduction, "ignore_index": int(ignore_index),
              "label_smoothing": float(label_smoothing), "probs": probs}
    return apply(cross_entropy, args, params)


cross_entropy = defop(
    "cross_entropy", kind="nn", infer=_ce_infer, impl=_ce_impl, decomp=_ce_decomp,
    extern_backend=_ce_extern,
    grad=_ce_grad, front=_cross_entropy_front,
    doc="Cross entropy between logits (class axis 1) and class indices or probabilities, "
        "with ``weight``, ``ignore_index``, ``label_smoothing`` and ``reduction`` as PyTorch.")


# ---- mean squared error ----------------------------------------------------------------------

def _mse_decomp(x, y, reduction):
    d = x - y
    sq = d * d
    return sq if reduction == "none" else sq.sum() if reduction == "sum" else sq.mean()


def _mse_impl(xp, x, y, reduction):
    d = x - y
    sq = d * d
    return sq if reduction == "none" else xp.sum(sq) if reduction == "sum" else xp.mean(sq)


def _mse_grad(g, out, x, y, reduction):
    shape = broadcast_shapes(x.shape, y.shape)
    if reduction == "none":
        d = 2 * (x - y) * g
    else:   # scale the 0-d incoming grad first: one full-size product instead of three
        scale = 2 / max(math.prod(shape), 1) if reduction == "mean" else 2
        d = (x - y) * (g * scale)
    return d, (-d if need(1) else None)


def _mse_infer(args, params):
    shape = broadcast_shapes(*(a.shape for a in args))
    dt = D.result_type(*args, default_float=default_float(args))
    dt = dt if dt.kind == "f" else default_float(args)
    return (shape if params["reduction"] == "none" else ()), dt


def _mse_front(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    if size_average is not None or reduce is not None:
        raise TypeError("mse_loss: size_average/reduce are deprecated; use reduction=")
    if weight is not None:
        raise NotImplementedError("mse_loss: weight= is not supported")
    _check_reduction(reduction, "mse_loss")
    return apply(mse_loss, (as_tensor(input), as_tensor(target)), {"reduction": reduction})


mse_loss = defop("mse_loss", kind="nn", infer=_mse_infer, impl=_mse_impl, decomp=_mse_decomp,
                 grad=_mse_grad, front=_mse_front,
                 doc="Mean (or sum, or elementwise) squared error between input and target.")
