"""NumPy's ndarray methods on NumPy-flavoured tensors (``t._np``: values of NumPy code, such as
the arrays of a ``%%compile`` cell).

A Tensor's methods follow PyTorch (``t.sort()`` returns (values, indices), ``t.repeat(2, 3)``
tiles). Where NumPy's method of the same name means something else, a NumPy-flavoured tensor
gets NumPy's meaning while NumPy code runs (:func:`numpy_code`, a ``%%compile`` cell): ``sort`` and ``fill`` work in place and return None, ``repeat`` repeats
elements (``axis=``, array repeats), ``item`` takes an index, ``view`` keeps the shape.

Every other public ndarray attribute that Tensor lacks (``partition``, ``put``, ``byteswap``,
``searchsorted``, ``flat``, ``strides``, ``tobytes``, ...) is NumPy's own, run on the concrete
value (on a tracer that is a graph break naming the method). A method that changes the array
(``partition``, ``put``, ``byteswap(inplace=True)``) runs on a copy whose new contents are then
written into the tensor, so the write is part of the graph like ``t[...] = v``. What cannot
be expressed that way (``resize`` and ``setflags`` change the array itself; ``view(dtype)`` of
a traced array would share memory under another dtype) raises :class:`NumPyOnly`, and a
``%%compile`` cell then runs plainly.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from .convert import asarray

from .tensor import Tensor
# NumPyOnly is defined in numpy_api (its fallback for memory queries raises it too)
from .numpy_api import NumPyOnly, _wrap_result, settle_pending_readers  # noqa: F401
from .ops.meta import numpy_scalar
from .ops.registry import NUMPY_FUNCS, OPS
from . import numpy_api


# called with the arrays whose memory is handed out as a raw ndarray (``%%compile`` registers
# its safety net here, so a failed attempt can undo writes through them)
ALIAS_HOOKS: list = []


# they change the ndarray object itself (shape, flags), not only its contents
_PLAIN_ONLY = {"resize": "ndarray.resize changes the array's shape in place",
               "setflags": "ndarray.setflags changes the array's flags",
               "itemset": "ndarray.itemset"}


def _reason(name):
    return f"ndarray.{name} has no op: NumPy runs it on the concrete value"


def _concrete(t, name):
    a = t._value(_reason(name))
    return a if isinstance(a, np.ndarray) else a.get()


def _plain_args(v, name):
    if isinstance(v, Tensor):
        return _concrete(v, name)
    if type(v) in (list, tuple):
        return type(v)(_plain_args(x, name) for x in v)
    return v


def _wrap(r):
    return _wrap_result(r)


def _same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _numpy_method(t, name):
    """NumPy's ``ndarray.<name>`` for ``t``: on a copy of its value, written back if changed."""
    def method(*args, **kwargs):
        read_only = t._read_only()
        a = _concrete(t, name)
        work = a.copy()
        work.flags.writeable = not read_only     # (NumPy then refuses a write in its own words)
        res = getattr(work, name)(*_plain_args(args, name), **{k: _plain_args(v, name) for k, v in kwargs.items()})
        if not _same(work, a):
            if work.shape != a.shape or work.dtype != a.dtype:
                raise NumPyOnly(f"ndarray.{name} changed the array's shape or dtype")
            t._assign(asarray(work), f"ndarray.{name}")
        return t if res is work else _wrap(res)
    method.__name__ = method.__qualname__ = name
    return method


class FlatIter:
    """``t.flat``: reads NumPy's flat iterator of the value; writes go into the tensor."""

    __slots__ = ("_t",)

    def __init__(self, t):
        self._t = t

    def __getitem__(self, index):
        return _wrap(_concrete(self._t, "flat").flat[_plain_args(index, "flat")])

    def __setitem__(self, index, value):
        work = _concrete(self._t, "flat").copy()
        work.flat[_plain_args(index, "flat")] = _plain_args(value, "flat")
        self._t._assign(asarray(work), "ndarray.flat write")

    def __iter__(self):
        return iter(_concrete(self._t, "flat").copy().flat)

    def __len__(self):
        return int(self._t.size)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(_concrete(self._t, "flat").flat, dtype=dtype)


def _getattr(self, name):
    """Tensor.__getattr__ (only reached when normal lookup fails)."""
    if name.startswith("_") or not object.__getattribute__(self, "_np") or not hasattr(np.ndarray, name):
        raise AttributeError(f"'Tensor' object has no attribute '{name}'")
    if name in _PLAIN_ONLY:
        raise NumPyOnly(f"{_PLAIN_ONLY[name]}: this needs a real ndarray")
    if name == "flat":
        return FlatIter(self)
    attr = getattr(np.ndarray, name)
    if callable(attr):
        return _numpy_method(self, name)
    if self._node is not None and name in ("strides", "base", "flags", "ctypes", "data"):
        node = self._node
        if node.is_placeholder and isinstance(self._data, np.ndarray) and self._version[0] == 0:
            return getattr(self._data, name)      # an input as it came in: its own array answers
        # a computed tracer's memory layout is the compiler's business: NumPy's answer needs
        # NumPy's array
        raise NumPyOnly(f"ndarray.{name} describes an ndarray's memory")
    return _wrap(getattr(_concrete(self, name), name))


# ---- the methods whose NumPy meaning differs from the Tensor's --------------------------------

def _sort(self, axis=-1, kind=None, order=None, *, stable=None):
    if self.ndim == 0 and axis is not None:     # PyTorch sorts a 0-d tensor; NumPy refuses
        raise np.exceptions.AxisError(axis, 0)
    if order is not None:
        return _numpy_method(self, "sort")(axis=axis, kind=kind, order=order)
    self._assign(NUMPY_FUNCS["sort"](self, axis=axis), "ndarray.sort")


def _fill(self, value):
    self._assign(OPS["full_like"].front(self, value), "ndarray.fill")


def _repeat(self, repeats, axis=None):
    if isinstance(repeats, int) and not isinstance(repeats, bool):
        try:
            return NUMPY_FUNCS["repeat"](self, repeats, axis=axis)
        except (TypeError, NotImplementedError):
            pass
    if isinstance(repeats, Tensor):
        repeats = _concrete(repeats, "repeat")
    return _wrap(np.repeat(_concrete(self, "repeat"), repeats, axis=axis))


def _item(self, *args):
    a = self._value("a Python scalar is needed (ndarray.item())")
    return (a if isinstance(a, np.ndarray) else a.get()).item(*args)


def _view(self, *args, dtype=None, type=None):
    """NumPy's view: the same data (``view()``), or reinterpreted as another dtype."""
    if args and dtype is None:
        dtype = args[0]
    if dtype is None and type is None:
        return self[...]
    if self._node is not None:
        if not (self._node.is_placeholder and isinstance(self._data, np.ndarray) and self._version[0] == 0):
            raise NumPyOnly("ndarray.view(dtype) of a computed array shares its memory under another dtype")
        # (it may be written through the view)
        settle_pending_readers(self, "ndarray.view(dtype) shares the input's memory")
        for hook in ALIAS_HOOKS:                             # the %%compile safety net copies it
            hook([self._data])
    return self._data.view(*(x for x in (dtype, type) if x is not None))   # an alias, as in NumPy


def _nonzero(self):
    """NumPy's nonzero: a tuple of index arrays, one per axis (a data-dependent shape: NumPy
    computes it on the concrete value)."""
    return _wrap(np.nonzero(_concrete(self, "nonzero")))


def _through_namespace(name, tensor_fn_name=None):
    """A method that NumPy spells with ``order=`` / ``dtype=`` / ``out=``: the Tensor's own when
    it takes the call as NumPy means it, else NumPy's ``np.<name>`` through nbaccel.numpy (which
    runs NumPy on the value where the op does not take the arguments)."""
    def method(self, *args, **kwargs):
        order = kwargs.get("order", args[0] if name in ("ravel", "flatten", "copy") and args
                           and isinstance(args[0], str) else None)
        if order is not None and name in ("ravel", "flatten"):
            # the tensor's ravel reads NumPy's order from the strides (NumPy's method on a
            # C-ordered copy would read another order for "K" and "A"); flatten is its copy
            flat = _TENSOR_METHODS["ravel"](self, order)
            return flat.clone() if name == "flatten" else flat
        if name == "reshape" and order is not None:     # (the op's F order is a view, as NumPy's)
            return _TENSOR_METHODS["reshape"](self, *args, **kwargs)
        if order not in (None, "C"):
            return _numpy_method(self, name)(*args, **kwargs)
        if kwargs.get("dtype") is not None or kwargs.get("out") is not None:
            fn = getattr(numpy_api, name, None)
            if fn is not None and name not in ("copy", "flatten"):
                return fn(self, *args, **kwargs)
            return _numpy_method(self, name)(*args, **kwargs)
        return _TENSOR_METHODS[name](self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    return method


_ORDER_OR_DTYPE = ("ravel", "flatten", "copy", "reshape", "sum", "prod", "mean", "cumsum", "cumprod",
                   "std", "var", "trace")
_TENSOR_METHODS: dict = {}

def _transpose(self, *axes):
    """ndarray.transpose: the axes are one permutation, as a tuple or as separate ints
    (``a.transpose(0, 1)`` of a 2-d array is the array itself); none reverses them."""
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    return NUMPY_FUNCS["transpose"](self, None if axes in ((), None) else tuple(axes))


_NUMPY_MEANING = {"sort": _sort, "fill": _fill, "repeat": _repeat, "item": _item, "view": _view,
                  "nonzero": _nonzero, "transpose": _transpose}


_numpy_code = [0]        # > 0 while NumPy code runs on tensors on any thread (the swap below)


class _NumPyCodeHere(threading.local):
    depth = 0            # > 0 while NumPy code runs on this thread: the methods' choice


_here = _NumPyCodeHere()


_SWAPS: dict = {}        # name -> (class, the method that picks NumPy's meaning, Tensor's own)
_SWAP_LOCK = threading.Lock()


@contextlib.contextmanager
def numpy_code():
    """While NumPy code runs (the ``%%compile`` magic wraps a cell's run in it), the methods
    whose NumPy meaning differs from PyTorch's follow NumPy on NumPy-flavoured tensors. Outside
    it a Tensor keeps PyTorch's methods (``nb.tensor(a).sort()`` gives values and indices).

    The methods that choose (``_either``) are on the class only while NumPy code runs: the
    first ``numpy_code`` in installs them and the last one out puts Tensor's own methods back,
    so that PyTorch code calls ``x.view(...)``, ``x.sum()`` without a wrapper's call per op
    (issue 36: about 0.3 us of a 3 us op). A method Tensor lacks keeps its wrapper always.

    The wrappers are on the class for every thread, but each chooses NumPy's meaning only on a
    thread that is inside ``numpy_code`` itself: a NumPy-flavoured tensor on another thread
    (``nbaccel.numpy``'s result in a data loader's worker, say) keeps Tensor's methods."""
    with _SWAP_LOCK:
        _numpy_code[0] += 1
        if _numpy_code[0] == 1:
            _swap(True)
    _here.depth += 1
    try:
        yield
    finally:
        _here.depth -= 1
        with _SWAP_LOCK:
            _numpy_code[0] -= 1
            if _numpy_code[0] == 0:
                _swap(False)


def _swap(numpy_meaning):
    for name, (cls, wrapper, own) in _SWAPS.items():
        setattr(cls, name, wrapper if numpy_meaning else own)


def _install_either(cls, name, wrapper, own):
    if own is None:          # nothing to swap back to: the wrapper raises Tensor's AttributeError
        setattr(cls, name, wrapper)
        return
    _SWAPS[name] = (cls, wrapper, own)
    setattr(cls, name, wrapper if _numpy_code[0] else own)


def _either(name, numpy_fn, tensor_fn):
    def method(self, *args, **kwargs):
        if self._np and _here.depth:      # (this thread's NumPy code: another's may run meanwhile)
            return numpy_fn(self, *args, **kwargs)
        if tensor_fn is None:
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")
        return tensor_fn(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = (((tensor_fn.__doc__ if tensor_fn is not None else "") or numpy_fn.__doc__ or "")
                      + f"\n\nIn NumPy code (a %%compile cell) on a NumPy-flavoured tensor: NumPy's "
                      f"``ndarray.{name}``, from nbaccel/ndarray_methods.py (``install``).")
    method.__nbaccel_either__ = True
    return method


def _power_operator(current):
    """``t ** 2``: ndarray's operator squares for a Python int 2 (NumPy's fast scalar power
    calls np.square), which differs from np.power only for bool: int8, not the int64 of bool
    with a weak int. A NumPy scalar's operator has no such path."""
    def __pow__(self, other, *args):
        if (type(other) is int and other == 2 and self._np and self.dtype.kind == "b"
                and not numpy_scalar(self)):
            return NUMPY_FUNCS["square"](self)
        return current(self, other, *args)
    __pow__.__doc__ = (current.__doc__ or "") + (
        "\n\nOn a NumPy-flavoured bool tensor, ``t ** 2`` is np.square (int8), as ndarray's "
        "operator: from nbaccel/ndarray_methods.py (``install``).")
    __pow__.__nbaccel_either__ = True
    return __pow__


def _item_assignment(current):
    """``t[i] = v``: a traced value that NumPy holds as a NumPy scalar (a reduction's) has no
    items to assign, as NumPy says (a TypeError, not an IndexError for a 0-d index)."""
    def __setitem__(self, index, value):
        if self._np and self._node is not None and numpy_scalar(self):
            raise TypeError(f"'numpy.{self.dtype.np.name}' object does not support item assignment")
        current(self, index, value)
    __setitem__.__doc__ = current.__doc__
    __setitem__.__nbaccel_either__ = True
    return __setitem__


def install(tensor_cls):
    """NumPy's meaning for NumPy-flavoured tensors (after the op table's methods are installed)."""
    for name, wrap in (("__pow__", _power_operator), ("__setitem__", _item_assignment)):
        if not getattr(tensor_cls.__dict__[name], "__nbaccel_either__", False):
            setattr(tensor_cls, name, wrap(tensor_cls.__dict__[name]))
    for name, fn in _NUMPY_MEANING.items():
        current = tensor_cls.__dict__.get(name)
        if getattr(current, "__nbaccel_either__", False):
            continue
        _install_either(tensor_cls, name, _either(name, fn, current), current)
    for name in _ORDER_OR_DTYPE:
        current = tensor_cls.__dict__.get(name)
        if current is None or getattr(current, "__nbaccel_either__", False):
            continue
        _TENSOR_METHODS[name] = current
        numpy_fn = _through_namespace(name)
        _install_either(tensor_cls, name,
                        _either(name, lambda self, *a, _f=numpy_fn, **k: _f(self, *a, **k), current),
                        current)
    tensor_cls.__getattr__ = _getattr
