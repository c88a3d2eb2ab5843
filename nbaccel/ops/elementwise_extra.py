"""Elementwise spellings that add no op: clip/clamp, nan_to_num, isposinf, isneginf, rint.
(real/imag/conj/angle are ops of their own: :mod:`.complex_ops`.) Autograd, tracing and code generation see only the ops they call."""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as D, ops
from ..tensor_meta import is_tensor
from .fronts import as_tensor, as_tensor_arg
from .registry import defalias
from .elementwise import _float_of


def _result_dtype(x, lo, hi):
    """NumPy's clip is one ufunc of three operands: its dtype is theirs together, Python
    scalars weak (bool with 1.5 and a float32 bound gives float32, not the float64 of bool
    with 1.5 alone)."""
    bounds = [as_tensor_arg(v) for v in (lo, hi) if v is not None]
    return D.result_type(x, *bounds, default_float=D.float64 if x._np else D.float32)


def _bound(v, x, dt, lower):
    """A clip bound as an operand of the result dtype ``dt``. A Python int out of ``dt``'s
    range raises OverflowError (NumPy 2), except that for an integer x one beyond the range on
    the side it does not clip (a min below it, a max above it) clips nothing and is taken."""
    if isinstance(v, int) and not isinstance(v, bool) and dt.kind in "iu":
        info = np.iinfo(dt.np)
        lo, hi = int(info.min), int(info.max)
        clips_nothing = x.dtype.kind in "iu" and (v < lo if lower else v > hi)
        if not (lo <= v <= hi or clips_nothing):
            raise OverflowError(f"Python integer {v} out of bounds for {dt.np}")
        v = builtins.min(builtins.max(v, lo), hi)
    return as_tensor_arg(v)


def clip(x, min=None, max=None, out=None, *, a_min=None, a_max=None):
    """Clamp x to [min, max]; either bound may be None, a scalar or a tensor.

    The Array API's (and PyTorch's) ``min``/``max``, positional or by name; NumPy's names
    ``a_min``/``a_max`` work too (NumPy 2 takes both spellings, one of each pair at most).
    NumPy values and promotion (min > max gives max; NaN in x or in a tensor bound gives
    NaN; the result dtype is that of x and both bounds together, Python scalars weak);
    PyTorch's gradient (1 inside [min, max] including the bounds, else 0; a tensor bound gets
    the gradient where it is selected)."""
    x = as_tensor(x)
    if out is not None:
        raise TypeError("clip: out= is not supported")
    if (a_min is not None and min is not None) or (a_max is not None and max is not None):
        raise ValueError("clip: give only one of a_min and min, and of a_max and max")
    lo = a_min if min is None else min
    hi = a_max if max is None else max
    if lo is None and hi is None:
        return x.clone()
    dt = _result_dtype(x, lo, hi)
    r = x if x.dtype is dt else x.astype(dt)
    for bound, cmp, lower in ((lo, ops.less, True), (hi, ops.greater, False)):
        if bound is None:
            continue
        bound = _bound(bound, x, dt, lower)
        take = cmp(r, bound)
        if is_tensor(bound) and bound.dtype.kind == "f":
            take = ops.logical_or(take, ops.isnan(bound))
        r = ops.where(take, bound, r)
    return r if r.dtype is dt else r.astype(dt)


def _clip_(self, *args, **kwargs):
    return self._assign(clip(self, *args, **kwargs), "clip_")


defalias("clip", clip, numpy="clip", methods=("clip", "clamp"))
defalias("clamp", clip)
defalias("clip_", _clip_, methods=("clip_", "clamp_"))


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """Replace NaN by ``nan`` and +-inf by ``posinf``/``neginf`` (default: the dtype's
    largest/smallest finite value). Integer and bool tensors come back unchanged."""
    x = as_tensor(x)
    if x.dtype.kind == "c":   # NumPy: each part on its own
        parts = [nan_to_num(p, copy, nan, posinf, neginf) for p in (ops.real(x), ops.imag(x))]
        return ops.complex(*parts)
    if x.dtype.kind != "f":
        return x.clone() if copy else x
    info = D.finfo(x.dtype)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    r = ops.where(ops.isnan(x), nan, x)
    r = ops.where(ops.equal(x, float("inf")), posinf, r)
    return ops.where(ops.equal(x, float("-inf")), neginf, r)


defalias("nan_to_num", nan_to_num, numpy="nan_to_num", methods="nan_to_num")


def _no_complex(name, x):
    if x.dtype.kind == "c":
        raise TypeError(f"{name} is not defined for complex tensors (as in NumPy)")


def isposinf(x):
    """x == +inf, elementwise (bool)."""
    x = as_tensor(x)
    _no_complex("isposinf", x)
    return ops.logical_and(ops.isinf(x), ops.greater(x, 0))


def isneginf(x):
    """x == -inf, elementwise (bool)."""
    x = as_tensor(x)
    _no_complex("isneginf", x)
    return ops.logical_and(ops.isinf(x), ops.less(x, 0))


defalias("isposinf", isposinf, numpy="isposinf", methods="isposinf")
defalias("isneginf", isneginf, numpy="isneginf", methods="isneginf")


def rint(x):
    """Round to the nearest integer, half to even, as a float (NumPy's ``rint``)."""
    return ops.round(_float_of(as_tensor(x)))


defalias("rint", rint, numpy="rint")
