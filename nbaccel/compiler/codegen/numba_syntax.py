"""The numba renderer's syntax: how each primitive is spelled in a numba loop body, and the
spellings of the reductions by their combine op. The dtype rules scalar code needs spelled out
(NumPy's loops convert operands; numba's scalar rules are NumPy 1's) come from the op table's
operand classes through ``common.py``. ``unsupported_reason`` says what numba cannot spell (the
kernel then stays on the NumPy tier). ``numba.py`` builds the loop nests with these."""
from __future__ import annotations

import numpy as np

from .common import is_cast as _is_cast, small_power, unrendered_params

SCALAR = {
    "add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})",
    "divide": "({0} / {1})", "floor_divide": "np.floor_divide({0}, {1})",
    "remainder": "np.remainder({0}, {1})", "fmod": "np.fmod({0}, {1})",
    "maximum": "({0} if ({0} > {1} or {0} != {0}) else {1})",
    "minimum": "({0} if ({0} < {1} or {0} != {0}) else {1})",
    "power": "({0} ** {1})", "atan2": "math.atan2({0}, {1})", "copysign": "np.copysign({0}, {1})",
    "equal": "({0} == {1})", "not_equal": "({0} != {1})", "less": "({0} < {1})",
    "less_equal": "({0} <= {1})", "greater": "({0} > {1})", "greater_equal": "({0} >= {1})",
    "logical_and": "(({0} != 0) & ({1} != 0))", "logical_or": "(({0} != 0) | ({1} != 0))",
    "logical_xor": "(({0} != 0) != ({1} != 0))",
    "bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})",
    "where": "({1} if {0} else {2})",
    "negative": "(-{0})", "positive": "(+{0})", "abs": "abs({0})", "logical_not": "(not {0})",
    "bitwise_invert": "np.invert({0})", "signbit": "np.signbit({0})", "isfinite": "np.isfinite({0})",
    "isinf": "np.isinf({0})", "isnan": "np.isnan({0})", "sign": "np.sign({0})",
    "floor": "np.floor({0})", "ceil": "np.ceil({0})", "trunc": "np.trunc({0})", "round": "np.rint({0})",
    "exp": "fexp({0})", "expm1": "fexpm1({0})", "log": "flog({0})", "log1p": "flog1p({0})",
    "sqrt": "math.sqrt({0})", "sin": "math.sin({0})", "cos": "math.cos({0})", "tan": "math.tan({0})",
    "asin": "math.asin({0})", "acos": "math.acos({0})", "atan": "math.atan({0})",
    "tanh": "ftanh({0})", "asinh": "math.asinh({0})", "acosh": "math.acosh({0})",
    "atanh": "math.atanh({0})", "erf": "ferf({0})",
    "detach": "{0}", "clone": "{0}",
    "real": "({0}).real", "imag": "({0}).imag", "conj": "np.conj({0})", "complex": "complex({0}, {1})",
}
# numba's scalar shifts differ from NumPy's for shift counts >= the bit width
_NUMPY_ONLY = {"bitwise_left_shift", "bitwise_right_shift"}
_DTYPES = {"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
           "float32", "float64", "complex64", "complex128"}
# complex values take cmath's functions; ordering has no complex meaning in numba
COMPLEX_SCALAR = {
    "exp": "cmath.exp({0})", "log": "cmath.log({0})", "sqrt": "cmath.sqrt({0})",
    "sin": "cmath.sin({0})", "cos": "cmath.cos({0})", "tan": "cmath.tan({0})",
    # C99's special cases (as NumPy's npy_ctanh): a zero part stays exact; numba's cmath.tanh
    # turns tanh(0+inf j) and tanh(nan+0j) into nan+nan j, and tanh(inf-inf j) into 1+0j
    "tanh": "(complex({0}.real, math.tan({0}.imag)) if {0}.real == 0 else "
            "complex(math.tanh({0}.real), {0}.imag) if {0}.imag == 0 else "
            "complex(math.copysign(1.0, {0}.real), math.copysign(0.0, {0}.imag)) "
            "if math.isinf({0}.real) and not math.isfinite({0}.imag) else cmath.tanh({0}))",
    "asin": "cmath.asin({0})", "acos": "cmath.acos({0})",
    "atan": "cmath.atan({0})", "asinh": "cmath.asinh({0})", "acosh": "cmath.acosh({0})",
    "atanh": "cmath.atanh({0})",
}
_COMPLEX_UNSUPPORTED = {"maximum", "minimum", "less", "less_equal", "greater", "greater_equal",
                        "expm1", "log1p", "sign", "power"}
# NumPy's bool + and * are logical or / and; numba's bool + bool is an int (True + True == 2)
BOOL_SCALAR = {"add": "({0} | {1})", "multiply": "({0} & {1})"}

# reductions, by the combine op of their rule (ops/registry.py: ReduceRule): the update of an
# accumulator {0} with a value {1}
FOLD = {"add": "{0} += {1}", "multiply": "{0} *= {1}", "logical_or": "{0} |= ({1} != 0)",
        "logical_and": "{0} &= ({1} != 0)", "maximum": "{0} = max({0}, {1})",
        "minimum": "{0} = min({0}, {1})"}
# a float max/min through LLVM's NaN-propagating intrinsics (numba_reduce.py)
VECTOR_SELECT = {"maximum": "fmaximum", "minimum": "fminimum"}
# float32 partial sums over chunks (numba_passes.sum_pass): the combine op they are valid for
PARTIAL_SUM = "add"
# argmax/argmin: the comparison that makes a value better than the best so far
BETTER = {"maximum": ">", "minimum": "<"}


def _np_type(dtype):
    return "np.bool_" if dtype.name == "bool" else f"np.{dtype.name}"


def _float_lit(v):
    return repr(float(v)) if v == v and abs(v) != float("inf") else f"float('{v}')"


# NumPy converts a float out of an integer dtype's range (NaN, infinities, 1e20) as the
# machine's C conversion does: x86 gives the "integer indefinite" INT_MIN for all of them. numba's
# np.int32(x) is LLVM's fptosi, undefined there: a kernel that knows its value is NaN (x / 0.0)
# folds it to anything. A cast is spelled with a range test instead, and the values outside the
# range are NumPy's own on this machine. C converts to a narrower integer through int32 and keeps
# the low bits; its unsigned 32 and 64 bit conversions differ by the value's range and the
# instructions the compiler chose, so a kernel with one stays on the NumPy tier.
_NATIVE_BITS = {"int32": 32, "int64": 64}
_THROUGH_INT32 = {"int8", "uint8", "int16", "uint16"}


def _outside(name):
    """NumPy's (NaN, +inf, -inf) cast to the integer dtype ``name``."""
    with np.errstate(invalid="ignore"):
        return tuple(np.array([np.nan, np.inf, -np.inf]).astype(name).tolist())


def float_to_int(x, name):
    """numba code for NumPy's cast of the float value ``x`` (a name or literal) to ``name``."""
    if name in _THROUGH_INT32:
        return f"np.{name}({float_to_int(x, 'int32')})"
    bits, (nan, pos, neg) = _NATIVE_BITS[name], _outside(name)
    t = f"np.{name}"
    out = (f"{t}({nan})" if nan == pos == neg
           else f"({t}({nan}) if {x} != {x} else {t}({pos}) if {x} > 0 else {t}({neg}))")
    return f"({t}({x}) if {-2.0 ** (bits - 1) - 1!r} < {x} < {2.0 ** (bits - 1)!r} else {out})"


def _float_to_unsigned(e):
    return (_is_cast(e) and e.dtype.name in ("uint32", "uint64") and e.args[0].dtype is not None
            and e.args[0].dtype.kind in "fc")


def unsupported_reason(k):
    """Why numba cannot run this kernel (it then stays on the NumPy tier), or None."""
    for b in k.inputs + k.outputs:
        if b.dtype.name not in _DTYPES:
            return f"numba has no {b.dtype.name}"
    for e in k.ops():
        if e.dtype.name not in _DTYPES:
            return f"numba has no {e.dtype.name}"
        name = e.op.name
        if name in _NUMPY_ONLY:
            return f"{name} differs in numba for large shift counts"
        if name not in SCALAR and not _is_cast(e):
            return f"{name} has no numba rendering"
        if _float_to_unsigned(e):
            return f"NumPy's float to {e.dtype.name} cast depends on the machine code"
        if name == "power" and e.dtype.kind == "i" and not _nonnegative_const(e.args[1]):
            # (NumPy raises ValueError for a negative one; numba's ** gives a number)
            return "an integer power whose exponent may be negative"
        if unrendered_params(e):
            return f"{name} with parameters has no numba rendering"
        if any(a.dtype is not None and a.dtype.kind == "c" for a in e.args) or e.dtype.kind == "c":
            if name in _COMPLEX_UNSUPPORTED:
                return f"numba orders or rounds complex {name} differently"
    for r in k.reductions:
        if (r.dtype.kind == "c" or r.src.dtype.kind == "c") and r.rule.selects:
            return "numba has no complex max/min"
    return None


def _nonnegative_const(a) -> bool:
    v = getattr(a, "value", None) if getattr(a, "kind", None) == "const" else None
    return isinstance(v, (int, float, np.integer, np.floating)) and v >= 0


def _casts_inputs(e):
    """Operands are converted to the computation dtype first, as NumPy's loops do (numba's
    scalar rules are NumPy 1's: uint64 + int64 would wrap instead of giving float64): every
    binary and ternary op except those whose operands keep their own dtype."""
    return e.op.kind != "unary" and e.op.operands in ("result", "common", "select")


def _product_power(e):
    """x ** 2 and x ** 3 of the base's own dtype as multiplications (a pow call does not
    vectorise), as NumPy's own fast path does."""
    return small_power(e) in (2, 3) and e.dtype.kind in "iuf" and e.args[0].dtype is e.dtype
