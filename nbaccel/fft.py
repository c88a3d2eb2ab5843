"""``nbaccel.fft``: the Array API ``fft`` extension (2024.12).

    import nbaccel as nb
    spec = nb.fft.rfft(nb.tensor([1.0, 0.0, -1.0, 0.0]))     # complex64, 3 values

No op in the table computes a transform: each function runs NumPy's ``numpy.fft`` on the
tensor's value (inside ``nbaccel.compile`` that is a graph break naming the function) and
returns a Tensor on the input's device. Dtypes follow the standard: a real float32 input gives
complex64, float64 gives complex128, and the inverse real transforms give the matching real
dtype (NumPy 2 keeps single precision too).
"""
from __future__ import annotations

import numpy as np

from . import dtypes as D
from .convert import asarray
from .tensor import Tensor

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_COMPLEX = {"float32": np.complex64, "float64": np.complex128, "complex64": np.complex64,
            "complex128": np.complex128}
_REAL = {"complex64": np.float32, "complex128": np.float64, "float32": np.float32, "float64": np.float64}


def _value(x, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"fft.{name}: expected a Tensor, got {type(x).__name__}")
    a = x._value(f"fft.{name} has no op: NumPy computes it on the concrete value")
    return a if isinstance(a, np.ndarray) else a.get()


def _out(a, like):
    return asarray(np.ascontiguousarray(a), device=like.device, _np=like._np)


def _check_float(x, name, real_only=False):
    kind = x.dtype.kind
    if kind not in ("fc" if not real_only else "f"):
        raise TypeError(f"fft.{name}: needs a {'real ' if real_only else ''}floating-point tensor, "
                        f"got {x.dtype}")


def _complex_transform(name, real_in=False, real_out=False):
    numpy_fn = getattr(np.fft, name)
    nd = name.endswith("n")

    if nd:
        def transform(x, /, *, s=None, axes=None, norm="backward"):
            _check_float(x, name, real_only=real_in)
            if axes is None and s is not None:     # the standard: the last len(s) axes
                axes = tuple(range(-len(s), 0))
            r = numpy_fn(_value(x, name), s=s, axes=axes, norm=norm)
            return _out(_cast(r, x, real_out), x)
    else:
        def transform(x, /, *, n=None, axis=-1, norm="backward"):
            _check_float(x, name, real_only=real_in)
            r = numpy_fn(_value(x, name), n=n, axis=axis, norm=norm)
            return _out(_cast(r, x, real_out), x)
    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = f"The Array API ``fft.{name}`` (NumPy's ``numpy.fft.{name}`` on the value)."
    return transform


def _cast(r, x, real_out):
    """The standard's result dtype: complex of the input's precision, or its real counterpart."""
    table = _REAL if real_out else _COMPLEX
    want = table.get(x.dtype.name)
    return r.astype(want, copy=False) if want is not None else r


fft = _complex_transform("fft")
ifft = _complex_transform("ifft")
fftn = _complex_transform("fftn")
ifftn = _complex_transform("ifftn")
rfft = _complex_transform("rfft", real_in=True)
irfft = _complex_transform("irfft", real_out=True)
rfftn = _complex_transform("rfftn", real_in=True)
irfftn = _complex_transform("irfftn", real_out=True)
hfft = _complex_transform("hfft", real_out=True)
ihfft = _complex_transform("ihfft", real_in=True)


def _freq(name):
    numpy_fn = getattr(np.fft, name)

    def freq(n, /, *, d=1.0, dtype=None, device=None):
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            raise ValueError(f"fft.{name}: n must be a positive integer, got {n!r}")
        # the default real floating dtype (float32, as __array_namespace_info__ says) unless
        # dtype= names another (the 2024.12 revision); NumPy's np.fft keeps its float64
        dt = D.dtype(dtype) if dtype is not None else D.float32
        if dt.kind != "f":
            raise TypeError(f"fft.{name}: dtype must be a real floating-point dtype, got {dt}")
        return asarray(numpy_fn(n, d=d).astype(dt.np), device=device, _np=False)
    freq.__name__ = freq.__qualname__ = name
    freq.__doc__ = (f"The Array API ``fft.{name}``: sample frequencies in ``dtype`` (the default "
                    f"float, float32, when None) on ``device``.")
    return freq


fftfreq = _freq("fftfreq")
rfftfreq = _freq("rfftfreq")


def _shift(name):
    numpy_fn = getattr(np.fft, name)

    def shift(x, /, *, axes=None):
        return _out(numpy_fn(_value(x, name), axes=axes), x)
    shift.__name__ = shift.__qualname__ = name
    shift.__doc__ = f"The Array API ``fft.{name}`` (the zero frequency moved {'to' if name == 'fftshift' else 'back from'} the centre)."
    return shift


fftshift = _shift("fftshift")
ifftshift = _shift("ifftshift")
