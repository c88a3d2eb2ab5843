"""The numba renderer's syntax: how each primitive is spelled in a numba loop body, and the
dtype rules that scalar code needs spelled out (NumPy's loops convert operands; numba's scalar
rules are NumPy 1's). ``numba.py`` builds the loop nests from the loop IR with these."""
from __future__ import annotations

from ..loops import Expr

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
    "tanh": "cmath.tanh({0})", "asin": "cmath.asin({0})", "acos": "cmath.acos({0})",
    "atan": "cmath.atan({0})", "asinh": "cmath.asinh({0})", "acosh": "cmath.acosh({0})",
    "atanh": "cmath.atanh({0})",
}
_COMPLEX_UNSUPPORTED = {"maximum", "minimum", "less", "less_equal", "greater", "greater_equal",
                        "expm1", "log1p", "sign", "power"}
# ops whose inputs are converted to the computation dtype first, as NumPy's loops are (numba's
# scalar rules are NumPy 1's: uint64 + int64 would wrap instead of giving float64)
_CAST_INPUTS = {"add", "subtract", "multiply", "divide", "floor_divide", "remainder", "fmod",
                "power", "maximum", "minimum", "equal", "not_equal", "less", "less_equal",
                "greater", "greater_equal", "where"}
_COMPARISONS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}


def _np_type(dtype):
    return "np.bool_" if dtype.name == "bool" else f"np.{dtype.name}"


def _weak_dtype(e: Expr, value):
    """The dtype a weak Python scalar operand is computed in: NumPy's loop dtype, which is the
    result dtype, except for comparisons, where a scalar of a higher kind than the array (a
    float next to ints or bools) is compared in its own default dtype."""
    from ... import dtypes as D
    if e.op.name not in _COMPARISONS:
        return e.dtype
    base = _operand_dtype(e)
    rank = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}
    kind = "b" if isinstance(value, bool) else "i" if isinstance(value, int) else \
        "f" if isinstance(value, float) else "c"
    if rank[kind] > rank[base.kind]:
        return {"i": D.int64, "f": D.float64, "c": D.complex128}[kind]
    return base


def _float_lit(v):
    return repr(float(v)) if v == v and abs(v) != float("inf") else f"float('{v}')"


def _small_power(e: Expr):
    """x ** 2 and x ** 3 with a constant exponent: multiplications (a pow call does not
    vectorise), as NumPy's own fast path does."""
    if e.op.name != "power" or e.args[1].kind != "const" or e.dtype.kind not in "fiu":
        return False
    v = e.args[1].value
    return not isinstance(v, bool) and isinstance(v, (int, float)) and v in (2, 3) \
        and e.args[0].dtype is e.dtype


def _operand_dtype(e: Expr):
    """The dtype weak scalar constants of e take: that of its array operands."""
    from ...dtypes import result_type
    ts = [a for a in e.args if not (a.kind == "const" and a.dtype is None)]
    if e.op.name == "where":
        ts = ts[1:] or ts
    if not ts:
        return e.dtype
    return result_type(*[a.dtype for a in ts])


def _int_limit(dtype, for_min):
    import numpy as np
    if dtype.kind not in "iu":   # bool
        return True if for_min else False
    info = np.iinfo(dtype.np)
    return int(info.max) if for_min else int(info.min)
