"""The elementwise ops' eager implementations on raw arrays (``xp``: NumPy or CuPy), where a
ufunc alone does not give NumPy's or the Array API's values.

These know no Tensor and no op table: each is an ``impl(xp, *arrays)`` that ``elementwise.py``
names in its ``defop``. erf (NumPy has none), integer division without NumPy's warnings, the
Array API's special cases of complex expm1, a sigmoid that neither overflows nor warns, and an
integer reciprocal.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_ERF_SPLIT = 2.0   # series below, continued fraction above
_ERF_TERMS = 40    # enough for both branches to reach ~1e-15 relative in float64


def _ufunc(name):
    """impl that calls ``xp.<name>`` on the operands (NumPy's, looked up once: the impl is on
    every eager elementwise op's path)."""
    f = getattr(np, name, None)
    if f is None:
        return lambda xp, *xs: getattr(xp, name)(*xs)
    return lambda xp, *xs: f(*xs) if xp is np else getattr(xp, name)(*xs)


def _is_float_array(a):
    return a.dtype.kind in "fc" or D.is_bfloat16(a.dtype)   # ml_dtypes' bfloat16 has kind 'V'


def _int_operands(*xs):
    return all(getattr(x, "dtype", np.dtype(type(x))).kind in "biu" for x in xs)


def _quiet_ufunc(name):
    """Integer division by zero gives 0 in NumPy (with a RuntimeWarning); keep the values,
    drop the warning for integer operands."""
    def impl(xp, a, b):
        if _int_operands(a, b):
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                return getattr(xp, name)(a, b)
        return getattr(xp, name)(a, b)
    impl.hides_integer_warnings = True   # the compiler's warning replay asks this (fpflags)
    return impl


def _expm1_standard(xp, x, out):
    """NumPy's complex ``expm1`` result ``out`` of ``x`` with the Array API's special cases
    (C99's cexp minus one), which NumPy misses: expm1(+0+0j) = +0+0j (not -0), expm1(+inf+0j) =
    +inf+0j, expm1(-inf+bj) = -1 + 0*cis(b), expm1(+inf+bj) = +inf*cis(b) - 1 for b finite
    nonzero, (-inf, +-inf or NaN) -> -1+0j, (+inf, +-inf or NaN) -> +inf+NaNj, (NaN, +-0) ->
    NaN+0j, and conj(expm1(z)) = expm1(conj(z)) throughout."""
    with np.errstate(all="ignore"):
        a, b = x.real, x.imag
        re, im = out.real.copy(), out.imag.copy()
        zero_b = b == 0
        fin_b = xp.isfinite(b)
        # b = +-0 and a not NaN: the real function, with b's zero as the imaginary part
        m = zero_b & ~xp.isnan(a)
        re = xp.where(m, xp.expm1(a), re)
        im = xp.where(m, b, im)
        # a = -inf, b finite: -1 + 0 * cis(b)
        m = xp.isneginf(a) & fin_b & ~zero_b
        re = xp.where(m, -1.0, re)
        im = xp.where(m, xp.copysign(xp.zeros_like(b), xp.sin(b)), im)
        # a = +inf, b finite nonzero: inf * cis(b) - 1
        m = xp.isposinf(a) & fin_b & ~zero_b
        re = xp.where(m, xp.inf * xp.cos(b), re)
        im = xp.where(m, xp.inf * xp.sin(b), im)
        # a = -inf, b infinite or NaN: -1 + 0j;  a = +inf, b infinite or NaN: +inf + NaN j
        m = xp.isneginf(a) & ~fin_b
        re = xp.where(m, -1.0, re)
        im = xp.where(m, 0.0, im)
        m = xp.isposinf(a) & ~fin_b
        re = xp.where(m, xp.inf, re)
        im = xp.where(m, xp.nan, im)
        # a = NaN: NaN + 0j for b = +-0 (b's sign kept), NaN + NaN j otherwise
        m = xp.isnan(a)
        re = xp.where(m, xp.nan, re)
        im = xp.where(m & zero_b, b, xp.where(m, xp.nan, im))
        # a finite, b infinite or NaN: NaN + NaN j
        m = xp.isfinite(a) & ~fin_b
        re = xp.where(m, xp.nan, re)
        im = xp.where(m, xp.nan, im)
        r = xp.empty(out.shape, dtype=out.dtype)
        r.real, r.imag = re, im
    return r


def erf_xp(xp, x):
    """erf in float64 from basic ``xp`` operations (NumPy and CuPy alike).

    * |x| < 2: the all-positive series erf(a) = 2/sqrt(pi) e^(-a^2) sum_n a (2a^2)^n / (2n+1)!!
      (no cancellation);
    * |x| >= 2: erfc's continued fraction erfc(a) = e^(-a^2)/sqrt(pi) / (a + (1/2)/(a + 1/(a +
      (3/2)/(a + ...)))), evaluated bottom-up, and erf = 1 - erfc.

    Maximum relative error against ``math.erf``: 1.2e-15 over [-7, 7] and down to 1e-300
    (tests/test_ops_elementwise.py checks 1e-13). erf(+-inf) = +-1, erf(nan) = nan.
    """
    x = xp.asarray(x).astype(np.float64)
    a = xp.abs(x)
    s = xp.minimum(a, _ERF_SPLIT)
    s2 = 2.0 * s * s
    term = s
    total = s
    for n in range(_ERF_TERMS):
        term = term * s2 / (2 * n + 3)
        total = total + term
    series = _TWO_OVER_SQRT_PI * xp.exp(-s * s) * total
    c = xp.maximum(a, _ERF_SPLIT)
    d = c
    for k in range(_ERF_TERMS, 0, -1):
        d = c + (0.5 * k) / d
    cfrac = 1.0 - xp.exp(-c * c) / (math.sqrt(math.pi) * d)
    return xp.copysign(xp.where(a < _ERF_SPLIT, series, cfrac), x)


def _sigmoid_impl(xp, x):
    # exp(-log(1 + e^-x)): no overflow warnings, accurate in both tails
    x = x if _is_float_array(x) else x.astype(np.float64)
    if x.dtype.kind == "c":    # no logaddexp for complex: the definition
        return 1 / (1 + xp.exp(-x))
    return xp.exp(-xp.logaddexp(0.0, -x))


def _recip_impl(xp, x):
    if _is_float_array(x):
        return xp.reciprocal(x)
    if x.dtype.kind in "bu":
        return xp.where(x == 1, x, 0)
    # |x| == 1 is the only exact case; NumPy leaves 1/0 to the platform (0 or INT_MIN): 0 here
    return xp.where(xp.abs(x.astype(np.int64)) == 1, x, 0)


# np.where branches per element: on a random mask (ReLU's backward, where(out > 0, g, 0), on
# a (64, 16, 28, 28) activation) it mispredicts half of them, 2.9 ms against 0.2 ms for
# choosing the bits through an integer mask. Below this many elements the branch is cheaper.
_SELECT_FROM = 1 << 14
_BITS = {4: np.int32, 8: np.int64}


def where_impl(xp, c, a, b):
    """``xp.where(c, a, b)``; on NumPy with a large boolean mask and float operands of one
    dtype, the same bits chosen by masking (:func:`_select_bits`)."""
    if xp is np and type(c) is np.ndarray and c.dtype == np.bool_ and c.size >= _SELECT_FROM:
        out = _select_bits(c, a, b)
        if out is not None:
            return out
    return xp.where(c, a, b)


def _zero_scalar(v):
    """A Python 0 or +0.0 (whose bits are all zero)."""
    return type(v) in (int, float) and v == 0 and math.copysign(1.0, v) > 0


def _select_bits(c, a, b):
    """np.where(c, a, b) for float arrays of one dtype (or one such array and a scalar 0),
    bit for bit: the chosen value's bits, NaN payloads and signed zeros included. None when
    the operands are not of that form."""
    arrays = [v for v in (a, b) if type(v) is np.ndarray]
    if not arrays or any(type(v) is not np.ndarray and not _zero_scalar(v) for v in (a, b)):
        return None
    dt = arrays[0].dtype
    if dt.kind != "f" or dt.itemsize not in _BITS or any(v.dtype != dt for v in arrays):
        return None
    it = _BITS[dt.itemsize]
    flags = c.view(np.int8)                              # 0 or 1
    if len(arrays) == 2:
        mask = np.negative(flags, dtype=it)                  # 0 or -1: all bits of a
        ab, bb = a.view(it), b.view(it)
        out = np.bitwise_xor(ab, bb)
        out = np.bitwise_and(out, mask, out=out if out.shape == np.broadcast_shapes(
            out.shape, mask.shape) else None)
        return np.bitwise_xor(out, bb, out=out if out.shape == np.broadcast_shapes(
            out.shape, bb.shape) else None).view(dt)
    if type(a) is np.ndarray:
        mask, bits = np.negative(flags, dtype=it), a.view(it)      # c: a's bits, else zero
    else:
        mask, bits = np.subtract(flags, 1, dtype=it), b.view(it)   # c: zero, else b's bits
    out = np.bitwise_and(bits, mask, out=mask if mask.shape == np.broadcast_shapes(
        mask.shape, bits.shape) else None)
    return out.view(dt)
