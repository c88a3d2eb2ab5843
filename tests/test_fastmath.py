"""Vectorisable math helpers for numba kernels: accuracy over the whole float32 range,
special values, dtype dispatch, and (by LLVM IR structure, never by time) that a loop
calling them vectorises.

`python tests/test_fastmath.py` prints the accuracy table used in docs/fastmath.md.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import numba
from numba import njit, types

from nbaccel.compiler.codegen import fastmath
from nbaccel.compiler.codegen.fastmath import SAFE_FASTMATH, fexp, ftanh, helpers

NAMES = ("fexp", "flog", "ftanh", "fsigmoid", "ferf", "flog1p", "fexpm1", "fgelu_tanh",
         "fsoftplus")
TINY = 2.0 ** -149  # one float32 denormal ulp


# ---------------------------------------------------------------- float64 references

def _erf(x):
    return np.asarray(np.frompyfunc(math.erf, 1, 1)(x), dtype=np.float64)


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x < 0, e, 1.0) / (1.0 + e)


def _gelu_tanh(x):  # x * sigmoid(2u): no cancellation in the negative tail; gelu(-inf) = 0
    u = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    s = _sigmoid(2 * u)
    return np.where(s == 0, 0.0, x * s)


def _softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


REFERENCE = {"fexp": np.exp, "flog": np.log, "ftanh": np.tanh, "fsigmoid": _sigmoid,
             "ferf": _erf, "flog1p": np.log1p, "fexpm1": np.expm1, "fgelu_tanh": _gelu_tanh,
             "fsoftplus": _softplus}

# Allowed |got - ref| <= RTOL * |ref| + TINY (the TINY term covers denormal results).
RTOL = {name: 4e-7 for name in NAMES}
# gelu's argument 2u = x (k0 + k1 x^2) carries float32 rounding that sigmoid amplifies by
# ~|2u| for negative x (float32 PyTorch has the same); checked for x >= -3, the tail
# absolutely.
RTOL["fgelu_tanh"] = 2e-6


# ---------------------------------------------------------------- kernels (compiled once)

_LOOPS: dict = {}


def loop_kernel(fn):
    """out[i] = fn(x[i]) as a numba loop, compiled once per function per test session
    (not cached on disk: numba disables IR inspection for cache-loaded code)."""
    if fn not in _LOOPS:
        def loop(x, out):
            for i in range(x.size):
                out[i] = fn(x[i])

        _LOOPS[fn] = njit(fastmath=SAFE_FASTMATH)(loop)
    return _LOOPS[fn]


_CALLS: dict = {}


def numba_call(fn):
    """fn(v) inside numba code, one dispatcher per helper: its signatures show the types
    the helper's overload gives each argument type."""
    if fn not in _CALLS:
        _CALLS[fn] = njit(lambda v: fn(v))
    return _CALLS[fn]


def apply(name, x):
    out = np.empty_like(x)
    loop_kernel(helpers()[name])(x, out)
    return out


def is_vectorised(fn, dtype=np.float32):
    """True when a loop kernel calling `fn` compiles to LLVM vector code (<8 x float>,
    <16 x float>, ...) with no scalar libm calls left in it."""
    k = loop_kernel(fn)
    x = np.ones(64, dtype)
    k(x, np.empty_like(x))
    ir = k.inspect_llvm((numba.typeof(x), numba.typeof(x)))
    elem = "float" if dtype == np.float32 else "double"
    vector = re.search(rf"<(8|16|32) x {elem}>", ir) is not None
    # without SVML, llvm.exp.v8f32 & co. are split back into scalar libm calls
    libm = re.search(r"@(llvm\.(exp|exp2|log|log2|log10|pow|tanh|sin|cos)\.|"
                     r"(exp|log|tanh|erf|log1p|expm1)f?\()", ir) is not None
    return vector and not libm


# ---------------------------------------------------------------- test points

def sample_points(n=2 ** 19, seed=0):
    """~1e6 float32 points: uniform over bit patterns (every binade, both signs,
    denormals) plus dense linear samples where the functions bend."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bits = bits[np.isfinite(bits)]
    scale = rng.choice(np.array([1, 4, 20, 100], np.float32), n)
    linear = rng.uniform(-1, 1, n).astype(np.float32) * scale
    edges = np.array([0, -0.0, 1, -1, 0.625, 0.9, 0.7, -0.7, 0.41421357, -0.29289323,
                      88.72283, 88.7228, 88.72284, -87.33655, -103.97, -103.972, -104,
                      3.4028235e38, -3.4028235e38, 1.1754944e-38, 1e-45, -1e-45, 1e-40],
                     np.float32)
    return np.concatenate([bits, linear, edges])


def measure(name, x):
    """(max relative error, points where finiteness/NaN-ness differs, worst x)."""
    with np.errstate(all="ignore"):
        got = apply(name, x).astype(np.float64)
        ref = REFERENCE[name](x.astype(np.float64))
        rounded = ref.astype(np.float32).astype(np.float64)
    mismatch = (np.isnan(got) != np.isnan(rounded)) | (
        np.isinf(got) & np.isinf(rounded) & (got != rounded)) | (
        np.isfinite(got) != np.isfinite(rounded))
    ok = np.isfinite(got) & np.isfinite(rounded)
    if name == "fgelu_tanh":  # float32 rounding of x*(1+0.0447x^2) is amplified there
        ok &= x >= -3
    err = np.abs(got[ok] - ref[ok]) - TINY
    rel = np.maximum(err, 0) / np.maximum(np.abs(ref[ok]), TINY)
    if rel.size == 0:
        return 0.0, x[mismatch], None
    return float(rel.max()), x[mismatch], x[ok][np.argmax(rel)]


POINTS = sample_points()


# ---------------------------------------------------------------- tests

def test_helpers_table():
    table = helpers()
    assert tuple(sorted(table)) == tuple(sorted(NAMES))
    assert table is not helpers()  # a copy: callers cannot edit the module's table
    for name, fn in table.items():
        assert fn is getattr(fastmath, name)
        for kernel in fn.kernels:
            assert kernel.targetoptions["fastmath"] == SAFE_FASTMATH
            assert kernel.targetoptions.get("inline") == "always"


def test_safe_fastmath_has_no_finite_math_assumptions():
    assert SAFE_FASTMATH == {"reassoc", "contract", "arcp", "nsz", "afn"}
    assert not SAFE_FASTMATH & {"nnan", "ninf", "fast"}


@pytest.mark.parametrize("name", NAMES)
def test_float32_accuracy_whole_range(name):
    rel, mismatch, worst = measure(name, POINTS)
    assert mismatch.size == 0, f"{name}: inf/nan differs from NumPy at {mismatch[:5]}"
    assert rel <= RTOL[name], f"{name}: max rel error {rel:.3g} at x={worst!r}"


def test_gelu_negative_tail_absolute():
    x = np.linspace(-40, -3, 100_001, dtype=np.float32)
    with np.errstate(all="ignore"):
        err = np.abs(apply("fgelu_tanh", x) - _gelu_tanh(x.astype(np.float64)))
    assert err.max() <= 1e-8  # |gelu| <= 4e-3 here


INF, NAN = np.inf, np.nan
SPECIAL = {
    "fexp": [(-INF, 0), (INF, INF), (NAN, NAN), (0, 1), (89, INF), (88.8, INF),
             (1e30, INF), (-104, 0), (-1e30, 0), (-3.4e38, 0)],
    "flog": [(0, -INF), (-0.0, -INF), (-1, NAN), (-INF, NAN), (INF, INF), (NAN, NAN),
             (1, 0), (-1e-45, NAN)],
    "ftanh": [(100, 1), (-100, -1), (10, 1), (-9.5, -1), (INF, 1), (-INF, -1), (NAN, NAN),
              (0, 0), (3.4e38, 1)],
    "fsigmoid": [(INF, 1), (-INF, 0), (1e4, 1), (-1e4, 0), (NAN, NAN), (0, 0.5),
                 (-200, 0), (200, 1)],
    "ferf": [(INF, 1), (-INF, -1), (5, 1), (-5, -1), (NAN, NAN), (0, 0), (1e20, 1)],
    "flog1p": [(-1, -INF), (-2, NAN), (INF, INF), (NAN, NAN), (0, 0), (-INF, NAN)],
    "fexpm1": [(-INF, -1), (INF, INF), (NAN, NAN), (0, 0), (-100, -1), (100, INF)],
    "fgelu_tanh": [(INF, INF), (-INF, 0), (NAN, NAN), (0, 0), (1e20, 1e20), (-100, 0)],
    "fsoftplus": [(INF, INF), (-INF, 0), (NAN, NAN), (1e30, 1e30), (0, math.log(2))],
}


@pytest.mark.parametrize("name", NAMES)
def test_special_values(name):
    xs = np.array([x for x, _ in SPECIAL[name]], np.float32)
    want = np.array([w for _, w in SPECIAL[name]], np.float32)
    np.testing.assert_allclose(apply(name, xs), want, rtol=1e-7, atol=0, equal_nan=True)
    # the same values through the float64 path (whose overflow thresholds differ)
    x64 = xs.astype(np.float64)
    got64 = np.array([helpers()[name](x) for x in x64])
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got64, REFERENCE[name](x64), rtol=1e-15, atol=0,
                                   equal_nan=True)


def test_odd_functions_are_odd():
    x = POINTS[np.isfinite(POINTS)]
    for name in ("ftanh", "ferf"):
        np.testing.assert_array_equal(apply(name, -x), -apply(name, x))


def test_denormals():
    sub = np.array([1e-45, 3e-42, 1e-40, 1.1e-38, -1e-45, -1e-40], np.float32)
    for name in ("ftanh", "ferf", "flog1p", "fexpm1"):  # ~x (erf: 2x/sqrt(pi))
        want = REFERENCE[name](sub.astype(np.float64))
        np.testing.assert_allclose(apply(name, sub), want, rtol=1e-6, atol=TINY)
    pos = sub[sub > 0]
    np.testing.assert_allclose(apply("flog", pos), np.log(pos.astype(np.float64)), rtol=4e-7)
    # exp results that are denormal (exp(-87.34) is the last normal one)
    x = np.linspace(-103.9, -87.4, 10_001, dtype=np.float32)
    got = apply("fexp", x).astype(np.float64)
    np.testing.assert_allclose(got, np.exp(x.astype(np.float64)), rtol=0, atol=TINY)
    assert (got > 0).all()


def test_float32_kernel_never_promotes_to_float64():
    for name in NAMES:
        apply(name, np.ones(4, np.float32))    # compile the float32 loop, whatever ran before
        k = loop_kernel(helpers()[name])
        sig = next(sig for sig in k.signatures if sig[0].dtype == types.float32)
        ir = k.inspect_llvm(sig)
        assert "fpext" not in ir and "fptrunc" not in ir, name


@pytest.mark.parametrize("name", NAMES)
def test_float64_path_matches_numpy(name):
    x = np.array([-30, -3.5, -1.2, -1e-5, 1e-300, 0.3, 0.9, 2.5, 40, 700], np.float64)
    if name in ("flog", "flog1p"):
        x = np.abs(x)
    fn = helpers()[name]
    got = np.array([fn(v) for v in x])
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got, REFERENCE[name](x), rtol=1e-14, atol=0)
    compiled = numba_call(fn)
    assert np.array_equal([compiled(v) for v in x], got, equal_nan=True)
    ret = {sig.return_type for sig in compiled.nopython_signatures}
    assert ret == {types.float64}


@pytest.mark.parametrize("name", ["fexp", "flog", "ftanh", "fsigmoid", "ferf"])
def test_integer_and_bool_promote_to_float64(name):
    fn = helpers()[name]
    for v in (3, np.int32(2), np.uint8(1), True):
        assert fn(v) == pytest.approx(float(REFERENCE[name](np.float64(v))), rel=1e-15)
        assert numba_call(fn)(v) == fn(v)
    sigs = {tuple(s.args): s.return_type for s in numba_call(fn).nopython_signatures}
    assert sigs[(types.int32,)] == sigs[(types.boolean,)] == types.float64


@pytest.mark.parametrize("bad", [1j, "x", np.float16(1)])
def test_unsupported_argument_type_raises(bad):
    from numba.core.errors import TypingError
    with pytest.raises(TypingError):
        fexp(bad)


@pytest.mark.parametrize("name", sorted(helpers()))
@pytest.mark.parametrize("x", [np.float32(0.75), np.float64(-1.25), 3, True])
def test_python_call_is_the_compiled_call(name, x):
    """One function serves Python and numba callers: same value, same bits, same type."""
    fn = helpers()[name]
    got = fn(x)
    want = numba_call(fn)(x)
    assert type(got) is type(want)
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("name", ["fexp", "ftanh", "fsigmoid"])
def test_loop_vectorises(name):
    assert is_vectorised(helpers()[name])


@pytest.mark.parametrize("name", ["flog", "ferf", "flog1p", "fexpm1", "fgelu_tanh",
                                  "fsoftplus"])
def test_other_helpers_vectorise(name):
    assert is_vectorised(helpers()[name])


def test_libm_exp_does_not_vectorise():
    """The reason this module exists: math.exp stays a scalar call."""
    @njit(fastmath=SAFE_FASTMATH)
    def libm_exp(x):
        return math.exp(x)

    assert not is_vectorised(libm_exp)


def test_caller_without_fastmath_and_numpy_error_model():
    x = np.concatenate([POINTS[:4096], np.array([np.inf, -np.inf, np.nan], np.float32)])

    @njit(error_model="numpy")
    def plain(x, out):  # a caller without fast-math flags gets the same numbers
        for i in range(x.size):
            out[i] = ftanh(x[i])

    out = np.empty_like(x)
    plain(x, out)
    want = np.tanh(x.astype(np.float64))  # ulp-level differences: no FMA contraction
    np.testing.assert_allclose(out, want, rtol=4e-7, atol=0, equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(st.floats(width=32, allow_nan=True, allow_infinity=True),
       st.sampled_from(NAMES))
def test_hypothesis_single_values(v, name):
    x = np.array([v], np.float32)
    rel, mismatch, _ = measure(name, x)
    assert mismatch.size == 0
    assert rel <= RTOL[name]


def accuracy_table():
    """Markdown rows: helper | max relative error | ulp-ish | points."""
    rows = ["| helper | max rel. error (float32) | worst x |", "|---|---|---|"]
    for name in NAMES:
        rel, _, worst = measure(name, POINTS)
        rows.append(f"| `{name}` | {rel:.2e} | {float(worst):.7g} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(f"{POINTS.size} points")
    print(accuracy_table())
