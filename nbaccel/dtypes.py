"""dtype singletons and the type-promotion table.

Promotion follows the Array API standard's table for two dtypes of the same kind
(bool, signed int, unsigned int, float). For the mixed cases the standard leaves
open we use NumPy's rule: the smallest type that holds both exactly, e.g.
int8 + uint8 -> int16, int16 + float16 -> float32, int64 + float32 -> float64.
bfloat16 (from ml_dtypes) joins the float ladder beside float16; float16 +
bfloat16 -> float32, as in PyTorch and JAX.

Python scalars are "weak" (NEP 50, the Array API and PyTorch agree): they take
the tensor's dtype when it is of the same or a wider kind; an int/bool tensor
combined with a Python float gives the *default float* (float32 for nbaccel's
own namespace, float64 for code traced through its NumPy-compatible namespace).
"""
from __future__ import annotations

from functools import lru_cache

import ml_dtypes
import numpy as np

__all__ = ["DType", "bool_", "int8", "uint8", "int16", "int32", "int64", "float16",
           "bfloat16", "float32", "float64", "dtype", "result_type", "ALL_DTYPES"]


class DType:
    """A long-lived dtype singleton. Compares equal to the matching NumPy dtype."""

    __slots__ = ("name", "np", "kind", "bits", "itemsize")

    def __init__(self, name: str, npdtype, kind: str, bits: int):
        self.name = name
        self.np = np.dtype(npdtype)
        self.kind = kind          # 'b' bool, 'i' signed, 'u' unsigned, 'f' float
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
    def is_floating_point(self):
        return self.kind == "f"

    @property
    def is_integer(self):
        return self.kind in "iu"


bool_ = DType("bool", np.bool_, "b", 8)
int8 = DType("int8", np.int8, "i", 8)
uint8 = DType("uint8", np.uint8, "u", 8)
int16 = DType("int16", np.int16, "i", 16)
int32 = DType("int32", np.int32, "i", 32)
int64 = DType("int64", np.int64, "i", 64)
float16 = DType("float16", np.float16, "f", 16)
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16, "f", 16)
float32 = DType("float32", np.float32, "f", 32)
float64 = DType("float64", np.float64, "f", 64)

ALL_DTYPES = (bool_, int8, uint8, int16, int32, int64, float16, bfloat16, float32, float64)
FLOAT_DTYPES = (float16, bfloat16, float32, float64)
INT_DTYPES = (int8, uint8, int16, int32, int64)

_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update({"bool_": bool_, "float": float64, "int": int64, "half": float16,
                 "double": float64, "long": int64})
_BY_NP = {d.np: d for d in ALL_DTYPES}


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
    raise TypeError(f"dtype {d} is not supported by nbaccel "
                    f"(supported: {', '.join(t.name for t in ALL_DTYPES)})")


# The smallest float that holds every value of an integer type exactly (NumPy's rule).
_INT_TO_FLOAT_BITS = {8: 16, 16: 32, 32: 64, 64: 64}


@lru_cache(maxsize=None)
def _promote(a: DType, b: DType) -> DType:
    if a is b:
        return a
    if a.kind == "b":
        return b
    if b.kind == "b":
        return a
    if a.kind == "f" and b.kind == "f":
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a.bits > b.bits else b
    if a.kind == "f" or b.kind == "f":
        f, i = (a, b) if a.kind == "f" else (b, a)
        need = _INT_TO_FLOAT_BITS[i.bits]
        if f is bfloat16:
            return bfloat16 if i.bits == 8 else (float32 if i.bits == 16 else float64)
        bits = max(f.bits, need)
        return {16: float16, 32: float32, 64: float64}[bits]
    if a.kind == b.kind:
        return a if a.bits > b.bits else b
    # signed with unsigned: a signed type wider than the unsigned one
    s, u = (a, b) if a.kind == "i" else (b, a)
    bits = max(s.bits, u.bits * 2)
    return {16: int16, 32: int32, 64: int64}.get(bits, int64)


def result_type(*args, default_float: DType = float32) -> DType:
    """Promote dtypes and Python scalars (weakly typed) to one result dtype."""
    strong = [dtype(getattr(a, "dtype", a)) for a in args
              if not isinstance(a, (bool, int, float))]
    if not strong:
        # only Python scalars: the usual defaults
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
            if out.kind != "f":
                out = default_float
    return out


def finfo(d):
    return ml_dtypes.finfo(dtype(d).np)


def iinfo(d):
    return np.iinfo(dtype(d).np)
