"""How a NumPy call on tensors reaches nbaccel (the routing under ``nbaccel.numpy``, numpy_api.py).

Arguments become *NumPy-flavoured* tensors (``_np=True``: NumPy's defaults, float64 and weak
Python scalars); a function the op table backs (``ops.registry.NUMPY_FUNCS``) runs through its op
(``routed``), so a call on a tracer is captured; anything else falls back to NumPy itself
(``fallback``): tensor arguments are made concrete (on a tracer, a graph break whose reason
names the function), NumPy runs, and array results are wrapped back.
"""
from __future__ import annotations

import builtins
import functools

import numpy as _np

from . import dtypes as D
from .convert import asarray as _asarray, is_passthrough
from .dispatch import active_trace
from .ops.meta import numpy_scalar
from .ops.registry import NUMPY_FUNCS, OPS
from .ops.ufunc_errors import first_error
from .tensor import Tensor, _inplace_cast_error

_PY_SCALARS = (bool, int, float, complex)
# functions whose first argument is a sequence of arrays
_SEQ_FIRST = {"concatenate", "concat", "stack", "hstack", "vstack", "dstack", "column_stack",
              "broadcast_arrays", "meshgrid", "block"}
_ELEMENTWISE = ("unary", "binary", "ternary")


# ---- argument conversion ------------------------------------------------------------------

class NumPyOnly(NotImplementedError, AttributeError):
    """The operation (an ndarray method, a NumPy function asking about memory) needs a real
    ndarray: the caller runs the code with NumPy instead. (Also an AttributeError, so
    ``hasattr(tracer, "strides")`` in other code is False, not an error.)"""


def _is_arraylike(x):
    return isinstance(x, (Tensor, _np.ndarray, _np.generic))


def _to_np_tensor(x):
    """Array-likes become NumPy-flavoured tensors (Python floats default to float64)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (_np.ndarray, _np.generic)):
        return _asarray(x)
    if isinstance(x, range):
        return _asarray(_np.asarray(x))     # NumPy reads a range as an int64 array
    if isinstance(x, (list, tuple)) and not builtins.any(isinstance(v, Tensor) for v in _flat(x)):
        return _asarray(x, _np=True)
    if isinstance(x, (list, tuple)):   # holds tensors (maybe tracers): stack them, traced
        return OPS["stack"].front([_to_np_tensor(v) for v in x]) if "stack" in OPS else _asarray(x, _np=True)
    if isinstance(x, _PY_SCALARS):
        return _asarray(x, _np=True)
    return x


def _flat_args(args, kwargs):
    """Every leaf of nested argument lists (the one flattening helper)."""
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, (list, tuple)):
            yield from _flat_args(v, {})
        else:
            yield v


def _flat(seq):
    return _flat_args(seq, {})


def _convert_args(name, kind, args):
    """NumPy defaults for the arguments of an op-backed function."""
    args = list(args)
    if not args:
        return args
    if kind in _ELEMENTWISE:
        n = {"unary": 1, "binary": 2, "ternary": 3}[kind]
        arrays = [a for a in args[:n] if _is_arraylike(a) or isinstance(a, (list, tuple, range))]
        for i in range(builtins.min(n, len(args))):
            a = args[i]
            # Python scalars stay weak next to an array (NEP 50), else they become float64/int64
            if isinstance(a, _PY_SCALARS) and arrays:
                continue
            args[i] = _to_np_tensor(a)
        return args
    first = args[0]
    if name in _SEQ_FIRST and isinstance(first, (list, tuple)):
        args[0] = type(first)(_to_np_tensor(a) for a in first)
    elif name not in ("einsum",) and (isinstance(first, (list, tuple, range, *_PY_SCALARS)) or
                                      isinstance(first, (_np.ndarray, _np.generic))):
        args[0] = _to_np_tensor(first)
    return args


def settle_pending_readers(t, reason):
    """Before an input's own buffer is handed to NumPy or other code (which may write into it:
    ``np.cumsum(a, out=a)``, ``np.copyto(a, v)``, ``np.random.shuffle(a)``), compute the pending
    graph if it reads that input, so what it computes sees the value from before the write."""
    node = t._node
    if node is None or not node.is_placeholder or t._data is None:
        return
    session = getattr(active_trace(), "session", None)
    if session is None or node.graph is not session.graph:
        return
    if builtins.any(a is node for n in session.graph.nodes for a in n.args):
        session._break(reason)
        session.flush()


def _concrete(x, reason):
    """A NumPy value for ``x`` (tensors, also inside lists/tuples/dicts)."""
    if isinstance(x, Tensor):
        settle_pending_readers(x, reason)
        a = x._value(reason)
        if not isinstance(a, _np.ndarray):        # a GPU array
            a = a.get()
        return a
    if isinstance(x, list):
        return [_concrete(v, reason) for v in x]
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(_concrete(v, reason) for v in x)
    if isinstance(x, dict):
        return {k: _concrete(v, reason) for k, v in x.items()}
    return x


def _wrap_result(r):
    """Arrays NumPy returns become NumPy-flavoured tensors again (so later ops are captured).
    Subclasses (masked arrays, matrices) and dtypes nbaccel has not (datetime64, object,
    strings, structured) stay NumPy's own objects, untouched."""
    if type(r) is _np.ndarray:
        try:
            return _asarray(r)
        except TypeError:
            return r
    if isinstance(r, tuple) and not hasattr(r, "_fields"):
        return tuple(_wrap_result(v) for v in r)
    if isinstance(r, tuple):
        return type(r)(*(_wrap_result(v) for v in r))
    if isinstance(r, list):
        return [_wrap_result(v) for v in r]
    return r


_LIST_RESULTS = {"split", "array_split", "hsplit", "vsplit", "dsplit"}


_PLAIN_TYPES = (Tensor, int, float, bool, complex, str, list, tuple, type(None))


def _untraced(x):
    """A value nbaccel never traces: an ndarray subclass (masked array, matrix), an array of a
    dtype nbaccel lacks (datetime64, object, str, structured), or another library's array
    (pandas, xarray, scipy.sparse, any object with ``__array_function__`` / ``__array_ufunc__``:
    NumPy's own function gives it what it expects). Dask arrays have their own path."""
    if isinstance(x, _PLAIN_TYPES):
        return False
    if isinstance(x, _np.ndarray) and type(x) is not _np.ndarray:
        return True
    if isinstance(x, (_np.ndarray, _np.generic)):
        try:
            D.dtype(x.dtype)
        except TypeError:
            return True
        return False
    t = type(x)
    mod = t.__module__ or ""
    if mod.startswith("dask"):
        return False
    return (hasattr(t, "__array_function__") or hasattr(t, "__array_ufunc__")
            or mod.startswith("scipy.sparse"))


def _untraced_input(args, kwargs):
    for v in list(args[:3]) + list(kwargs.values()):
        if _untraced(v) or (isinstance(v, (list, tuple)) and v and builtins.any(_untraced(e) for e in v[:4])):
            return True
    return False


def _has_tensor(args, kwargs):
    return builtins.any(isinstance(v, Tensor) for v in _flat(list(args) + list(kwargs.values())))


# reductions whose dtype= sets the result (and accumulator) dtype
_DTYPE_ACCUMULATORS = {"sum", "prod", "cumsum", "cumprod", "nansum", "nanprod", "nancumsum", "nancumprod",
                       "mean", "nanmean", "std", "var", "nanstd", "nanvar", "trace"}
# answers about memory that concrete copies of tensors would give wrongly
_MEMORY_QUERIES = {"shares_memory", "may_share_memory", "byte_bounds"}


# NumPy functions that write into their first argument (np.copyto(v, 1) with v = t[0]): on a
# tensor they run on a copy of its value, which is then assigned back, so a view writes into
# the array it views (its concrete value is a copy of its own) and a read-only one refuses in
# NumPy's words
_WRITES_FIRST = {"copyto", "put", "putmask", "place", "fill_diagonal"}


def _write_into_first(func, target, rest, kwargs, reason):
    read_only = target._read_only()           # (asked before _concrete realises the tracer)
    a = _concrete(target, reason)
    work = a.copy()
    work.flags.writeable = not read_only
    res = func(work, *_concrete(rest, reason), **_concrete(kwargs, reason))
    if work.tobytes() != a.tobytes():
        target._assign(_asarray(work), "copy_")
    return _wrap_result(res)


def _traced_outs(kwargs):
    """The traced tensors a NumPy call is asked to write into (``out=``), or ()."""
    out = kwargs.get("out")
    outs = out if isinstance(out, tuple) else (out,)
    if active_trace() is None or not builtins.all(isinstance(o, Tensor) or o is None for o in outs):
        return ()
    return tuple(o for o in outs if o is not None and o._node is not None and o.device.type == "cpu")


def _write_into_outs(func, args, kwargs, targets, reason):
    """``func(..., out=t)`` with ``t`` traced (``np.negative(v, out=v)`` where the ufunc's front
    takes no ``out``): NumPy writes into copies of the targets' values, which are then assigned
    back as in-place updates, so a view's write reaches the array it views (its realized value
    is an array of its own) and the trace knows the new value. The result is the target itself,
    as NumPy returns its ``out``."""
    works = []
    for t in targets:
        read_only = t._read_only()
        work = _concrete(t, reason).copy()
        work.flags.writeable = not read_only
        works.append(work)
    swap = dict(zip(map(id, targets), works))
    out = kwargs["out"]
    kw = dict(_concrete({k: v for k, v in kwargs.items() if k != "out"}, reason))
    kw["out"] = tuple(swap.get(id(o), o) for o in out) if isinstance(out, tuple) else swap[id(out)]
    res = func(*_concrete(args, reason), **kw)
    for t, work in zip(targets, works):
        t._assign(_asarray(work), "copy_")
    back = {id(w): t for t, w in zip(targets, works)}

    def result(r):
        return back[id(r)] if id(r) in back else _wrap_result(r)
    return tuple(result(r) for r in res) if isinstance(res, tuple) else result(res)


def fallback(func, qualname):
    """``func`` (a NumPy function) made safe for tensors: concrete values in, tensors out."""
    reason = f"np.{qualname} is not in the op table (no-op fallback): NumPy runs it on concrete values"

    @functools.wraps(func)
    def call(*args, **kwargs):
        if not _has_tensor(args, kwargs):
            return _wrap_result(func(*args, **kwargs))
        if qualname in _MEMORY_QUERIES:
            raise NumPyOnly(f"np.{qualname} asks about ndarray memory, which tensors do not expose")
        if qualname in _WRITES_FIRST and args and isinstance(args[0], Tensor) \
                and args[0].device.type == "cpu":
            return _write_into_first(func, args[0], args[1:], kwargs, reason)
        if isinstance(func, _np.ufunc) and len(args) > func.nin and "out" not in kwargs:
            # outputs given positionally (np.negative(v, v)) are its out= (one: NumPy's tuple)
            args, kwargs = args[:func.nin], {**kwargs, "out": tuple(args[func.nin:])}
        targets = _traced_outs(kwargs)
        if targets:
            return _write_into_outs(func, args, kwargs, targets, reason)
        return _wrap_result(func(*_concrete(args, reason), **_concrete(kwargs, reason)))
    call.__nbaccel_fallback__ = True
    return call


# NumPy functions whose 0-d results are 0-d arrays (ufuncs and reductions give scalars)
_ARRAY_RESULTS = {"where", "copy", "asarray", "array", "ascontiguousarray", "asanyarray", "tensordot"}


def mark_array_result(name, out):
    """Note on a traced result that NumPy's function gives an ndarray even when it is 0-d."""
    if name in _ARRAY_RESULTS and isinstance(out, Tensor) and out._node is not None:
        out._node.array_result = True
    return out


def routed(front, name, kind, numpy_func):
    """An op-backed NumPy function; signatures the op's front does not take fall back to NumPy
    (so NumPy raises its own errors, never one NumPy would not raise)."""
    slow = fallback(numpy_func, name) if numpy_func is not None else None

    def call(*args, **kwargs):
        if _untraced_input(args, kwargs):
            return numpy_func(*args, **kwargs)
        if slow is not None and kwargs.get("order") not in (None, "C"):
            return slow(*args, **kwargs)   # Fortran or memory order: NumPy's own
        try:
            out = front(*_convert_args(name, kind, args), **kwargs)
        except (TypeError, NotImplementedError):
            if slow is None:
                raise
            return slow(*args, **kwargs)
        want = kwargs.get("dtype")
        if slow is not None and want is not None and isinstance(out, Tensor) and short in _DTYPE_ACCUMULATORS:
            try:
                wrong = out.dtype.np != _np.dtype(want)
            except TypeError:
                wrong = True
            if wrong:                      # the op's front did not honour dtype=: NumPy's own
                return slow(*args, **kwargs)
        if short in _LIST_RESULTS and isinstance(out, tuple):
            return list(out)               # NumPy's split family returns lists
        if short in ("broadcast_arrays", "meshgrid") and isinstance(out, list):
            return tuple(out)              # NumPy 2 returns a tuple
        return mark_array_result(short, out)
    short = name.rsplit(".", 1)[-1]
    call.__name__ = call.__qualname__ = name.rsplit(".", 1)[-1]
    call.__doc__ = f"numpy.{name} through nbaccel's op ``{getattr(front, '__name__', name)}``."
    call.__wrapped__ = numpy_func
    return call


# -- Tensor's NumPy protocols (numpy_routing.install, which import nbaccel runs) ------------
def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """``Tensor.__array_ufunc__``: ``np.exp(t)`` and ``np.add(a, b, out=t)`` run the ufunc's op."""
    if any(is_passthrough(v) for v in inputs):   # masked arrays, matrices: NumPy's own result
        return fallback(getattr(ufunc, method) if method != "__call__" else ufunc,
                        f"{ufunc.__name__} of a masked array or matrix")(*inputs, **kwargs)
    front = NUMPY_FUNCS.get(ufunc.__name__) if method == "__call__" else None
    if front is None:
        name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        if any(getattr(v, "_np", False) for v in inputs):
            # tensors of NumPy code keep NumPy's behaviour, as __array_function__ gives them: NumPy
            # runs the ufunc (or its reduce, accumulate, outer, at) on concrete values, and on a
            # tracer that is a graph break naming it (np.nextafter(a, 1.0) in an nb.compile'd
            # function of arrays)
            return fallback(ufunc if method == "__call__" else getattr(ufunc, method), name)(*inputs, **kwargs)
        raise TypeError(f"nbaccel has no op for numpy.{name}")
    out = kwargs.pop("out", None)
    target = out[0] if isinstance(out, tuple) and out else out
    if isinstance(target, Tensor) and target._np and numpy_scalar(target):
        # a traced value NumPy holds as a NumPy scalar (a reduction's): no place to write
        raise TypeError("return arrays must be of ArrayType")
    casting = kwargs.pop("casting", "same_kind")
    for k in ("order", "subok"):
        kwargs.pop(k, None)
    dtype = kwargs.pop("dtype", None)
    if kwargs:
        raise TypeError(f"numpy.{ufunc.__name__}: unsupported argument(s) {sorted(kwargs)}")
    if isinstance(target, Tensor) and target._np and dtype is None:
        try:
            return target._assign(front(*inputs))
        except (TypeError, ValueError) as e:
            # NumPy's exception, in NumPy's order (the loop and the cast before the shapes)
            first = first_error(ufunc, target, inputs, casting)
            if first is None or str(first) == str(e):
                raise
            raise (type(e)(str(first)) if isinstance(first, ValueError) and isinstance(e, ValueError)
                   else first) from None
    res = front(*inputs)
    if dtype is not None:
        res = res.astype(dtype)
    if out is not None:
        target = out[0] if isinstance(out, tuple) else out
        if isinstance(target, Tensor):
            return target._assign(res)
        if not _np.can_cast(res.dtype.np, target.dtype, "same_kind"):
            raise _inplace_cast_error(res.dtype, D.dtype(target.dtype), "in-place operation")
        _np.copyto(target, _np.asarray(res), casting="same_kind")
        return target
    return res

def array_function(self, func, types, args, kwargs):
    """``Tensor.__array_function__``: ``np.concatenate([t, u])`` runs the function's op; a
    function with none falls back to NumPy on NumPy-flavoured tensors."""
    if any(is_passthrough(v) for v in _flat_args(args, kwargs)):
        return fallback(func, f"{func.__name__} of a masked array or matrix")(*args, **kwargs)
    mod = func.__module__ or ""
    prefix = mod[len("numpy."):] + "." if mod.startswith("numpy.") and not mod.startswith("numpy._") else ""
    name = prefix + func.__name__
    front = NUMPY_FUNCS.get(name) or NUMPY_FUNCS.get(func.__name__ if not prefix else name)
    if front is None and any(getattr(t, "_np", False) for t in _flat_args(args, kwargs)):
        # tensors that came from NumPy code keep NumPy's behaviour: NumPy runs the function on
        # concrete values (on a tracer that is a graph break naming the function)
        return fallback(func, name)(*args, **kwargs)
    if front is None:
        raise TypeError(f"nbaccel has no op for numpy.{name}: convert with np.asarray(t) "
                        "first, or use an nbaccel op")
    return mark_array_result(func.__name__, front(*args, **kwargs))


def install(cls):
    """Give Tensor NumPy's two protocols (this module sits above Tensor, which cannot import it)."""
    cls.__array_ufunc__ = array_ufunc
    cls.__array_function__ = array_function
