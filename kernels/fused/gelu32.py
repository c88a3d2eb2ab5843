"""GELU's erf form for float32 arrays in float32 arithmetic (``cpu.gelu_forward`` and
``cpu.gelu_backward`` dispatch here for float32; float64 keeps ``math.erf``).

The float64 version of these loops (a fitted erfc and a polynomial exp in float64) ran 2.4x
PyTorch's time on the GPT's (1024, 512) activations: a vector holds half as many float64
lanes, and the exp's reduction and polynomial are float64 too. Here every step is float32:

* Phi(x) = 0.5 * erfc(-x / sqrt 2), erfc(z) = t * exp(-z^2 + c(t)) with Numerical Recipes'
  Chebyshev fit c(t), t = 1 / (1 + z/2) (relative error below 1.2e-7 of the smaller tail, so
  no cancellation for negative x: the tail is computed, never 1 - something).
* -z^2 = -x^2 / 2 is the term whose rounding would cost most (|x^2 / 2| reaches 87 before
  the tail underflows; its float32 rounding alone would be a relative error of up to 4e-6 of
  the tail). x is split into a 12-bit head h and the rest l, x^2 = h^2 + l * (x + h), h^2
  exact, and the exp takes its argument as the exact head plus a small rest, its range
  reduction subtracting n * ln2 from the exact head first (Cody and Waite).
* exp(r), |r| <= ln2 / 2, is a degree-7 Taylor polynomial (truncation below 6e-9), scaled by
  2^n built in the exponent bits; LLVM vectorises all of it (no libm call).
* x >= 0: gelu = x - x * tail, so the result has one rounding, not 1 - tail's as well.

No "reassoc" here (the head-plus-rest sums must stay in their order); nothing is a reduction.
The tests hold the result within 3e-7 of the exact function and 5e-7 relative where it is not
tiny (tests/test_fused_kernels.py).
"""
from __future__ import annotations

import numpy as np
from numba import njit

F = np.float32
_LOG2E = F(1.4426950408889634)
_LN2_HI = F(0.693145751953125)          # 16 significant bits: n * _LN2_HI is exact
_LN2_LO = F(1.4286067653e-06)
_ROUND = F(12582912.0)                  # 1.5 * 2^23: adding and subtracting it rounds to integer
_HEAD_MASK = np.int32(-4096)            # clears the 12 low bits of a float32's significand
_EXP_MIN = F(-87.0)                     # below it the tail is under float32's normal range
_HALF = F(0.5)
_ONE = F(1.0)
_INV_SQRT2 = F(0.7071067811865476)
_INV_SQRT_2PI = F(0.3989422804014327)
_BIG = F(10.0)                          # above it Phi(x) rounds to 1 and gelu(x) is x
# Numerical Recipes' erfc fit, c(t) = -1.26551223 + t * (1.00002368 + ...)
_C = [F(c) for c in (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
                     -1.13520398, 1.48851587, -0.82215223, 0.17087277)]
C0, C1, C2, C3, C4, C5, C6, C7, C8, C9 = _C
_E = [F(1.0 / k) for k in (2, 6, 24, 120, 720, 5040)]
E2, E3, E4, E5, E6, E7 = _E

# the flags of float32 element loops: no "reassoc" (see the module's docstring)
JIT32 = dict(nogil=True, cache=True, boundscheck=False, error_model="numpy",
              fastmath={"contract", "nsz"})


@njit(inline="always", **{k: v for k, v in JIT32.items() if k == "fastmath"})
def exp32(hi, lo):
    """exp(hi + lo) for hi + lo <= 0, hi exact and |lo| small; 0 below -87, NaN stays NaN.
    (Also cross-entropy's float32 exp, :mod:`.xent32`, with lo = 0.) Inlined, it takes its
    caller's fast-math flags: call it from functions without "reassoc" (JIT32)."""
    a = hi + lo
    n = (a * _LOG2E + _ROUND) - _ROUND
    r = ((hi - n * _LN2_HI) + lo) - n * _LN2_LO
    p = _ONE + r * (_ONE + r * (E2 + r * (E3 + r * (E4 + r * (E5 + r * (E6 + r * E7))))))
    k = np.int32(n) if a >= _EXP_MIN else np.int32(0)
    scale = np.int32((k + np.int32(127)) << np.int32(23)).view(np.float32)
    e = p * scale
    return F(0.0) if a < _EXP_MIN else e


@njit(inline="always", **{k: v for k, v in JIT32.items() if k == "fastmath"})
def _half_square(v):
    """-v^2 / 2 as an exact head and a small rest."""
    h = np.int32(np.float32(v).view(np.int32) & _HEAD_MASK).view(np.float32)
    return -_HALF * (h * h), -_HALF * ((v - h) * (v + h))


@njit(inline="always", **{k: v for k, v in JIT32.items() if k == "fastmath"})
def _fit(v):
    """t and c(t) of erfc(|v| / sqrt 2)'s fit."""
    t = _ONE / (_ONE + _HALF * _INV_SQRT2 * abs(v))
    c = C0 + t * (C1 + t * (C2 + t * (C3 + t * (C4 + t * (C5 + t * (C6 + t * (C7 + t * (
        C8 + t * C9))))))))
    return t, c


@njit(**JIT32)
def gelu_forward_f32(x, out):
    for i in range(x.size):
        v = x[i]
        hi, lo = _half_square(v)
        t, c = _fit(v)
        tail = _HALF * t * exp32(hi, lo + c)      # Phi(-|v|)
        xt = v * tail
        y = xt if v < F(0.0) else v - xt
        out[i] = v if v > _BIG else y


@njit(**JIT32)
def gelu_backward_f32(g, x, out):
    for i in range(x.size):
        v = x[i]
        hi, lo = _half_square(v)
        t, c = _fit(v)
        tail = _HALF * t * exp32(hi, lo + c)
        phi = exp32(hi, lo) * _INV_SQRT_2PI
        cdf = tail if v < F(0.0) else _ONE - tail
        out[i] = g[i] * (cdf + v * phi)


# ---- the tanh form (``approximate="tanh"``), float32 ---------------------------------------------
# 0.5 * x * (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) * (x + 0.044715 x^3). With
# e = exp(-2|u|) <= 1, sigmoid(2u) = 1 / (1 + e) for u >= 0 and e / (1 + e) below, so the exp
# never overflows and the small side is computed as such; sigmoid's derivative is e / (1 + e)^2
# on both sides. NumPy's expression (its SIMD tanh and five temporaries) ran 1.4x PyTorch's
# forward, 2.2x with the backward.

_K_TANH = F(0.7978845608028654)
_C_TANH = F(0.044715)
_C3_TANH = F(3 * 0.044715)
_TWO = F(2.0)


@njit(inline="always", fastmath={"contract", "nsz"})
def _tanh_parts(v):
    u = _K_TANH * (v + _C_TANH * v * v * v)
    e = exp32(-_TWO * abs(u), F(0.0))
    return u, e, _ONE / (_ONE + e)


@njit(**JIT32)
def gelu_tanh_forward_f32(x, out):
    for i in range(x.size):
        v = x[i]
        u, e, q = _tanh_parts(v)
        out[i] = v * q if u >= F(0.0) else v * e * q


@njit(**JIT32)
def gelu_tanh_backward_f32(g, x, out):
    for i in range(x.size):
        v = x[i]
        u, e, q = _tanh_parts(v)
        s = q if u >= F(0.0) else e * q
        du = _TWO * _K_TANH * (_ONE + _C3_TANH * v * v)
        out[i] = g[i] * (s + v * du * e * q * q)
