"""Elementwise ops: unary and binary primitives (with their per-element renderings) and
the composites built from them."""
from __future__ import annotations

from .registry import defop, OPS


def _ops():
    from .. import ops
    return ops


# ---- binary arithmetic -------------------------------------------------------------------

add = defop("add", kind="binary", impl=lambda xp, a, b: xp.add(a, b),
            grad=lambda g, out, a, b: (g, g), scalar="({0} + {1})", ufunc="add",
            methods=("add", "__add__", "__radd__"), numpy="add", inplace=True)

sub = defop("subtract", kind="binary", impl=lambda xp, a, b: xp.subtract(a, b),
            grad=lambda g, out, a, b: (g, -g), scalar="({0} - {1})", ufunc="subtract",
            methods=("sub", "subtract", "__sub__", "__rsub__"), numpy="subtract", inplace=True,
            dtype_rule="nobool")

mul = defop("multiply", kind="binary", impl=lambda xp, a, b: xp.multiply(a, b),
            grad=lambda g, out, a, b: (g * b, g * a), scalar="({0} * {1})", ufunc="multiply",
            methods=("mul", "multiply", "__mul__", "__rmul__"), numpy="multiply", inplace=True)

div = defop("divide", kind="binary", impl=lambda xp, a, b: xp.true_divide(a, b),
            grad=lambda g, out, a, b: (g / b, -g * out / b), scalar="({0} / {1})", ufunc="true_divide",
            methods=("div", "divide", "true_divide", "__truediv__", "__rtruediv__"),
            numpy=("divide", "true_divide"), inplace=True, dtype_rule="float")

maximum = defop("maximum", kind="binary", impl=lambda xp, a, b: xp.maximum(a, b),
                grad=lambda g, out, a, b: _minmax_grad(g, out, a, b),
                scalar="max({0}, {1})", ufunc="maximum", methods="maximum", numpy="maximum")

minimum = defop("minimum", kind="binary", impl=lambda xp, a, b: xp.minimum(a, b),
                grad=lambda g, out, a, b: _minmax_grad(g, out, a, b),
                scalar="min({0}, {1})", ufunc="minimum", methods="minimum", numpy="minimum")


def _minmax_grad(g, out, a, b):
    # ties split the gradient evenly, as PyTorch does
    ops = _ops()
    ea = ops.equal(a, out).astype(g.dtype)
    eb = ops.equal(b, out).astype(g.dtype)
    tot = ea + eb
    return (g * ea / tot, g * eb / tot)


def _pow_grad(g, out, a, b):
    ops = _ops()
    ga = g * b * ops.power(a, b - 1) if not isinstance(b, (int, float)) or b != 0 else None
    gb = None
    if hasattr(b, "_node") and b.requires_grad:
        safe = ops.where(a > 0, a, 1)
        gb = g * out * ops.log(safe)
    return (ga, gb)


power = defop("power", kind="binary", impl=lambda xp, a, b: xp.power(a, b), grad=_pow_grad,
              scalar="({0} ** {1})", ufunc="power",
              methods=("pow", "__pow__", "__rpow__"), numpy=("power", "pow"), inplace=True)

# ---- comparisons (bool results, not differentiable) ---------------------------------------

for _name, _np, _sym, _dunders in [
        ("equal", "equal", "==", ("eq", "__eq__")),
        ("not_equal", "not_equal", "!=", ("ne", "__ne__")),
        ("less", "less", "<", ("lt", "__lt__")),
        ("less_equal", "less_equal", "<=", ("le", "__le__")),
        ("greater", "greater", ">", ("gt", "__gt__")),
        ("greater_equal", "greater_equal", ">=", ("ge", "__ge__"))]:
    defop(_name, kind="binary", impl=(lambda f: lambda xp, a, b: getattr(xp, f)(a, b))(_np),
          differentiable=False, dtype_rule="bool", scalar="({0} %s {1})" % _sym, ufunc=_np,
          methods=_dunders, numpy=_np)

# ---- unary ---------------------------------------------------------------------------------

neg = defop("negative", kind="unary", impl=lambda xp, x: xp.negative(x),
            grad=lambda g, out, x: (-g,), scalar="(-{0})", ufunc="negative",
            methods=("neg", "negative", "__neg__"), numpy="negative", dtype_rule="nobool")

exp = defop("exp", kind="unary", impl=lambda xp, x: xp.exp(x), grad=lambda g, out, x: (g * out,),
            scalar="fexp({0})", ufunc="exp", methods="exp", numpy="exp", dtype_rule="float",
            inplace=True)

log = defop("log", kind="unary", impl=lambda xp, x: xp.log(x), grad=lambda g, out, x: (g / x,),
            scalar="flog({0})", ufunc="log", methods="log", numpy="log", dtype_rule="float",
            inplace=True)

sqrt = defop("sqrt", kind="unary", impl=lambda xp, x: xp.sqrt(x),
             grad=lambda g, out, x: (g / (2 * out),), scalar="math.sqrt({0})", ufunc="sqrt",
             methods="sqrt", numpy="sqrt", dtype_rule="float", inplace=True)

tanh = defop("tanh", kind="unary", impl=lambda xp, x: xp.tanh(x),
             grad=lambda g, out, x: (g * (1 - out * out),), scalar="ftanh({0})", ufunc="tanh",
             methods="tanh", numpy="tanh", dtype_rule="float", inplace=True)

sin = defop("sin", kind="unary", impl=lambda xp, x: xp.sin(x),
            grad=lambda g, out, x: (g * _ops().cos(x),), scalar="math.sin({0})", ufunc="sin",
            methods="sin", numpy="sin", dtype_rule="float", inplace=True)

cos = defop("cos", kind="unary", impl=lambda xp, x: xp.cos(x),
            grad=lambda g, out, x: (-g * _ops().sin(x),), scalar="math.cos({0})", ufunc="cos",
            methods="cos", numpy="cos", dtype_rule="float", inplace=True)

abs_ = defop("abs", kind="unary", impl=lambda xp, x: xp.abs(x),
             grad=lambda g, out, x: (g * _ops().sign(x),), scalar="abs({0})", ufunc="absolute",
             methods=("abs", "absolute", "__abs__"), numpy=("absolute", "abs"), inplace=True)

sign = defop("sign", kind="unary", impl=lambda xp, x: xp.sign(x), differentiable=False,
             scalar="np.sign({0})", ufunc="sign", methods="sign", numpy="sign", dtype_rule="nobool")

logical_not = defop("logical_not", kind="unary", impl=lambda xp, x: xp.logical_not(x),
                    differentiable=False, dtype_rule="bool", scalar="(not {0})",
                    ufunc="logical_not", methods="logical_not", numpy="logical_not")

where = defop("where", kind="ternary", impl=lambda xp, c, a, b: xp.where(c, a, b),
              grad=lambda g, out, c, a, b: (None, _ops().where(c, g, 0), _ops().where(c, 0, g)),
              scalar="({1} if {0} else {2})", ufunc="where", methods="where", numpy="where")

# ---- composites ------------------------------------------------------------------------------


def _sigmoid(x):
    return 1 / (1 + _ops().exp(-x))


sigmoid = defop("sigmoid", kind="unary", decomp=_sigmoid,
                impl=lambda xp, x: 1 / (1 + xp.exp(-x)),
                grad=lambda g, out, x: (g * out * (1 - out),),
                methods="sigmoid", dtype_rule="float")

square = defop("square", kind="unary", decomp=lambda x: x * x, impl=lambda xp, x: xp.square(x),
               grad=lambda g, out, x: (2 * g * x,), methods="square", numpy="square")
