"""dtype singletons and the type-promotion table.

The dtypes: bool, int8/16/32/64, uint8/16/32/64, float16, bfloat16, float32, float64,
complex64, complex128 (every dtype the Array API 2024.12 standard requires, plus float16 and
bfloat16). Kinds: 'b' bool, 'i' signed, 'u' unsigned, 'f' real floating, 'c' complex.

Promotion is NumPy 2's (``np.promote_types``), which agrees with the Array API standard's
table for two dtypes of the same kind and, for the mixed cases the standard leaves open,
gives the smallest type that holds both exactly: int8 + uint8 -> int16, int16 + float16 ->
float32, int64 + float32 -> float64, int64 + uint64 -> float64 (no integer holds both),
float64 + complex64 -> complex128. bfloat16 (from ml_dtypes, not a NumPy dtype) joins the
float ladder beside float16 as in PyTorch and JAX: float16 + bfloat16 -> float32, bfloat16
with a complex dtype -> complex64 or complex128.

Python scalars are "weak" (NEP 50, the Array API and PyTorch agree): they take the tensor's
dtype when it is of the same or a wider kind. An int/bool tensor combined with a Python
float gives the *default float* (float32 for nbaccel's own namespace, float64 for code
traced through its NumPy-compatible namespace); a real tensor combined with a Python
complex gives the complex dtype of its float (float32 -> complex64, float64 -> complex128,
float16/bfloat16 -> complex64) and, from an int/bool tensor, the *default complex* (the
complex of the default float).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["DType", "bool_", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
           "uint64", "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
           "dtype", "result_type", "ALL_DTYPES", "is_bfloat16"]


class DType:
    """A long-lived dtype singleton. Compares equal to the matching NumPy dtype."""

    __slots__ = ("name", "np", "kind", "bits", "itemsize")

    def __init__(self, name: str, npdtype, kind: str, bits: int):
        self.name = name
        self.np = np.dtype(npdtype)
        self.kind = kind          # 'b' bool, 'i' signed, 'u' unsigned, 'f' float, 'c' complex
        self.bits = bits
        self.itemsize = self.np.itemsize

    def __repr__(self):
        return f"nbaccel.{self.name}"

    def __str__(self):
        return self.name

    def __eq__(self, other):
        if isinstance(other, DType):
            return self is other
        try:
            return dtype(other) is self
        except TypeError:
            return False

    def __hash__(self):
        return hash(self.name)

    def __reduce__(self):  # keeps singletons singletons across copy/pickle
        return (dtype, (self.name,))

    @property
    def dtype(self):
        """The NumPy dtype. ``np.dtype(obj)`` reads an object's ``.dtype``, so NumPy accepts
        nbaccel dtypes as its own: ``np.ones(3, nb.float32)``, ``np.zeros(n, x.dtype)``."""
        return self.np

    @property
    def is_floating_point(self):
        return self.kind == "f"

    @property
    def is_complex(self):
        return self.kind == "c"

    @property
    def is_integer(self):
        return self.kind in "iu"


class _BFloat16(DType):
    """bfloat16, whose NumPy dtype comes from ``ml_dtypes``. Importing ``ml_dtypes`` takes about
    a second, so it happens the first time the NumPy dtype is needed (an array is made or
    converted), not at ``import nbaccel``; name, kind and width are known without it."""

    __slots__ = ()

    def __init__(self):
        self.name, self.kind, self.bits, self.itemsize = "bfloat16", "f", 16, 2

    @property
    def np(self):
        npd = _BF16_NP.get("np")
        if npd is None:
            import ml_dtypes
            npd = _BF16_NP["np"] = np.dtype(ml_dtypes.bfloat16)
            _BY_NP[npd] = self
        return npd


_BF16_NP: dict = {}    # the ml_dtypes dtype once loaded


def is_bfloat16(npdtype) -> bool:
    """Whether a NumPy dtype is ml_dtypes' bfloat16, without importing ml_dtypes (an array of
    it can only exist once something has imported ml_dtypes)."""
    return npdtype.kind == "V" and npdtype.name == "bfloat16"


def _ml_dtypes():
    """The ``ml_dtypes`` module (imported on first use; see :class:`_BFloat16`)."""
    import ml_dtypes
    bfloat16.np    # registers the dtype for lookups
    return ml_dtypes


bool_ = DType("bool", np.bool_, "b", 8)
int8 = DType("int8", np.int8, "i", 8)
uint8 = DType("uint8", np.uint8, "u", 8)
int16 = DType("int16", np.int16, "i", 16)
int32 = DType("int32", np.int32, "i", 32)
int64 = DType("int64", np.int64, "i", 64)
float16 = DType("float16", np.float16, "f", 16)
bfloat16 = _BFloat16()
float32 = DType("float32", np.float32, "f", 32)
float64 = DType("float64", np.float64, "f", 64)
uint16 = DType("uint16", np.uint16, "u", 16)
uint32 = DType("uint32", np.uint32, "u", 32)
uint64 = DType("uint64", np.uint64, "u", 64)
complex64 = DType("complex64", np.complex64, "c", 64)
complex128 = DType("complex128", np.complex128, "c", 128)

ALL_DTYPES = (bool_, int8, uint8, int16, uint16, int32, uint32, int64, uint64,
              float16, bfloat16, float32, float64, complex64, complex128)
FLOAT_DTYPES = (float16, bfloat16, float32, float64)
COMPLEX_DTYPES = (complex64, complex128)
INT_DTYPES = (int8, uint8, int16, uint16, int32, uint32, int64, uint64)

_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update({"bool_": bool_, "float": float64, "int": int64, "half": float16,
                 "double": float64, "long": int64, "complex": complex128,
                 "cfloat": complex64, "cdouble": complex128})
_BY_NP = {d.np: d for d in ALL_DTYPES if d is not bfloat16}    # bfloat16 joins when loaded


def dtype(x) -> DType:
    """Convert a DType, NumPy dtype or scalar type, or a name to the nbaccel singleton."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        if x in _BY_NAME:
            return _BY_NAME[x]
    elif x is bool:
        return bool_
    elif x is int:
        return int64
    elif x is float:
        return float64
    elif x is complex:
        return complex128
    else:
        npx = getattr(x, "np", None)
        if isinstance(npx, np.dtype) and npx in _BY_NP:
            return _BY_NP[npx]
    try:
        d = np.dtype(x)
    except Exception:
        raise TypeError(f"data type {x!r} is not understood") from None
    if d in _BY_NP:
        return _BY_NP[d]
    if is_bfloat16(d):      # made by code that imported ml_dtypes itself
        return bfloat16
    raise TypeError(f"dtype {d} is not supported by nbaccel "
                    f"(supported: {', '.join(t.name for t in ALL_DTYPES)})")


def complex_of(d: DType) -> DType:
    """The complex dtype whose parts have (at least) the precision of real dtype ``d``."""
    if d.kind == "c":
        return d
    return complex128 if d is float64 else complex64


def real_of(d: DType) -> DType:
    """The real dtype of a complex dtype's parts (complex64 -> float32); others unchanged."""
    if d is complex64:
        return float32
    if d is complex128:
        return float64
    return d


@lru_cache(maxsize=None)
def _promote(a: DType, b: DType) -> DType:
    if a is b:
        return a
    if a is bfloat16 or b is bfloat16:
        return _promote_bfloat16(b if a is bfloat16 else a)
    return _BY_NP[np.promote_types(a.np, b.np)]


def _promote_bfloat16(o: DType) -> DType:
    """bfloat16 with another dtype (PyTorch/JAX): it holds bool and 8-bit integers; wider
    integers and float16 need the next float that holds both."""
    if o.kind == "b" or (o.kind in "iu" and o.bits == 8):
        return bfloat16
    if o.kind in "iu":
        return float32 if o.bits == 16 else float64
    if o is float16:
        return float32
    return o                      # float32, float64, complex64, complex128


def result_type(*args, default_float: DType = float32) -> DType:
    """Promote dtypes and Python scalars (weakly typed) to one result dtype."""
    strong = [a if isinstance(a, DType) else dtype(getattr(a, "dtype", a)) for a in args
              if not isinstance(a, (bool, int, float, complex))]
    if not strong:
        # only Python scalars: the usual defaults
        if any(isinstance(a, complex) for a in args):
            return complex_of(default_float)
        if any(isinstance(a, float) for a in args):
            return default_float
        if any(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return int64
        return bool_
    out = strong[0]
    for d in strong[1:]:
        out = _promote(out, d)
    for a in args:
        if isinstance(a, bool):
            continue
        if isinstance(a, int):
            if out.kind == "b":
                out = int64
        elif isinstance(a, float):
            if out.kind in "biu":
                out = default_float
        elif isinstance(a, complex):
            if out.kind in "biu":
                out = complex_of(default_float)
            elif out.kind == "f":
                out = complex_of(out)
    return out


def finfo(d):
    return _ml_dtypes().finfo(real_of(dtype(d)).np)


def iinfo(d):
    return np.iinfo(dtype(d).np)
