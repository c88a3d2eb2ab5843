"""Shape and movement ops: reshape, permute, broadcast_to, astype, and friends.

Views: reshape (when the layout allows), permute/transpose, broadcast_to/expand,
squeeze/unsqueeze and basic indexing return views that share memory (and the
in-place version counter) with their input, as in NumPy and PyTorch.
"""
from __future__ import annotations

import math

from .. import dtypes as D
from .fronts import apply, as_tensor
from .registry import defalias, defop


def _resolve_shape(shape, numel):
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ValueError(f"can only specify one unknown dimension (-1), got {shape}")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise ValueError(f"cannot reshape a tensor of size {numel} into shape {shape}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise ValueError(f"cannot reshape a tensor of size {numel} into shape {shape}")
    return shape


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple(int(s) for s in shape)


def _reshape_front(x, *shape, newshape=None):
    x = as_tensor(x)
    shape = _shape_arg(shape) if newshape is None else _shape_arg((newshape,))
    return apply(reshape, (x,), {"shape": shape})


reshape = defop(
    "reshape", kind="movement", view=True,
    impl=lambda xp, x, shape: xp.reshape(x, shape),
    infer=lambda args, p: (_resolve_shape(p["shape"], math.prod(args[0].shape)), args[0].dtype),
    grad=lambda g, out, x, shape: (g.reshape(x.shape),),
    front=_reshape_front, methods=("reshape", "view"), numpy="reshape")


def _permute_front(x, *axes):
    x = as_tensor(x)
    axes = _shape_arg(axes) if axes and axes[0] is not None else tuple(reversed(range(x.ndim)))
    if sorted(a % max(x.ndim, 1) for a in axes) != list(range(x.ndim)):
        raise ValueError(f"axes {axes} don't match a tensor of dimension {x.ndim}")
    return apply(permute, (x,), {"axes": tuple(a % x.ndim for a in axes)})


def _inverse(axes):
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a] = i
    return tuple(inv)


permute = defop(
    "permute", kind="movement", view=True,
    impl=lambda xp, x, axes: xp.transpose(x, axes),
    infer=lambda args, p: (tuple(args[0].shape[a] for a in p["axes"]), args[0].dtype),
    grad=lambda g, out, x, axes: (g.permute(_inverse(axes)),),
    front=_permute_front, methods="permute", numpy=("transpose", "permute_dims"))


def _broadcast_front(x, *shape):
    x = as_tensor(x)
    shape = _shape_arg(shape)
    # PyTorch's expand: -1 keeps the size
    nd = len(shape) - x.ndim
    if nd < 0:
        raise ValueError(f"cannot broadcast a tensor of shape {x.shape} to shape {shape}")
    shape = tuple(x.shape[i - nd] if s == -1 else s for i, s in enumerate(shape))
    from .meta import broadcast_shapes
    try:
        ok = broadcast_shapes(x.shape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"cannot broadcast a tensor of shape {x.shape} to shape {shape}")
    if shape == tuple(x.shape):
        return x
    return apply(broadcast_to, (x,), {"shape": shape})


broadcast_to = defop(
    "broadcast_to", kind="movement", view=True,
    impl=lambda xp, x, shape: xp.broadcast_to(x, shape),
    infer=lambda args, p: (p["shape"], args[0].dtype),
    grad=lambda g, out, x, shape: (g,),   # autograd sums the broadcast dims away
    front=_broadcast_front, methods=("broadcast_to", "expand"), numpy="broadcast_to")


def _astype_front(x, dtype, copy=True):
    x = as_tensor(x)
    dt = D.dtype(dtype)
    if dt is x.dtype and not copy:
        return x
    return apply(astype, (x,), {"dtype": dt})


astype = defop(
    "astype", kind="unary",
    impl=lambda xp, x, dtype: x.astype(dtype.np),
    infer=lambda args, p: (args[0].shape, p["dtype"]),
    grad=lambda g, out, x, dtype: (g.astype(x.dtype) if x.dtype.kind == "f" else None,),
    scalar="CAST", ufunc="astype", front=_astype_front, methods="astype", numpy="astype")


def _to_device_impl(xp, x, device):
    if device.type == "cpu":
        return x.get() if hasattr(x, "get") else x
    return xp.asarray(x)


to_device = defop(
    "to_device", kind="other", impl=_to_device_impl,
    infer=lambda args, p: (args[0].shape, args[0].dtype),
    grad=lambda g, out, x, device: (g.to(x.device),),
    front=lambda x, device: apply(to_device, (x,), {"device": device}))


detach = defop(
    "detach", kind="unary", impl=lambda xp, x: x, differentiable=False, view=True,
    scalar="{0}", ufunc="positive",
    front=lambda x: apply(detach, (as_tensor(x),), {}))


def _clone_front(x, *, memory_format=None):
    return apply(clone, (as_tensor(x),), {})


clone = defop(
    "clone", kind="unary", impl=lambda xp, x: xp.array(x, copy=True),
    grad=lambda g, out, x: (g,), scalar="{0}", ufunc="positive",
    front=_clone_front, methods=("clone", "copy"), numpy="copy")


def _swapaxes(x, axis1, axis2):
    x = as_tensor(x)
    axes = list(range(x.ndim))
    a1, a2 = axis1 % x.ndim, axis2 % x.ndim
    axes[a1], axes[a2] = axes[a2], axes[a1]
    return x.permute(*axes)


defalias("swapaxes", _swapaxes, numpy="swapaxes", methods=("swapaxes", "swapdims"))
