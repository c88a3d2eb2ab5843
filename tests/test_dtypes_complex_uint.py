"""complex64/complex128 and uint16/uint32/uint64 against NumPy 2 (and PyTorch where installed).

* Promotion: every pair of the 14 NumPy dtypes equals ``np.result_type`` (int64 + uint64 ->
  float64, float16 + complex64 -> complex64, ...); Python scalars are weak (NEP 50),
  complex ones included; nbaccel's own flavour gives complex64 as its default complex.
* Elementwise ops and reductions over complex and unsigned data equal NumPy's values and
  dtypes; ops NumPy has no complex loop for raise TypeError as NumPy does.
* ``.real`` / ``.imag`` / ``.conj()`` / ``angle`` and ``np.real/np.imag/np.conj/np.angle``.
* Array API: the info lists every required dtype, isdtype kinds, finfo/iinfo/can_cast.
* No autograd through complex tensors: a clear error, never a silently missing gradient.
* ``np.dtype(nb.float32)`` works, so real NumPy called with ``x.dtype`` works, also inside a
  compiled function (issue 8, item 7).
"""
import warnings

import numpy as np
import pytest

import nbaccel as nb
import nbaccel.numpy as xnp
from oracle import assert_close

try:
    import torch
except Exception:  # pragma: no cover - depends on the machine
    torch = None

NP_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
             "float16", "float32", "float64", "complex64", "complex128"]
COMPLEX = ["complex64", "complex128"]
UINTS = ["uint16", "uint32", "uint64"]
RNG = np.random.default_rng(7)


def _complex(shape, dtype):
    re = RNG.uniform(-2, 2, shape)
    im = RNG.uniform(-2, 2, shape)
    return (re + 1j * im).astype(dtype)


def _uint(shape, dtype, high=200):
    return RNG.integers(0, high, size=shape).astype(dtype)


def _tol(dtype):
    return {"complex64": (2e-5, 2e-6), "float32": (2e-5, 2e-6)}.get(np.dtype(dtype).name, (1e-12, 1e-13))


def _same(got, want, msg=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{msg}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{msg}: shape {got.shape} != {want.shape}"
    rtol, atol = _tol(want.dtype) if want.dtype.kind in "fc" else (0, 0)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=msg)


def _np_result(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return fn(*args), None
        except Exception as e:  # noqa: BLE001 - the exception class is compared
            return None, e


# ---- dtypes and promotion ---------------------------------------------------------------------

def test_new_dtypes_exist_and_round_trip():
    for name in COMPLEX + UINTS:
        d = getattr(nb, name)
        assert nb.dtypes.dtype(name) is d and nb.dtypes.dtype(np.dtype(name)) is d
        assert d == np.dtype(name) and str(d) == name
        assert np.dtype(d) == np.dtype(name)
    assert nb.dtypes.dtype(complex) is nb.complex128
    assert nb.complex64.kind == "c" and nb.uint64.kind == "u"


@pytest.mark.parametrize("a", NP_DTYPES)
def test_result_type_every_pair(a):
    for b in NP_DTYPES:
        want = np.result_type(np.dtype(a), np.dtype(b))
        assert nb.result_type(getattr(nb.dtypes, a if a != "bool" else "bool_"),
                              nb.dtypes.dtype(b)) == want, (a, b)
        x, y = nb.asarray(np.ones(2, a)), nb.asarray(np.ones(2, b))
        assert (x + y).dtype == want, (a, b)
        assert nb.result_type(x, y) == want


def test_uint64_with_signed_is_float64():
    assert nb.result_type(nb.uint64, nb.int64) is nb.float64
    assert nb.result_type(nb.uint64, nb.int8) is nb.float64
    assert nb.result_type(nb.uint32, nb.int32) is nb.int64
    assert nb.result_type(nb.uint16, nb.int16) is nb.int32


def test_bfloat16_with_new_dtypes():
    assert nb.result_type(nb.bfloat16, nb.complex64) is nb.complex64
    assert nb.result_type(nb.bfloat16, nb.complex128) is nb.complex128
    assert nb.result_type(nb.bfloat16, nb.uint16) is nb.float32
    assert nb.result_type(nb.bfloat16, nb.uint64) is nb.float64
    assert (nb.ones(2, dtype=nb.bfloat16) + 1j).dtype is nb.complex64


SCALARS = [True, 2, 2.5, -0.5, 1j, 1 + 2j]
SCALAR_OPS = ["add", "subtract", "multiply", "divide", "power", "equal", "maximum", "less"]


@pytest.mark.parametrize("d", NP_DTYPES)
def test_python_scalars_are_weak(d):
    a = np.ones(3, d)
    for s in SCALARS:
        for name in SCALAR_OPS:
            for args_np, args_nb in (((a, s), (nb.asarray(a), s)), ((s, a), (s, nb.asarray(a)))):
                want, err = _np_result(getattr(np, name), *args_np)
                if err is not None:
                    with pytest.raises(type(err)):
                        getattr(nb, name)(*args_nb)
                    continue
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    got = getattr(nb, name)(*args_nb)
                assert got.dtype == want.dtype, (name, d, s)
                _same(got, want, f"{name}({d}, {s!r})")


def test_nbaccel_flavour_default_complex_is_complex64():
    assert nb.tensor(1 + 2j).dtype is nb.complex64
    assert nb.tensor([1j, 2]).dtype is nb.complex64
    assert (nb.arange(3) * 1j).dtype is nb.complex64            # int + complex scalar
    assert (nb.ones(3, dtype=nb.float64) * 1j).dtype is nb.complex128
    assert nb.result_type(nb.int8, 1j) is nb.complex64
    assert nb.result_type(1j) is nb.complex64 and nb.result_type(1j, 2.0) is nb.complex64
    # NumPy data and the NumPy namespace keep NumPy's complex128
    assert nb.asarray(np.ones(2, np.int8)).__mul__(1j).dtype is nb.complex128
    assert xnp.asarray(1 + 2j).dtype is nb.complex128
    assert nb.asarray(np.array([1 + 2j])).dtype is nb.complex128
    assert nb.asarray(np.array([1 + 2j], np.complex64)).dtype is nb.complex64
    if torch is not None:
        assert str(torch.tensor(1 + 2j).dtype) == "torch.complex64"


def test_uint8_sums_give_uint64():
    for d in ["uint8"] + UINTS:
        a = _uint((3, 4), d)
        t = nb.asarray(a)
        for name in ("sum", "prod"):
            _same(getattr(t, name)(), getattr(a, name)(), f"{name} {d}")
            _same(getattr(t, name)(axis=0), getattr(a, name)(axis=0), f"{name} {d}")
        _same(nb.cumsum(t, axis=1), np.cumsum(a, axis=1), f"cumsum {d}")
        _same(nb.cumprod(t), np.cumprod(a), f"cumprod {d}")
    assert nb.asarray(np.ones(3, np.uint8)).sum().dtype is nb.uint64


# ---- elementwise ops ------------------------------------------------------------------------

COMPLEX_UNARY = ["negative", "positive", "absolute", "sign", "sqrt", "exp", "expm1", "log", "log1p",
                 "log2", "log10", "exp2", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
                 "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "square", "reciprocal",
                 "rint", "isfinite", "isnan", "isinf", "conjugate", "real", "imag", "angle"]
REAL_ONLY_UNARY = ["floor", "ceil", "trunc", "signbit"]


@pytest.mark.parametrize("d", COMPLEX)
def test_complex_unary_ops_match_numpy(d):
    a = _complex((3, 5), d)
    a[0, 0] = 0
    a[1, 1] = complex(np.inf, 1)
    a[2, 2] = complex(np.nan, 0)
    t = nb.asarray(a)
    for name in COMPLEX_UNARY:
        want, err = _np_result(getattr(np, name), a)
        assert err is None, name
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            got = getattr(np, name)(t)          # NumPy dispatch to the op table
        assert isinstance(got, nb.Tensor), name
        _same(got, want, f"np.{name}({d})")
    for name in REAL_ONLY_UNARY:
        _, err = _np_result(getattr(np, name), a)
        assert isinstance(err, TypeError)
        with pytest.raises(TypeError, match="complex"):
            getattr(nb, name)(t)


def test_abs_of_complex_is_real():
    for d, r in (("complex64", nb.float32), ("complex128", nb.float64)):
        t = nb.asarray(_complex((4,), d))
        assert abs(t).dtype is r and t.abs().dtype is r and nb.abs(t).dtype is r
        _same(abs(t), np.abs(np.asarray(t)))


COMPLEX_BINARY = ["add", "subtract", "multiply", "divide", "power", "equal", "not_equal",
                  "maximum", "minimum", "less", "greater_equal", "logical_and", "logical_xor"]
REAL_ONLY_BINARY = ["floor_divide", "remainder", "fmod", "arctan2", "copysign", "hypot",
                    "logaddexp", "bitwise_and", "left_shift"]


@pytest.mark.parametrize("d", COMPLEX)
@pytest.mark.parametrize("other", ["same", "float32", "float64", "int16", "uint64", "bool"])
def test_complex_binary_ops_match_numpy(d, other):
    a = _complex((3, 4), d)
    b = _complex((3, 4), d) if other == "same" else RNG.uniform(-2, 2, (3, 4)).astype(other)
    b.flat[0] = a.flat[0] if other == "same" else b.flat[0]    # one tie for the comparisons
    ta, tb = nb.asarray(a), nb.asarray(b)
    for name in COMPLEX_BINARY:
        want, err = _np_result(getattr(np, name), a, b)
        assert err is None, name
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            got = getattr(np, name)(ta, tb)
        _same(got, want, f"{name}({d}, {other})")
    for name in REAL_ONLY_BINARY:
        _, err = _np_result(getattr(np, name), a, b)
        assert isinstance(err, TypeError), name
        with pytest.raises(TypeError):
            getattr(np, name)(ta, tb)


UINT_UNARY = ["negative", "absolute", "sign", "sqrt", "exp", "floor", "square", "invert",
              "isfinite", "logical_not", "conjugate", "real", "imag", "angle"]
UINT_BINARY = ["add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power",
               "maximum", "minimum", "equal", "less", "bitwise_and", "bitwise_or", "bitwise_xor",
               "left_shift", "right_shift", "arctan2", "hypot"]


@pytest.mark.parametrize("d", UINTS)
def test_uint_ops_match_numpy(d):
    a = _uint((3, 4), d, 30)
    b = _uint((3, 4), d, 30) + 1
    b.flat[0] = 0                               # division by zero gives 0 (NumPy)
    ta, tb = nb.asarray(a), nb.asarray(b)
    for name in UINT_UNARY:
        want, err = _np_result(getattr(np, name), a)
        assert err is None, name
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _same(getattr(np, name)(ta), want, f"{name}({d})")
    for name in UINT_BINARY:
        want, err = _np_result(getattr(np, name), a, b)
        assert err is None, name
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            _same(getattr(np, name)(ta, tb), want, f"{name}({d})")
    # mixed with signed and floats
    for other in ("int8", "int32", "int64", "float32"):
        c = RNG.integers(-5, 5, (3, 4)).astype(other)
        _same(nb.asarray(a) + nb.asarray(c), a + c, f"{d} + {other}")
        _same(nb.asarray(a) * 3, a * 3)


def test_uint64_extremes():
    a = np.array([0, 1, 2 ** 63, 2 ** 64 - 1], np.uint64)
    t = nb.asarray(a)
    _same(t + np.uint64(1), a + np.uint64(1))       # wraps, as NumPy
    _same(t // 3, a // 3)
    _same(t.max(), a.max())
    _same(t.astype(nb.float64), a.astype(np.float64))
    _same(t > 2 ** 62, a > 2 ** 62)
    assert nb.iinfo(nb.uint64).max == 2 ** 64 - 1


# ---- reductions -----------------------------------------------------------------------------

COMPLEX_REDUCTIONS = ["sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin",
                      "any", "all", "cumsum", "cumprod"]


@pytest.mark.parametrize("d", COMPLEX)
def test_complex_reductions_match_numpy(d):
    a = _complex((4, 5), d)
    a[1, 2] = 0
    t = nb.asarray(a)
    for name in COMPLEX_REDUCTIONS:
        for axis in (None, 0, 1):
            want = getattr(np, name)(a, axis=axis)
            got = getattr(np, name)(t, axis=axis)
            _same(got, want, f"{name}({d}, axis={axis})")
    assert np.var(t).dtype == nb.dtypes.real_of(t.dtype)      # var/std of complex are real
    _same(nb.std(t, correction=1), np.std(a, ddof=1))
    with pytest.raises(TypeError, match="complex"):
        nb.logsumexp(t)
    if torch is not None:
        tt = torch.from_numpy(a)
        _same(t.sum(dim=0), tt.sum(dim=0).numpy())
        _same(t.mean(), tt.mean().numpy())


@pytest.mark.parametrize("d", UINTS)
def test_uint_reductions_match_numpy(d):
    a = _uint((4, 5), d)
    t = nb.asarray(a)
    for name in ("sum", "prod", "mean", "var", "max", "min", "argmax", "any", "all"):
        for axis in (None, 1):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _same(getattr(np, name)(t, axis=axis), getattr(np, name)(a, axis=axis), f"{name}({d})")


# ---- real, imag, conj, angle, complex -------------------------------------------------------

def test_real_imag_conj_attributes():
    a = _complex((2, 3), "complex128")
    t = nb.asarray(a)
    _same(t.real, a.real)
    _same(t.imag, a.imag)
    _same(t.conj(), a.conj())
    _same(t.conjugate(), a.conjugate())
    _same(nb.conj(t), np.conj(a))
    _same(nb.real(t), np.real(a))
    _same(nb.imag(t), np.imag(a))
    _same(nb.angle(t), np.angle(a))
    _same(nb.angle(t, deg=True), np.angle(a, deg=True))
    _same(t.angle(), np.angle(a))
    for fn in (np.real, np.imag, np.conj, np.conjugate, np.angle):
        got = fn(t)
        assert isinstance(got, nb.Tensor)
        _same(got, fn(a), fn.__name__)
    assert t.is_complex() and not nb.ones(2).is_complex()


def test_real_imag_of_real_tensors():
    a = np.array([-1.5, 0.0, 2.0], np.float32)
    t = nb.asarray(a)
    assert t.real is t                         # NumPy: the array itself
    _same(t.imag, a.imag)
    _same(t.conj(), a.conj())
    _same(nb.angle(t), np.angle(a))
    for d in ("bool", "int8", "uint16", "int64"):
        x = np.array([0, 1, 1], d)
        _same(nb.angle(nb.asarray(x)), np.angle(x), d)
        _same(np.conj(nb.asarray(x)), np.conj(x), d)
        _same(np.imag(nb.asarray(x)), np.imag(x), d)


def test_real_and_imag_are_views_and_settable():
    a = _complex((3,), "complex128")
    t = nb.asarray(a.copy())
    r = t.real
    r[0] = 10.0                                 # a write through the view reaches t (NumPy)
    assert t[0].item().real == 10.0
    t.imag = 0.5
    want = a.copy()
    want[0] = complex(10.0, want[0].imag)
    want.imag = 0.5
    _same(t, want)
    t.real = nb.asarray(np.array([1.0, 2.0, 3.0]))
    want.real = [1.0, 2.0, 3.0]
    _same(t, want)
    with pytest.raises(TypeError, match="imaginary"):
        nb.ones(3).imag = 1.0


def test_complex_constructor_is_exact_for_infinities():
    re = nb.asarray(np.array([np.inf, 1.0, np.nan]))
    im = nb.asarray(np.array([1.0, -np.inf, 0.0]))
    got = nb.complex(re, im)
    assert got.dtype is nb.complex128
    _same(got.real, np.asarray(re))
    _same(got.imag, np.asarray(im))
    assert nb.complex(nb.ones(2), 0.5).dtype is nb.complex64
    with pytest.raises(TypeError, match="real"):
        nb.complex(got, im)


def test_nan_to_num_complex():
    a = np.array([complex(np.nan, np.inf), complex(-np.inf, 1), 1 + 2j])
    _same(nb.nan_to_num(nb.asarray(a)), np.nan_to_num(a))
    with pytest.raises(TypeError):
        nb.isposinf(nb.asarray(a))


def test_complex_mesh_and_fractal_cell():
    """A Mandelbrot-style iteration, the everyday complex cell (issue 9)."""
    x = np.linspace(-2, 1, 9)
    y = np.linspace(-1, 1, 7)
    X, Y = np.meshgrid(x, y)
    c = X + 1j * Y
    tc = xnp.asarray(X) + 1j * xnp.asarray(Y)
    assert tc.dtype is nb.complex128
    z, tz = np.zeros_like(c), xnp.zeros_like(tc)
    for _ in range(6):
        z, tz = z * z + c, tz * tz + tc
    with np.errstate(all="ignore"):
        _same(np.abs(tz) < 2, np.abs(z) < 2)
        _same(tz, z)
    _same(xnp.linspace(0, 1j, 5), np.linspace(0, 1j, 5))
    _same(xnp.full(3, 1 + 1j), np.full(3, 1 + 1j))
    _same(nb.zeros(2, dtype=nb.complex64), np.zeros(2, np.complex64))


# ---- linear algebra -------------------------------------------------------------------------

def test_complex_linalg():
    a = _complex((3, 3), "complex128") + 3 * np.eye(3)
    b = _complex((3, 2), "complex128")
    ta, tb = nb.asarray(a), nb.asarray(b)
    _same(ta @ tb, a @ b)
    _same(nb.linalg.inv(ta), np.linalg.inv(a))
    _same(nb.linalg.det(ta), np.linalg.det(a))
    _same(nb.linalg.solve(ta, tb), np.linalg.solve(a, b))
    _same(nb.linalg.vector_norm(ta), np.linalg.norm(a.ravel()))
    _same(nb.linalg.matrix_norm(ta), np.linalg.norm(a, "fro"))
    _same(nb.linalg.svdvals(ta), np.linalg.svd(a, compute_uv=False))
    h = a + a.conj().T
    _same(nb.linalg.eigvalsh(nb.asarray(h)), np.linalg.eigvalsh(h))
    sign, logabs = nb.linalg.slogdet(ta)
    wsign, wlogabs = np.linalg.slogdet(a)
    _same(sign, wsign)
    _same(logabs, wlogabs)
    # np.linalg.eigvals has no op: NumPy runs it, the complex result comes back as a tensor
    r = np.array([[0.0, 1.0], [-1.0, 0.0]])
    ev = xnp.linalg.eigvals(xnp.asarray(r))
    assert isinstance(ev, nb.Tensor) and ev.dtype is nb.complex128
    _same(ev.real, np.linalg.eigvals(r).real)
    _same(np.sort(ev.imag), np.sort(np.linalg.eigvals(r).imag))


# ---- Array API --------------------------------------------------------------------------------

def test_array_api_info_lists_every_required_dtype():
    info = nb.__array_namespace_info__()
    required = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float32", "float64", "complex64", "complex128"}
    assert set(info.dtypes()) == required
    kinds = {"bool": {"bool"}, "signed integer": {"int8", "int16", "int32", "int64"},
             "unsigned integer": {"uint8", "uint16", "uint32", "uint64"},
             "real floating": {"float32", "float64"}, "complex floating": {"complex64", "complex128"}}
    for kind, names in kinds.items():
        assert set(info.dtypes(kind=kind)) == names, kind
        for n in required:
            assert nb.isdtype(getattr(nb, n), kind) == (n in names), (n, kind)
    assert set(info.dtypes(kind="integral")) == kinds["signed integer"] | kinds["unsigned integer"]
    assert set(info.dtypes(kind="numeric")) == required - {"bool"}
    assert info.default_dtypes()["complex floating"] is nb.complex64


def test_finfo_iinfo_can_cast():
    for c, r in (("complex64", "float32"), ("complex128", "float64")):
        fi, want = nb.finfo(getattr(nb, c)), np.finfo(np.dtype(c))
        assert fi.bits == want.bits and fi.eps == float(want.eps) and fi.max == float(want.max)
        assert fi.smallest_normal == float(want.smallest_normal) and fi.dtype is getattr(nb, r)
    for u in ["uint8"] + UINTS:
        ii, want = nb.iinfo(getattr(nb, u)), np.iinfo(u)
        assert (ii.bits, ii.min, ii.max) == (want.bits, int(want.min), int(want.max))
    with pytest.raises(TypeError):
        nb.iinfo(nb.complex64)
    std = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float32", "float64", "complex64", "complex128"]
    for a in std:
        for b in std:
            assert nb.can_cast(getattr(nb, a), getattr(nb, b)) == np.can_cast(a, b), (a, b)


def test_torch_agrees_on_complex():
    if torch is None:
        pytest.skip("PyTorch is not installed")
    a = _complex((3, 4), "complex64")
    t, tt = nb.asarray(a), torch.from_numpy(a)
    for name, tname in (("abs", "abs"), ("angle", "angle"), ("exp", "exp"), ("sqrt", "sqrt"),
                        ("sin", "sin"), ("tanh", "tanh"), ("conj", "conj"), ("sign", "sgn")):
        want = getattr(torch, tname)(tt).resolve_conj().numpy()
        _same(getattr(nb, name)(t), want, name)
    _same(t.real, tt.real.numpy())
    _same(t.imag, tt.imag.numpy())
    assert str((torch.ones(2, dtype=torch.float64) * torch.ones(2, dtype=torch.complex64)).dtype) \
        == "torch." + (nb.ones(2, dtype=nb.float64) * nb.ones(2, dtype=nb.complex64)).dtype.name
    re, im = np.array([np.inf, 1.0], np.float32), np.array([0.5, -np.inf], np.float32)
    _same(nb.complex(nb.asarray(re), nb.asarray(im)),
          torch.complex(torch.from_numpy(re), torch.from_numpy(im)).numpy())


# ---- autograd ----------------------------------------------------------------------------------

def test_no_autograd_through_complex():
    with pytest.raises(RuntimeError, match="complex"):
        nb.ones(2, dtype=nb.complex64).requires_grad_()
    x = nb.ones(3, requires_grad=True)
    with pytest.raises(NotImplementedError, match="complex"):
        x * 1j
    with pytest.raises(NotImplementedError, match="complex"):
        nb.complex(x, x)
    with pytest.raises(NotImplementedError, match="complex"):
        x.astype(nb.complex64)
    with nb.no_grad():                           # without grad the same ops run
        assert (x * 1j).dtype is nb.complex64
    z = (x.detach() * 1j)
    assert not z.requires_grad
    # the real parts of real tensors stay differentiable
    (nb.real(x) * 2 + nb.imag(x) + nb.conj(x)).sum().backward()
    assert_close(x.grad, np.full(3, 3.0, np.float32))


# ---- NumPy accepts nbaccel dtypes (issue 8, item 7) ----------------------------------------

def test_numpy_reads_nbaccel_dtypes():
    for d in nb.dtypes.ALL_DTYPES:
        assert np.dtype(d) == d.np
        assert np.zeros(2, d).dtype == d.np
    x = nb.ones(3, dtype=nb.float32)
    assert np.ones((4, 3), x.dtype).dtype == np.float32
    assert np.asarray([1, 2], dtype=nb.uint16).dtype == np.uint16
    assert np.dtype("float32") == nb.float32 and nb.float32 == np.dtype("float32")
    a = np.ones(3)
    assert a.astype(nb.float32).dtype == np.float32
    assert np.zeros_like(a, dtype=nb.complex64).dtype == np.complex64
    assert np.issubdtype(nb.float32, np.floating) and np.issubdtype(nb.uint16, np.unsignedinteger)
    assert np.finfo(nb.float32).eps == np.finfo(np.float32).eps
    assert np.iinfo(nb.uint16).max == 65535
    assert np.promote_types(nb.int8, nb.uint8) == np.int16


def test_numpy_with_x_dtype_inside_a_compiled_function():
    def f(x):
        return np.ones((x.shape[0], 3), x.dtype) + x[:, :3]

    x = nb.asarray(RNG.uniform(size=(5, 4)).astype(np.float32))
    cf = nb.compile(f)
    for _ in range(2):
        got = cf(x)
        assert got.dtype is nb.float32
        _same(got, np.ones((5, 3), np.float32) + np.asarray(x)[:, :3])

    def g(x):                                   # the NumPy namespace inside a compiled function
        return xnp.zeros((x.shape[0],), x.dtype) + x.sum(axis=1) * 1j
    got = nb.compile(g)(x)
    _same(got, np.asarray(x).sum(axis=1) * 1j)


# ---- the compiler with the new dtypes ---------------------------------------------------------

def _compiled_cases():
    def mesh(x):
        z = x + 1j * x[::-1]
        return (z * z).real + np.abs(z), np.angle(z).sum(axis=0)

    def cexp(z):
        return np.exp(z * 1j).sum(axis=1), np.conj(z) * z

    def uops(u):
        return (u + 3) * u, u.sum(), u // 2, u.max(axis=0), u.astype(np.uint64) + np.uint64(2 ** 63)

    x = RNG.uniform(-1, 1, (4, 6))
    return [(mesh, x), (cexp, _complex((4, 6), "complex64")), (uops, _uint((4, 6), "uint32"))]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_compiled_complex_and_uint_match_eager(backend):
    for fn, a in _compiled_cases():
        t = nb.asarray(a)
        want = fn(t)
        cf = nb.compile(fn, backend=backend)
        for _ in range(2):
            got = cf(t)
            for g, w in zip(got, want):
                _same(g, w, f"{fn.__name__} on {backend}")
        assert cf.report.kernels, fn.__name__
        # numba has no complex or uint16/32/64 here yet: those kernels run on the NumPy tier
        assert all(k["backend"] in ("numpy", "numba") for k in cf.report.kernels)


def test_in_place_updates_follow_same_kind_casting():
    z = nb.asarray(np.ones(3, np.complex64))
    z += nb.asarray(np.full(3, 1j))              # complex128 into complex64: same kind (NumPy)
    z *= 2.0
    _same(z, (np.ones(3, np.complex64) + 1j) * 2)
    x = nb.asarray(np.ones(3))
    with pytest.raises(TypeError):
        x += 1j                                  # complex into real: NumPy refuses too
    with pytest.raises(TypeError):
        x[0] = 1j
    u = nb.asarray(np.arange(3, dtype=np.uint64))
    with pytest.raises(TypeError):               # uint64 + int64 is float64
        u += nb.asarray(np.arange(3))
    u += 1                                       # a weak Python int keeps uint64
    _same(u, np.arange(3, dtype=np.uint64) + 1)


def test_pinv_of_integer_and_uint_input():
    a = np.array([[1, 2], [3, 4], [5, 7]], np.uint32)
    _same(xnp.linalg.pinv(xnp.asarray(a)), np.linalg.pinv(a))


def test_vecdot_conjugates_its_first_argument():
    a, b = _complex((2, 3), "complex128"), _complex((2, 3), "complex128")
    _same(nb.vecdot(nb.asarray(a), nb.asarray(b)), np.vecdot(a, b))
    _same(np.linalg.vecdot(nb.asarray(a), nb.asarray(b)), np.linalg.vecdot(a, b))
    _same(np.vdot(xnp.asarray(a), xnp.asarray(b)), np.vdot(a, b))


# ---- arrays nbaccel leaves to NumPy: masked arrays, matrices, datetime/object/str --------------

@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")   # np.matrix
def test_masked_arrays_and_matrices_pass_through_untouched():
    m = np.ma.array([1.0, 4.0, 9.0], mask=[0, 1, 0])
    with pytest.raises(TypeError, match="MaskedArray"):
        nb.asarray(m)
    with pytest.raises(TypeError, match="matrix"):
        nb.asarray(np.matrix([[1.0, 2.0]]))
    t, a = xnp.asarray(np.arange(3.0)), np.arange(3.0)
    for fn in (lambda v: v * m, lambda v: m * v, lambda v: v + m, lambda v: m - v,
               lambda v: np.add(v, m), lambda v: np.maximum(m, v), lambda v: xnp.sqrt(m) + 0 * a,
               lambda v: np.concatenate([v, m])):
        got, want = fn(t), fn(a)
        assert type(got) is np.ma.MaskedArray, got
        np.testing.assert_array_equal(np.ma.getmaskarray(got), np.ma.getmaskarray(want))
        np.testing.assert_allclose(got.filled(-1), want.filled(-1))
    mx = np.matrix(np.eye(3))
    got = t @ mx
    assert type(got) is np.matrix and got.shape == (1, 3)


def test_datetime_object_and_str_arrays_are_not_converted():
    for a in (np.array(["2020-01-01"], "datetime64[D]"), np.array([1, 2], "timedelta64[s]"),
              np.array([1, None], object), np.array(["a", "b"]), np.array([b"x"])):
        with pytest.raises(TypeError):
            nb.asarray(a)
        assert type(xnp.asarray(a)) is np.ndarray         # the NumPy namespace: NumPy's own
    td = np.array([1, 2], "timedelta64[s]")
    got = xnp.add(td, td)
    assert type(got) is np.ndarray and got.dtype == td.dtype


def test_random_complex_draws_have_both_parts():
    nb.manual_seed(0)
    z = nb.randn(20000, dtype=nb.complex64)
    assert z.dtype is nb.complex64
    a = np.asarray(z)
    assert abs(np.mean(np.abs(a) ** 2) - 1.0) < 0.05          # torch.randn: E|z|^2 = 1
    assert abs(np.var(a.real) - 0.5) < 0.03 and abs(np.var(a.imag) - 0.5) < 0.03
    u = np.asarray(nb.rand(1000, dtype=nb.complex128))
    assert 0 <= u.real.min() and u.real.max() < 1 and 0 <= u.imag.min() and u.imag.max() < 1
    assert u.imag.std() > 0.2
    if torch is not None:
        t = torch.randn(20000, dtype=torch.complex64)
        assert abs(float(t.abs().pow(2).mean()) - float(np.mean(np.abs(a) ** 2))) < 0.08


def test_dlpack_round_trip_with_torch():
    if torch is None:
        pytest.skip("PyTorch is not installed")
    for d in COMPLEX + UINTS:
        a = np.arange(4).astype(d)
        tt = torch.from_dlpack(nb.asarray(a))
        assert str(tt.dtype) == "torch." + d and tt.tolist() == a.tolist()
        back = nb.from_dlpack(torch.from_numpy(a))
        assert back.dtype == getattr(nb, d)
        _same(back, a)


def _same_parts(got, want, msg):
    """Each part equal to NumPy's: NaN where NumPy has NaN, zeros with NumPy's sign."""
    for part in ("real", "imag"):
        g, w = getattr(np.asarray(got), part), getattr(np.asarray(want), part)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{msg} {part} NaN")
        ok = ~np.isnan(w)
        np.testing.assert_allclose(g[ok], w[ok], rtol=_tol(w.dtype)[0], err_msg=f"{msg} {part}")
        zero = ok & (w == 0)
        np.testing.assert_array_equal(np.signbit(g[zero]), np.signbit(w[zero]), err_msg=f"{msg} {part} sign")


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("d", COMPLEX)
@pytest.mark.parametrize("name", ["tanh", "expm1"])
def test_compiled_complex_special_values_match_numpy(backend, d, name):
    """Infinities, NaNs and signed zeros in either part (the Array API's special cases)."""
    vals = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 800.0]
    a = np.array([complex(x, y) for x in vals for y in vals], d)
    want, err = _np_result(getattr(np, name), a)
    assert err is None
    fn = getattr(nb, name)
    cf = nb.compile(lambda t: fn(t), backend=backend)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        got = cf(nb.asarray(a))
    assert got.dtype.name == d and cf.report.kernels
    _same_parts(got.numpy(), want, f"{name} {d} on {backend}")
    if backend == "numba" and name == "tanh":
        assert {k["backend"] for k in cf.report.kernels} == {"numba"}
