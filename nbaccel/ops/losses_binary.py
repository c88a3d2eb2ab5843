"""Binary losses: ``binary_cross_entropy`` (of probabilities) and
``binary_cross_entropy_with_logits``, with PyTorch's formulas.

``binary_cross_entropy`` clamps each log to >= -100, as PyTorch does, so a probability of
exactly 0 or 1 gives a finite loss; its derivative is PyTorch's
``(x - y) / max(x * (1 - x), 1e-12)``, finite there too. The logits form uses the stable
``(1 - y) * x + (1 + (pos_weight - 1) * y) * (log1p(exp(-|x|)) + max(-x, 0))``.
"""
from __future__ import annotations

import math

from .fronts import apply, as_tensor
from .meta import broadcast_shapes
from .registry import defop
from .. import ops

_REDUCTIONS = ("none", "mean", "sum")


def _reduce(loss, reduction):
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()


def _infer(args, params):
    shape = broadcast_shapes(*(a.shape for a in args))
    return (shape if params["reduction"] == "none" else ()), args[0].dtype


def _check(input, target, weight, reduction, name):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    x, y = as_tensor(input), as_tensor(target)
    if x.dtype.kind != "f":
        raise TypeError(f"{name}: input must be floating point, got {x.dtype}")
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"{name}: Using a target size ({tuple(y.shape)}) that is different to "
                         f"the input size ({tuple(x.shape)}) is deprecated. Please ensure they "
                         "have the same size.")
    if y.dtype is not x.dtype:
        y = y.astype(x.dtype)
    args = (x, y)
    if weight is not None:
        w = as_tensor(weight)
        args += (w.astype(x.dtype) if w.dtype is not x.dtype else w,)
    return args


# ---- binary_cross_entropy ----------------------------------------------------------------------

def _bce_decomp(x, y, *w, reduction):
    logx = ops.clamp(ops.log(x), min=-100.0)
    log1mx = ops.clamp(ops.log(1 - x), min=-100.0)
    loss = -(y * logx + (1 - y) * log1mx)
    if w:
        loss = loss * w[0]
    return _reduce(loss, reduction)


def _xp_reduce(xp, loss, reduction):
    return loss if reduction == "none" else xp.sum(loss) if reduction == "sum" else xp.mean(loss)


def _bce_impl(xp, x, y, *w, reduction):
    with _quiet(xp):
        logx = xp.maximum(xp.log(x), -100.0)
        log1mx = xp.maximum(xp.log(1 - x), -100.0)
    loss = -(y * logx + (1 - y) * log1mx)
    if w:
        loss = loss * w[0]
    return _xp_reduce(xp, loss, reduction)


def _quiet(xp):
    """log(0) is -inf by design here (then clamped): no NumPy warning about it."""
    import contextlib
    return xp.errstate(divide="ignore") if hasattr(xp, "errstate") else contextlib.nullcontext()


def _bce_grad(g, out, x, y, *w, reduction):
    d = (x - y) / ops.clamp((1 - x) * x, min=1e-12)
    if w:
        d = d * w[0]
    if reduction == "mean":
        g = g / max(math.prod(broadcast_shapes(*(a.shape for a in (x, y) + w))), 1)
    gy = None
    if y.requires_grad:      # d/dy = log(1 - x) - log(x), clamped as the loss is
        gy = (ops.clamp(ops.log(1 - x), min=-100.0) - ops.clamp(ops.log(x), min=-100.0)) * \
            (w[0] if w else 1) * g
    return (d * g, gy) + ((None,) if w else ())


def _bce_front(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        raise TypeError("binary_cross_entropy: size_average/reduce are deprecated; use reduction=")
    args = _check(input, target, weight, reduction, "binary_cross_entropy")
    x = args[0]
    if x._node is None and x.numel() and not (bool(((x >= 0) & (x <= 1)).all())):
        raise RuntimeError("binary_cross_entropy: all elements of input should be between 0 and 1")
    return apply(binary_cross_entropy, args, {"reduction": reduction})


binary_cross_entropy = defop(
    "binary_cross_entropy", kind="nn", infer=_infer, impl=_bce_impl, decomp=_bce_decomp, grad=_bce_grad,
    front=_bce_front,
    doc="Binary cross entropy between probabilities ``input`` and ``target`` (logs clamped "
        "at -100 as PyTorch), with ``weight`` and ``reduction``.")


# ---- binary_cross_entropy_with_logits -----------------------------------------------------------

def _bcel_decomp(x, y, *rest, reduction, has_weight, has_pos_weight):
    w = rest[0] if has_weight else None
    pw = rest[-1] if has_pos_weight else None
    soft = ops.log1p(ops.exp(-ops.abs(x))) + ops.maximum(-x, 0.0)
    if pw is not None:
        loss = (1 - y) * x + ((pw - 1) * y + 1) * soft
    else:
        loss = (1 - y) * x + soft
    if w is not None:
        loss = loss * w
    return _reduce(loss, reduction)


def _bcel_impl(xp, x, y, *rest, reduction, has_weight, has_pos_weight):
    w = rest[0] if has_weight else None
    pw = rest[-1] if has_pos_weight else None
    soft = xp.log1p(xp.exp(-xp.abs(x))) + xp.maximum(-x, 0)
    loss = (1 - y) * x + (((pw - 1) * y + 1) * soft if pw is not None else soft)
    if w is not None:
        loss = loss * w
    return _xp_reduce(xp, loss, reduction)


def _bcel_grad(g, out, x, y, *rest, reduction, has_weight, has_pos_weight):
    w = rest[0] if has_weight else None
    pw = rest[-1] if has_pos_weight else None
    s = ops.sigmoid(x)
    d = ((pw - 1) * y + 1) * s - pw * y if pw is not None else s - y
    if w is not None:
        d = d * w
    if reduction == "mean":
        g = g / max(math.prod(broadcast_shapes(*(a.shape for a in (x, y) + rest))), 1)
    gy = None
    if y.requires_grad:
        gy = -x if pw is None else (pw - 1) * (ops.log1p(ops.exp(-ops.abs(x))) + ops.maximum(-x, 0.0)) - x
        gy = (gy * w if w is not None else gy) * g
    return (d * g, gy) + (None,) * len(rest)


def _bcel_front(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                pos_weight=None):
    if size_average is not None or reduce is not None:
        raise TypeError("binary_cross_entropy_with_logits: size_average/reduce are deprecated; "
                        "use reduction=")
    args = _check(input, target, weight, reduction, "binary_cross_entropy_with_logits")
    if pos_weight is not None:
        pw = as_tensor(pos_weight)
        args += (pw.astype(args[0].dtype) if pw.dtype is not args[0].dtype else pw,)
    return apply(binary_cross_entropy_with_logits, args,
                 {"reduction": reduction, "has_weight": weight is not None,
                  "has_pos_weight": pos_weight is not None})


binary_cross_entropy_with_logits = defop(
    "binary_cross_entropy_with_logits", kind="nn", infer=_infer, impl=_bcel_impl, decomp=_bcel_decomp,
    grad=_bcel_grad, front=_bcel_front,
    doc="Binary cross entropy of ``sigmoid(input)`` against ``target``, computed stably from "
        "logits, with ``weight``, ``pos_weight`` and ``reduction`` as PyTorch.")
