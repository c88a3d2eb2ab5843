"""``np.asarray``, ``np.asanyarray`` and ``np.ascontiguousarray`` of a traced array, traced.

NumPy calls these on an ndarray without looking at its values: ``np.asarray(a)`` is ``a``
itself, with a ``dtype`` it is ``a.astype(dtype)`` where the dtype differs, with ``copy=True``
a copy, and ``np.ascontiguousarray(a)`` is ``a`` where ``a`` is C-contiguous. NumPy does not
let an array-like object take part in these calls (they have no ``__array_function__``), so on
a tracer they ask ``__array__`` for the values: a graph break in an ``nb.compile``'d function.
(A ``%%compile`` cell's ``np`` is ``nbaccel.numpy``, whose ``asarray`` keeps tracers already.)

While a call is traced, ``numpy``'s three attributes are wrappers that give the user's code
NumPy's meaning on a NumPy-flavoured tracer; anything else (a concrete array, a list, nbaccel's
or a library's own call, an argument whose meaning depends on what is not traced, such as
``order="F"`` or ``like=``) goes to NumPy's own function unchanged, so another thread or an
untraced call sees NumPy. The wrappers are put in place by the first trace and taken away by
the last (``installed``)."""
from __future__ import annotations

import contextlib
import sys
import threading

import numpy as np

from ...ops.registry import NUMPY_FUNCS
from ...dispatch import active_trace
from ...tensor import Tensor
from .user_code import _is_internal

_NAMES = ("asarray", "asanyarray", "ascontiguousarray")
_ORIGINAL = {name: getattr(np, name) for name in _NAMES}
_LOCK = threading.Lock()
_depth = 0
_LIBRARY_DIRS = ("site-packages", "dist-packages")


def _user_tracer(a):
    """``a`` when it is a NumPy-flavoured tracer of this thread's trace and the caller (two
    frames up: the user's code calling the wrapper) is the user's own code, else None."""
    if type(a) is not Tensor or a._node is None or not a._np or active_trace() is None:
        return None
    caller = sys._getframe(2).f_code.co_filename
    if _is_internal(caller) or any(d in caller for d in _LIBRARY_DIRS):
        return None
    return a


def _numpy_scalar(t) -> bool:
    graph = t._node.graph
    return getattr(graph, "numpy_scalar", lambda _: False)(t)


def _mark_array(t):
    """NumPy's result here is an ndarray, a 0-d one too (not a NumPy scalar)."""
    if t._node is not None:
        t._node.array_result = True
    return t


def _as(t, dtype, copy):
    """``np.asarray(t, dtype, copy=copy)`` of a tracer, or None where NumPy's own call decides."""
    if dtype is not None and np.dtype(dtype) != t.dtype.np:
        if copy is False:
            return None                           # NumPy raises: its own call says how
        return _mark_array(t.astype(np.dtype(dtype)))
    if copy or _numpy_scalar(t):                  # (a NumPy scalar becomes a new 0-d array)
        # np.asarray's copy is laid out as its operand (order "K", np.copy's), where
        # ndarray.copy's is C order: a later ravel of it is a view or a copy by that layout
        return _mark_array(NUMPY_FUNCS["copy"](t))
    return t


def _original(name, a, **kwargs):
    return _ORIGINAL[name](a, **{k: v for k, v in kwargs.items() if v is not None})


def _as_wrapper(name):
    """np.asarray or np.asanyarray (one meaning on a tracer, which is never a subclass)."""
    def wrapper(a, dtype=None, order=None, *, device=None, copy=None, like=None):
        t = _user_tracer(a)
        if t is not None and order in (None, "K", "A") and device is None and like is None:
            out = _as(t, dtype, copy)
            if out is not None:
                return out
        return _original(name, a, dtype=dtype, order=order, device=device, copy=copy, like=like)
    wrapper.__name__ = wrapper.__qualname__ = name
    return wrapper


asarray = _as_wrapper("asarray")
asanyarray = _as_wrapper("asanyarray")


def ascontiguousarray(a, dtype=None, *, like=None):
    t = _user_tracer(a)
    if t is not None and like is None and t.ndim >= 1:      # (a 0-d value becomes 1-d: NumPy's)
        same = dtype is None or np.dtype(dtype) == t.dtype.np
        if same and t._node.graph.c_contiguous(t) and not _numpy_scalar(t):
            return t
        if same:
            return _mark_array(t.copy())          # ndarray.copy is C order
    return _original("ascontiguousarray", a, dtype=dtype, like=like)


_WRAPPERS = {"asarray": asarray, "asanyarray": asanyarray, "ascontiguousarray": ascontiguousarray}
for _name, _fn in _WRAPPERS.items():
    _fn.__doc__ = _ORIGINAL[_name].__doc__
    _fn.__wrapped__ = _ORIGINAL[_name]


@contextlib.contextmanager
def installed():
    """The wrappers in ``numpy`` while a trace runs (nested and concurrent traces count)."""
    global _depth
    with _LOCK:
        _depth += 1
        if _depth == 1:
            for name, fn in _WRAPPERS.items():
                setattr(np, name, fn)
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0:
                for name, fn in _ORIGINAL.items():
                    setattr(np, name, fn)
