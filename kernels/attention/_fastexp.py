"""A float32 ``exp`` that numba can vectorise, for the softmax tiles of the CPU kernel.

The llvmlite build numba uses has no SVML, so ``math.exp`` inside a numba loop is a scalar
libm call and the loop stays scalar. ``vexp`` below uses only compares, selects, a
polynomial and an integer bit trick for 2**n, which LLVM turns into SIMD code. float64
arguments take ``math.exp``.

Algorithm (Cephes ``expf``): n = round(x / ln 2), r = x - n ln 2 (split constant),
exp(r) = 1 + r + r² P(r) with P of degree 5, times 2**n built in the exponent field. Inputs below
-87.3 return exactly 0 (attention scores after subtracting the row max are <= 0, so only
the underflow end matters; inputs above 88 are clamped). Relative error ~1e-7.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

# Never fastmath=True: its no-inf/no-nan flags would break the -inf scores of masked entries.
FASTMATH = {"reassoc", "contract", "arcp", "nsz", "afn"}

_F = np.float32
_LOG2E = _F(1.4426950408889634)
_LN2_HI = _F(0.693359375)
_LN2_LO = _F(-2.12194440e-4)
_LO = _F(-87.3)
_HI = _F(88.3)
_C = tuple(_F(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                           4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1))
_HALF, _ONE, _ZERO = _F(0.5), _F(1.0), _F(0.0)


@intrinsic
def _pow2(typingctx, n):
    """2**n for an integer-valued float32 n in [-126, 127], written straight into the
    exponent field."""
    if n != types.float32:
        return None

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        biased = builder.add(builder.fptosi(args[0], i32), ir.Constant(i32, 127))
        return builder.bitcast(builder.shl(biased, ir.Constant(i32, 23)), ir.FloatType())

    return types.float32(types.float32), codegen


@njit(fastmath=FASTMATH, cache=True)
def _exp_f32(x):
    xc = min(max(x, _LO), _HI)
    n = np.floor(xc * _LOG2E + _HALF)
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    p = _C[0]
    p = p * r + _C[1]
    p = p * r + _C[2]
    p = p * r + _C[3]
    p = p * r + _C[4]
    p = p * r + _C[5]
    y = (p * r * r + r + _ONE) * _pow2(n)
    return y if x >= _LO else _ZERO


def vexp(x):
    """exp(x); vectorisable inside numba loops for float32."""
    return math.exp(x)


@overload(vexp, jit_options={"fastmath": FASTMATH})
def _vexp_overload(x):
    if x == types.float32:
        return lambda x: _exp_f32(x)
    if isinstance(x, types.Float):
        return lambda x: math.exp(x)
    return None
