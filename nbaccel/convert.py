"""Conversions into Tensors: asarray (zero-copy where possible), tensor, from_numpy, from_dlpack."""
from __future__ import annotations

import numpy as np

from . import dtypes as D
from .devices import array_module, device as _device, device_of_array
from .ops.meta import numpy_scalar

# The Tensor class, handed in by tensor.py when it is made: tensor.py imports this module (a
# Tensor is built with asarray), so this one cannot import it back (the same for autograd.py and
# dispatch.py: the engine's arrows point from Tensor down)
Tensor = None

# ndarray subclasses whose semantics a Tensor would lose (a mask; matrix `*`): nbaccel never
# converts them, so NumPy handles them untouched (the NumPy namespace falls back to NumPy on
# the TypeError, and Tensor's NumPy protocols run NumPy on concrete values; see
# numpy_routing.py)
PASSTHROUGH_TYPES = (np.ma.MaskedArray, np.matrix)


def is_passthrough(x) -> bool:
    """Is ``x`` (or an element of a list/tuple) an array nbaccel leaves to NumPy untouched?"""
    if isinstance(x, (list, tuple)):
        return any(is_passthrough(v) for v in x)
    return isinstance(x, PASSTHROUGH_TYPES)


def _np_of(data):
    """Is this NumPy data (so results should follow NumPy's defaults)?"""
    return isinstance(data, (np.ndarray, np.generic))


def asarray(obj, dtype=None, device=None, copy=None, *, requires_grad=False, _np=None):
    """Convert to a Tensor, zero-copy where possible (Array API ``asarray``)."""
    if isinstance(obj, Tensor):
        t = obj
        if dtype is not None and D.dtype(dtype) is not t.dtype:
            if copy is False:
                raise ValueError("asarray: a dtype change needs a copy, but copy=False")
            t = t.astype(dtype)
        elif copy:
            t = t.clone()
        if device is not None:
            t = t.to(device)
        if requires_grad:
            t.requires_grad_(True)
        return t
    if isinstance(obj, PASSTHROUGH_TYPES):
        raise TypeError(f"nbaccel does not convert a {type(obj).__name__} (its semantics would be "
                        "lost); NumPy handles it untouched")
    dev = _device(device) if device is not None else device_of_array(obj)
    xp = array_module(dev)
    npflag = _np_of(obj) if _np is None else _np
    dt = D.dtype(dtype) if dtype is not None else None
    if hasattr(obj, "__dlpack__") and not isinstance(obj, np.ndarray) and dev.type == "cpu" \
            and type(obj).__module__.split(".")[0] not in ("numpy", "cupy"):
        try:
            obj = np.from_dlpack(obj)
        except Exception:
            obj = np.asarray(obj)
    if dt is None:
        if isinstance(obj, (np.ndarray, np.generic)) or hasattr(obj, "__cuda_array_interface__"):
            a = xp.asarray(obj)
            try:
                dt = D.dtype(a.dtype)
            except TypeError:
                raise TypeError(f"dtype {a.dtype} is not supported by nbaccel (supported: "
                                f"{', '.join(t.name for t in D.ALL_DTYPES)})") from None
        else:
            a = _from_python(obj, xp, npflag)
            dt = D.dtype(a.dtype)
        if copy:
            a = a.copy()
    else:
        if isinstance(obj, (np.ndarray, np.generic)) or hasattr(obj, "__cuda_array_interface__"):
            a = xp.asarray(obj)
        else:
            a = _from_python(obj, xp, npflag, dt)
        if a.dtype != dt.np:
            if copy is False:
                raise ValueError("asarray: a dtype change needs a copy, but copy=False")
            a = a.astype(dt.np)
        elif copy:
            a = a.copy()
    if dev.type == "cpu" and not isinstance(a, np.ndarray):
        a = np.asarray(a)
    t = Tensor._wrap(a, dt, dev, npflag)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _from_python(obj, xp, npflag, dt=None):
    """Python scalars and (nested) sequences, possibly holding tensors."""
    if isinstance(obj, (list, tuple)) and any(isinstance(o, Tensor) for o in _flat(obj)):
        obj = _untensor(obj)
    if dt is not None:
        return xp.asarray(obj, dtype=dt.np)
    a = np.asarray(obj)
    if a.dtype.kind == "f" and not npflag and a.dtype == np.float64:
        a = a.astype(np.float32)           # nbaccel's default float
    elif a.dtype.kind == "c" and not npflag and a.dtype == np.complex128:
        a = a.astype(np.complex64)         # ... and its default complex (as in PyTorch)
    elif a.dtype.kind in "iu" and a.dtype != np.int64 and not isinstance(obj, np.generic):
        a = a.astype(np.int64)
    elif a.dtype.kind not in "biufc":
        raise TypeError(f"can't make a tensor from {type(obj).__name__} data of dtype {a.dtype}")
    return xp.asarray(a)


def _flat(obj):
    for o in obj:
        if isinstance(o, (list, tuple)):
            yield from _flat(o)
        else:
            yield o


def _untensor(obj):
    if isinstance(obj, Tensor):
        return np.asarray(obj.cpu())
    if isinstance(obj, (list, tuple)):
        return [_untensor(o) for o in obj]
    return obj


def tensor(data, dtype=None, device=None, requires_grad=False):
    """Make a new Tensor that owns a copy of ``data`` (like ``torch.tensor``)."""
    if isinstance(data, Tensor):
        data = data.detach()
    return asarray(data, dtype=dtype, device=device, copy=True, requires_grad=requires_grad)


def from_numpy(a: np.ndarray) -> Tensor:
    """Zero-copy view of a NumPy array as a Tensor (writes show through both ways)."""
    if isinstance(a, Tensor) and a._np and a._node is not None:
        return _traced_from_numpy(a)
    if not isinstance(a, np.ndarray):
        raise TypeError(f"expected np.ndarray, got {type(a).__name__}")
    return asarray(a, _np=False)


def _traced_from_numpy(a: Tensor) -> Tensor:
    """``from_numpy`` of a traced NumPy value (an array of a %%compile cell, or a compiled
    function's NumPy argument): the plain code hands an ndarray here. The result is a view of
    ``a`` whose flavour is nbaccel's own, so the trace's view tracking carries writes through
    either side to the other; the trace's session gives it the array's memory once the call
    ends (docs/magics.md). A view the trace cannot track is refused with the reason (a
    %%compile cell then runs plainly), never handed out as a copy."""
    if numpy_scalar(a):
        # the plain code holds a NumPy scalar (a reduction's or ufunc's 0-d result)
        raise TypeError(f"expected np.ndarray, got {a.dtype.np.type.__name__}")
    if a.device.type != "cpu":
        raise TypeError(f"nbaccel.from_numpy: the traced array lives on {a.device}, where the "
                        "plain code's ndarray is in host memory; a tensor sharing its memory "
                        "cannot be made here")
    t = a.detach()
    t._np = False          # nbaccel's own flavour: its methods and printing are PyTorch's
    note = getattr(t._node.graph, "shared_view", None)
    why = note(t) if note is not None else "no trace session tracks its views"
    if why is not None:
        raise TypeError(f"nbaccel.from_numpy inside a trace: {why}; the tensor would not share "
                        "memory with the array as it does in the plain code")
    return t


def from_dlpack(x, /, *, device=None, copy=None) -> Tensor:
    """Import any DLPack-capable array (NumPy, CuPy, PyTorch, JAX) without copying
    (``copy=True`` copies; ``device=`` moves, as the Array API's from_dlpack)."""
    dev_type = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else 1
    if dev_type == 1:
        t = asarray(np.from_dlpack(x), _np=False)
    else:
        t = asarray(array_module(_device("cuda")).from_dlpack(x), _np=False)
    if copy:
        t = t.clone()
    return t if device is None else t.to(device)
