"""Values of an exported graph to JSON and back, with a tag for every non-JSON type.

Only data is stored: numbers, strings, tuples, slices, dtypes, devices, references to earlier
values (``{"$ref": k}``) and symbolic sizes (``{"$sym": ...}``). Decoding builds each value from
its tag and checks it; nothing read from a file is ever evaluated, imported or unpickled.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..devices import Device, device
from .dims import ExportError, Poly


class Ref:
    """A reference to value ``k`` of the program (inputs, then weights, then nodes)."""

    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def __eq__(self, other):
        return isinstance(other, Ref) and other.k == self.k

    def __hash__(self):
        return hash(("ref", self.k))

    def __repr__(self):
        return f"Ref({self.k})"


DTYPE_NAMES = {d.name for d in D.ALL_DTYPES}


def encode(v, where=""):
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int) and type(v) is not int and not isinstance(v, np.integer):
        return int(v)                              # _Size and other int subclasses
    if type(v) is int:
        return v
    if type(v) is float:
        if math.isfinite(v):
            return v
        return {"$float": "nan" if v != v else "inf" if v > 0 else "-inf"}
    if type(v) is complex:
        return {"$complex": [encode(v.real), encode(v.imag)]}
    if isinstance(v, np.generic):
        if v.dtype.name not in DTYPE_NAMES:
            raise ExportError(f"{where}: a NumPy {v.dtype} scalar cannot be exported")
        return {"$np": v.dtype.name, "v": encode(v.item(), where)}
    if isinstance(v, tuple):
        return {"$tuple": [encode(x, where) for x in v]}
    if isinstance(v, list):
        return [encode(x, where) for x in v]
    if isinstance(v, dict):
        return {"$dict": [[encode(k, where), encode(x, where)] for k, x in v.items()]}
    if isinstance(v, slice):
        return {"$slice": [encode(v.start, where), encode(v.stop, where), encode(v.step, where)]}
    if v is Ellipsis:
        return {"$ellipsis": 1}
    if isinstance(v, D.DType):
        return {"$dtype": v.name}
    if isinstance(v, Device):
        return {"$device": str(v)}
    if isinstance(v, Ref):
        return {"$ref": v.k}
    if isinstance(v, Poly):
        return {"$sym": v.to_json()}
    raise ExportError(f"{where}: a value of type {type(v).__name__} cannot be exported")


def decode(v, ctx):
    """``ctx``: ``known`` (declared dim names) and ``max_ref`` (refs must point before it)."""
    if v is None or isinstance(v, (bool, str, int)):
        return v
    if isinstance(v, float):
        return v
    if isinstance(v, list):
        return [decode(x, ctx) for x in v]
    if not isinstance(v, dict) or not v:
        raise ExportError(f"unexpected value {v!r}")
    tag = next(iter(v))
    body = v[tag]
    if tag == "$np":
        if set(v) != {"$np", "v"} or body not in DTYPE_NAMES:
            raise ExportError(f"malformed NumPy scalar {v!r}")
        return D.dtype(body).np.type(decode(v["v"], ctx))
    if len(v) != 1:
        raise ExportError(f"malformed tagged value {v!r}")
    if tag == "$float":
        if body not in ("nan", "inf", "-inf"):
            raise ExportError(f"malformed float {v!r}")
        return float(body)
    if tag == "$complex":
        re, im = _pair(body, 2, v)
        return complex(decode(re, ctx), decode(im, ctx))
    if tag == "$tuple":
        return tuple(decode(x, ctx) for x in _list(body, v))
    if tag == "$dict":
        return {_hashable(decode(k, ctx)): decode(x, ctx) for k, x in (_pair(p, 2, v) for p in _list(body, v))}
    if tag == "$slice":
        return slice(*(decode(x, ctx) for x in _pair(body, 3, v)))
    if tag == "$ellipsis":
        return Ellipsis
    if tag == "$dtype":
        if body not in DTYPE_NAMES:
            raise ExportError(f"unknown dtype {body!r}")
        return D.dtype(body)
    if tag == "$device":
        if not isinstance(body, str):
            raise ExportError(f"malformed device {v!r}")
        try:
            return device(body)
        except Exception as e:   # noqa: BLE001 - e.g. a cuda program on a machine without one
            raise ExportError(f"the program uses device {body!r}, which is not available here ({e})") from None
    if tag == "$ref":
        if type(body) is not int or not 0 <= body < ctx["max_ref"]:
            raise ExportError(f"a reference points at value {body!r}, which does not come before it")
        return Ref(body)
    if tag == "$sym":
        return Poly.from_json(body, ctx["known"])
    raise ExportError(f"unknown value tag {tag!r}")


def _list(body, v):
    if not isinstance(body, list):
        raise ExportError(f"malformed value {v!r}")
    return body


def _pair(body, n, v):
    if not isinstance(body, list) or len(body) != n:
        raise ExportError(f"malformed value {v!r}")
    return body


def _hashable(k):
    try:
        hash(k)
    except TypeError:
        raise ExportError(f"a dict key {k!r} is not hashable") from None
    return k
