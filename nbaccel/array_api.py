"""What the Array API standard (2024.12) asks of a namespace beyond its ops: constants, data
type inspection (isdtype, can_cast, finfo, iinfo), ``__array_namespace_info__``, and the
small utilities broadcast_arrays and meshgrid (aliases over broadcast_to/reshape) and
broadcast_shapes (2025.12).

>>> import nbaccel as nb
>>> nb.isdtype(nb.float32, "real floating"), nb.can_cast(nb.int8, nb.int32)
(True, True)
>>> nb.finfo(nb.float32).bits
32

Every dtype the standard requires is here: bool, int8/16/32/64, uint8/16/32/64, float32,
float64, complex64, complex128 (float16 and bfloat16 are extras, not listed by the info).
``finfo`` of a complex dtype describes its real parts (as NumPy and the standard say).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import dtypes as D
from .devices import cpu, cuda_available, device as _device
from .ops.fronts import as_tensor
from .ops.meta import broadcast_shapes as broadcast_shapes_of
from .ops.registry import defalias
from .tensor_meta import is_tensor

# the newest revision nbaccel implements in full (docs/array-api.md lists the deviations and
# the 2025.12 additions that are here already)
__array_api_version__ = "2024.12"
SUPPORTED_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")
# NumPy's limit, which every tensor's buffer shares
MAX_DIMENSIONS = 64

e = math.e
pi = math.pi
inf = math.inf
nan = math.nan
newaxis = None

# the standard's dtypes that nbaccel has (float16/bfloat16 are extras, not listed by the info)
_STANDARD = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float32", "float64", "complex64", "complex128")

_KINDS = {
    "bool": lambda d: d.kind == "b",
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": lambda d: d.kind == "f",
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iufc",
}


def _as_dtype(x) -> D.DType:
    if isinstance(x, D.DType):
        return x
    if is_tensor(x):
        return x.dtype
    return D.dtype(x)


def isdtype(dtype, kind) -> bool:
    """Is ``dtype`` of ``kind``: a dtype, a kind name ('bool', 'signed integer', 'unsigned
    integer', 'integral', 'real floating', 'complex floating', 'numeric') or a tuple of them."""
    dt = _as_dtype(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dt, k) for k in kind)
    if isinstance(kind, str) and kind in _KINDS:
        return _KINDS[kind](dt)
    if isinstance(kind, str) and kind not in D._BY_NAME:
        raise ValueError(f"isdtype: unknown kind {kind!r} (expected one of {sorted(_KINDS)})")
    return dt is _as_dtype(kind)


def can_cast(from_, to, /) -> bool:
    """Can ``from_`` (a dtype or a tensor) be cast to ``to`` by the type-promotion rules
    (no loss of kind or range)?"""
    a, b = _as_dtype(from_), _as_dtype(to)
    return D._promote(a, b) is b


@dataclass(frozen=True)
class finfo_object:
    """Machine limits of a floating-point dtype (the Array API's finfo result)."""
    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: D.DType

    @property
    def tiny(self):        # NumPy / PyTorch spelling
        return self.smallest_normal

    @property
    def resolution(self):
        return 10.0 ** -int(-math.log10(self.eps))


@dataclass(frozen=True)
class iinfo_object:
    """Limits of an integer dtype (the Array API's iinfo result)."""
    bits: int
    max: int
    min: int
    dtype: D.DType


def finfo(type, /) -> finfo_object:
    """Limits of a floating-point dtype (or of a tensor's dtype). For a complex dtype, the
    limits of its real parts (``bits`` is the part's width and ``dtype`` the real dtype, as in
    the standard: finfo(complex64) describes float32)."""
    dt = _as_dtype(type)
    if dt.kind not in "fc":
        raise TypeError(f"finfo: {dt} is not a floating-point dtype")
    part = D.real_of(dt)
    i = D.finfo(part)
    return finfo_object(part.bits, float(i.eps), float(i.max), float(i.min),
                        float(i.smallest_normal), part)


def iinfo(type, /) -> iinfo_object:
    """Limits of an integer dtype (or of a tensor's dtype)."""
    dt = _as_dtype(type)
    if dt.kind not in "iu":
        raise TypeError(f"iinfo: {dt} is not an integer dtype")
    i = np.iinfo(dt.np)
    return iinfo_object(dt.bits, int(i.max), int(i.min), dt)


class _NamespaceInfo:
    """The object ``__array_namespace_info__()`` returns."""

    def capabilities(self):
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": MAX_DIMENSIONS}

    def default_device(self):
        return cpu

    def devices(self):
        return [cpu] + ([_device("cuda")] if cuda_available() else [])

    def default_dtypes(self, *, device=None):
        return {"real floating": D.float32, "complex floating": D.complex64,
                "integral": D.int64, "indexing": D.int64}

    def dtypes(self, *, device=None, kind=None):
        """The standard's dtypes nbaccel supports (all of them), optionally of one ``kind``
        (a kind name or a tuple of them, as for ``isdtype``)."""
        return {n: D.dtype(n) for n in _STANDARD if kind is None or isdtype(D.dtype(n), kind)}


def __array_namespace_info__():
    """Inspection of this namespace: capabilities, devices, default and supported dtypes."""
    return _NamespaceInfo()


# ---- utilities over existing ops ------------------------------------------------------------

def broadcast_shapes(*shapes):
    """The shape that ``shapes`` (tuples of ints) broadcast to; ``()`` for none. Shapes that do
    not broadcast raise ValueError (the Array API 2025.12, as ``numpy.broadcast_shapes``)."""
    return broadcast_shapes_of(*(tuple(int(d) for d in s) for s in shapes))


def _broadcast_arrays(*arrays):
    """Broadcast tensors against each other (views; no copy)."""
    if len(arrays) == 1 and isinstance(arrays[0], (list, tuple)):
        arrays = tuple(arrays[0])
    ts = [as_tensor(a) for a in arrays]
    shape = broadcast_shapes_of(*(t.shape for t in ts))
    return [t if tuple(t.shape) == shape else t.broadcast_to(shape) for t in ts]


def _meshgrid(*arrays, indexing="xy"):
    """Coordinate grids from 1-D tensors; indexing 'xy' (Cartesian) or 'ij' (matrix)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    if len(arrays) == 1 and isinstance(arrays[0], (list, tuple)):
        arrays = tuple(arrays[0])
    ts = [as_tensor(a) for a in arrays]
    for t in ts:
        if t.ndim != 1:
            raise ValueError(f"meshgrid: inputs must be 1-D, got shape {tuple(t.shape)}")
    n = len(ts)
    pos = list(range(n))
    if indexing == "xy" and n >= 2:
        pos[0], pos[1] = 1, 0
    shape = [0] * n
    for t, p in zip(ts, pos):
        shape[p] = t.shape[0]
    out = []
    for t, p in zip(ts, pos):
        view = [1] * n
        view[p] = t.shape[0]
        out.append(t.reshape(tuple(view)).broadcast_to(tuple(shape)))
    return out


defalias("broadcast_arrays", _broadcast_arrays, numpy="broadcast_arrays")
defalias("meshgrid", _meshgrid, numpy="meshgrid")
