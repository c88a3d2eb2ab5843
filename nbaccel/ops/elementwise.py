"""Elementwise ops: the unary and binary primitives (with their per-element renderings) and
the composites built from them (Python Array API 2024.12 set, NumPy and PyTorch spellings).

Primitive or composite: an op stays primitive when a decomposition would lose precision or
range (expm1, log1p, tan, the inverse trig and hyperbolic functions, erf) or when it is a
single instruction anyway. Composites (log2, log10, exp2, sinh, cosh, square, reciprocal,
rsqrt, sigmoid, hypot, logaddexp) carry a ``decomp`` for the compiler plus a fast eager
``impl`` and a ``grad``. Spellings that add no op (clip, nan_to_num, real, ...) live in
:mod:`.elementwise_extra`; the eager implementations that are more than one ufunc call (erf,
complex expm1's special cases, sigmoid, integer reciprocal, quiet integer division) live in
:mod:`.elementwise_xp`, on raw arrays.

Result dtypes follow NumPy 2 (dtype rules in :mod:`.meta`): float functions of integer
input give the smallest float that holds it on NumPy-flavoured tensors (int8 -> float16) and
nbaccel's default float32 otherwise; ops with no bool loop in NumPy (power, floor_divide,
remainder, square) compute bool as int8; negative of bool, subtraction of bools and bitwise
ops on floats raise TypeError, positive and sign of bool NumPy's UFuncTypeError (a subclass).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D, ops
from ..devices import array_module
from ..tensor_meta import TensorMetadata, is_tensor
from .fronts import ENGINE, apply, as_tensor, as_tensor_arg
from .meta import (real_only, no_bool_loop, broadcast_shapes, default_float, shape_of, default_infer,
    apply_dtype_rule, cast_weak_int)
from .registry import OPS, defop
from .elementwise_xp import (_TWO_OVER_SQRT_PI, _expm1_standard, _quiet_ufunc, _recip_impl, _sigmoid_impl,
                             _ufunc, erf_xp, where_impl)

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _zero_grad(g, out, *args, **params):
    """Piecewise-constant ops (floor, sign, round, ...): zero gradient, as in PyTorch."""
    return tuple(ops.zeros_like(g) if is_tensor(a) else None for a in args)


def _ufloat_binary_infer(args, params):
    """NumPy's float loops for two operands: each integer operand goes to the smallest float
    that holds it (uint8 with int8 -> float16, not float32); a Python float with only
    integer operands gives the default float."""
    shape = broadcast_shapes(*(shape_of(a) for a in args))
    strong = [a for a in args if is_tensor(a)]
    if all(a.dtype.kind != "f" for a in strong) and any(isinstance(a, float) for a in args):
        return shape, default_float(args)
    npflag = default_float(args) is D.float64
    all_bool = all(a.dtype.kind == "b" for a in strong)
    vals = [(D.int64 if all_bool and type(a) is int else a) if not is_tensor(a) else
            a if a.dtype.kind == "f" else
            (D._promote(a.dtype, D.float16) if npflag else D.float32) for a in args]
    vals = [(D.float64 if npflag else D.float32) if v is D.int64 else v for v in vals]
    return shape, D.result_type(*vals, default_float=default_float(args))


# ---- binary arithmetic -------------------------------------------------------------------

def _binary_args(a, b):
    """The operands of a binary front: array-likes become Tensors, a Python scalar stays (weak)
    unless both are scalars. (Fronts test for two tensors themselves, a call less per op.)"""
    a, b = as_tensor_arg(a), as_tensor_arg(b)
    if not is_tensor(a) and not is_tensor(b):
        a = as_tensor(a)
    return a, b


def _add_front(a, b, *, alpha=1):
    """a + alpha * b, broadcasting (``alpha`` as in PyTorch)."""
    if not (isinstance(a, TensorMetadata) and isinstance(b, TensorMetadata)):
        a, b = _binary_args(a, b)
    return apply(add, (a, b if alpha == 1 else b * alpha), {})


def _sub_front(a, b, *, alpha=1):
    """a - alpha * b, broadcasting (``alpha`` as in PyTorch)."""
    if not (isinstance(a, TensorMetadata) and isinstance(b, TensorMetadata)):
        a, b = _binary_args(a, b)
    return apply(sub, (a, b if alpha == 1 else b * alpha), {})


add = defop("add", kind="binary", impl=_ufunc("add"), front=_add_front,
            grad=lambda g, out, a, b: (g, g), 
            methods=("add", "__add__", "__radd__"), numpy="add", inplace=True)
sub = defop("subtract", kind="binary", impl=_ufunc("subtract"), front=_sub_front,
            grad=lambda g, out, a, b: (g, -g), 
            methods=("sub", "subtract", "__sub__", "__rsub__"), numpy="subtract", inplace=True,
            dtype_rule="nobool")
mul = defop("multiply", kind="binary", impl=_ufunc("multiply"),
            # (a Python scalar operand, x * 0.9, gets no gradient: no g * x for it)
            grad=lambda g, out, a, b: (g * b if is_tensor(a) else None,
                                       g * a if is_tensor(b) else None),
            methods=("mul", "multiply", "__mul__", "__rmul__"), numpy="multiply", inplace=True)


def _div_front(a, b, *, rounding_mode=None):
    """True division; PyTorch's ``rounding_mode`` 'floor' / 'trunc' rounds the quotient."""
    if not (isinstance(a, TensorMetadata) and isinstance(b, TensorMetadata)):
        a, b = _binary_args(a, b)
    if rounding_mode is None:
        return apply(div, (a, b), {})
    if rounding_mode == "floor":
        return floor_divide.front(a, b)
    if rounding_mode != "trunc":
        raise ValueError("div: rounding_mode must be None, 'floor' or 'trunc', "
                         f"got {rounding_mode!r}")
    q = floor_divide.front(a, b)
    if q.dtype.kind == "f":
        return ops.trunc(apply(div, (a, b), {})).astype(q.dtype)
    # integers: floor and trunc differ where the division is inexact and the signs differ
    inexact = ops.not_equal(ops.remainder(a, b), 0)
    fix = ops.logical_and(inexact, ops.not_equal(ops.less(a, 0), ops.less(b, 0)))
    return ops.where(fix, q + 1, q)


div = defop("divide", kind="binary", impl=_ufunc("true_divide"),
            grad=lambda g, out, a, b: (g / b, -g * out / b), 
            methods=("div", "divide", "true_divide", "__truediv__", "__rtruediv__"),
            numpy=("divide", "true_divide"), inplace=True, dtype_rule="float", front=_div_front)

floor_divide = defop(
    "floor_divide", kind="binary", impl=_quiet_ufunc("floor_divide"), differentiable=False,
    dtype_rule="int8bool",
    methods=("floor_divide", "__floordiv__", "__rfloordiv__"), numpy="floor_divide", inplace=True)

remainder = defop(
    "remainder", kind="binary", impl=_quiet_ufunc("remainder"), dtype_rule="int8bool",
    grad=lambda g, out, a, b: (g, -g * ops.floor_divide(a, b)),
    methods=("remainder", "__mod__", "__rmod__"), numpy=("remainder", "mod"), inplace=True)

fmod = defop("fmod", kind="binary", impl=_quiet_ufunc("fmod"), dtype_rule="int8bool",
             grad=lambda g, out, a, b: (g, -g * ops.trunc(a / b)),
             methods="fmod", numpy="fmod", inplace=True)


def _minmax_grad(g, out, a, b):
    # ties split the gradient evenly, as PyTorch does
    ea = ops.equal(a, out).astype(g.dtype)
    eb = ops.equal(b, out).astype(g.dtype)
    tot = ea + eb
    return (g * ea / tot, g * eb / tot)


maximum = defop("maximum", kind="binary", impl=_ufunc("maximum"), grad=_minmax_grad,
                methods="maximum", numpy="maximum")
minimum = defop("minimum", kind="binary", impl=_ufunc("minimum"), grad=_minmax_grad,
                methods="minimum", numpy="minimum")


def _pow_grad(g, out, a, b):
    ga = g * b * ops.power(a, b - 1) if not isinstance(b, (int, float)) or b != 0 else None
    gb = None
    if is_tensor(b) and b.requires_grad:
        gb = g * out * ops.log(ops.where(ops.greater(a, 0), a, 1))
    return (ga, gb)


def _power_infer(args, params):
    """NumPy refuses integer arrays to negative integer powers whatever the data: so does the
    shape rule (tracing raises where NumPy raises, and an unused power still raises)."""
    shape, dtype = default_infer("binary", "int8bool")(args, params)
    b = args[1]
    size = 1
    for d in getattr(args[0], "shape", ()):
        size *= d
    if dtype.kind in "iu" and isinstance(b, int) and not isinstance(b, bool) and b < 0 and size:
        raise ValueError("Integers to negative integer powers are not allowed.")
    return shape, dtype


power = defop("power", kind="binary", impl=_ufunc("power"), grad=_pow_grad, dtype_rule="int8bool",
              infer=_power_infer, methods=("pow", "__pow__", "__rpow__"), numpy=("power", "pow"), inplace=True)

atan2 = defop("atan2", kind="binary", infer=_ufloat_binary_infer, impl=_ufunc("arctan2"),
              dtype_rule="ufloat",
              grad=lambda g, out, a, b: (g * b / (a * a + b * b), -g * a / (a * a + b * b)),
              methods=("atan2", "arctan2"), numpy=("arctan2", "atan2"), inplace=True)


def _copysign_grad(g, out, a, b):
    flip = ops.not_equal(ops.signbit(a), ops.signbit(b))
    return (ops.where(flip, -g, g), ops.zeros_like(g) if is_tensor(b) else None)


copysign = defop("copysign", kind="binary", infer=_ufloat_binary_infer, impl=_ufunc("copysign"),
                 dtype_rule="ufloat",
                 grad=_copysign_grad, 
                 methods="copysign", numpy="copysign", inplace=True)

# ---- comparisons and logic (bool results, not differentiable) -------------------------------

for _name, _methods in [
        ("equal", ("eq", "__eq__")), ("not_equal", ("ne", "__ne__")),
        ("less", ("lt", "less", "__lt__")), ("less_equal", ("le", "less_equal", "__le__")),
        ("greater", ("gt", "greater", "__gt__")),
        ("greater_equal", ("ge", "greater_equal", "__ge__"))]:
    defop(_name, kind="binary", impl=_ufunc(_name), differentiable=False, dtype_rule="bool",
          operands="common", methods=_methods, numpy=_name)

for _name in ("logical_and", "logical_or", "logical_xor"):
    defop(_name, kind="binary", impl=_ufunc(_name), differentiable=False, dtype_rule="bool",
          operands="own", methods=_name, numpy=_name, inplace=True)

for _name, _uf, _methods, _np_names, _rule in [
        ("bitwise_and", "bitwise_and", ("__and__", "__rand__"), (), "integer"),
        ("bitwise_or", "bitwise_or", ("__or__", "__ror__"), (), "integer"),
        ("bitwise_xor", "bitwise_xor", ("__xor__", "__rxor__"), (), "integer"),
        # NumPy gives 0 (or -1) for shifts by >= the bit width; C and LLVM leave it undefined
        ("bitwise_left_shift", "left_shift", ("__lshift__", "__rlshift__"), ("left_shift",), "shift"),
        ("bitwise_right_shift", "right_shift", ("__rshift__", "__rrshift__"), ("right_shift",), "shift")]:
    defop(_name, kind="binary", impl=_ufunc(_uf), differentiable=False, dtype_rule=_rule,
          methods=(_name,) + _methods, numpy=(_name,) + _np_names, inplace=True)


def _where_front(condition, x, y):
    args = [as_tensor_arg(v) for v in (condition, x, y)]
    if not any(is_tensor(v) for v in args):
        args[0] = as_tensor(args[0])
    if type(args[1]) is int or type(args[2]) is int:    # (every renderer then spells a
        dt = D.result_type(*args[1:], default_float=default_float(args))   # constant its dtype holds)
        args[1:] = [cast_weak_int(v, dt) if type(v) is int else v for v in args[1:]]
    return apply(where, tuple(args), {})


where = defop("where", kind="ternary", impl=where_impl,
              grad=lambda g, out, c, a, b: (None, ops.where(c, g, 0), ops.where(c, 0, g)),
              front=_where_front, methods="where", numpy="where")

# ---- unary primitives ------------------------------------------------------------------------

neg = defop("negative", kind="unary", impl=_ufunc("negative"),
            grad=lambda g, out, x: (-g,), 
            methods=("neg", "negative", "__neg__"), numpy="negative", dtype_rule="nobool", inplace=True)

positive = defop("positive", kind="unary", impl=_ufunc("positive"),
                 grad=lambda g, out, x: (g,), 
                 methods=("positive", "__pos__"), numpy="positive", dtype_rule="nobool")
no_bool_loop(positive, "positive")     # NumPy's UFuncTypeError (negative has its own TypeError)

abs_ = defop("abs", kind="unary", impl=_ufunc("abs"), dtype_rule="real",
             grad=lambda g, out, x: (g * ops.sign(x),), 
             methods=("abs", "absolute", "__abs__"), numpy=("absolute", "abs"), inplace=True)

logical_not = defop("logical_not", kind="unary", impl=_ufunc("logical_not"),
                    differentiable=False, dtype_rule="bool", operands="own",
                    methods="logical_not", numpy="logical_not", inplace=True)

bitwise_invert = defop("bitwise_invert", kind="unary", impl=_ufunc("invert"), differentiable=False,
                       dtype_rule="integer", 
                       methods=("bitwise_not", "bitwise_invert", "__invert__"),
                       numpy=("invert", "bitwise_not", "bitwise_invert"), inplace=True)

signbit = defop("signbit", kind="unary", impl=_ufunc("signbit"), differentiable=False,
                dtype_rule="bool", operands="own",
                methods="signbit", numpy="signbit")

for _name in ("isfinite", "isinf", "isnan"):
    defop(_name, kind="unary", impl=_ufunc(_name), differentiable=False, dtype_rule="bool",
          operands="own", methods=_name, numpy=_name)

# piecewise constant: integer dtypes pass through (NumPy, PyTorch); zero gradient
sign = defop("sign", kind="unary", impl=_ufunc("sign"), grad=_zero_grad, dtype_rule="nobool",
             methods="sign", numpy="sign", inplace=True)
no_bool_loop(sign, "sign")
for _name, _methods in [("floor", ()), ("ceil", ()), ("trunc", ("fix",))]:
    defop(_name, kind="unary", impl=_ufunc(_name), grad=_zero_grad, dtype_rule="same",
          methods=(_name,) + _methods,
          numpy=_name, inplace=True)


def _round_front(x, decimals=0, out=None):
    """Round half to even; ``decimals`` as in NumPy (x * 10**d, rint, / 10**d)."""
    x = as_tensor(x)
    if out is not None:
        raise TypeError("round: out= is not supported")
    decimals = int(decimals)
    if x.dtype is D.bool_:   # NumPy rounds bool through its float loop
        x = _float_of(x)
    if decimals == 0 or (x.dtype.kind in "iu" and decimals > 0):
        return apply(round_, (x,), {})
    f = 10.0 ** abs(decimals)
    if x.dtype.kind in "iu":   # negative decimals of integers: via float, back to the int type
        return (apply(round_, (x / f,), {}) * f).astype(x.dtype)
    if decimals > 0:
        return apply(round_, (x * f,), {}) / f
    return apply(round_, (x / f,), {}) * f


round_ = defop("round", kind="unary", impl=_ufunc("round"), grad=_zero_grad, dtype_rule="nobool",
               front=_round_front,
               methods=("round", "__round__"), numpy=("round", "around"), inplace=True)


def _float_unary(name, np_name, grad, methods=(), front=None):
    """A float function (exp, sin, ...): NumPy's float loops decide the result dtype."""
    return defop(name, kind="unary", impl=_ufunc(np_name), grad=grad, methods=(name,) + tuple(methods),
                 numpy=tuple(dict.fromkeys((np_name, name))), dtype_rule="ufloat", inplace=True,
                 front=front)


def _expm1_front(x):
    """``expm1``. For complex input outside NumPy code (an nbaccel tensor, not a NumPy-flavoured
    one) and outside a trace, the Array API's special cases (``_expm1_standard``); NumPy code
    keeps NumPy's values, as plain NumPy gives them, and so do compiled kernels (see
    docs/array-api.md)."""
    x = x if isinstance(x, ENGINE.Tensor) else as_tensor(x)
    out = apply(expm1, (x,), {})
    if (out.dtype.kind != "c" or x._np or x._node is not None or out._node is not None
            or out.requires_grad):
        return out
    xv, ov = x._data, out._data
    xp = np if isinstance(xv, np.ndarray) else array_module(out.device)
    special = ~(xp.isfinite(xv.real) & xp.isfinite(xv.imag)) | (xv.imag == 0)
    if not bool(special.any()):
        return out
    return ENGINE.asarray(_expm1_standard(xp, xv, ov), device=out.device, _np=False)


def _sqrt1m(x):
    return ops.sqrt(1 - x * x)


exp = _float_unary("exp", "exp", lambda g, out, x: (g * out,))
expm1 = _float_unary("expm1", "expm1", lambda g, out, x: (g * (out + 1),), front=_expm1_front)
log = _float_unary("log", "log", lambda g, out, x: (g / x,))
log1p = _float_unary("log1p", "log1p", lambda g, out, x: (g / (x + 1),))
sqrt = _float_unary("sqrt", "sqrt", lambda g, out, x: (g / (2 * out),))
sin = _float_unary("sin", "sin", lambda g, out, x: (g * ops.cos(x),))
cos = _float_unary("cos", "cos", lambda g, out, x: (-g * ops.sin(x),))
tan = _float_unary("tan", "tan", lambda g, out, x: (g * (1 + out * out),))
asin = _float_unary("asin", "arcsin", lambda g, out, x: (g / _sqrt1m(x),),
                    ("arcsin",))
acos = _float_unary("acos", "arccos", lambda g, out, x: (-g / _sqrt1m(x),),
                    ("arccos",))
atan = _float_unary("atan", "arctan", lambda g, out, x: (g / (1 + x * x),),
                    ("arctan",))
tanh = _float_unary("tanh", "tanh", lambda g, out, x: (OPS["tanh_backward"].front(g, out),))
asinh = _float_unary("asinh", "arcsinh", lambda g, out, x: (g / ops.sqrt(x * x + 1),), ("arcsinh",))
acosh = _float_unary("acosh", "arccosh",
                     lambda g, out, x: (g / (ops.sqrt(x - 1) * ops.sqrt(x + 1)),), ("arccosh",))
atanh = _float_unary("atanh", "arctanh", lambda g, out, x: (g / (1 - x * x),), ("arctanh",))

# ---- erf: NumPy has none, so it is built from xp operations (erf_xp, in elementwise_xp.py) ---

erf = defop("erf", kind="unary", impl=erf_xp, dtype_rule="ufloat", inplace=True,
            grad=lambda g, out, x: (g * _TWO_OVER_SQRT_PI * ops.exp(-(x * x)),),
            methods="erf",
            doc="The error function (float64-accurate to ~1e-15; see erf_xp).")

# ---- unary composites: a decomposition for the compiler, a fast impl and a grad -------------


def _float_of(x):
    """x as the float dtype a float function of it returns (int8 -> float16 for NumPy data)."""
    dt = apply_dtype_rule("ufloat", x.dtype, [x])
    return x if x.dtype is dt else x.astype(dt)


def _composite(name, decomp, impl, grad, rule="ufloat", methods=(), numpy=(), inplace=True):
    return defop(name, kind="unary", decomp=decomp, impl=impl, grad=grad, dtype_rule=rule,
                 methods=(name,) + tuple(methods), numpy=numpy, inplace=inplace)


log2 = _composite("log2", lambda x: ops.log(x) * (1 / _LN2), _ufunc("log2"),
                  lambda g, out, x: (g / (x * _LN2),), numpy="log2")
log10 = _composite("log10", lambda x: ops.log(x) * (1 / _LN10), _ufunc("log10"),
                   lambda g, out, x: (g / (x * _LN10),), numpy="log10")
exp2 = _composite("exp2", lambda x: ops.exp(_float_of(x) * _LN2), _ufunc("exp2"),
                  lambda g, out, x: (g * out * _LN2,), numpy="exp2")


def _sinh(x):
    # expm1 keeps small |x| accurate; e^(|x| - ln 2) keeps sinh finite up to its own overflow
    x = _float_of(x)
    if x.dtype.kind == "c":
        return (ops.exp(x) - ops.exp(-x)) * 0.5
    a = ops.abs(x)
    small = (ops.expm1(x) - ops.expm1(-x)) * 0.5
    big = ops.exp(a - _LN2) - ops.exp(-a - _LN2)
    return ops.where(ops.less(a, 1.0), small, ops.copysign(big, x))


def _cosh(x):
    if x.dtype.kind == "c":
        return (ops.exp(x) + ops.exp(-x)) * 0.5
    a = ops.abs(_float_of(x))
    return ops.exp(a - _LN2) + ops.exp(-a - _LN2)


sinh = _composite("sinh", _sinh, _ufunc("sinh"), lambda g, out, x: (g * ops.cosh(x),),
                  numpy="sinh")
cosh = _composite("cosh", _cosh, _ufunc("cosh"), lambda g, out, x: (g * ops.sinh(x),),
                  numpy="cosh")


sigmoid = _composite("sigmoid", lambda x: 1 / (1 + ops.exp(-_in_result_dtype(sigmoid, x)[0])),
                     _sigmoid_impl,
                     lambda g, out, x: (g * out * (1 - out),), rule="float", methods=("expit",))
rsqrt = _composite("rsqrt", lambda x: 1 / ops.sqrt(x), lambda xp, x: 1 / xp.sqrt(x),
                   lambda g, out, x: (-0.5 * g * out * out * out,))


def _square_decomp(x):
    x = x.astype(D.int8) if x.dtype is D.bool_ else x
    return x * x


square = _composite("square", _square_decomp, _ufunc("square"), lambda g, out, x: (2 * g * x,),
                    rule="int8bool", numpy="square")


def _recip_front(x):
    """1/x. Integer input: NumPy-flavoured tensors keep NumPy's integer reciprocal (1/x
    truncated toward 0, so 0 except at +-1); others give a float32 result, as in PyTorch."""
    x = as_tensor(x)
    if x.dtype.kind not in "fc" and not x._np:
        x = x.astype(D.float32)
    return apply(reciprocal, (x,), {})


def _recip_decomp(x):
    if x.dtype.kind in "fc":
        return 1 / x
    xi = x.astype(D.int8) if x.dtype is D.bool_ else x
    return ops.where(ops.equal(ops.abs(xi.astype(D.int64)), 1), xi, 0)


reciprocal = defop("reciprocal", kind="unary", decomp=_recip_decomp, impl=_recip_impl,
                   dtype_rule="int8bool", front=_recip_front,
                   grad=lambda g, out, x: (-g * out * out,), methods="reciprocal",
                   numpy="reciprocal", inplace=True)

# ---- binary composites ---------------------------------------------------------------------------


def _in_result_dtype(op, *args):
    """Cast tensor operands to the op's result dtype, so a decomposition computes (and
    returns) in the dtype the op promises."""
    _, dt = op.infer(args, {})
    return [a.astype(dt) if is_tensor(a) and a.dtype is not dt else a for a in args]


def _abs(v):
    return abs(v) if not is_tensor(v) else ops.abs(v)


def _hypot(a, b):
    # scale by the larger magnitude so a*a cannot overflow (or underflow to 0)
    a, b = (_abs(v) for v in _in_result_dtype(hypot, a, b))
    big, small = ops.maximum(a, b), ops.minimum(a, b)
    safe = ops.where(ops.equal(big, 0), 1, big)
    r = small / safe
    out = big * ops.sqrt(1 + r * r)
    return ops.where(ops.logical_or(ops.isinf(a), ops.isinf(b)), float("inf"), out)  # hypot(inf, nan)


hypot = defop("hypot", kind="binary", infer=_ufloat_binary_infer, decomp=_hypot,
              impl=_ufunc("hypot"), dtype_rule="ufloat",
              grad=lambda g, out, a, b: (g * a / out, g * b / out),
              methods="hypot", numpy="hypot", inplace=True)


def _logaddexp(a, b):
    # max + log1p(exp(-|a - b|)); equal arguments (also both -inf or +inf) give a + log 2
    a, b = _in_result_dtype(logaddexp, a, b)
    m = ops.maximum(a, b)
    d = ops.abs(ops.subtract(a, b))
    return ops.where(ops.equal(a, b), ops.add(a, _LN2), m + ops.log1p(ops.exp(-d)))


def _logaddexp_grad(g, out, a, b):
    return (g * ops.exp(ops.subtract(a, out)), g * ops.exp(ops.subtract(b, out)))


logaddexp = defop("logaddexp", kind="binary", infer=_ufloat_binary_infer, decomp=_logaddexp,
                  impl=_ufunc("logaddexp"),
                  dtype_rule="ufloat", grad=_logaddexp_grad, methods="logaddexp",
                  numpy="logaddexp", inplace=True)


# NumPy has no complex loop for these: complex operands raise its TypeError
for _op in (floor_divide, remainder, fmod, atan2, copysign, hypot, logaddexp, signbit, erf):
    real_only(_op)
for _name in ("floor", "ceil", "trunc"):
    real_only(OPS[_name])
