"""nbaccel.fft, the Array API fft extension (issue 21, item 8): every function against NumPy's
numpy.fft, with the standard's dtypes (float32 -> complex64, float64 -> complex128, inverse
real transforms real), keyword-only parameters, and errors for invalid input."""
import inspect

import numpy as np
import pytest

import nbaccel as nb

RNG = np.random.default_rng(0)
X2 = RNG.standard_normal((4, 6))


def _tol(dt):
    return 2e-5 if dt in (np.float32, np.complex64) else 1e-12


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kw", [("fft", {}), ("ifft", {"n": 8}), ("rfft", {"axis": 0}), ("ihfft", {}),
                                     ("fft", {"norm": "ortho"}), ("rfft", {"n": 4, "norm": "forward"})])
def test_one_axis_transforms_match_numpy(name, kw, dtype):
    a = X2.astype(dtype)
    got = getattr(nb.fft, name)(nb.asarray(a), **kw)
    want = getattr(np.fft, name)(a, **kw)
    assert got.dtype.np == (np.complex64 if dtype == np.float32 else np.complex128)
    np.testing.assert_allclose(got.numpy(), want, rtol=_tol(dtype), atol=_tol(dtype) * 10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kw", [("fftn", {}), ("ifftn", {"axes": (1,)}), ("rfftn", {"s": (4, 4)}), ("fftn", {"s": (5,)}),
                                     ("fftn", {"s": (2, 3), "axes": (0, 1), "norm": "ortho"})])
def test_n_dimensional_transforms_match_numpy(name, kw, dtype):
    a = X2.astype(dtype)
    got = getattr(nb.fft, name)(nb.asarray(a), **kw)
    if "s" in kw and "axes" not in kw:           # the standard: the last len(s) axes
        kw = dict(kw, axes=tuple(range(-len(kw["s"]), 0)))
    np.testing.assert_allclose(got.numpy(), getattr(np.fft, name)(a, **kw), rtol=_tol(dtype), atol=_tol(dtype) * 10)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("name,kw", [("irfft", {}), ("irfft", {"n": 9}), ("hfft", {"axis": 0}), ("irfftn", {}),
                                     ("fft", {}), ("ifftn", {})])
def test_complex_inputs(name, kw, dtype):
    c = (X2 + 1j * X2[::-1]).astype(dtype)
    got = getattr(nb.fft, name)(nb.asarray(c), **kw)
    want = getattr(np.fft, name)(c, **kw)
    real = name in ("irfft", "hfft", "irfftn")
    expect = (np.float32 if dtype == np.complex64 else np.float64) if real else dtype
    assert got.dtype.np == expect
    np.testing.assert_allclose(got.numpy(), want, rtol=_tol(dtype) * 10, atol=_tol(dtype) * 100)


def test_round_trip():
    a = nb.asarray(X2)
    np.testing.assert_allclose(nb.fft.irfft(nb.fft.rfft(a), n=6).numpy(), X2, atol=1e-12)
    np.testing.assert_allclose(nb.fft.ifftn(nb.fft.fftn(a)).numpy().real, X2, atol=1e-12)


def test_frequencies_and_shifts():
    f = nb.fft.fftfreq(8, d=0.5)
    assert f.dtype.np == np.float32          # the default float (2024.12: dtype= picks another)
    np.testing.assert_array_equal(f.numpy(), np.fft.fftfreq(8, d=0.5).astype(np.float32))
    f = nb.fft.fftfreq(8, d=0.5, dtype=nb.float64)
    assert f.dtype.np == np.float64
    np.testing.assert_array_equal(f.numpy(), np.fft.fftfreq(8, d=0.5))
    r = nb.fft.rfftfreq(7, dtype=nb.float32)
    assert r.dtype.np == np.float32
    np.testing.assert_allclose(r.numpy(), np.fft.rfftfreq(7))
    np.testing.assert_array_equal(nb.fft.fftshift(nb.asarray(X2), axes=1).numpy(), np.fft.fftshift(X2, axes=1))
    np.testing.assert_array_equal(nb.fft.ifftshift(nb.fft.fftshift(nb.asarray(X2))).numpy(), X2)
    with pytest.raises(ValueError):
        nb.fft.fftfreq(0)
    with pytest.raises(TypeError):
        nb.fft.fftfreq(4, dtype=nb.int32)


def test_signatures_are_the_standards():
    for name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
        p = inspect.signature(getattr(nb.fft, name)).parameters
        assert list(p) == ["x", "n", "axis", "norm"]
        assert p["x"].kind is inspect.Parameter.POSITIONAL_ONLY
        assert all(p[k].kind is inspect.Parameter.KEYWORD_ONLY for k in ("n", "axis", "norm"))
    for name in ("fftn", "ifftn", "rfftn", "irfftn"):
        assert list(inspect.signature(getattr(nb.fft, name)).parameters) == ["x", "s", "axes", "norm"]
    assert list(inspect.signature(nb.fft.fftfreq).parameters) == ["n", "d", "dtype", "device"]
    assert set(nb.fft.__all__) == {"fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft",
                                   "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"}


def test_namespace_has_the_extension_and_invalid_input_raises():
    t = nb.tensor([1.0, 2.0])
    assert t.__array_namespace__().fft is nb.fft
    with pytest.raises(TypeError):
        nb.fft.rfft(nb.asarray(np.array([1 + 1j, 2.0])))        # a real transform of complex data
    with pytest.raises(TypeError):
        nb.fft.fft(nb.asarray(np.arange(4)))                    # integers are not floating-point


def test_inside_a_compiled_function():
    f = nb.compile(lambda x: nb.fft.rfft(x * 2).real.sum())
    a = nb.asarray(X2)
    np.testing.assert_allclose(float(f(a)), np.fft.rfft(X2 * 2).real.sum(), rtol=1e-12)
