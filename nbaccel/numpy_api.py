"""``nbaccel.numpy``: a NumPy-compatible namespace (what ``np`` means inside a ``%%compile`` cell).

Every ``np.<func>`` that has an op in the table (``ops.registry.NUMPY_FUNCS``) routes through
nbaccel, so calls on tracer tensors are captured; results follow NumPy's defaults (float64 is
the default float, NumPy 2 promotion with weak Python scalars) because arrays and Python
values are turned into *NumPy-flavoured* tensors (``_np=True``).

Anything else falls back to NumPy itself: tensor arguments are made concrete (on a tracer that
is a graph break whose reason names the function), NumPy runs, and array results are wrapped
back (the argument conversion, the routing and the fallback are in ``numpy_routing.py``; this
module holds the namespace: its ufuncs, creation functions with NumPy's signatures, and the
submodules). So a cell never fails where plain NumPy would not. ``np.random`` is NumPy's own module
(a seeded draw is bit-identical to plain NumPy); dtypes and constants are NumPy's own.

    >>> import numpy
    >>> import nbaccel.numpy as xnp
    >>> t = xnp.exp(numpy.arange(3.0))
    >>> t.dtype.name, type(t).__name__
    ('float64', 'Tensor')
"""
from __future__ import annotations

import builtins
import functools
import types

import numpy as _np

from . import dtypes as D
from .ops.registry import NUMPY_FUNCS, OPS
from .convert import asarray as _asarray
from .tensor import Tensor
# the routing under the namespace (numpy_routing.py); its public names are importable from here too
from .numpy_routing import (_PY_SCALARS, NumPyOnly, _concrete, _flat, _to_np_tensor, _untraced,  # noqa: F401
                            _untraced_input, _wrap_result, fallback, mark_array_result, routed,
                            settle_pending_readers)


class _UFuncType(type):
    """``isinstance(f, np.ufunc)`` in a cell holds for NumPy's ufuncs and for ours alike."""

    def __instancecheck__(cls, obj):
        return type.__instancecheck__(cls, obj) or isinstance(obj, _np.ufunc)


class _UFunc(metaclass=_UFuncType):
    """An op-backed ufunc: calls are captured; ``.reduce``/``.outer``/... run NumPy's ufunc.
    In a cell it is ``np.ufunc`` (named so, like NumPy's type), so type tests read as plainly."""

    def __init__(self, call, ufunc):
        self._call = call
        self._ufunc = ufunc
        self.__name__ = ufunc.__name__
        self.__doc__ = call.__doc__

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __getattr__(self, k):
        attr = getattr(self._ufunc, k)
        if k == "outer" and self._ufunc.nin == 2:
            return self._outer(fallback(attr, f"{self.__name__}.outer"))
        return fallback(attr, f"{self.__name__}.{k}") if callable(attr) else attr

    def _outer(self, slow):
        """``ufunc.outer(a, b)`` as broadcasting: ``ufunc(a[..., None, ...], b)``, captured."""
        def outer(a, b, **kwargs):
            if kwargs or not builtins.all(type(v) in (Tensor, _np.ndarray) for v in (a, b)) or \
                    _untraced_input((a, b), {}):
                return slow(a, b, **kwargs)
            a, b = _to_np_tensor(a), _to_np_tensor(b)
            return self._call(a.reshape(tuple(a.shape) + (1,) * b.ndim), b)
        outer.__name__ = "outer"
        return outer

    def __repr__(self):
        return f"<nbaccel ufunc {self.__name__!r}>"


_UFunc.__name__ = _UFunc.__qualname__ = "ufunc"
ufunc = _UFunc


def _op_kind(front):
    op = OPS.get(getattr(front, "__name__", ""))
    return op.kind if op is not None and op.front is front else "other"


# NumPy's result order is its own (unique_values is hash-ordered in NumPy 2.3+)
_NUMPY_ORDER = {"unique_values"}


def _numpy_pinv(front):
    """np.linalg.pinv's default cut-off is rcond=1e-15 (the Array API's is max(M, N) * eps)."""
    def pinv(a, rcond=None, hermitian=False, *, rtol=None):
        if hermitian:
            raise NotImplementedError("pinv(hermitian=True)")
        if rcond is None and rtol is None:
            rcond = 1e-15
        return front(a, rtol, rcond=rcond)
    return pinv


def _make(name, module=_np):
    """The nbaccel.numpy function for ``numpy.<name>`` (``name`` may be ``linalg.inv``)."""
    short = name.rsplit(".", 1)[-1]
    numpy_func = getattr(module, short, None)
    front = NUMPY_FUNCS.get(name)
    if front is None or name in _NUMPY_ORDER:
        if isinstance(numpy_func, _np.ufunc):    # no op, but .reduce/.outer/.at stay reachable
            return _UFunc(fallback(numpy_func, name), numpy_func)
        return fallback(numpy_func, name) if callable(numpy_func) else numpy_func
    if name == "linalg.pinv":
        front = _numpy_pinv(front)
    call = routed(front, name, _op_kind(front), numpy_func if callable(numpy_func) else None)
    if isinstance(numpy_func, _np.ufunc):
        return _UFunc(call, numpy_func)
    return call


# ---- creation with NumPy's signatures and defaults -------------------------------------------

def _npt(t):
    """Mark a freshly created tensor NumPy-flavoured (NumPy's float64 defaults downstream). A
    traced one marks its node too, so the compiler's re-tracing keeps the flavour."""
    t._np = True
    if t._node is not None:
        t._node.np_flavour = True
    return t


def _dtype(dtype, default):
    return D.dtype(dtype) if dtype is not None else default


def _shape(shape):
    return (int(shape),) if isinstance(shape, (int, _np.integer)) else tuple(int(s) for s in shape)


def _no_like(like):
    if like is not None:
        raise TypeError("like= is not supported by nbaccel.numpy")


def zeros(shape, dtype=float, order="C", *, device=None, like=None):
    """numpy.zeros (float64 by default)."""
    _no_like(like)
    return _npt(OPS["full"].front(_shape(shape), 0, dtype=_dtype(dtype, D.float64), device=device))


def ones(shape, dtype=None, order="C", *, device=None, like=None):
    """numpy.ones (float64 by default)."""
    _no_like(like)
    return _npt(OPS["full"].front(_shape(shape), 1, dtype=_dtype(dtype, D.float64), device=device))


def empty(shape, dtype=float, order="C", *, device=None, like=None):
    """numpy.empty (zero-filled: nbaccel never hands out uninitialised memory)."""
    return zeros(shape, dtype, order, device=device, like=like)


def full(shape, fill_value, dtype=None, order="C", *, device=None, like=None):
    """numpy.full (the dtype of ``fill_value`` by default: bool, int64 or float64)."""
    _no_like(like)
    if isinstance(fill_value, Tensor) and fill_value.ndim == 0:
        dt = _dtype(dtype, fill_value.dtype)
        return _npt((fill_value.astype(dt) + zeros(shape, dt)))
    if not isinstance(fill_value, (*_PY_SCALARS, _np.generic)):
        return _wrap_result(_np.full(_shape(shape), _concrete(fill_value, "np.full of an array"),
                                     dtype=None if dtype is None else D.dtype(dtype).np))
    default = D.dtype(_np.asarray(fill_value).dtype)
    value = fill_value.item() if isinstance(fill_value, _np.generic) else fill_value
    return _npt(OPS["full"].front(_shape(shape), value, dtype=_dtype(dtype, default), device=device))


def _like(value, name):
    def front(a, dtype=None, order="K", subok=True, shape=None, *, device=None, **kw):
        if name == "full_like":
            value_ = kw.pop("fill_value")
        else:
            value_ = value
        if kw:
            raise TypeError(f"{name}() got unexpected keyword arguments {sorted(kw)}")
        a = _to_np_tensor(a)
        if shape is not None:
            return full(shape, value_, dtype=dtype if dtype is not None else a.dtype.np, device=device)
        if isinstance(value_, _np.generic):
            value_ = value_.item()
        return _npt(OPS["full_like"].front(a, value_, dtype=dtype, device=device))
    front.__name__ = name
    front.__doc__ = f"numpy.{name} (the dtype and shape of ``a`` by default)."
    return front


zeros_like = _like(0, "zeros_like")
ones_like = _like(1, "ones_like")
empty_like = _like(0, "empty_like")
_full_like = _like(None, "full_like")


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """numpy.full_like."""
    return _full_like(a, dtype, order, subok, shape, device=device, fill_value=fill_value)


def arange(start, stop=None, step=None, dtype=None, *, device=None, like=None):
    """numpy.arange (int64 for integer arguments, float64 otherwise)."""
    _no_like(like)
    vals = [v for v in (start, stop, step) if v is not None]
    vals = [v.item() if isinstance(v, (Tensor, _np.generic)) else v for v in vals]
    if dtype is None:
        dtype = D.dtype(_np.result_type(*vals))
    if stop is None:
        start, stop = 0, vals[0]
    else:
        start, stop = vals[0], vals[1]
    step = vals[2] if len(vals) == 3 else 1
    return _npt(OPS["arange"].front(start, stop, step, dtype=dtype, device=device))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None):
    """numpy.linspace (float64 by default)."""
    if axis != 0 or not builtins.all(isinstance(v, (*_PY_SCALARS, _np.generic)) for v in (start, stop)):
        return fallback(_np.linspace, "linspace")(start, stop, num, endpoint, retstep, dtype, axis)
    cplx = builtins.any(isinstance(v, (complex, _np.complexfloating)) for v in (start, stop))
    t = _npt(OPS["linspace"].front(start, stop, int(num), endpoint=endpoint,
                                   dtype=_dtype(dtype, D.complex128 if cplx else D.float64),
                                   device=device))
    if retstep:
        div = (num - 1) if endpoint else num
        # NumPy's step is a scalar of the start/stop/num type, whatever dtype= the samples get
        step = _np.result_type(start, stop, float(num)).type((stop - start) / div if div > 0 else _np.nan)
        return t, step
    return t


def eye(N, M=None, k=0, dtype=float, order="C", *, device=None, like=None):
    """numpy.eye (float64 by default)."""
    _no_like(like)
    return _npt(OPS["eye"].front(N, M, k, dtype=_dtype(dtype, D.float64), device=device))


def identity(n, dtype=None, *, like=None):
    """numpy.identity."""
    return eye(n, dtype=dtype, like=like)


def asarray(a, dtype=None, order=None, *, device=None, copy=None, like=None):
    """numpy.asarray: tensors stay tensors (a tracer stays captured); others become
    NumPy-flavoured tensors."""
    _no_like(like)
    if isinstance(a, Tensor):
        t = a.astype(dtype) if dtype is not None and D.dtype(dtype) is not a.dtype else a
        return t.clone() if copy and t is a else t
    if isinstance(a, (list, tuple)) and builtins.any(isinstance(v, Tensor) for v in _flat(a)):
        t = _to_np_tensor(a)
        return t.astype(dtype) if dtype is not None else t
    try:
        return _asarray(a, dtype=dtype, copy=copy, _np=True)
    except TypeError:   # strings, objects, complex: plain NumPy
        return _np.asarray(a, dtype=dtype, order=order, copy=copy)


def array(obj, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    """numpy.array (a copy by default)."""
    t = asarray(obj, dtype=dtype, copy=copy or None, like=like)
    if isinstance(t, Tensor):
        if copy and t is obj:
            t = t.clone()
        while t.ndim < ndmin:
            t = t[None]
    elif ndmin:
        t = _np.array(t, ndmin=ndmin, copy=False)
    return t


def ascontiguousarray(a, dtype=None, *, like=None):
    """numpy.ascontiguousarray (nbaccel decides layouts itself: a no-op on tensors)."""
    return asarray(a, dtype=dtype, like=like)


def _numpy_when_untraceable(front):
    """A creation function that hands dtypes and values nbaccel has not (datetime64, strings,
    structured dtypes, complex where the engine lacks it) to NumPy itself, untouched."""
    numpy_func = getattr(_np, front.__name__)

    @functools.wraps(front)
    def call(*args, **kwargs):
        try:
            return front(*args, **kwargs)
        except (TypeError, ValueError) as e:
            if builtins.any(isinstance(v, Tensor) for v in _flat(list(args) + list(kwargs.values()))):
                raise
            try:
                return _wrap_result(numpy_func(*args, **kwargs))
            except Exception:
                raise e from None
    call.__wrapped__ = numpy_func          # write-back turns it into NumPy's own function
    return call


for _name in ("zeros", "ones", "empty", "full", "arange", "linspace", "eye", "identity"):
    globals()[_name] = _numpy_when_untraceable(globals()[_name])
del _name

# ---- nan-reductions as where + reduction --------------------------------------------------------

def _nan_front(name, reduce):
    numpy_func = getattr(_np, name)

    @functools.wraps(numpy_func)
    def call(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        t = a if isinstance(a, Tensor) else None
        if t is None and type(a) is _np.ndarray and not _untraced(a):
            t = _asarray(a)
        if t is None or dtype is not None or out is not None or kwargs or t.dtype.kind not in "fiub":
            return fallback(numpy_func, name)(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kwargs)
        return reduce(t, axis, keepdims)
    call.__module__ = __name__
    call.__wrapped__ = numpy_func
    return call


def _nansum(t, axis, keepdims):
    if t.dtype.kind != "f":
        return t.sum(axis=axis, keepdims=keepdims)
    return where(isnan(t), 0.0, t).sum(axis=axis, keepdims=keepdims)


def _nanmean(t, axis, keepdims):
    if t.dtype.kind != "f":
        return t.mean(axis=axis, keepdims=keepdims)
    count = (~isnan(t)).sum(axis=axis, keepdims=keepdims).astype(t.dtype)
    return _nansum(t, axis, keepdims) / count


nansum = _nan_front("nansum", _nansum)
nanmean = _nan_front("nanmean", _nanmean)

# ---- the namespace ---------------------------------------------------------------------------

# the routing's public names count as the namespace's own, as when they were defined here
_OWN = {n: v for n, v in dict(globals()).items() if callable(v) and not n.startswith("_")
        and getattr(v, "__module__", None) in (__name__, fallback.__module__)
        and n not in ("fallback", "routed")}
_cache: dict[str, object] = {}


class _SubModule(types.ModuleType):
    """``nbaccel.numpy.linalg`` / ``.fft``: op-backed where the table has an op, NumPy elsewhere."""

    def __init__(self, name, module):
        super().__init__(f"nbaccel.numpy.{name}")
        self._prefix = name
        self._module = module

    def __getattr__(self, k):
        if k.startswith("__"):
            raise AttributeError(k)
        own = getattr(self._module, k, None)
        if isinstance(own, type):            # LinAlgError and other classes: NumPy's own
            setattr(self, k, own)
            return own
        v = _make(f"{self._prefix}.{k}", self._module)
        if v is None and not hasattr(self._module, k):
            raise AttributeError(f"module 'numpy.{self._prefix}' has no attribute {k!r}")
        setattr(self, k, v)
        return v

    def __dir__(self):
        return dir(self._module)


linalg = _SubModule("linalg", _np.linalg)
fft = _SubModule("fft", _np.fft)


class _Random(types.ModuleType):
    """``np.random`` inside a cell: NumPy's own generator (seeded draws match plain NumPy bit for
    bit), with array results wrapped as NumPy-flavoured tensors so that arithmetic on them
    (``x * 2`` on a freshly drawn array) is captured too. Generators, seeds and states are
    NumPy's own objects."""

    def __init__(self):
        super().__init__("nbaccel.numpy.random")

    def __getattr__(self, k):
        v = getattr(_np.random, k)
        if callable(v) and not isinstance(v, type):
            @functools.wraps(v)
            def draw(*args, **kwargs):
                return _wrap_result(v(*args, **kwargs))
            setattr(self, k, draw)
            return draw
        return v

    def __dir__(self):
        return dir(_np.random)


random = _Random()


def __getattr__(name):
    """Everything else: op-backed when the table has an op, NumPy's own object otherwise
    (dtypes, constants, classes, submodules) or a NumPy fallback for functions."""
    if name.startswith("__"):
        if name in ("__version__", "__array_api_version__"):   # `np.__version__` in a cell
            return getattr(_np, name)
        raise AttributeError(name)
    if name in _cache:
        return _cache[name]
    if not hasattr(_np, name) and name not in NUMPY_FUNCS:
        raise AttributeError(f"module 'numpy' has no attribute {name!r}")
    obj = getattr(_np, name, None)
    if isinstance(obj, (type, types.ModuleType)) or (obj is not None and not callable(obj)):
        value = obj                              # dtypes, classes, constants, submodules
    else:
        value = _make(name)
    _cache[name] = value
    return value


def __dir__():
    return sorted(set(dir(_np)) | set(_OWN) | {"linalg", "fft", "random"})


# names with an op, eagerly: `from nbaccel.numpy import exp` works without __getattr__
for _name in list(NUMPY_FUNCS):
    if "." not in _name and _name not in _OWN and hasattr(_np, _name):
        globals()[_name] = _cache[_name] = _make(_name)
del _name
