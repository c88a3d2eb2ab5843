"""The values going into and out of a compiled call.

A compiled function takes nested arguments (tuples, lists, dicts of arrays) and hands back what
the plain function would: the array leaves are found and replaced by tracers on the way in, and
on the way out each traced result becomes its computed value, a NumPy array where the caller
passed NumPy (as a ``%%compile`` cell hands NumPy back) and a Tensor otherwise.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from .schedule.views import numpy_gives_array


def array_leaves(obj, name, out):
    """(name, leaf) for each array leaf of nested tuples/lists/dicts."""
    if isinstance(obj, (Tensor, np.ndarray)):
        out.append((name, obj))
    elif isinstance(obj, (list, tuple)):
        for i, o in enumerate(obj):
            array_leaves(o, f"{name}[{i}]", out)
    elif isinstance(obj, dict):
        for k, o in obj.items():
            array_leaves(o, f"{name}[{k!r}]", out)
    return out


def map_arrays(obj, fn):
    """``obj`` with ``fn`` applied to each array leaf (nested tuples, named tuples, lists, dicts)."""
    if isinstance(obj, (Tensor, np.ndarray)):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(map_arrays(o, fn) for o in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(map_arrays(o, fn) for o in obj)
    if isinstance(obj, dict):
        return {k: map_arrays(o, fn) for k, o in obj.items()}
    return obj


def numpy_like(out):
    """A plain result with its tensors as NumPy values (what the compiled call returns for NumPy
    inputs)."""
    if isinstance(out, Tensor):
        a = np.asarray(out.detach()._value())
        return a[()] if a.ndim == 0 else a
    if type(out) in (tuple, list):
        return type(out)(numpy_like(o) for o in out)
    if type(out) is dict:
        return {k: numpy_like(v) for k, v in out.items()}
    return out


def to_output(session, t, numpy_out):
    """What a traced call hands back for ``t``: its computed value, as a NumPy array where the
    call took NumPy (``numpy_out``; None: as the value itself came), else as a Tensor."""
    if not isinstance(t, Tensor):
        return t
    made_by = t._node
    c = None
    if t._node is not None:
        if id(t) in session.materialized:
            c = session.materialized[id(t)][1]
        elif id(t) in session.sources:
            c = session.sources[id(t)]
        else:
            session.realize(t, None)
            c = session.materialized[id(t)][1]
    else:
        c = t
    # (a cell's NumPy-flavoured value on a GPU goes back as its Tensor: the magic copies it to
    # the host and counts the transfer, magics/boundary.to_numpy)
    if numpy_out or (numpy_out is None and c._np and isinstance(c._data, np.ndarray)):
        a = c._data
        return a[()] if a.ndim == 0 and not numpy_gives_array(made_by) else a
    return c
