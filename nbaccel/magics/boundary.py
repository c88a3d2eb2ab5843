"""Tracing boundaries of a ``%%compile`` cell: what a traced value becomes when it leaves.

The cell function calls every function through :func:`call` (``cellfunc`` rewrites the cell's
calls). NumPy-flavoured tensors handed to code outside NumPy's namespace (matplotlib, pandas,
scipy, ``np.ma``, ``str.format``, ``print``, ``isinstance``, ...) arrive as what the plain cell
would have handed over: a ``numpy.ndarray``, or a NumPy scalar for a 0-d result. On a tracer
that is a graph break whose reason names the receiver. Calls that keep values traced: nbaccel's
own functions (``np.*`` inside the cell), Tensor methods, functions and classes defined in the
notebook (they are traced through), and a few builtins that only pass references along
(``len``, ``enumerate``, ``zip``, ``list.append``, ...).

:func:`setmask` lowers boolean-mask writes (``a[m] = v``, ``a[m] += v``, ``a[m] = b[m]``) to
``where`` when ``m`` is a boolean array with ``a``'s shape; everything else is the plain
``a[i] = v``.
"""
from __future__ import annotations

import builtins
import operator
import sys
import types

import numpy as np

from . import snapshot
from ..compiler.replay.read_recorder import calls_for_the_user
from ..compiler.schedule.views import numpy_gives_array
from ..dispatch import active_trace
from ..tensor import NP_ARRAY_0D, Tensor, _Size
from ..numpy_api import settle_pending_readers
from .. import numpy_api

# builtins that only pass references along or read metadata: no value is needed
_TRANSPARENT_BUILTINS = {builtins.len, builtins.getattr, builtins.hasattr, builtins.setattr,
                         builtins.delattr, builtins.id, builtins.callable, builtins.enumerate,
                         builtins.zip, builtins.range, builtins.reversed, builtins.iter,
                         builtins.next, builtins.map, builtins.filter, builtins.abs,
                         # Tensor converts itself exactly as an ndarray would (a graph break)
                         builtins.float, builtins.int, builtins.bool, builtins.complex}
_CONTAINERS = (list, dict, set)
_ITEM_OPS = {"=": None, "Add": operator.iadd, "Sub": operator.isub, "Mult": operator.imul,
             "Div": operator.itruediv, "FloorDiv": operator.ifloordiv, "Mod": operator.imod,
             "Pow": operator.ipow, "MatMult": operator.imatmul, "BitAnd": operator.iand,
             "BitOr": operator.ior, "BitXor": operator.ixor, "LShift": operator.ilshift,
             "RShift": operator.irshift}
_OUT_OF_PLACE = {"Add": operator.add, "Sub": operator.sub, "Mult": operator.mul,
                 "Div": operator.truediv, "FloorDiv": operator.floordiv, "Mod": operator.mod,
                 "Pow": operator.pow, "BitAnd": operator.and_, "BitOr": operator.or_,
                 "BitXor": operator.xor}


def keeps_traced(f) -> bool:
    """True when ``f`` may receive tracers (nbaccel's own code, Tensor methods, notebook code)."""
    if getattr(f, "__nbaccel_fallback__", False):
        return True                   # nbaccel.numpy's NumPy fallback: it breaks with its reason
    owner = getattr(f, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType):
        if isinstance(owner, Tensor):
            return True
        if type(owner) in _CONTAINERS:            # lst.append(t): converted at write-back
            return True
        return _user_or_nbaccel(type(owner))
    if isinstance(f, (types.BuiltinFunctionType, types.BuiltinMethodType, type)):
        try:
            if f in _TRANSPARENT_BUILTINS:
                return True
        except TypeError:   # an unhashable callable
            return False
        if isinstance(f, type) and f.__module__ == "builtins":
            return False
    return _user_or_nbaccel(f)


def _is_nbaccel_method(f) -> bool:
    """A Tensor method or an nbaccel function (not a function of the user's)."""
    if isinstance(getattr(f, "__self__", None), Tensor):
        return True
    mod = getattr(f, "__module__", None) or ""
    return mod == "nbaccel" or mod.startswith("nbaccel.")


def _user_or_nbaccel(f) -> bool:
    mod = getattr(f, "__module__", None) or getattr(type(f), "__module__", None) or ""
    if mod == "__main__":
        return True
    if mod == "nbaccel" or mod.startswith("nbaccel."):
        return not mod.startswith("nbaccel.numpy.random")
    return False


def _name(f) -> str:
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or type(f).__name__
    mod = getattr(f, "__module__", None)
    owner = getattr(f, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType):
        return f"{type(owner).__name__}.{getattr(f, '__name__', name)}"
    return f"{mod}.{name}" if mod and mod != "builtins" else name


def to_numpy(value, reason="a NumPy value is needed"):
    """What the plain cell would hold for ``value``: ndarray / NumPy scalar for NumPy-flavoured
    tensors (also inside lists, tuples and dicts; new containers only where something changed)."""
    if isinstance(value, Tensor):
        if not value._np:
            if value._node is None:
                return value
            return Tensor._wrap(value._value(reason), value.dtype, value.device, False)
        # a 0-d value is a NumPy scalar unless NumPy's own op made a 0-d array (see views.py)
        array_0d = value._np == NP_ARRAY_0D or (value._node is not None and numpy_gives_array(value._node))
        a = value._value(reason)
        if not isinstance(a, np.ndarray):          # a GPU array
            a = a.get()
        return a[()] if a.ndim == 0 and not array_0d else a
    if type(value) is _Size:
        return int(value)
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):
        return _numpy_result(value, reason)
    if type(value) in (list, tuple):
        new = [to_numpy(v, reason) for v in value]
        if any(a is not b for a, b in zip(new, value)):
            return type(value)(new)
        return value
    if type(value) is dict:
        new = {k: to_numpy(v, reason) for k, v in value.items()}
        if any(new[k] is not value[k] for k in value):
            return new
        return value
    return value


_NUMPY_RESULTS: dict = {}


def _numpy_result(value, reason):
    """A named result (``QRResult``, ``UniqueAllResult``, ...) as NumPy's own class holding
    NumPy values (nbaccel's namedtuple of the same name otherwise stays its own)."""
    fields = [to_numpy(v, reason) for v in value]
    cls = type(value)
    if (cls.__module__ or "").startswith("nbaccel"):
        if not _NUMPY_RESULTS:
            a = np.eye(2)
            for r in (np.linalg.qr(a), np.linalg.svd(a), np.linalg.eigh(a), np.linalg.slogdet(a),
                      np.unique_all(a), np.unique_counts(a), np.unique_inverse(a)):
                _NUMPY_RESULTS[type(r).__name__] = type(r)
        cls = _NUMPY_RESULTS.get(cls.__name__, cls)
    if cls is type(value) and all(a is b for a, b in zip(fields, value)):
        return value
    return cls(*fields)


def _has_tensor(values, depth=0):
    for v in values:
        if isinstance(v, Tensor) or type(v) is _Size:
            return True
        if depth < 3 and type(v) in (list, tuple) and _has_tensor(v, depth + 1):
            return True
        if depth < 3 and type(v) is dict and _has_tensor(v.values(), depth + 1):
            return True
    return False


@calls_for_the_user        # (a print or list.append it makes stops the cell from replaying)
def call(f, /, *args, **kwargs):
    """``f(*args, **kwargs)``, with tensors realised when ``f`` is outside NumPy's namespace
    (``f`` is positional-only: a user's keyword named ``f`` goes to the user's function)."""
    __tracebackhide__ = True  # noqa: F841
    if not args and not kwargs:
        return f()
    if not (_has_tensor(args) or _has_tensor(kwargs.values())) or keeps_traced(f):
        try:
            return f(*args, **kwargs)
        except TypeError as e:
            if e.__traceback__.tb_next is None and _is_nbaccel_method(f):
                # the call did not bind: nbaccel's method lacks a parameter NumPy's has
                raise TypeError(f"nbaccel's {_name(f)} does not take these arguments ({e})") from None
            raise
    reason = f"{_name(f)} is outside NumPy's namespace: it receives NumPy values"
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, Tensor):               # it may write into an input's own buffer
            settle_pending_readers(a, reason)
    given = list(args) + list(kwargs.values())
    args = [to_numpy(a, reason) for a in args]
    kwargs = {k: to_numpy(v, reason) for k, v in kwargs.items()}
    snapshot.guard(args + list(kwargs.values()))     # it may write into them (np.random.shuffle)
    handed = _handed_out(given, args + list(kwargs.values()), [])
    counts = [sys.getrefcount(a) for _, a in handed]
    result = f(*args, **kwargs)
    session = getattr(active_trace(), "session", None) if handed else None
    for (t, a), count in zip(handed, counts):
        # more references to the memory's owner now: f kept the array or views of it
        # (`rows = list(x)`; a view's base is the owner, not the array it was made from)
        if sys.getrefcount(a) > count and session is not None:
            session.note_kept_outside(t, _name(f))
    return result


def _handed_out(given, passed, out, depth=0):
    """(traced tensor, the owner of the memory of the NumPy array ``f`` received for it) for each
    tensor handed over, also inside lists, tuples and dicts (``to_numpy`` kept their structure)."""
    for t, a in zip(given, passed):
        if isinstance(t, Tensor):
            if t._node is not None and isinstance(a, np.ndarray):
                while isinstance(a.base, np.ndarray):
                    a = a.base
                out.append((t, a))
        elif depth < 3 and type(t) in (list, tuple) and type(a) in (list, tuple):
            _handed_out(t, a, out, depth + 1)
        elif depth < 3 and type(t) is dict and type(a) is dict:
            _handed_out(list(t.values()), [a.get(k) for k in t], out, depth + 1)
    return out


def _lowerable_mask(target, index):
    """The boolean mask to lower to ``where`` (None when ``target[index]`` is not a whole-shape
    boolean-mask selection of a Tensor)."""
    if not isinstance(target, Tensor):
        return None
    if isinstance(index, Tensor):
        ok = index.dtype.name == "bool" and tuple(index.shape) == tuple(target.shape)
    elif type(index) is np.ndarray:
        ok = index.dtype == np.bool_ and index.shape == tuple(target.shape)
    else:
        ok = False
    return index if ok else None


def _is_scalarish(v):
    return isinstance(v, (bool, int, float, np.generic)) or (isinstance(v, Tensor) and v.ndim == 0) \
        or (isinstance(v, np.ndarray) and v.ndim == 0)


def setmask(target, index, value, op, later=None):
    """``target[index] = value`` (``op`` '='), ``target[index] op= value``, or (``op`` 'copy')
    ``target[index] = later()`` where ``later()`` is ``value[index]``."""
    __tracebackhide__ = True  # noqa: F841
    mask = _lowerable_mask(target, index) if active_trace() is not None else None
    if op == "copy":
        if mask is not None and isinstance(value, (Tensor, np.ndarray)) and \
                tuple(value.shape) == tuple(target.shape):
            _where_into(target, mask, value)
            return
        target[index] = later()
        return
    if op == "=":
        if mask is not None and _is_scalarish(value):
            _where_into(target, mask, value)
            return
        target[index] = value
        return
    if mask is not None and _is_scalarish(value) and op in _OUT_OF_PLACE:
        new = _OUT_OF_PLACE[op](target, value)
        if isinstance(new, Tensor) and new.dtype is target.dtype:   # NumPy would cast it back
            _where_into(target, mask, new)
            return
    item = target[index]
    item = _ITEM_OPS[op](item, value)
    target[index] = item


def _where_into(target, mask, value):
    """``target[...] = where(mask, value, target)`` cast to ``target``'s dtype, captured."""
    new = numpy_api.where(mask, value, target)
    if new.dtype is not target.dtype:
        new = new.astype(target.dtype)
    target._assign(new, "setitem")


def sync(value=None, numpy=False):
    """Compute what is pending now (a graph break): a ``try`` body's errors raise inside it.
    ``numpy``: ``value`` as the plain cell's NumPy value (an f-string formats it)."""
    __tracebackhide__ = True  # noqa: F841
    if numpy:
        if isinstance(value, Tensor) or type(value) is _Size:
            return to_numpy(value, "an f-string formats the value")
        return value
    trace = active_trace()
    session = getattr(trace, "session", None)
    if session is None:
        return value
    if isinstance(value, Tensor) and value._node is not None:
        value._value("a try block: its errors must raise inside it")
    elif session.graph.nodes:
        session._break("a try block: its errors must raise inside it")
        session.flush()
    return value
