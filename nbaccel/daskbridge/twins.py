"""Dask's own implementation of an op-table node: the same NumPy call on Dask arrays.

Used for the ops that are not chunk work (matmul, tensordot, einsum, transposes, reshapes,
slicing, cumulative sums, concatenation): they run as Dask's own graph between the compiled
stages. Also used to build the plain graph of a whole call for the report's task count.
"""
from __future__ import annotations

import numpy as np

from .errors import NotChunkWork

_NUMPY_NAMES = {"amax": "max", "amin": "min", "asin": "arcsin", "acos": "arccos", "atan": "arctan",
                "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2",
                "bitwise_invert": "invert", "bitwise_left_shift": "left_shift",
                "bitwise_right_shift": "right_shift"}
# the ops that run as Dask's own between compiled stages
BETWEEN_STAGES = {"matmul", "tensordot", "einsum", "permute", "reshape", "getitem", "cumsum",
                  "cumprod", "concat", "broadcast_to"}


def _index(spec):
    """A getitem index from its recorded form: slices, None, ints, Ellipsis."""
    out = []
    for part in spec:
        tag = part[0]
        if tag == "s":
            out.append(slice(*part[1:]))
        elif tag == "n":
            out.append(None)
        elif tag == "i":
            out.append(int(part[1]))
        elif tag == "e":
            out.append(Ellipsis)
        else:
            raise NotChunkWork("indexing with an array runs plainly on Dask")
    return tuple(out)


def _np(v):
    return v.np if hasattr(v, "np") and hasattr(v, "name") else v


def dask_twin(node, args):
    """``node`` applied with NumPy's spelling to ``args`` (Dask arrays and Python scalars)."""
    name, p = node.op.name, {k: _np(v) for k, v in node.params.items() if k != "device"}
    if name == "astype":
        out = args[0].astype(p["dtype"])
    elif name == "matmul":
        out = np.matmul(*args)
    elif name == "tensordot":
        out = np.tensordot(*args, axes=p["axes"])
    elif name == "einsum":
        out = np.einsum(p["subscripts"], *args)
    elif name == "permute":
        out = args[0].transpose(p["axes"])
    elif name == "reshape":
        out = args[0].reshape(p["shape"])
    elif name == "broadcast_to":
        out = np.broadcast_to(args[0], p["shape"])
    elif name == "getitem":
        out = args[0][_index(p["index"])]
    elif name in ("cumsum", "cumprod"):
        out = getattr(np, name)(args[0], axis=p.get("axis"), dtype=p.get("dtype"))
    elif name == "concat":
        out = np.concatenate(list(args), axis=p.get("axis", 0))
    elif name in ("softmax", "log_softmax"):
        x, ax = args[0], p["axis"]
        s = x - x.max(axis=ax, keepdims=True)
        lse = np.log(np.exp(s).sum(axis=ax, keepdims=True))
        out = np.exp(s - lse) if name == "softmax" else s - lse
    else:
        if name in ("var", "std"):
            p["ddof"] = p.pop("correction", 0.0)
        if name in ("argmax", "argmin") and isinstance(p.get("axis"), tuple):
            p["axis"] = p["axis"][0]
        fn = getattr(np, _NUMPY_NAMES.get(name, name), None)
        if fn is None:
            raise NotChunkWork(f"{name} has no NumPy twin for Dask")
        out = fn(*args, **p)
    if tuple(getattr(out, "shape", ())) != tuple(node.shape):
        raise NotChunkWork(f"{name}: Dask's result has shape {getattr(out, 'shape', ())}, the trace {node.shape}")
    if hasattr(out, "dtype") and out.dtype != node.dtype.np:
        # Dask's own op differs from NumPy here (its matmul of int32 gives int64): the plain run
        # gives Dask's answer, so the call runs plainly
        raise NotChunkWork(f"Dask's {name} gives {out.dtype} where NumPy gives {node.dtype.np}")
    return out
