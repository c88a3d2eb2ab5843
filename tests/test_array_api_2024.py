"""The Array API 2024.12 revision (and the 2025.12 additions nbaccel has), checked against
array-api-strict, the standard's reference namespace, as the oracle: every signature the
reference declares (by the rules of data-apis/array-api-tests' signature tests), and the values
and dtypes of the new and changed functions over the standard's dtypes and special cases.

Where the reference itself departs from the standard (complex expm1's special cases, which it
takes from NumPy; ``isin(invert=True)``), the standard's text is the oracle, and the test says
so. nbaccel's own deviations are listed in docs/array-api.md; the tests that pin them are
named ``test_deviation_*``.
"""
from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pytest

import nbaccel as nb

xp = pytest.importorskip("array_api_strict")

Param = inspect.Parameter
REAL_FLOATS = ("float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
NUMERIC = INTS + REAL_FLOATS
COMPLEX = ("complex64", "complex128")


# ---- helpers -----------------------------------------------------------------------------------

def _np(a):
    """A NumPy value of an nbaccel tensor or an array-api-strict array."""
    if hasattr(a, "_array"):
        return np.asarray(a._array)
    return np.asarray(a)


def _dtype_name(d):
    return str(d).rsplit(".", 1)[-1]


def _same(ours, theirs, *, signed_zeros=False):
    """Equal dtype, shape and values (NaN equals NaN; with ``signed_zeros`` -0 differs from +0)."""
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _same(o, t, signed_zeros=signed_zeros)
        return
    assert _dtype_name(ours.dtype) == _dtype_name(theirs.dtype), (ours.dtype, theirs.dtype)
    assert tuple(ours.shape) == tuple(theirs.shape)
    a, b = _np(ours), _np(theirs)
    np.testing.assert_array_equal(a, b)
    if signed_zeros and a.dtype.kind in "fc":
        for part in ((lambda v: v.real, lambda v: v.imag) if a.dtype.kind == "c" else (lambda v: v,)):
            pa, pb = part(a), part(b)
            zero = (pa == 0) & (pb == 0)
            np.testing.assert_array_equal(np.signbit(pa[zero]), np.signbit(pb[zero]))


def _same_layout(ours, theirs):
    assert _dtype_name(ours.dtype) == _dtype_name(theirs.dtype)
    assert tuple(ours.shape) == tuple(theirs.shape)


def _both(fn):
    """``fn(ns)`` in nbaccel and in the reference, compared."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _same(fn(nb), fn(xp), signed_zeros=True)


def A(ns, values, dtype):
    return ns.asarray(values, dtype=getattr(ns, dtype))


# ---- signatures: every function the reference has, by array-api-tests' rules ------------------

def _functions(module):
    """The standard's functions in a reference module: its ``__all__`` and what it defines
    itself (the extensions' 2025.12 functions are not in their ``__all__``), not its flag API
    or the helpers it imports."""
    out = []
    for name in sorted(dir(module)):
        f = getattr(module, name)
        if name.startswith("_") or not inspect.isfunction(f):
            continue
        if getattr(f, "__module__", "").startswith("array_api_strict._flags"):
            continue
        if name in getattr(module, "__all__", ()) or f.__module__ == module.__name__:
            out.append(name)
    return out


SIGNATURE_CASES = ([("", n) for n in _functions(xp)] + [("linalg", n) for n in _functions(xp.linalg)]
                   + [("fft", n) for n in _functions(xp.fft)])


def _signature_problem(ours, stub):
    """What array-api-tests' signature test would find wrong with ``ours`` (None: nothing).
    The stub's positional parameters come first, in order: a positional-or-keyword one keeps
    its name and kind (or widens a positional-only one); each keyword-only one exists by name
    and may be given by keyword. Extra parameters are allowed."""
    params = list(inspect.signature(ours).parameters.values())
    stub_params = list(inspect.signature(stub).parameters.values())
    positional = [p for p in stub_params if p.kind != Param.KEYWORD_ONLY]
    for i, s in enumerate(positional):
        if i >= len(params):
            return f"parameter {s.name!r} is missing"
        p = params[i]
        if s.kind not in (Param.POSITIONAL_ONLY, Param.VAR_POSITIONAL, Param.VAR_KEYWORD) \
                and p.name != s.name:
            return f"parameter {i} is named {p.name!r}, the standard says {s.name!r}"
        if p.kind not in (s.kind, Param.POSITIONAL_OR_KEYWORD):
            return f"parameter {p.name!r} is {p.kind.description}, the standard says {s.kind.description}"
    names = {p.name: p for p in params}
    for s in stub_params[len(positional):]:
        if s.name not in names:
            return f"keyword-only parameter {s.name!r} is missing"
        if names[s.name].kind not in (Param.KEYWORD_ONLY, Param.POSITIONAL_OR_KEYWORD):
            return f"parameter {s.name!r} cannot be given by keyword"
    return None


@pytest.mark.parametrize("module,name", SIGNATURE_CASES,
                         ids=[f"{m}.{n}" if m else n for m, n in SIGNATURE_CASES])
def test_signature_is_the_standards(module, name):
    ours_mod = getattr(nb, module) if module else nb
    theirs_mod = getattr(xp, module) if module else xp
    assert hasattr(ours_mod, name), f"nbaccel{'.' + module if module else ''}.{name} is missing"
    problem = _signature_problem(getattr(ours_mod, name), getattr(theirs_mod, name))
    assert problem is None, f"{name}: {problem}"


# ---- the version and the inspection API --------------------------------------------------------

def test_version_is_2024_12():
    assert nb.__array_api_version__ == "2024.12"
    assert nb.ones(2).__array_namespace__(api_version="2024.12") is nb
    with pytest.raises(ValueError):
        nb.ones(2).__array_namespace__(api_version="2026.12")


def test_capabilities_say_max_dimensions():
    caps = nb.__array_namespace_info__().capabilities()
    assert caps["max dimensions"] == xp.__array_namespace_info__().capabilities()["max dimensions"]
    assert nb.ones((1,) * caps["max dimensions"]).ndim == caps["max dimensions"]
    assert caps["boolean indexing"] and caps["data-dependent shapes"]


# ---- the fixed signatures keep NumPy's and PyTorch's spellings -----------------------------------

@pytest.mark.parametrize("name", ["zeros", "ones", "empty"])
def test_creation_takes_a_shape_tuple_and_spread_ints(name):
    f = getattr(nb, name)
    same = _same if name != "empty" else _same_layout       # empty's values are unspecified
    for shape in ((2, 3), (), (0,), 4):
        same(f(shape, dtype=nb.float64), getattr(xp, name)(shape, dtype=xp.float64))
    same(f(shape=(2, 3), dtype=nb.int16), getattr(xp, name)(shape=(2, 3), dtype=xp.int16))
    assert f(2, 3).shape == (2, 3) and f(2, 3).dtype == nb.float32     # PyTorch's *size
    assert f(size=(2, 3)).shape == (2, 3)
    assert f([2, 3]).shape == (2, 3)
    with pytest.raises(TypeError):
        f((2,), size=(3,))


def test_reshape_broadcast_permute_take_one_tuple_or_spread_ints():
    x = nb.reshape(nb.arange(6, dtype=nb.float64), (2, 3))
    r = xp.reshape(xp.arange(6, dtype=xp.float64), (2, 3))
    _same(nb.reshape(x, (3, 2)), xp.reshape(r, (3, 2)))
    _same(nb.reshape(x, shape=(6,)), xp.reshape(r, shape=(6,)))
    _same(nb.permute_dims(x, (1, 0)), xp.permute_dims(r, (1, 0)))
    _same(nb.permute_dims(x, axes=(1, 0)), xp.permute_dims(r, axes=(1, 0)))
    _same(nb.broadcast_to(x[0, ...], (4, 3)), xp.broadcast_to(r[0, ...], (4, 3)))
    _same(nb.broadcast_to(x[0, ...], shape=(4, 3)), xp.broadcast_to(r[0, ...], shape=(4, 3)))
    # PyTorch's spellings
    assert x.reshape(3, 2).shape == (3, 2) and x.reshape(-1).shape == (6,)
    assert x.view(6).shape == (6,)
    assert x.permute(1, 0).shape == (3, 2) and x.permute(dims=(1, 0)).shape == (3, 2)
    assert x[0].expand(4, 3).shape == (4, 3) and x[:1].expand(5, -1).shape == (5, 3)
    # NumPy's
    assert nb.numpy.reshape(np.arange(6), (2, 3)).shape == (2, 3)
    assert nb.numpy.reshape(np.arange(6), shape=(3, 2)).shape == (3, 2)
    assert nb.numpy.broadcast_to(np.arange(3), (2, 3)).shape == (2, 3)
    assert nb.numpy.transpose(np.ones((2, 3)), (1, 0)).shape == (3, 2)


def test_permute_dims_negative_axes_and_bad_axes():
    x = nb.ones((2, 3, 4))
    assert nb.permute_dims(x, (-1, 0, 1)).shape == (4, 2, 3)          # 2025.12
    _same(nb.permute_dims(A(nb, [[1, 2]], "int32"), (-1, -2)),
          xp.permute_dims(A(xp, [[1, 2]], "int32"), (-1, -2)))
    for bad in ((0, 1, 5), (0, 0, 1), (0, 1)):
        with pytest.raises(ValueError):
            nb.permute_dims(x, bad)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_clip_min_max(dtype):
    v = [0, 1, 5, 9, 12]
    _both(lambda ns: ns.clip(A(ns, v, dtype), 2, 8))
    _both(lambda ns: ns.clip(A(ns, v, dtype), min=3))
    _both(lambda ns: ns.clip(A(ns, v, dtype), max=4))
    _both(lambda ns: ns.clip(A(ns, v, dtype), A(ns, [1, 1, 6, 6, 6], dtype), A(ns, [2, 2, 7, 8, 20], dtype)))
    _both(lambda ns: ns.clip(A(ns, v, dtype)))


def test_clip_float_special_cases_and_numpy_spellings():
    v = [-math.inf, -1.0, -0.0, 0.0, 2.0, math.inf, math.nan]
    for dt in REAL_FLOATS:
        _both(lambda ns: ns.clip(A(ns, v, dt), -0.5, 1.5))
        _both(lambda ns: ns.clip(A(ns, v, dt), A(ns, [math.nan] * 7, dt), 1.0))
    a = np.array([1.0, 5.0, 9.0])
    for call in (lambda m: m.clip(a, 2, 6), lambda m: m.clip(a, a_min=2, a_max=6),
                 lambda m: m.clip(a, min=2, max=6), lambda m: m.clip(a, a_min=2, a_max=None)):
        np.testing.assert_array_equal(np.asarray(call(nb.numpy)), call(np))
    t = nb.asarray([1.0, 5.0, 9.0])
    np.testing.assert_array_equal(t.clamp(min=2.0).numpy(), [2, 5, 9])
    np.testing.assert_array_equal(nb.clamp(t, 2.0, 6.0).numpy(), [2, 5, 6])
    with pytest.raises(ValueError):
        nb.clip(t, 1.0, a_min=2.0)


@pytest.mark.parametrize("name", ["std", "var"])
@pytest.mark.parametrize("dtype", REAL_FLOATS)
def test_std_var_axis_correction_keepdims(name, dtype):
    v = [[1.0, 2.0, 4.0], [3.0, 7.0, 8.0]]

    def close(fn):
        ours, theirs = fn(nb), fn(xp)
        assert _dtype_name(ours.dtype) == _dtype_name(theirs.dtype)
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-6)
    for axis in (None, 0, 1, -1, (0, 1)):
        for keepdims in (False, True):
            close(lambda ns: getattr(ns, name)(A(ns, v, dtype), axis=axis, correction=1,
                                               keepdims=keepdims))
            close(lambda ns: getattr(ns, name)(A(ns, v, dtype), axis=axis, correction=0.0,
                                               keepdims=keepdims))
    # NumPy's positional axis / ddof and PyTorch's unbiased
    a = np.array(v)
    np.testing.assert_allclose(np.asarray(getattr(nb.numpy, name)(a, 0)), getattr(np, name)(a, 0))
    np.testing.assert_allclose(np.asarray(getattr(nb.numpy, name)(a, 1, ddof=1)), getattr(np, name)(a, 1, ddof=1))
    t = nb.asarray(a)
    np.testing.assert_allclose(getattr(t, name)(1, True).numpy(), getattr(np, name)(a, 1, ddof=1))


def test_deviation_std_var_default_correction_on_pytorch_tensors():
    """docs/array-api.md: nbaccel's own tensors take PyTorch's default (correction 1); the
    standard's default, 0, holds for NumPy-flavoured tensors and whenever correction= is given."""
    v = [1.0, 2.0, 4.0]
    assert float(nb.var(nb.asarray(v, dtype=nb.float64))) == pytest.approx(np.var(v, ddof=1))
    assert float(nb.var(nb.asarray(v, dtype=nb.float64), correction=0)) == pytest.approx(np.var(v))
    assert float(nb.numpy.var(np.array(v))) == pytest.approx(np.var(v))


# ---- fixed failures of the suite ------------------------------------------------------------------

@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
def test_fftfreq_default_dtype_dtype_and_device(name):
    f = getattr(nb.fft, name)
    default = nb.__array_namespace_info__().default_dtypes()["real floating"]
    for n in (1, 2, 7, 8):
        out = f(n)
        assert out.dtype == default
        np.testing.assert_allclose(out.numpy(), getattr(np.fft, name)(n), rtol=1e-6)
        for dt in REAL_FLOATS:
            _same(f(n, d=0.25, dtype=getattr(nb, dt)), getattr(xp.fft, name)(n, d=0.25, dtype=getattr(xp, dt)))
    assert f(4, device=nb.__array_namespace_info__().default_device()).device == nb.device("cpu")
    # NumPy's np.fft keeps float64
    assert np.asarray(nb.numpy.fft.fftfreq(4)).dtype == np.float64


@pytest.mark.parametrize("rep_dtype", ["int8", "int16", "int32", "int64", "uint8"])
@pytest.mark.parametrize("x_dtype", ["float32", "int64", "bool"])
def test_repeat_empty_and_typed_repeats(x_dtype, rep_dtype):
    _both(lambda ns: ns.repeat(A(ns, [], x_dtype), A(ns, [], rep_dtype)))
    _both(lambda ns: ns.repeat(ns.reshape(A(ns, [], x_dtype), (0, 3)), A(ns, [], rep_dtype), axis=0))
    _both(lambda ns: ns.repeat(A(ns, [1, 0, 1], x_dtype), A(ns, [2, 0, 3], rep_dtype)))
    _both(lambda ns: ns.repeat(A(ns, [[1, 0], [1, 1]], x_dtype), 2, axis=1))


INF, NAN = math.inf, math.nan
# the standard's complex special cases of expm1 (a = real(x), b = imag(x)); None: either sign
EXPM1_SPECIAL = [
    ((0.0, 0.0), (0.0, 0.0)),
    ((-0.0, 0.0), (None, 0.0)),
    ((1.5, INF), (NAN, NAN)),
    ((-2.0, NAN), (NAN, NAN)),
    ((INF, 0.0), (INF, 0.0)),
    ((-INF, 1.0), (-1.0, 0.0)),            # -1 + 0 * cis(1): +0 * sin(1) = +0
    ((-INF, 2.0), (-1.0, 0.0)),
    ((-INF, 4.0), (-1.0, -0.0)),           # sin(4) < 0
    ((INF, 1.0), (INF, INF)),              # +inf * cis(1) - 1
    ((INF, 2.0), (-INF, INF)),             # cos(2) < 0
    ((-INF, INF), (-1.0, None)),
    ((INF, INF), (None, NAN)),
    ((-INF, NAN), (-1.0, None)),
    ((INF, NAN), (None, NAN)),
    ((NAN, 0.0), (NAN, 0.0)),
    ((NAN, 2.0), (NAN, NAN)),
    ((NAN, NAN), (NAN, NAN)),
]


def _check_part(got, want):
    if want is None:        # the standard leaves the sign open
        return
    if math.isnan(want):
        assert math.isnan(got)
    elif math.isinf(want):
        assert got == want
    else:
        assert got == want and math.copysign(1, got) == math.copysign(1, want), (got, want)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("case", EXPM1_SPECIAL, ids=[str(c[0]) for c in EXPM1_SPECIAL])
def test_expm1_complex_special_cases(case, dtype):
    """The standard's table (array-api-strict runs NumPy's expm1, which misses several of these,
    so the standard's text is the oracle), with expm1(conj(z)) == conj(expm1(z))."""
    (a, b), (re, im) = case
    for sign in (1.0, -1.0):            # the conjugate too
        z = complex(a, sign * b) if not math.isnan(b) else complex(a, b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out = nb.expm1(nb.asarray([z], dtype=getattr(nb, dtype)))
        assert out.dtype == getattr(nb, dtype)
        assert not out._np and repr(out).startswith("tensor(")     # still an nbaccel tensor
        got = complex(out.numpy()[0])
        _check_part(got.real, re)
        want_im = im if im is None or math.isnan(im) or math.isnan(b) else sign * im
        if im == 0.0 and sign < 0:
            want_im = -im                   # conj flips the zero's sign
        _check_part(got.imag, want_im)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_expm1_complex_ordinary_values_match_the_reference(dtype):
    rng = np.random.default_rng(7)
    z = (rng.normal(size=20) + 1j * rng.normal(size=20)) * np.array([1e-9] * 5 + [1.0] * 15)
    ours = nb.expm1(nb.asarray(z.tolist(), dtype=getattr(nb, dtype)))
    theirs = xp.expm1(xp.asarray(z.astype(dtype)))
    assert _dtype_name(ours.dtype) == _dtype_name(theirs.dtype)
    rtol = 1e-5 if dtype == "complex64" else 1e-12
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=rtol)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_deviation_expm1_numpy_code_keeps_numpys_values(dtype):
    """NumPy code (``nbaccel.numpy``, NumPy-flavoured tensors) gives NumPy's complex expm1, as
    plain NumPy does, and so does a compiled function (its kernels run NumPy's expm1 or the
    numba tier's equal of it); the Array API namespace's eager calls give the standard's."""
    vals = [0.0, -0.0, 1.0, np.inf, -np.inf, np.nan]
    z = np.array([complex(a, b) for a in vals for b in vals], dtype)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.expm1(z)
        for got in (nb.numpy.expm1(z), nb.expm1(nb.asarray(z)), nb.asarray(z).expm1()):
            np.testing.assert_array_equal(np.asarray(got), want)
            np.testing.assert_array_equal(np.signbit(np.asarray(got).real), np.signbit(want.real))
        std = nb.expm1(nb.asarray(z.tolist(), dtype=getattr(nb, dtype))).numpy()
    assert complex(std[0]) == 0j and not np.signbit(std[0].real)     # expm1(+0+0j) = +0+0j


@pytest.mark.parametrize("dtype", REAL_FLOATS)
def test_expm1_real_special_cases(dtype):
    _both(lambda ns: ns.expm1(A(ns, [NAN, 0.0, -0.0, INF, -INF, 1e-10, -3.0], dtype)))


# ---- the 2024.12 additions ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", NUMERIC)
def test_diff(dtype):
    v = [[1, 4, 9, 16], [2, 3, 5, 7], [0, 1, 1, 2]]
    _both(lambda ns: ns.diff(A(ns, v, dtype)))
    _both(lambda ns: ns.diff(A(ns, v, dtype), axis=0))
    _both(lambda ns: ns.diff(A(ns, v, dtype), n=2))
    _both(lambda ns: ns.diff(A(ns, v, dtype), axis=-2, n=2))
    _both(lambda ns: ns.diff(A(ns, v, dtype), n=0))
    _both(lambda ns: ns.diff(A(ns, v, dtype), n=5))                # longer than the axis: empty
    _both(lambda ns: ns.diff(A(ns, v, dtype), prepend=A(ns, [[0], [1], [0]], dtype),
                             append=A(ns, [[20], [9], [3]], dtype)))
    _both(lambda ns: ns.diff(A(ns, v, dtype), axis=0, append=A(ns, [[1, 1, 1, 1]], dtype), n=2))
    _both(lambda ns: ns.diff(A(ns, [], dtype)))


def test_diff_numpy_spellings_and_errors():
    a = np.array([1, 4, 9, 16])
    np.testing.assert_array_equal(nb.diff(nb.asarray(a), 2).numpy(), np.diff(a, 2))
    np.testing.assert_array_equal(nb.diff(nb.asarray(a), prepend=0).numpy(), np.diff(a, prepend=0))
    np.testing.assert_array_equal(nb.diff(nb.asarray([True, False, False])).numpy(),
                                  np.diff([True, False, False]))
    with pytest.raises(ValueError):
        nb.diff(nb.asarray(3))
    with pytest.raises(ValueError):
        nb.diff(nb.asarray(a), n=-1)


def test_diff_is_differentiable():
    x = nb.tensor([1.0, 4.0, 9.0], requires_grad=True)
    (nb.diff(x) * nb.asarray([1.0, 10.0], dtype=x.dtype)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [-1.0, -9.0, 10.0])


NEXTAFTER_VALUES = [0.0, -0.0, 1.0, -1.0, 1e-30, INF, -INF, NAN, 3.5]


@pytest.mark.parametrize("dtype", REAL_FLOATS)
def test_nextafter(dtype):
    x1 = [a for a in NEXTAFTER_VALUES for _ in NEXTAFTER_VALUES]
    x2 = [b for _ in NEXTAFTER_VALUES for b in NEXTAFTER_VALUES]
    _both(lambda ns: ns.nextafter(A(ns, x1, dtype), A(ns, x2, dtype)))
    _both(lambda ns: ns.nextafter(A(ns, [1.0, 2.0], dtype), 3.0))         # a scalar operand
    _both(lambda ns: ns.nextafter(0.0, A(ns, [1.0, -1.0], dtype)))
    _both(lambda ns: ns.nextafter(A(ns, [[1.0], [2.0]], dtype), A(ns, [0.0, 5.0], dtype)))


def test_nextafter_mixed_precision_and_errors():
    _same(nb.nextafter(A(nb, [1.0], "float32"), A(nb, [2.0], "float64")),
          np.nextafter(np.array([1.0], np.float64), np.array([2.0])))
    with pytest.raises(TypeError):
        nb.nextafter(A(nb, [1, 2], "int32"), A(nb, [1, 2], "int32"))


@pytest.mark.parametrize("dtype", REAL_FLOATS + COMPLEX)
def test_reciprocal(dtype):
    v = [1.0, 2.0, -4.0, 0.0, -0.0, INF, NAN, 0.5]
    if dtype in COMPLEX:
        v = [complex(t, 1.0) for t in v if not math.isnan(t) and not math.isinf(t)]
    _both(lambda ns: ns.reciprocal(A(ns, v, dtype)))


@pytest.mark.parametrize("dtype", NUMERIC + ("bool",))
def test_take_along_axis(dtype):
    v = [[1, 0, 1], [0, 1, 1]]
    idx = [[2, 0], [1, 1]]
    _both(lambda ns: ns.take_along_axis(A(ns, v, dtype), A(ns, idx, "int64"), axis=1))
    _both(lambda ns: ns.take_along_axis(A(ns, v, dtype), A(ns, idx, "int64")))          # axis=-1
    _both(lambda ns: ns.take_along_axis(A(ns, v, dtype), A(ns, [[1, 0, 1]], "int32"), axis=0))
    _both(lambda ns: ns.take_along_axis(A(ns, v, dtype), A(ns, [[-1], [-3]], "int64"), axis=-1))


@pytest.mark.parametrize("dtype", NUMERIC + ("bool",) + COMPLEX)
def test_count_nonzero(dtype):
    v = [[1, 0, 1], [0, 0, 1]]
    if dtype in REAL_FLOATS:
        v = [[NAN, -0.0, 1.0], [0.0, INF, 2.0]]
    for kw in ({}, {"axis": 0}, {"axis": 1, "keepdims": True}, {"axis": (0, 1)}, {"axis": -1},
               {"keepdims": True}):
        _both(lambda ns: ns.count_nonzero(A(ns, v, dtype), **kw))


@pytest.mark.parametrize("dtype", NUMERIC + COMPLEX)
def test_cumulative_prod(dtype):
    v = [[1, 2, 3], [2, 1, 2]]
    _both(lambda ns: ns.cumulative_prod(A(ns, v, dtype), axis=1))
    _both(lambda ns: ns.cumulative_prod(A(ns, v, dtype), axis=0, include_initial=True))
    _both(lambda ns: ns.cumulative_prod(A(ns, [2, 3], dtype)))
    _both(lambda ns: ns.cumulative_prod(A(ns, [2, 3], dtype), include_initial=True))
    _both(lambda ns: ns.cumulative_prod(A(ns, [], dtype), include_initial=True))
    if dtype in INTS:
        _both(lambda ns: ns.cumulative_prod(A(ns, [2, 3], dtype), dtype=ns.int64))
        _both(lambda ns: ns.cumulative_prod(A(ns, [2, 3], dtype), dtype=ns.float64))


@pytest.mark.parametrize("dtype", ("int8", "uint16", "int64", "float32", "float64"))
def test_searchsorted_scalars_and_sides(dtype):
    x1 = [1, 2, 2, 5, 9]
    for side in ("left", "right"):
        _both(lambda ns: ns.searchsorted(A(ns, x1, dtype), A(ns, [0, 2, 6, 10], dtype), side=side))
        _both(lambda ns: ns.searchsorted(A(ns, x1, dtype), 2, side=side))        # 2025.12
    _both(lambda ns: ns.searchsorted(A(ns, [9, 1, 5], dtype), A(ns, [4], dtype),
                                     sorter=A(ns, [1, 2, 0], "int64")))


# scalar arguments of the binary elementwise functions (2024.12): the scalar takes the array's dtype
BINARY_SCALARS = {
    "add": (NUMERIC + COMPLEX, 3), "subtract": (NUMERIC + COMPLEX, 2), "multiply": (NUMERIC + COMPLEX, 2),
    "divide": (REAL_FLOATS + COMPLEX, 2.0), "floor_divide": (NUMERIC, 2), "remainder": (NUMERIC, 3),
    "pow": (REAL_FLOATS + COMPLEX, 2.0), "atan2": (REAL_FLOATS, 0.5), "hypot": (REAL_FLOATS, 4.0),
    "copysign": (REAL_FLOATS, -1.0), "logaddexp": (REAL_FLOATS, 0.5), "maximum": (NUMERIC, 3),
    "minimum": (NUMERIC, 3), "nextafter": (REAL_FLOATS, 0.0),
    "equal": (NUMERIC + COMPLEX, 2), "not_equal": (NUMERIC, 2), "less": (NUMERIC, 2),
    "less_equal": (NUMERIC, 2), "greater": (NUMERIC, 2), "greater_equal": (NUMERIC, 2),
    "bitwise_and": (INTS, 3), "bitwise_or": (INTS, 3), "bitwise_xor": (INTS, 3),
    "bitwise_left_shift": (INTS, 1), "bitwise_right_shift": (INTS, 1),
    "logical_and": (("bool",), True), "logical_or": (("bool",), False), "logical_xor": (("bool",), True),
}
SCALAR_CASES = [(n, d) for n, (ds, _) in BINARY_SCALARS.items() for d in ds]


@pytest.mark.parametrize("name,dtype", SCALAR_CASES, ids=[f"{n}-{d}" for n, d in SCALAR_CASES])
def test_binary_function_with_a_python_scalar(name, dtype):
    scalar = BINARY_SCALARS[name][1]
    if dtype in REAL_FLOATS + COMPLEX and isinstance(scalar, int) and not isinstance(scalar, bool):
        scalar = float(scalar)
    v = [True, False, True] if dtype == "bool" else [1, 2, 7]
    _both(lambda ns: getattr(ns, name)(A(ns, v, dtype), scalar))
    if name not in ("nextafter",) or dtype in REAL_FLOATS:
        _both(lambda ns: getattr(ns, name)(scalar, A(ns, v, dtype)))


@pytest.mark.parametrize("dtype", NUMERIC + ("bool",))
def test_where_with_scalars(dtype):
    cond = [True, False, True]
    v = [True, False, False] if dtype == "bool" else [1, 2, 3]
    s = True if dtype == "bool" else (7.0 if dtype in REAL_FLOATS else 7)
    _both(lambda ns: ns.where(A(ns, cond, "bool"), A(ns, v, dtype), s))
    _both(lambda ns: ns.where(A(ns, cond, "bool"), s, A(ns, v, dtype)))


@pytest.mark.parametrize("dtype", REAL_FLOATS)
def test_complex_scalar_with_a_real_array(dtype):
    """2024.12's breaking change: a Python complex with a real floating array gives the complex
    dtype of the array's precision."""
    _both(lambda ns: ns.multiply(A(ns, [1.0, 2.0], dtype), 1j))
    _both(lambda ns: ns.add(2 + 1j, A(ns, [1.0, 2.0], dtype)))
    assert _dtype_name(nb.result_type(getattr(nb, dtype), 1j)) == _dtype_name(xp.result_type(getattr(xp, dtype), 1j))


def test_result_type_with_scalars():
    for dt, s in (("int8", 1), ("float32", 1.0), ("uint16", True), ("float64", 1j), ("int32", 2.5)):
        try:
            want = xp.result_type(getattr(xp, dt), s)
        except TypeError:
            continue
        assert _dtype_name(nb.result_type(getattr(nb, dt), s)) == _dtype_name(want)


@pytest.mark.parametrize("dtype", REAL_FLOATS)
def test_conj_real_imag_of_real_arrays(dtype):
    _both(lambda ns: ns.conj(A(ns, [1.0, -2.0], dtype)))
    _both(lambda ns: ns.real(A(ns, [1.0, -2.0], dtype)))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_mean_of_complex(dtype):
    v = [[1 + 2j, 3 - 1j], [0.5j, 2.0]]
    for axis in (None, 0, 1):
        ours, theirs = nb.mean(A(nb, v, dtype), axis=axis), xp.mean(A(xp, v, dtype), axis=axis)
        assert _dtype_name(ours.dtype) == _dtype_name(theirs.dtype)
        np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-6)


def test_integer_array_indexing():
    """2024.12 adds integer array indexing (each axis indexed by an integer array or integer)."""
    v = [[1, 2, 3], [4, 5, 6]]
    _both(lambda ns: A(ns, v, "int32")[A(ns, [1, 0, 1], "int64"), A(ns, [2, 2, 0], "int64")])
    _both(lambda ns: A(ns, v, "int32")[A(ns, [1, 0], "int64"), 1])
    _both(lambda ns: A(ns, v, "int32")[A(ns, [[1], [0]], "int64"), A(ns, [0, 2], "int64")])
    _both(lambda ns: A(ns, v, "int32")[-1, A(ns, [-1, 0], "int64")])


# ---- the 2025.12 additions nbaccel has ----------------------------------------------------------

def test_broadcast_shapes():
    for shapes in (((2, 1), (1, 3), (3,)), ((),), (), ((0, 1), (5,)), ((4, 1, 2), (3, 1))):
        assert nb.broadcast_shapes(*shapes) == xp.broadcast_shapes(*shapes)
    with pytest.raises(ValueError):
        nb.broadcast_shapes((2, 3), (4,))


@pytest.mark.parametrize("dtype", INTS)
def test_isin(dtype):
    _both(lambda ns: ns.isin(A(ns, [[1, 2], [3, 4]], dtype), A(ns, [2, 5, 4], dtype)))
    _both(lambda ns: ns.isin(A(ns, [1, 2, 3], dtype), 2))
    _both(lambda ns: ns.isin(A(ns, [1, 2, 3], dtype), A(ns, [[3], [1]], dtype)))
    _both(lambda ns: ns.isin(A(ns, [], dtype), A(ns, [1], dtype)))
    # invert: array-api-strict 2.6 ignores it; the standard (and NumPy) negate
    np.testing.assert_array_equal(
        nb.isin(A(nb, [1, 2, 3], dtype), A(nb, [2, 5], dtype), invert=True).numpy(),
        np.isin(np.array([1, 2, 3]), [2, 5], invert=True))


def test_isin_floats_as_numpy():
    a, b = np.array([1.0, np.nan, 2.5]), np.array([2.5, np.nan])
    np.testing.assert_array_equal(nb.isin(nb.asarray(a), nb.asarray(b)).numpy(), np.isin(a, b))


@pytest.mark.parametrize("dtype", REAL_FLOATS + COMPLEX)
def test_expand_dims_tuple_axis(dtype):
    _both(lambda ns: ns.expand_dims(A(ns, [1, 2], dtype), axis=(0, -1)))
    _both(lambda ns: ns.expand_dims(A(ns, [[1, 2]], dtype), axis=1))


@pytest.mark.parametrize("dtype", REAL_FLOATS + COMPLEX)
def test_eig_and_eigvals(dtype):
    rng = np.random.default_rng(3)
    m = rng.normal(size=(2, 4, 4))
    if dtype in COMPLEX:
        m = m + 1j * rng.normal(size=(2, 4, 4))
    m = m.astype(dtype)
    ours, theirs = nb.linalg.eig(nb.asarray(m)), xp.linalg.eig(xp.asarray(m))
    vals, vecs = ours
    assert ours.eigenvalues is vals and ours.eigenvectors is vecs
    for o, t in zip(ours, theirs):
        assert _dtype_name(o.dtype) == _dtype_name(t.dtype) and tuple(o.shape) == tuple(t.shape)
    rtol = 1e-4 if dtype in ("float32", "complex64") else 1e-10
    key = lambda v: np.sort_complex(np.round(v, 3))          # order is LAPACK's
    np.testing.assert_allclose(key(vals.numpy()), key(_np(theirs[0])), rtol=rtol, atol=rtol)
    # A v = lambda v, unit columns
    v, w = vecs.numpy(), vals.numpy()
    np.testing.assert_allclose(m.astype(v.dtype) @ v, v * w[..., None, :], rtol=rtol * 10, atol=rtol * 10)
    np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, rtol=rtol)
    ev = nb.linalg.eigvals(nb.asarray(m))
    assert _dtype_name(ev.dtype) == _dtype_name(xp.linalg.eigvals(xp.asarray(m)).dtype)
    np.testing.assert_allclose(key(ev.numpy()), key(vals.numpy()), rtol=rtol, atol=rtol)


def test_eig_errors():
    with pytest.raises(np.linalg.LinAlgError):
        nb.linalg.eig(nb.ones((2, 3)))
    with pytest.raises(TypeError):
        nb.linalg.eigvals(nb.asarray([[1, 2], [3, 4]], dtype=nb.int32))


def test_new_ops_batch_under_vmap():
    from nbaccel.func import vmap
    x = nb.asarray([[1.0, 2.0], [3.0, 4.0]], dtype=nb.float64)
    y = nb.asarray([0.0, 5.0], dtype=nb.float64)
    np.testing.assert_array_equal(vmap(lambda a: nb.nextafter(a, y))(x).numpy(),
                                  np.nextafter(x.numpy(), y.numpy()))
    np.testing.assert_array_equal(vmap(nb.nextafter)(x, nb.asarray([[9.0], [0.0]], dtype=nb.float64)).numpy(),
                                  np.nextafter(x.numpy(), [[9.0], [0.0]]))
    np.testing.assert_array_equal(vmap(lambda a: nb.isin(a, nb.asarray([2.0, 3.0], dtype=nb.float64)))(x).numpy(),
                                  [[False, True], [True, False]])
    m = np.random.default_rng(0).normal(size=(3, 2, 2))
    np.testing.assert_allclose(np.sort_complex(vmap(nb.linalg.eigvals)(nb.asarray(m)).numpy()),
                               np.sort_complex(np.linalg.eigvals(m)), rtol=1e-6)
