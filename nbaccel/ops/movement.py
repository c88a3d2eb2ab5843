"""Shape and movement ops: reshape, permute, broadcast_to, astype, and friends (flip, repeat and
tril/triu, written over other ops: movement_extra.py).

Views: reshape (when the layout allows), permute/transpose, broadcast_to/expand,
squeeze/unsqueeze and basic indexing return views that share memory (and the
in-place version counter) with their input, as in NumPy and PyTorch.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..devices import device as _device
from .batching import pad_batched
from .fronts import apply, as_tensor
from .meta import normalize_axis, broadcast_shapes, np_shape, numpy_scalar, shape_error
from .registry import NUMPY_FUNCS, defalias, defmethod, defop
from ..tensor_meta import TensorMetadata


def _resolve_shape(shape, numel, args=()):
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise shape_error(args, "can only specify one unknown dimension",
                          "only one dimension can be inferred")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape and known != 0 and numel % known == 0:
        return tuple(numel // known if s == -1 else s for s in shape)
    if -1 in shape or known != numel:
        raise shape_error(args, lambda: f"cannot reshape array of size {numel} into shape "
                          + np_shape("newaxis" if s == -1 else s for s in shape),
                          f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple(int(s) for s in shape)


def _by_name(fname, positional, named, keys):
    """A shape or axes given positionally (``*shape``) or by one of its names: NumPy's, the
    Array API's and PyTorch's spellings differ (shape/newshape, axes/dims, shape/size)."""
    if not named:
        return positional
    key = next(iter(named))
    if len(named) > 1 or key not in keys or positional:
        raise TypeError(f"{fname}() got an unexpected keyword argument {key!r}")
    return (named[key],)


def _leading(first, more):
    """The positional shape or axes of a front whose first one is a named parameter (the Array
    API's ``reshape(x, shape)``) that also takes PyTorch's spread form (``x.reshape(3, 2)``)."""
    return () if first is None and not more else (first,) + more


def _reshape_front(x, shape=None, *more, copy=None, order=None, **named):
    if not isinstance(x, TensorMetadata):
        x = as_tensor(x)
    if order is not None and order != "C":       # (NumPy's F order: reversed axes, _in_read_order)
        shape = _shape_arg(_by_name("reshape", _leading(shape, more), named, ("shape", "newshape")))
        return _reshape_in_order(x, shape, order, copy)
    if type(shape) is int and not more and not named:
        shape = (shape,)        # (x.view(n): what _shape_arg makes of it, without three calls)
    else:
        shape = _shape_arg(_by_name("reshape", _leading(shape, more), named, ("shape", "newshape")))
    out = apply(reshape, (x,), {"shape": shape})
    if copy:   # copy=True: a new buffer (copy=None/False: a view where the layout allows)
        out = out.clone()
    return out


def _reshape_batch(args, batched, params, size):
    return apply(reshape, args, {"shape": (size,) + tuple(params["shape"])})


reshape = defop(
    "reshape", kind="movement", view=True, batch_rule=_reshape_batch,
    layout=lambda lay, p, shape: lay.reshape(shape), bijective=True,
    impl=lambda xp, x, shape: x.reshape(shape),     # (the method: no NumPy wrapper call)
    infer=lambda args, p: (_resolve_shape(p["shape"], math.prod(args[0].shape), args),
                           args[0].dtype),
    grad=lambda g, out, x, shape: (g.reshape(x.shape),),
    front=_reshape_front, methods=("reshape", "view"), numpy="reshape")


def _permute_front(x, axes=None, *more, **named):
    x = as_tensor(x)
    nd = x.ndim
    axes = _by_name("permute", _leading(axes, more), named, ("axes", "dims"))
    axes = _shape_arg(axes) if axes and axes[0] is not None else tuple(reversed(range(nd)))
    # negative axes count from the end (the Array API 2025.12, NumPy and PyTorch alike)
    if (any(not -nd <= a < nd for a in axes)
            or sorted(a % max(nd, 1) for a in axes) != list(range(nd))):
        raise ValueError(f"axes {axes} don't match a tensor of dimension {nd}")
    return apply(permute, (x,), {"axes": tuple(a % nd for a in axes)})


def _inverse(axes):
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a] = i
    return tuple(inv)


permute = defop(
    "permute", kind="movement", view=True,
    layout=lambda lay, p, shape: lay.permute(p["axes"]), bijective=True,
    batch_rule=lambda args, batched, p, size: apply(
        permute, args, {"axes": (0,) + tuple(a + 1 for a in p["axes"])}),
    impl=lambda xp, x, axes: x.transpose(axes),
    infer=lambda args, p: (tuple(args[0].shape[a] for a in p["axes"]), args[0].dtype),
    grad=lambda g, out, x, axes: (g.permute(_inverse(axes)),),
    front=_permute_front, methods="permute", numpy="permute_dims")


def _expand_message(have, want):
    """PyTorch's text for an ``expand`` to a size the tensor can't broadcast to."""
    nd = len(want) - len(have)
    for i in range(len(want) - 1, nd - 1, -1):
        if have[i - nd] != 1 and have[i - nd] != want[i]:
            return (f"The expanded size of the tensor ({want[i]}) must match the existing size "
                    f"({have[i - nd]}) at non-singleton dimension {i}.  Target sizes: "
                    f"{list(want)}.  Tensor sizes: {list(have)}")
    return f"cannot expand a tensor of size {list(have)} to {list(want)}"


def _broadcast_front(x, shape=None, *more, **named):
    x = as_tensor(x)
    shape = _shape_arg(_by_name("broadcast_to", _leading(shape, more), named, ("shape", "size")))
    # PyTorch's expand: -1 keeps the size
    nd = len(shape) - x.ndim
    if nd < 0:
        raise shape_error((x,), "input operand has more dimensions than allowed by the axis "
                          "remapping", f"expand({list(x.shape)}, size={list(shape)}): the number "
                          f"of sizes provided ({len(shape)}) must be greater or equal to the "
                          f"number of dimensions in the tensor ({x.ndim})")
    shape = tuple(x.shape[i - nd] if s == -1 else s for i, s in enumerate(shape))
    try:
        ok = broadcast_shapes(x.shape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise shape_error((x,), lambda: "operands could not be broadcast together with remapped "
                          f"shapes [original->remapped]: {np_shape(x.shape)}  and requested shape "
                          f"{np_shape(shape)}", lambda: _expand_message(x.shape, shape))
    if shape == tuple(x.shape) and not x._np:
        return x          # (NumPy's broadcast_to always gives a new read-only array, never x)
    return apply(broadcast_to, (x,), {"shape": shape})


broadcast_to = defop(
    "broadcast_to", kind="movement", view=True,
    layout=lambda lay, p, shape: lay.broadcast_to(shape),
    batch_rule=lambda args, batched, p, size: apply(
        broadcast_to, (pad_batched(args[0], len(p["shape"])),), {"shape": (size,) + tuple(p["shape"])}),
    impl=lambda xp, x, shape: xp.broadcast_to(x, shape),
    infer=lambda args, p: (p["shape"], args[0].dtype),
    grad=lambda g, out, x, shape: (g,),   # autograd sums the broadcast dims away
    front=_broadcast_front, methods=("broadcast_to", "expand"), numpy="broadcast_to")


def _astype_front(x, dtype, copy=True, *, device=None):
    x = as_tensor(x)
    if device is not None:   # the Array API's astype(x, dtype, device=...)
        x = x.to(device)
    dt = D.dtype(dtype)
    if dt is x.dtype and not copy:
        return x
    return apply(astype, (x,), {"dtype": dt})


astype = defop(
    "astype", kind="unary",
    impl=lambda xp, x, dtype: x.astype(dtype.np),
    infer=lambda args, p: (args[0].shape, p["dtype"]),
    grad=lambda g, out, x, dtype: (g.astype(x.dtype) if x.dtype.kind == "f" else None,),
    front=_astype_front, methods="astype", numpy="astype")


def _to_device_impl(xp, x, device):
    # xp is the target's array module (dispatch runs a move on its target device)
    if device.type == "cpu":
        return x.get() if hasattr(x, "get") else x
    with xp.cuda.Device(device.index):
        return xp.asarray(x)


to_device = defop(
    "to_device", kind="other", impl=_to_device_impl,
    batch_rule=lambda args, batched, p, size: apply(to_device, args, p),
    infer=lambda args, p: (args[0].shape, args[0].dtype),
    grad=lambda g, out, x, device: (g.to(x.device),),
    methods="to_device",
    front=lambda x, device, stream=None: apply(to_device, (x,), {"device": _device(device)}))


detach = defop(
    "detach", kind="unary", impl=lambda xp, x: x, differentiable=False, view=True,
    layout=lambda lay, p, shape: lay, bijective=True,
    front=lambda x: apply(detach, (as_tensor(x),), {}))


def _clone_front(x, *, memory_format=None):
    return apply(clone, (as_tensor(x),), {})


# ``order`` is NumPy's layout of the copy, which a later reshape's view-or-copy decision reads
# (compiler/schedule/views.py): "C" (Tensor.clone, ndarray.copy), "K" (np.copy, and np.roll /
# np.tile's copies: laid out as the operand) or "A" (np.pad's: F order for an F-ordered operand)
clone = defop(
    "clone", kind="unary", impl=lambda xp, x, order="C": xp.array(x, copy=True, order=order),
    grad=lambda g, out, x, order="C": (g,),
    front=_clone_front, methods="clone")


def _copy_method(x, order="K"):
    """ndarray.copy (C order: ndarray_methods runs NumPy's own for another order). A NumPy
    scalar's copy is a scalar, where a clone is an array (np.copy's 0-d result): it is recorded
    as a reshape to (), an op whose result has its operand's type, and which a scalar never
    shares (views.py)."""
    x = as_tensor(x)
    if numpy_scalar(x):
        return apply(reshape, (x,), {"shape": ()})
    return apply(clone, (x,), {})


defmethod("copy", _copy_method)


def axis_index(axis, ndim: int, name: str = "axis") -> int:
    """One axis, range-checked (IndexError naming it and the tensor's dimension)."""
    a = int(axis)
    if not -ndim <= a < ndim:
        raise np.exceptions.AxisError(f"{name} {a} is out of bounds for a tensor of dimension {ndim}")
    return a % ndim


def _numpy(name, fn):
    """A NumPy spelling whose semantics differ from nbaccel's function of the same name."""
    fn.__name__ = fn.__qualname__ = name
    NUMPY_FUNCS[name] = fn
    return fn


def _np_copy(a, order="K", subok=False):
    """np.copy: laid out as ``a`` (order "K"), where ndarray.copy is C order."""
    x = as_tensor(a)
    if order not in ("C", "F", "A", "K"):
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got '{order}')")
    return apply(clone, (x,), {} if order == "C" else {"order": order})


_numpy("copy", _np_copy)


# ---- views over reshape and permute ----------------------------------------------------------

def _swapaxes(x, axis1, axis2):
    if not isinstance(x, TensorMetadata):
        x = as_tensor(x)
    nd = len(x.shape)
    axes = list(range(nd))
    if type(axis1) is int and type(axis2) is int and -nd <= axis1 < nd and -nd <= axis2 < nd:
        a1, a2 = axis1 % nd, axis2 % nd     # (in range: what axis_index gives, without two calls)
    else:
        a1, a2 = axis_index(axis1, nd), axis_index(axis2, nd)
    axes[a1], axes[a2] = axes[a2], axes[a1]
    return apply(permute, (x,), {"axes": tuple(axes)})   # (a valid permutation already)


defalias("swapaxes", _swapaxes, numpy="swapaxes", methods=("swapaxes", "swapdims"))


_SWAPPED: dict = {}


def _transpose(x, *args, axes=None, dim0=None, dim1=None):
    """Two int arguments swap two dims (PyTorch); none or one axes tuple permute (NumPy)."""
    if len(args) == 2 and axes is None and dim0 is None and dim1 is None and type(args[0]) is int \
            and type(args[1]) is int and isinstance(x, TensorMetadata):
        a1, a2 = args            # the common call, x.transpose(0, 1): _swapaxes' work, inline
        nd = x._data.ndim if x._node is None else len(x.shape)
        perm = _SWAPPED.get((nd, a1, a2))    # the permutation, remembered per (ndim, a1, a2)
        if perm is None:
            if not (-nd <= a1 < nd and -nd <= a2 < nd):
                return _swapaxes(x, *args)   # (axis_index raises, naming the axis)
            axes = list(range(nd))
            axes[a1 % nd], axes[a2 % nd] = axes[a2 % nd], axes[a1 % nd]
            if len(_SWAPPED) > 10_000:
                _SWAPPED.clear()
            perm = _SWAPPED[(nd, a1, a2)] = tuple(axes)
        return apply(permute, (x,), {"axes": perm})
    x = as_tensor(x)
    if dim0 is not None or dim1 is not None:
        args = (dim0, dim1)
    elif axes is not None:
        args = (axes,)
    if len(args) == 2 and all(isinstance(a, (int, np.integer)) for a in args):
        return _swapaxes(x, *args)          # (np.int64 dims too, as PyTorch takes them)
    if not args or args == (None,):
        return x.permute(*reversed(range(x.ndim)))
    return x.permute(*(args[0] if len(args) == 1 else args))


defalias("transpose", _transpose, numpy="transpose", methods="transpose")


def _squeeze(x, axis=None, *, dim=None):
    """Remove size-1 axes (all of them, or the given ones: each must have size 1)."""
    x = as_tensor(x)
    axis = dim if dim is not None else axis
    if axis is None:
        axes = tuple(i for i, s in enumerate(x.shape) if s == 1)
    elif x.ndim == 0:
        normalize_axis(axis, 0)
        axes = ()
    else:
        axes = normalize_axis(axis, x.ndim)
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(f"cannot squeeze axis {a} of a tensor of shape {tuple(x.shape)}: "
                                 "its size is not 1")
    return x.reshape(tuple(s for i, s in enumerate(x.shape) if i not in axes))


defalias("squeeze", _squeeze, numpy="squeeze", methods="squeeze")


def _expand_dims(x, axis=0, *, dim=None):
    """Insert size-1 axes at the given positions of the result."""
    x = as_tensor(x)
    axis = dim if dim is not None else axis
    out_nd = x.ndim + (1 if isinstance(axis, int) else len(axis))
    axes = normalize_axis(axis, out_nd)
    rest = iter(x.shape)
    return x.reshape(tuple(1 if i in axes else next(rest) for i in range(out_nd)))


defalias("expand_dims", _expand_dims, numpy="expand_dims")
defalias("unsqueeze", lambda x, dim: _expand_dims(x, dim), methods="unsqueeze")


def _flatten(x, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim (PyTorch); all of them by default (0-d gives shape (1,))."""
    x = as_tensor(x)
    if x._np and start_dim == 0 and end_dim == -1:
        return x.reshape(-1).clone()   # NumPy's ndarray.flatten copies: a write never reaches x
    if x.ndim == 0:
        return x.reshape(1)
    s, e = axis_index(start_dim, x.ndim, "start_dim"), axis_index(end_dim, x.ndim, "end_dim")
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    shape = x.shape[:s] + (math.prod(x.shape[s:e + 1]),) + x.shape[e + 1:]
    return x.reshape(shape)


defalias("flatten", _flatten, methods="flatten")
def _ravel(x, order="C"):
    x = as_tensor(x)
    if order not in (None, "C"):
        x = _in_read_order(x, order)
    contiguous = getattr(x._node.graph, "c_contiguous", None) if x._node is not None else None
    if contiguous is not None and not contiguous(x):
        return x.reshape(-1).clone()   # NumPy's ravel copies an array that is not C-contiguous
    return x.reshape(-1)


defalias("ravel", _ravel, numpy="ravel", methods="ravel")


def _reshape_in_order(x, shape, order, copy):
    """NumPy's ``reshape(shape, order="F")`` (or "A" of an F- and not C-contiguous array): the
    axes reversed, reshaped to the reversed shape in C order, reversed back; a view exactly
    where NumPy's is, since the middle reshape is one wherever the strides allow it."""
    if order == "K":
        raise ValueError("order 'K' is not permitted for reshaping")
    if order == "A":                                    # (an unknown order raises there)
        order = "C" if _in_read_order(x, "A") is x else "F"
    elif order != "F":
        _in_read_order(x, order)
    if order == "C":
        out = apply(reshape, (x,), {"shape": shape})
    else:
        shape = _resolve_shape(shape, math.prod(x.shape), (x,))   # (its error names this shape)
        flipped = x.permute(tuple(range(x.ndim - 1, -1, -1))) if x.ndim > 1 else x
        out = apply(reshape, (flipped,), {"shape": tuple(reversed(shape))})
        if out.ndim > 1:
            out = out.permute(tuple(range(out.ndim - 1, -1, -1)))
    return out.clone() if copy else out


def _in_read_order(x, order):
    """``x`` permuted so that its C order is NumPy's ``order`` of reading it: "F" the axes
    reversed, "A" as "F" for an F- and not C-contiguous array, "K" the axes by decreasing
    stride (NumPy does not flip a negative one); the C-order ravel of the result is then a view
    exactly where NumPy's is. A traced array's strides are NumPy's as the trace models them."""
    if order not in ("F", "A", "K"):
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
    if x.ndim < 2:
        return x
    if x._node is not None:
        layout = getattr(x._node.graph, "numpy_layout", lambda t: None)(x)
    else:
        layout = x._data if hasattr(x._data, "strides") else None
    if layout is None:                                  # (no strides to read: as C order)
        return x if order != "F" else x.permute(tuple(range(x.ndim - 1, -1, -1)))
    f, c = layout.flags.f_contiguous, layout.flags.c_contiguous
    if order == "A":
        order = "F" if f and not c else "C"
    elif order == "K":
        order = "C" if c else "F" if f else "K"
    if order == "C":
        return x
    if order == "F":
        return x.permute(tuple(range(x.ndim - 1, -1, -1)))
    perm = tuple(sorted(range(x.ndim), key=lambda d: -abs(layout.strides[d])))
    return x.permute(perm)


def _moveaxis(x, source, destination):
    """Move axes to new positions, keeping the order of the others (NumPy moveaxis)."""
    x = as_tensor(x)
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination must have the same number of elements")
    src = [axis_index(a, x.ndim, "source") for a in src]
    dst = [axis_index(a, x.ndim, "destination") for a in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"moveaxis: repeated axis in {source} or {destination}")
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return x.permute(*order)


defalias("moveaxis", _moveaxis, numpy="moveaxis", methods=("moveaxis", "movedim"))
defalias("movedim", _moveaxis)


def _contiguous(x, memory_format=None):
    """x itself when already C-contiguous, else a C-contiguous copy."""
    x = as_tensor(x)
    if x._node is not None or x._data.flags.c_contiguous:
        return x
    return x.clone()


defmethod("contiguous", _contiguous)
