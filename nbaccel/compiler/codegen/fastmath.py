"""Vectorisable math helpers that generated numba kernels call by name.

The llvmlite build numba uses here has no SVML, so ``math.exp``/``math.tanh`` in a numba
loop are scalar libm calls and the loop does not vectorise. The float32 versions below use
only operations LLVM vectorises (compares and selects instead of branches, polynomials,
integer bit tricks for 2**n and frexp), so a kernel calling ``fexp`` becomes a loop over
``<16 x float>``. float64 arguments take ``math.*`` (accurate libm); integer and bool
arguments are promoted to float64 like NumPy does.

Every helper is written to stay correct under :data:`SAFE_FASTMATH` (the flags generated
kernels use): steps whose rounding matters (Cody-Waite range reduction) go through
``llvm.fmuladd`` calls that carry no fast-math flags, and 2**n is applied by integer
exponent addition rather than a product of scale factors that reassociation could reorder
into an overflow. See docs/fastmath.md for the algorithms and the measured accuracy.

Example::

    from numba import njit
    from nbaccel.compiler.codegen.fastmath import SAFE_FASTMATH, fexp

    @njit(fastmath=SAFE_FASTMATH)
    def kernel(x, out):
        for i in range(x.size):
            out[i] = fexp(x[i])
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.errors import TypingError
from numba.extending import intrinsic, overload

# Never fastmath=True: its nnan/ninf flags let LLVM turn overflow tails into NaN.
SAFE_FASTMATH = {"reassoc", "contract", "arcp", "nsz", "afn"}

_JIT = dict(inline="always", fastmath=SAFE_FASTMATH, cache=True)
_F32 = np.float32

# ---------------------------------------------------------------- bit-level intrinsics
_I32 = ir.IntType(32)
_FLT = ir.FloatType()


def _f32_only(*tys):
    return all(t == types.float32 for t in tys)


@intrinsic
def _add_exponent(typingctx, y, k):
    """y * 2**k for float32 y and integer-valued float32 k, by adding k to y's exponent
    field (exact while the result stays a normal number)."""
    if not _f32_only(y, k):
        return None

    def codegen(context, builder, sig, args):
        bits = builder.bitcast(args[0], _I32)
        shift = builder.shl(builder.fptosi(args[1], _I32), ir.Constant(_I32, 23))
        return builder.bitcast(builder.add(bits, shift), _FLT)

    return types.float32(types.float32, types.float32), codegen


@intrinsic
def _exponent_field(typingctx, x):
    """The biased exponent field (0..255) of a float32, as a float32."""
    if not _f32_only(x):
        return None

    def codegen(context, builder, sig, args):
        bits = builder.lshr(builder.bitcast(args[0], _I32), ir.Constant(_I32, 23))
        return builder.sitofp(builder.and_(bits, ir.Constant(_I32, 0xFF)), _FLT)

    return types.float32(types.float32), codegen


@intrinsic
def _mantissa(typingctx, x):
    """The mantissa of a positive normal float32 scaled into [0.5, 1)."""
    if not _f32_only(x):
        return None

    def codegen(context, builder, sig, args):
        bits = builder.and_(builder.bitcast(args[0], _I32), ir.Constant(_I32, 0x807FFFFF))
        return builder.bitcast(builder.or_(bits, ir.Constant(_I32, 0x3F000000)), _FLT)

    return types.float32(types.float32), codegen


@intrinsic
def _fmuladd(typingctx, a, b, c):
    """a * b + c as an llvm.fmuladd call: reassociation does not look inside it, so it
    can never merge the two halves of a Cody-Waite constant."""
    if not _f32_only(a, b, c):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_FLT, [_FLT, _FLT, _FLT])
        fn = builder.module.declare_intrinsic("llvm.fmuladd.f32", fnty=fnty)
        return builder.call(fn, args)

    return types.float32(types.float32, types.float32, types.float32), codegen


@intrinsic
def _fdiv(typingctx, a, b):
    """a / b as a bare fdiv: numba's '/' under error_model='python' adds a
    ZeroDivisionError branch that stops the loop from vectorising."""
    if not (isinstance(a, types.Float) and a == b):
        return None

    def codegen(context, builder, sig, args):
        return builder.fdiv(args[0], args[1])

    return a(a, a), codegen


@intrinsic
def _select(typingctx, cond, a, b):
    """``a if cond else b`` as one LLVM ``select`` (both sides already computed). The pasted
    helper text (``fastmath_text.py``) spells its conditional expressions with it: a numba
    conditional expression is three blocks to build, type and reconstruct SSA for, where this is
    one call, and LLVM would turn the blocks into the same select."""
    if not isinstance(cond, types.Boolean):
        return None
    if a == b:
        res = a
    elif isinstance(a, (types.Float, types.Integer)) and isinstance(b, (types.Float, types.Integer)):
        res = typingctx.unify_types(a, b)
        if res is None:
            return None
    else:
        return None

    def codegen(context, builder, sig, args):
        c, x, y = args
        x = context.cast(builder, x, sig.args[1], res)
        y = context.cast(builder, y, sig.args[2], res)
        return builder.select(c, x, y)

    return res(cond, a, b), codegen


# ---------------------------------------------------------------- float32 constants
# Polynomial coefficients are near-minimax fits (weighted least squares with Lawson
# reweighting, in float64) made for this module; docs/fastmath.md has the fit ranges.
_ZERO, _HALF, _ONE, _TWO = _F32(0.0), _F32(0.5), _F32(1.0), _F32(2.0)
_INF = _F32(np.inf)
_NAN = _F32(np.nan)
_LOG2E = _F32(1.4426950408889634)
_LN2_HI = _F32(0.693359375)  # 9 significant bits: n * _LN2_HI is exact
_LN2_LO = _F32(-2.1219444005469057e-4)  # ln 2 - _LN2_HI
_EXP_LO = _F32(-104.0)  # exp(-104) < smallest denormal / 2: result 0
_EXP_HI = _F32(89.0)  # exp(89) > float32 max: result inf
_BIG_N = _F32(100.0)
_N_SMALL_SHIFT, _SCALE_SMALL = _F32(64.0), _F32(2.0 ** -64)
_N_BIG_SHIFT = _F32(-1.0)
# exp(r) = 1 + r + r^2 * P(r), |r| <= ln2/2
_EP0, _EP1, _EP2 = _F32(0.5), _F32(0.1666666567325592), _F32(0.041666291654109955)
_EP3, _EP4, _EP5 = _F32(0.008333498612046242), _F32(0.001394496881403029), _F32(1.9790059013757855e-4)
# log(1+f) = f - f^2/2 + f^3 * Q(f), sqrt(1/2)-1 <= f <= sqrt(2)-1
_LQ = tuple(_F32(c) for c in (
    0.3333333134651184, -0.25000837445259094, 0.2000129222869873, -0.16622760891914368,
    0.14199714362621307, -0.13164237141609192, 0.12779004871845245, -0.07645832002162933))
_LQ0, _LQ1, _LQ2, _LQ3, _LQ4, _LQ5, _LQ6, _LQ7 = _LQ
_SQRT_HALF = _F32(0.70710677)
_LOG1P_LO, _LOG1P_HI = _F32(-0.29289323), _F32(0.41421357)
_FLT_MIN = _F32(1.1754943508222875e-38)
_DENORM_SCALE, _DENORM_SHIFT = _F32(2.0 ** 25), _F32(25.0)
_EXP_BIAS = _F32(126.0)  # field - 126 is the exponent for a mantissa in [0.5, 1)
# tanh(x) = x + x^3 * T(x^2), |x| < 0.625
_TANH_SMALL = _F32(0.625)
_TT0, _TT1, _TT2 = _F32(-0.3333328068256378), _F32(0.13331420719623566), _F32(-0.05373780429363251)
_TT3, _TT4 = _F32(0.020632559433579445), _F32(-0.0056973970495164394)
# erf(x) = x * E(x^2), |x| < 0.9
_ERF_SMALL = _F32(0.9)
_EE = tuple(_F32(c) for c in (
    1.1283791065216064, -0.3761262595653534, 0.11283600330352783, -0.02685445174574852,
    0.005189548712223768, -0.0008020949317142367, 7.889453991083428e-05))
_EE0, _EE1, _EE2, _EE3, _EE4, _EE5, _EE6 = _EE
# erfc(a) = exp(-a^2) * C(1/a), 0.9 <= a <= 4 (erf rounds to 1 beyond 3.9)
_ERF_CLAMP = _F32(4.0)
_EC = tuple(_F32(c) for c in (
    -0.00023110295296646655, 0.5634147524833679, 0.027806883677840233, -0.45445096492767334,
    0.5088578462600708, -0.3031608462333679, 0.09951991587877274, -0.014172906056046486))
_EC0, _EC1, _EC2, _EC3, _EC4, _EC5, _EC6, _EC7 = _EC
# expm1(x) = x + x^2/2 + x^3 * M(x), |x| < 0.7
_EXPM1_SMALL = _F32(0.7)
_EM = tuple(_F32(c) for c in (
    0.1666666716337204, 0.041666675359010696, 0.008333326317369938, 0.0013888028915971518,
    0.00019843211339320987, 2.507846693333704e-05, 2.7509852316143224e-06))
_EM0, _EM1, _EM2, _EM3, _EM4, _EM5, _EM6 = _EM
# gelu_tanh(x) = x * sigmoid(2 * sqrt(2/pi) * (x + 0.044715 x^3))
_GELU_K0 = _F32(2.0 * math.sqrt(2.0 / math.pi))
_GELU_K1 = _F32(2.0 * math.sqrt(2.0 / math.pi) * 0.044715)
_GELU_K0_64 = 2.0 * math.sqrt(2.0 / math.pi)
_GELU_K1_64 = 2.0 * math.sqrt(2.0 / math.pi) * 0.044715


# ---------------------------------------------------------------- float32 kernels
# Branch-free: both sides of every case are computed and a compare picks one, which
# LLVM turns into a vector select. Comparisons are written so NaN falls through to a
# path that propagates it.

@njit(**_JIT)
def _exp32(x):
    xc = _EXP_LO if x < _EXP_LO else x
    xc = _EXP_HI if xc > _EXP_HI else xc
    n = np.floor(xc * _LOG2E + _HALF)
    r = _fmuladd(-n, _LN2_HI, xc)
    r = _fmuladd(-n, _LN2_LO, r)
    p = ((((_EP5 * r + _EP4) * r + _EP3) * r + _EP2) * r + _EP1) * r + _EP0
    y = _ONE + (r + r * r * p)  # exp(r) in [0.70, 1.42]
    # 2**n by exponent addition; shift n into range first near overflow / underflow
    low = n < -_BIG_N
    high = n > _BIG_N
    shift = _N_SMALL_SHIFT if low else (_N_BIG_SHIFT if high else _ZERO)
    scale = _SCALE_SMALL if low else (_TWO if high else _ONE)
    y = _add_exponent(y, n + shift) * scale
    return x if x != x else y


@njit(**_JIT)
def _log1p_core32(f):
    """log(1 + f) for sqrt(1/2)-1 <= f <= sqrt(2)-1 (f exact)."""
    z = f * f
    q = ((((((_LQ7 * f + _LQ6) * f + _LQ5) * f + _LQ4) * f + _LQ3) * f + _LQ2) * f + _LQ1) * f + _LQ0
    return f + (f * z * q - _HALF * z)


@njit(**_JIT)
def _log32(x):
    tiny = x < _FLT_MIN  # denormals: scale into the normal range first
    xs = x * _DENORM_SCALE if tiny else x
    e = _exponent_field(xs) - (_EXP_BIAS + _DENORM_SHIFT if tiny else _EXP_BIAS)
    m = _mantissa(xs)
    lowm = m < _SQRT_HALF
    e = e - _ONE if lowm else e
    m = m + m if lowm else m
    y = _log1p_core32(m - _ONE)
    y = _fmuladd(e, _LN2_HI, _fmuladd(e, _LN2_LO, y))
    y = y if x > _ZERO else (-_INF if x == _ZERO else _NAN)
    return _INF if x == _INF else y


@njit(**_JIT)
def _log1p32(x):
    core = _log1p_core32(x)
    full = _log32(_ONE + x)
    return core if (x > _LOG1P_LO and x < _LOG1P_HI) else full


@njit(**_JIT)
def _expm1_32(x):
    z = x * x
    m = (((((_EM6 * x + _EM5) * x + _EM4) * x + _EM3) * x + _EM2) * x + _EM1) * x + _EM0
    small = x + (_HALF * z + x * z * m)
    big = _exp32(x) - _ONE
    return small if abs(x) < _EXPM1_SMALL else big


@njit(**_JIT)
def _tanh32(x):
    ax = abs(x)
    z = x * x
    t = (((_TT4 * z + _TT3) * z + _TT2) * z + _TT1) * z + _TT0
    small = x + x * z * t
    big = _ONE - _fdiv(_TWO, _exp32(ax + ax) + _ONE)  # exp overflow -> exactly 1
    big = -big if x < _ZERO else big
    return small if ax < _TANH_SMALL else big


@njit(**_JIT)
def _sigmoid32(x):
    e = _exp32(-abs(x))  # never overflows; e / (1 + e) keeps denormal tails for x < 0
    return _fdiv(e if x < _ZERO else _ONE, _ONE + e)


@njit(**_JIT)
def _erf32(x):
    ax = abs(x)
    z = x * x
    e = (((((_EE6 * z + _EE5) * z + _EE4) * z + _EE3) * z + _EE2) * z + _EE1) * z + _EE0
    small = x * e
    a = _ERF_CLAMP if ax > _ERF_CLAMP else ax
    t = _fdiv(_ONE, a)
    c = ((((((_EC7 * t + _EC6) * t + _EC5) * t + _EC4) * t + _EC3) * t + _EC2) * t + _EC1) * t + _EC0
    big = _ONE - _exp32(-(a * a)) * c
    big = -big if x < _ZERO else big
    return small if ax < _ERF_SMALL else big


@njit(**_JIT)
def _gelu_tanh32(x):
    s = _sigmoid32(x * (_GELU_K0 + _GELU_K1 * (x * x)))
    return _ZERO if s == _ZERO else x * s  # x = -inf: 0, not -inf * 0


@njit(**_JIT)
def _softplus32(x):
    return (x if x > _ZERO else _ZERO) + _log1p32(_exp32(-abs(x)))


# ---------------------------------------------------------------- float64 kernels

@njit(**_JIT)
def _sigmoid64(x):
    e = math.exp(-abs(x))
    return _fdiv(e if x < 0.0 else 1.0, 1.0 + e)


@njit(**_JIT)
def _gelu_tanh64(x):
    s = _sigmoid64(x * (_GELU_K0_64 + _GELU_K1_64 * (x * x)))
    return 0.0 if s == 0.0 else x * s


@njit(**_JIT)
def _softplus64(x):
    return (x if x > 0.0 else 0.0) + math.log1p(math.exp(-abs(x)))


@njit(**_JIT)
def _exp64(x):
    return math.exp(x)


@njit(**_JIT)
def _log64(x):
    return math.log(x)


@njit(**_JIT)
def _tanh64(x):
    return math.tanh(x)


@njit(**_JIT)
def _erf64(x):
    return math.erf(x)


@njit(**_JIT)
def _log1p64(x):
    return math.log1p(x)


@njit(**_JIT)
def _expm1_64(x):
    return math.expm1(x)


# ---------------------------------------------------------------- public helpers
# One function per helper serves both callers: numba code gets the float32 or float64
# kernel inlined through the overload, Python code gets the same kernel by a type test.

def _typed(name, f32, f64, doc):
    """The helper ``name``: float32 in, float32 out; float64, integers and bools take the
    float64 kernel, as NumPy promotes them."""
    def helper(x):
        if isinstance(x, np.float32):
            return f32(x)
        if isinstance(x, (float, np.float64, int, np.integer, bool, np.bool_)):
            return f64(np.float64(x))
        raise TypingError(f"{name}() takes a float32, float64, integer or bool scalar, "
                          f"got {type(x).__name__}")

    helper.__name__ = helper.__qualname__ = name
    helper.__doc__ = doc
    helper.kernels = (f32, f64)    # the numba functions behind it, for inspection

    @overload(helper, inline="always", jit_options={"fastmath": SAFE_FASTMATH})
    def _impl(x):
        if x == types.float32:
            return lambda x: f32(x)
        if x == types.float64:
            return lambda x: f64(x)
        if isinstance(x, (types.Integer, types.Boolean)):
            return lambda x: f64(np.float64(x))
        raise TypingError(f"{name}() takes a float32, float64, integer or bool scalar, got {x}")

    return helper


fexp = _typed("fexp", _exp32, _exp64,
              "exp(x); float32 stays float32 and vectorises. ``fexp(np.float32(1.0))``")
flog = _typed("flog", _log32, _log64, "Natural log; log(0) = -inf, log(x < 0) = nan.")
ftanh = _typed("ftanh", _tanh32, _tanh64, "tanh(x); exactly +-1 for large |x|.")
fsigmoid = _typed("fsigmoid", _sigmoid32, _sigmoid64,
                  "1 / (1 + exp(-x)), saturating to 0 and 1 without NaN.")
ferf = _typed("ferf", _erf32, _erf64, "The error function; odd, erf(+-inf) = +-1.")
flog1p = _typed("flog1p", _log1p32, _log1p64, "log(1 + x), accurate for small x.")
fexpm1 = _typed("fexpm1", _expm1_32, _expm1_64, "exp(x) - 1, accurate for small x.")
fgelu_tanh = _typed("fgelu_tanh", _gelu_tanh32, _gelu_tanh64,
                    "GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).")
fsoftplus = _typed("fsoftplus", _softplus32, _softplus64, "log(1 + exp(x)) without overflow.")


_HELPERS = {
    "fexp": fexp, "flog": flog, "ftanh": ftanh, "fsigmoid": fsigmoid, "ferf": ferf,
    "flog1p": flog1p, "fexpm1": fexpm1, "fgelu_tanh": fgelu_tanh, "fsoftplus": fsoftplus,
}


def helpers():
    """Name -> numba function for every helper generated kernels may call.

    >>> sorted(helpers())[:3]
    ['ferf', 'fexp', 'fexpm1']
    """
    return dict(_HELPERS)


__all__ = ["SAFE_FASTMATH", "helpers", *_HELPERS]
