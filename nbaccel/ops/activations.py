"""Clamping activations: ``leaky_relu`` and ``hardtanh`` (``relu6`` is hardtanh(0, 6)).

Composites whose gradient is written from the *output* (``out > 0``, ``min < out < max``), not
the input, so the in-place forms (``nn.LeakyReLU(inplace=True)`` after a BatchNorm, as DCGAN
does) leave nothing stale for autograd, as in PyTorch.
"""
from __future__ import annotations

from .fronts import apply, as_tensor
from .registry import defop
from .. import ops


def _leaky_front(input, negative_slope=0.01, inplace=False):
    x = as_tensor(input)
    out = apply(leaky_relu, (x,), {"slope": float(negative_slope)})
    return x._assign(out) if inplace else out


leaky_relu = defop(
    "leaky_relu", kind="unary", dtype_rule="nobool",
    decomp=lambda x, slope: ops.where(x > 0, x, x * slope),
    impl=lambda xp, x, slope: xp.where(x > 0, x, x * x.dtype.type(slope)),
    grad=lambda g, out, x, slope: (ops.where(out > 0, g, g * slope),),
    front=_leaky_front,
    doc="x where x > 0, else negative_slope * x (``F.leaky_relu``).")


def _hardtanh_front(input, min_val=-1.0, max_val=1.0, inplace=False):
    x = as_tensor(input)
    out = apply(hardtanh, (x,), {"lo": float(min_val), "hi": float(max_val)})
    return x._assign(out) if inplace else out


hardtanh = defop(
    "hardtanh", kind="unary", dtype_rule="nobool",
    decomp=lambda x, lo, hi: ops.where(x <= lo, lo, ops.where(x >= hi, hi, x)).astype(x.dtype),
    impl=lambda xp, x, lo, hi: xp.clip(x, lo, hi).astype(x.dtype, copy=False),
    grad=lambda g, out, x, lo, hi: (ops.where((out > lo) & (out < hi), g, 0),),
    front=_hardtanh_front,
    doc="x clipped to [min_val, max_val]; the gradient is 1 strictly inside (``F.hardtanh``).")
