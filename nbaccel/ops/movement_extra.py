"""Movement spellings over the other ops, beside ``movement.py``: flip (a view, negative strides),
repeat / repeat_interleave (a broadcast view reshaped, or a take) and tril / triu (a where).
Autograd, tracing and code generation see only the ops they call."""
from __future__ import annotations

import numpy as np

from .. import ops
from ..convert import asarray
from ..tensor_meta import is_tensor
from .fronts import as_tensor
from .meta import normalize_axis
from .movement import axis_index
from .registry import defalias


# ---- flips ---------------------------------------------------------------------------------------

def _flip(x, axis=None, *, dims=None):
    """Reverse the order along axes (all when None). A view (negative strides), as in NumPy."""
    x = as_tensor(x)
    axis = dims if dims is not None else axis
    axes = range(x.ndim) if axis is None else normalize_axis(axis, x.ndim)
    return x[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))]


defalias("flip", _flip, numpy="flip", methods="flip")
defalias("fliplr", lambda x: _flip(x, 1), numpy="fliplr", methods="fliplr")
defalias("flipud", lambda x: _flip(x, 0), numpy="flipud", methods="flipud")


# roll and tile (and Tensor.repeat) are index arithmetic in the compiler: ops/wrapping.py


def _repeat(x, repeats, axis=None, *, dim=None, output_size=None):
    """Repeat each element (NumPy / Array API ``repeat``, PyTorch ``repeat_interleave``)."""
    x = as_tensor(x)
    axis = dim if dim is not None else axis
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = axis_index(axis, x.ndim)
    if is_tensor(repeats):
        repeats = repeats.tolist()
    if isinstance(repeats, (list, tuple)) and len(repeats) == 1:
        repeats = repeats[0]
    n, sh = x.shape[axis], tuple(x.shape)
    if not isinstance(repeats, (list, tuple)) and not getattr(repeats, "ndim", 0):
        r = int(repeats)
        if r < 0:
            raise ValueError(f"repeat: negative repeats {r}")
        if r == 1:
            return x.clone()
        y = x.reshape(sh[:axis + 1] + (1,) + sh[axis + 1:])
        y = y.broadcast_to(sh[:axis + 1] + (r,) + sh[axis + 1:])
        return y.reshape(sh[:axis] + (n * r,) + sh[axis + 1:])
    reps = np.asarray(repeats)
    if reps.size == 0:          # [] reads as float64: empty repeats of any integer dtype
        reps = reps.astype(np.int64)
    if reps.shape != (n,):
        raise ValueError(f"repeat: repeats of shape {reps.shape} don't match axis {axis} of "
                         f"size {n}")
    if (reps < 0).any():
        raise ValueError("repeat: negative repeats")
    return ops.take(x, np.repeat(np.arange(n), reps), axis=axis)


defalias("repeat", _repeat, numpy="repeat")
defalias("repeat_interleave", _repeat, methods="repeat_interleave")


def _tri(x, k, lower):
    x = as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"{'tril' if lower else 'triu'} needs at least 2 dimensions, got a "
                         f"tensor of shape {tuple(x.shape)}")
    n, m = x.shape[-2:]
    mask = np.tri(n, m, k, dtype=bool) if lower else ~np.tri(n, m, k - 1, dtype=bool)
    return ops.where(asarray(mask, device=x.device, _np=False), x, ops.zeros_like(x))


defalias("tril", lambda x, k=0, *, diagonal=None: _tri(x, k if diagonal is None else diagonal, True),
         numpy="tril", methods="tril")
defalias("triu", lambda x, k=0, *, diagonal=None: _tri(x, k if diagonal is None else diagonal, False),
         numpy="triu", methods="triu")
