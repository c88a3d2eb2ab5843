"""The Triton renderer's syntax: how each primitive is spelled in a ``@triton.jit`` body, the
dtype rules that spelling needs, and the small jitted helpers the generated modules share.

Values live in *register types*: every dtype is computed in itself, except float16 and
bfloat16, which are held in float32 and rounded back to their own precision after every
operation (NumPy computes half-precision ufuncs in float32 and rounds each result, so the
values agree). bool is Triton's ``int1``; bool *buffers* are passed as uint8.

Only Triton's core language is used (``tl.exp``, ``tl.sqrt_rn``, ``tl.where``, bit casts):
Triton's interpreter, which runs the tests on the CPU, has no libdevice. Functions that
have no core spelling (``atan``, ``asin``, ...) are written with libdevice and rendered only
for a real GPU (``LIBDEVICE``); under the interpreter they are unsupported.
"""
from __future__ import annotations

# dtype name -> (Triton element type of a buffer, register type)
DTYPES = {
    "bool": ("tl.uint8", "tl.int1"),
    "int8": ("tl.int8", "tl.int8"), "uint8": ("tl.uint8", "tl.uint8"),
    "int16": ("tl.int16", "tl.int16"), "uint16": ("tl.uint16", "tl.uint16"),
    "int32": ("tl.int32", "tl.int32"), "uint32": ("tl.uint32", "tl.uint32"),
    "int64": ("tl.int64", "tl.int64"), "uint64": ("tl.uint64", "tl.uint64"),
    "float16": ("tl.float16", "tl.float32"), "bfloat16": ("tl.bfloat16", "tl.float32"),
    "float32": ("tl.float32", "tl.float32"), "float64": ("tl.float64", "tl.float64"),
}
HALF = {"float16", "bfloat16"}


# -- register types and typed constants ----------------------------------------------------

def reg(dt):
    return DTYPES[dt.name][1]


def buf(dt):
    return DTYPES[dt.name][0]


def float_text(v):
    v = float(v)
    if v != v:
        return "float('nan')"
    if v in (float("inf"), float("-inf")):
        return "float('inf')" if v > 0 else "-float('inf')"
    return repr(v)


def const_text(value, dt):
    """A typed scalar in register type (half floats rounded to their own precision)."""
    import numpy as np
    if dt.kind == "b":
        return f"tl.full(o.shape, {1 if value else 0}, tl.int1)"
    if dt.kind == "f":
        v = float(value)
        if dt.name in HALF:
            v = float(np.asarray(v, dtype=dt.np).astype(np.float32))
        return f"tl.full(o.shape, {float_text(v)}, {reg(dt)})"
    if isinstance(value, float):
        value = int(value)
    if not fits(value, dt):     # NumPy's error for a weak scalar its array's dtype cannot hold
        raise OverflowError(f"Python integer {value} out of bounds for {dt.name}")
    return f"tl.full(o.shape, {int(value)}, {reg(dt)})"


def half_round(code, dt):
    if dt.name == "bfloat16":
        return f"_round_bf16({code})"
    return f"({code}).to(tl.float16).to(tl.float32)"


def fits(value, dt):
    import numpy as np
    if isinstance(value, bool) or not isinstance(value, int):
        return True
    info = np.iinfo(dt.np)
    return info.min <= value <= info.max


def sqrt_fn(dt):
    return "tl.sqrt" if dt.name == "float64" else "tl.sqrt_rn"


# Elementwise spellings over register values already converted to the operation's dtype.
# {0}, {1}, {2}: the operands. Per-kind variants: FLOAT / INT / BOOL override COMMON.
COMMON = {
    "add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})",
    "divide": "({0} / {1})",
    "equal": "({0} == {1})", "not_equal": "({0} != {1})", "less": "({0} < {1})",
    "less_equal": "({0} <= {1})", "greater": "({0} > {1})", "greater_equal": "({0} >= {1})",
    "logical_and": "(({0} != 0) & ({1} != 0))", "logical_or": "(({0} != 0) | ({1} != 0))",
    "logical_xor": "(({0} != 0) ^ ({1} != 0))", "logical_not": "({0} == 0)",
    "bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})",
    "where": "tl.where({0}, {1}, {2})",
    "negative": "(-{0})", "positive": "{0}", "detach": "{0}", "clone": "{0}",
}
FLOAT = {
    "floor_divide": "_floordiv_f({0}, {1})", "remainder": "_remainder_f({0}, {1})",
    "fmod": "({0} % {1})",
    # NumPy propagates a NaN from either side
    "maximum": "tl.where(({0} > {1}) | ({0} != {0}), {0}, {1})",
    "minimum": "tl.where(({0} < {1}) | ({0} != {0}), {0}, {1})",
    "power": "_pow_f({0}, {1})", "copysign": "tl.where({sb1}, -tl.abs({0}), tl.abs({0}))",
    "abs": "tl.abs({0})", "signbit": "{sb0}",
    "isfinite": "(({0} == {0}) & (tl.abs({0}) != float('inf')))",
    "isinf": "(tl.abs({0}) == float('inf'))", "isnan": "({0} != {0})",
    "sign": "tl.where({0} > 0, 1.0, tl.where({0} < 0, -1.0, {0} * 0.0))",
    "floor": "tl.floor({0})", "ceil": "tl.ceil({0})",
    "trunc": "tl.where({0} < 0, tl.ceil({0}), tl.floor({0}))",
    "round": "_rint_f({0}, {big})",
    "exp": "tl.exp({0})", "expm1": "_expm1_f({0})", "log": "tl.log({0})", "log1p": "_log1p_f({0})",
    "sqrt": "{sqrt}({0})", "sin": "tl.sin({0})", "cos": "tl.cos({0})",
    "tan": "(tl.sin({0}) / tl.cos({0}))", "tanh": "_tanh_f({0})",
    "asinh": "_asinh_f({0})", "acosh": "tl.log({0} + {sqrt}({0} * {0} - 1.0))",
    "atanh": "(0.5 * _log1p_f(2.0 * {0} / (1.0 - {0})))", "erf": "tl.erf({0})",
}
INT = {
    "floor_divide": "_floordiv_i({0}, {1})", "remainder": "_remainder_i({0}, {1})",
    "power": "_pow_i({0}, {1}, {bits})",
    "fmod": "_fmod_i({0}, {1})", "maximum": "tl.maximum({0}, {1})", "minimum": "tl.minimum({0}, {1})",
    "abs": "tl.abs({0})", "signbit": "({0} < 0)", "isfinite": "({0} == {0})",
    "isinf": "({0} != {0})", "isnan": "({0} != {0})",
    "sign": "(({0} > 0).to({reg}) - ({0} < 0).to({reg}))",
    "bitwise_invert": "(~{0})",
    "bitwise_left_shift": "_shl({0}, {1}, {bits})", "bitwise_right_shift": "_shr({0}, {1}, {bits})",
    "floor": "{0}", "ceil": "{0}", "trunc": "{0}", "round": "{0}",
}
UNSIGNED = {"abs": "{0}", "sign": "({0} > 0).to({reg})", "signbit": "({0} != {0})"}
BOOL = {
    "add": "({0} | {1})", "multiply": "({0} & {1})", "maximum": "({0} | {1})",
    "minimum": "({0} & {1})", "abs": "{0}", "bitwise_invert": "({0} == 0)",
    "isfinite": "({0} == {0})", "isinf": "({0} != {0})", "isnan": "({0} != {0})",
    "signbit": "({0} != {0})",
}
# no core-language spelling: libdevice on a GPU only (the interpreter has no libdevice)
LIBDEVICE = {
    "asin": "libdevice.asin({0})", "acos": "libdevice.acos({0})", "atan": "libdevice.atan({0})",
    "atan2": "libdevice.atan2({0}, {1})",
}
NEGATIVE_POWER = "Integers to negative integer powers are not allowed."
# NumPy errors an integer op raises where Triton would compute: (condition on the operands,
# message); the kernel flags them (``flag_error``)
INT_ERRORS = {"power": ("({1} < 0)", NEGATIVE_POWER)}

# reductions, by the combine op of their rule (ops/registry.py: ReduceRule)
BLOCK_FOLD = {"add": "tl.sum({0}, axis=1)", "multiply": "tl.reduce({0}, 1, _mul)"}   # one block
LOOP_FOLD = {"add": "{0} + {1}", "multiply": "{0} * {1}"}       # a lane's accumulator, per block
TRUTH_BLOCK = {"logical_or": "tl.max", "logical_and": "tl.min"}  # any/all over int32 flags
TRUTH_FOLD = {"logical_or": "|", "logical_and": "&"}
SELECT_BLOCK = {"maximum": "tl.max", "minimum": "tl.min"}        # max/min (and arg) of a block
SELECT_FOLD = {"maximum": "tl.maximum", "minimum": "tl.minimum"}
BETTER = {"maximum": ">", "minimum": "<"}                        # argmax/argmin: a better value

HEADER = '''# generated by nbaccel: triton tier
import triton
import triton.language as tl
'''
LIBDEVICE_IMPORT = "from triton.language.extra import libdevice\n"

# Jitted helpers: NumPy's semantics for the operations Triton spells differently (floor
# division and remainder signs, division by zero in integers, shifts past the bit width,
# round-half-to-even) and the functions the core language lacks.
HELPERS = '''

@triton.jit
def _floordiv_i(a, b):
    # Triton's // truncates; NumPy floors, and gives 0 for a zero divisor
    safe = tl.where(b == 0, b + 1, b)
    q = a // safe
    q = tl.where((a - q * safe != 0) & ((a < 0) != (safe < 0)), q - 1, q)
    return tl.where(b == 0, q * 0, q)


@triton.jit
def _remainder_i(a, b):
    safe = tl.where(b == 0, b + 1, b)
    r = a % safe
    r = tl.where((r != 0) & ((r < 0) != (safe < 0)), r + safe, r)
    return tl.where(b == 0, r * 0, r)


@triton.jit
def _fmod_i(a, b):
    safe = tl.where(b == 0, b + 1, b)
    r = a % safe
    return tl.where(b == 0, r * 0, r)


@triton.jit
def _shl(a, b, BITS: tl.constexpr):
    ok = (b >= 0) & (b < BITS)
    r = a << tl.where(ok, b, b * 0)
    return tl.where(ok, r, r * 0)


@triton.jit
def _shr(a, b, BITS: tl.constexpr):
    ok = (b >= 0) & (b < BITS)
    r = a >> tl.where(ok, b, b * 0)
    full = tl.where(a < 0, a * 0 - 1, a * 0)
    return tl.where(ok, r, full)


@triton.jit
def _pow_i(a, b, BITS: tl.constexpr):
    # square and multiply over the exponent's bits, wrapping as NumPy's integer power does
    # (a negative exponent is NumPy's ValueError: the kernel flags it, see NEGATIVE_POWER)
    r = a * 0 + 1
    base = a
    e = tl.where(b < 0, b * 0, b)
    for _ in range(BITS):
        r = tl.where((e & 1) != 0, r * base, r)
        base = base * base
        e = e >> 1
    return r


@triton.jit
def _floordiv_f(a, b):
    # NumPy's npy_divmod: floor((a - fmod(a, b)) / b), corrected
    mod = a % b
    div = (a - mod) / b
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    fl = tl.floor(div)
    fl = tl.where(div - fl > 0.5, fl + 1.0, fl)
    q = a / b
    fl = tl.where(div == 0, q * 0.0, fl)
    return tl.where(b == 0, q, fl)


@triton.jit
def _remainder_f(a, b):
    mod = a % b
    return tl.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)


@triton.jit
def _pow_f(a, b):
    # |a| ** b through exp2/log2, the sign of a negative base for an integral exponent,
    # NaN for a negative base with a fractional one; b == 0 and a == 1 give 1 (even for NaN)
    mag = tl.exp2(b * tl.log2(tl.abs(a)))
    integral = tl.floor(b) == b
    odd = integral & (tl.floor(b * 0.5) * 2.0 != b)
    r = tl.where((a < 0) & odd, -mag, mag)
    r = tl.where((a < 0) & (integral == 0) & (tl.abs(b) != float('inf')), r * 0.0 + float('nan'), r)
    return tl.where((b == 0) | (a == 1), r * 0.0 + 1.0, r)


@triton.jit
def _rint_f(x, BIG: tl.constexpr):
    # round half to even; values of magnitude >= BIG are integers already
    r = tl.floor(x + 0.5)
    d = r - x
    odd = tl.floor(r * 0.5) * 2.0 != r
    r = tl.where((d > 0.5) | ((d == 0.5) & odd), r - 1.0, r)
    return tl.where(tl.abs(x) >= BIG, x, r)


@triton.jit
def _expm1_f(x):
    # Kahan: (e^x - 1) * x / log(e^x) keeps the relative accuracy near 0
    u = tl.exp(x)
    um = u - 1.0
    r = tl.where(um == 0, x, um * x / tl.log(u))
    r = tl.where(um == -1.0, um, r)
    return tl.where(u == float('inf'), u, r)


@triton.jit
def _log1p_f(x):
    u = x + 1.0
    r = tl.where(u == 1.0, x, tl.log(u) * x / (u - 1.0))
    return tl.where(x == float('inf'), x, r)


@triton.jit
def _tanh_f(x):
    # 1 - 2 / (e^2|x| + 1) with the sign of x; expm1 keeps small |x| accurate
    e = _expm1_f(-2.0 * tl.abs(x))
    t = -e / (e + 2.0)
    return tl.where(x < 0, -t, t)


@triton.jit
def _asinh_f(x):
    a = tl.abs(x)
    r = _log1p_f(a + a * a / (1.0 + tl.sqrt(a * a + 1.0)))
    r = tl.where(a > 1e18, tl.log(a) + 0.6931471805599453, r)
    return tl.where(x < 0, -r, r)


@triton.jit
def _round_bf16(x):
    # float32 -> the nearest bfloat16 (ties to even), still held in float32; written with
    # integer ops because Triton's interpreter truncates float32 -> bfloat16 casts
    b = x.to(tl.uint32, bitcast=True)
    b = b + 0x7FFF + ((b >> 16) & 1)
    r = ((b >> 16) << 16).to(tl.float32, bitcast=True)
    return tl.where(x != x, x, r)


@triton.jit
def _mul(a, b):
    return a * b
'''
