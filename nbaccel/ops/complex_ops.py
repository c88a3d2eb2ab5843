"""Complex numbers: the parts of a complex tensor and the ops that build or measure one.

Primitives: ``real``, ``imag`` (views into a complex tensor, as in NumPy), ``conj`` (NumPy's
``conjugate`` ufunc) and ``complex`` (``torch.complex(real, imag)``: a complex tensor from its
parts, exact for infinities and NaNs, unlike ``re + 1j * im``). ``angle`` is a composite
(``atan2(imag, real)``).

On real tensors the parts follow NumPy: ``real(x)`` is ``x`` itself, ``imag(x)`` zeros of
x's dtype, ``conj(x)`` a copy (bool computes as int8, NumPy's loop); ``angle(x)`` is 0 or pi
in x's float dtype (bool gives the default float).

Autograd: complex tensors never require grad (see ``dispatch.apply``: an op that makes a
complex tensor from an input that requires grad raises). ``real``/``imag``/``conj``/``angle``
of a *real* tensor are differentiable (identity, zero, identity, zero).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D, ops
from ..tensor_meta import is_tensor
from .fronts import apply, as_tensor, as_tensor_arg
from .meta import apply_dtype_rule, broadcast_shapes, default_float, shape_of
from .registry import defop


# ---- parts ----------------------------------------------------------------------------------

def _part_infer(args, params):
    x = args[0]
    return x.shape, D.real_of(x.dtype)


def _real_front(x):
    """The real part (a view of a complex tensor; a real tensor itself, as NumPy)."""
    x = as_tensor(x)
    if x.dtype.kind != "c":
        return x
    return apply(real, (x,), {})


def _imag_front(x):
    """The imaginary part (a view of a complex tensor; zeros of x's dtype for a real one)."""
    x = as_tensor(x)
    if x.dtype.kind != "c":
        return ops.zeros_like(x)
    return apply(imag, (x,), {})


real = defop("real", kind="unary", impl=lambda xp, x: xp.real(x), infer=_part_infer,
             grad=lambda g, out, x: (g,), view=True,
             front=_real_front, numpy="real",
             doc="The real part of a complex tensor (NumPy's view).")
imag = defop("imag", kind="unary", impl=lambda xp, x: xp.imag(x), infer=_part_infer,
             grad=lambda g, out, x: (ops.zeros_like(g),), view=True,
             front=_imag_front, numpy="imag",
             doc="The imaginary part of a complex tensor (NumPy's view).")

conj = defop("conj", kind="unary", impl=lambda xp, x: xp.conjugate(x), dtype_rule="int8bool",
             grad=lambda g, out, x: (g,), 
             methods=("conj", "conjugate", "conj_physical"), numpy=("conjugate", "conj"),
             doc="Complex conjugate, elementwise (a copy of a real tensor; bool as int8).")


# ---- complex(real, imag) --------------------------------------------------------------------

def _complex_infer(args, params):
    shape = broadcast_shapes(*(shape_of(a) for a in args))
    for a in args:
        if (is_tensor(a) and a.dtype.kind == "c") or isinstance(a, complex):
            raise TypeError("complex: the real and imaginary parts must be real")
    dt = D.result_type(*args, default_float=default_float(args))
    if dt.kind != "f":
        dt = default_float(args)
    return shape, D.complex_of(dt)


def _complex_impl(xp, re, im):
    shape = np.broadcast_shapes(np.shape(re), np.shape(im))
    out = xp.empty(shape, dtype=xp.result_type(re, im, 1j))
    out.real = re
    out.imag = im
    return out


def _no_grad(g, out, re, im):
    # never reached: dispatch.apply refuses to record autograd for a complex result
    raise NotImplementedError("nbaccel has no autograd through complex tensors")


def _complex_front(real, imag):
    """A complex tensor from its real and imaginary parts (``torch.complex``): exact for
    infinities and NaNs, which ``real + 1j * imag`` is not (inf * 1j has a NaN real part)."""
    a, b = as_tensor_arg(real), as_tensor_arg(imag)
    if not is_tensor(a) and not is_tensor(b):
        a = as_tensor(a)
    return apply(complex_, (a, b), {})


complex_ = defop("complex", kind="binary", impl=_complex_impl, infer=_complex_infer,
                 grad=_no_grad, operands="own",   # the real parts, not the complex result
                 front=_complex_front,
                 doc="A complex tensor from real and imaginary parts (torch.complex).")


# ---- angle ----------------------------------------------------------------------------------

def _angle_infer(args, params):
    x = args[0]
    if x.dtype.kind == "c":
        return x.shape, D.real_of(x.dtype)
    if x.dtype.kind == "b":          # NumPy: arctan2(0.0, bool) is float64
        return x.shape, default_float(args)
    return x.shape, apply_dtype_rule("ufloat", x.dtype, args)


def _angle_decomp(x, deg=False):
    _, dt = _angle_infer((x,), {})
    if x.dtype.kind == "c":
        r = ops.atan2(ops.imag(x), ops.real(x))
    else:
        xf = x.astype(dt)
        r = ops.atan2(ops.zeros_like(xf), xf)
    return r * (180.0 / math.pi) if deg else r


def _angle_impl(xp, x, deg=False):
    return xp.angle(x, deg=deg)


def _angle_front(z, deg=False):
    """The argument of each element, in radians (degrees with ``deg=True``): NumPy's angle."""
    return apply(angle, (as_tensor(z),), {"deg": bool(deg)})


angle = defop("angle", kind="unary", decomp=_angle_decomp, impl=_angle_impl, infer=_angle_infer,
              grad=lambda g, out, x, deg=False: (ops.zeros_like(g),), front=_angle_front,
              methods="angle", numpy="angle",
              doc="The argument (phase) of complex elements; 0 or pi for real ones.")
